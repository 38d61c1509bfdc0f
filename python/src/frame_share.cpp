// SPDX-License-Identifier: BSD-3-Clause
#include "frame_share.hpp"

#include <string>
#include <tuple>
#include <utility>

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

namespace py = pybind11;

namespace ex2d::python {
namespace {

template <typename T, typename Vector>
py::array_t<T> copy_to_numpy(const Vector& values)
{
    return py::array_t<T>(py::ssize_t(values.size()), values.data());
}

template <typename T, typename Vector>
void copy_from_numpy(const py::dict& part, const char* key, Vector& to)
{
    const auto array = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(part[key]);
    if (!array || array.ndim() != 1) {
        throw py::value_error(std::string("a frame part's '") + key + "' is not a 1-D array");
    }
    to.assign(array.data(), array.data() + array.size());
}

}  // namespace

void prepare_numpy()
{
    const double zero = 0.0;
    const std::uint32_t none = 0;
    const py::array_t<double> floats(1, &zero);
    const py::array_t<std::uint32_t> bits(1, &none);
    (void)py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(floats);
    (void)py::array_t<std::uint32_t, py::array::c_style | py::array::forcecast>::ensure(bits);
}

PythonFrameShare::PythonFrameShare(py::object share) : share_(std::move(share))
{
    index_ = share_.attr("index").cast<int>();
    count_ = share_.attr("count").cast<int>();
    if (count_ < 1 || index_ < 0 || index_ >= count_) {
        throw py::value_error("share.index " + std::to_string(index_) + " is not in range(" +
                              std::to_string(count_) + ")");
    }
}

BundleShare PythonFrameShare::bundles(int nbundle) const
{
    return bundle_share(nbundle, index_, count_);
}

std::optional<std::vector<ExtractedFrame>> PythonFrameShare::gather(ExtractedFrame part)
{
    py::gil_scoped_acquire gil;
    const py::object parts = share_.attr("gather")(part_to_python(part));
    if (parts.is_none()) return std::nullopt;
    std::vector<ExtractedFrame> out;
    for (const py::handle item : parts) out.push_back(part_from_python(item));
    return out;
}

py::dict part_to_python(const ExtractedFrame& part)
{
    py::dict out;
    out["specmin"] = part.specmin;
    out["nspec"] = part.nspec;
    out["nwave"] = part.nwave;
    out["ndiag"] = part.ndiag;
    out["model_ny"] = part.model_ny;
    out["model_nx"] = part.model_nx;
    out["psferr"] = part.psferr;
    out["npatch"] = part.npatch;
    out["npatch_retried"] = part.npatch_retried;
    out["npatch_failed"] = part.npatch_failed;
    const StageTimes& t = part.stage_times;
    out["stage_times"] = py::make_tuple(t.psf, t.build, t.solve, t.decorrelate, t.chi2);
    out["wave"] = copy_to_numpy<double>(part.wave);
    out["flux"] = copy_to_numpy<double>(part.flux);
    out["ivar"] = copy_to_numpy<double>(part.ivar);
    out["mask"] = copy_to_numpy<std::uint32_t>(part.mask);
    out["resolution"] = copy_to_numpy<double>(part.resolution);
    out["chi2pix"] = copy_to_numpy<double>(part.chi2pix);
    out["pixmask_fraction"] = copy_to_numpy<double>(part.pixmask_fraction);
    out["xflux"] = copy_to_numpy<double>(part.xflux);
    out["model"] = copy_to_numpy<double>(part.model);
    return out;
}

ExtractedFrame part_from_python(const py::handle& part)
{
    if (!py::isinstance<py::dict>(part)) throw py::value_error("a frame part is not a dict");
    const auto fields = py::reinterpret_borrow<py::dict>(part);
    ExtractedFrame out;
    out.specmin = fields["specmin"].cast<int>();
    out.nspec = fields["nspec"].cast<int>();
    out.nwave = fields["nwave"].cast<int>();
    out.ndiag = fields["ndiag"].cast<int>();
    out.model_ny = fields["model_ny"].cast<int>();
    out.model_nx = fields["model_nx"].cast<int>();
    out.psferr = fields["psferr"].cast<double>();
    out.npatch = fields["npatch"].cast<long>();
    out.npatch_retried = fields["npatch_retried"].cast<long>();
    out.npatch_failed = fields["npatch_failed"].cast<long>();
    std::tie(out.stage_times.psf, out.stage_times.build, out.stage_times.solve,
             out.stage_times.decorrelate, out.stage_times.chi2) =
        fields["stage_times"].cast<std::tuple<double, double, double, double, double>>();
    copy_from_numpy<double>(fields, "wave", out.wave);
    copy_from_numpy<double>(fields, "flux", out.flux);
    copy_from_numpy<double>(fields, "ivar", out.ivar);
    copy_from_numpy<std::uint32_t>(fields, "mask", out.mask);
    copy_from_numpy<double>(fields, "resolution", out.resolution);
    copy_from_numpy<double>(fields, "chi2pix", out.chi2pix);
    copy_from_numpy<double>(fields, "pixmask_fraction", out.pixmask_fraction);
    copy_from_numpy<double>(fields, "xflux", out.xflux);
    copy_from_numpy<double>(fields, "model", out.model);
    return out;
}

}  // namespace ex2d::python
