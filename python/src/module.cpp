// SPDX-License-Identifier: BSD-3-Clause
// ex2d._ex2d: the engine in-process for Python. Arrays go in as numpy arrays and come out as
// numpy arrays that own the engine's buffers (no copy); the GIL is released while the engine
// works; Ctrl-C stops an extraction between patches; errors are Python exceptions, one class
// per exit-code class of the ex2d tool, with the tool's message.
#include <atomic>
#include <chrono>
#include <cmath>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "ex2d/exit_codes.hpp"
#include "ex2d/extraction.hpp"
#include "ex2d/input_checks.hpp"
#include "ex2d/preproc.hpp"
#include "ex2d/psf_io.hpp"
#include "ex2d/timing_file.hpp"
#include "commands.hpp"
#include "frame_share.hpp"
#include "python_errors.hpp"
#include "python_log.hpp"

namespace py = pybind11;

namespace ex2d::python {
namespace {

/// A numpy array over `data`, which `owner` keeps alive (a shared_ptr to the object holding
/// it): the array is a view, not a copy.
template <typename T, typename Owner>
py::array_t<T> view_of(const T* data, std::vector<py::ssize_t> shape,
                       const std::shared_ptr<Owner>& owner)
{
    auto* keep = new std::shared_ptr<Owner>(owner);
    py::capsule base(keep, [](void* p) { delete static_cast<std::shared_ptr<Owner>*>(p); });
    return py::array_t<T>(std::move(shape), data, base);
}

struct PythonPsf {
    std::shared_ptr<const GaussHermitePsf> psf;
    std::string path;
};

struct PythonPreproc {
    std::shared_ptr<const PreprocImage> image;
};

/// A backend kept between calls (a CUDA backend holds its device memory and context).
struct PythonBackend {
    std::shared_ptr<ExtractionBackend> backend;
    std::string name;
};

struct PythonExtraction {
    std::shared_ptr<const ExtractedFrame> frame;
};

PythonBackend make_python_backend(const std::string& name, int threads, int device,
                                  double gpu_memory_gib)
{
    if (threads < 0) {
        raise(kExitUsage, "threads must be >= 0 (0: the CPUs this process may use), got " +
                              std::to_string(threads));
    }
    if (!(gpu_memory_gib > 0)) raise(kExitUsage, "gpu_memory_gib must be > 0");
    CudaBackendOptions cuda;
    cuda.device = device;
    cuda.memory_budget_bytes = std::size_t(gpu_memory_gib * double(std::size_t(1) << 30));
    auto made = [&] {
        py::gil_scoped_release released;
        return make_backend(name, threads, cuda);
    }();
    if (!made.is_ok()) raise(made.status());
    return {std::shared_ptr<ExtractionBackend>(std::move(made).value()), name};
}

/// `value` as a C-contiguous array of T: the caller's own memory where it already is one,
/// else a converted copy. Floating-point values only for float planes, integers or booleans
/// only for the mask, so that a mask passed as an image (or the reverse) is refused.
template <typename T>
py::array_t<T, py::array::c_style | py::array::forcecast> plane(const py::handle& value,
                                                                const char* name, bool integer)
{
    const py::array array = py::array::ensure(value);
    if (!array) raise(kExitUsage, std::string(name) + " is not an array");
    const char kind = array.dtype().kind();
    const bool ok = integer ? (kind == 'i' || kind == 'u' || kind == 'b')
                            : (kind == 'f' || kind == 'i' || kind == 'u');
    if (!ok) {
        raise(kExitUsage, std::string(name) + " has dtype " +
                              py::str(array.dtype()).cast<std::string>() + "; " +
                              (integer ? "an integer mask is needed" : "a real array is needed"));
    }
    if (array.ndim() != 2) {
        raise(kExitUsage, std::string(name) + " has " + std::to_string(array.ndim()) +
                              " dimensions; a 2-D image (rows, columns) is needed");
    }
    auto converted = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(array);
    if (!converted) raise(kExitUsage, std::string(name) + " cannot be converted");
    return converted;
}

/// The preproc planes of the caller as the tool reads them, weights made the same way
/// (PreprocImage::take_weights), after the checks the module adds for arrays: equal shapes,
/// the PSF's CCD, finite ivar >= 0, finite pixels wherever they carry weight.
PreprocImage preproc_from_arrays(const py::handle& image, const py::handle& ivar,
                                 const py::handle& mask, const GaussHermitePsf& psf)
{
    const auto pixels = plane<double>(image, "image", false);
    const auto inverse_variance = plane<double>(ivar, "ivar", false);
    const auto bits = plane<std::uint32_t>(mask, "mask", true);
    const auto shape = [](const auto& a) {
        return "(" + std::to_string(a.shape(0)) + ", " + std::to_string(a.shape(1)) + ")";
    };
    if (shape(inverse_variance) != shape(pixels) || shape(bits) != shape(pixels)) {
        raise(kExitUsage, "image, ivar and mask differ in shape: " + shape(pixels) + ", " +
                              shape(inverse_variance) + ", " + shape(bits));
    }
    if (pixels.shape(0) != psf.npix_y || pixels.shape(1) != psf.npix_x) {
        raise(kExitUsage, "image is " + shape(pixels) + " but PSF " + psf.source + " is for a (" +
                              std::to_string(psf.npix_y) + ", " + std::to_string(psf.npix_x) +
                              ") CCD");
    }
    PreprocImage out;
    out.ny = int(pixels.shape(0));
    out.nx = int(pixels.shape(1));
    out.source = "numpy arrays";
    const std::size_t n = std::size_t(out.ny) * std::size_t(out.nx);
    out.image.assign(pixels.data(), pixels.data() + n);
    out.ivar.assign(inverse_variance.data(), inverse_variance.data() + n);
    out.mask.assign(bits.data(), bits.data() + n);
    for (std::size_t k = 0; k < n; ++k) {
        const bool weighted = out.ivar[k] > 0 && (out.mask[k] & 767u) == 0;
        if (!std::isfinite(out.ivar[k]) || out.ivar[k] < 0 ||
            (weighted && !std::isfinite(out.image[k]))) {
            const std::string where = "(" + std::to_string(k / std::size_t(out.nx)) + ", " +
                                      std::to_string(k % std::size_t(out.nx)) + ")";
            raise(kExitUsage, !std::isfinite(out.ivar[k]) || out.ivar[k] < 0
                                  ? "ivar at " + where + " is " + std::to_string(out.ivar[k]) +
                                        "; it must be finite and >= 0"
                                  : "image at " + where + " is " + std::to_string(out.image[k]) +
                                        " where ivar > 0 and mask == 0; set its ivar to 0 or "
                                        "its mask to mask it");
        }
    }
    return out;
}

/// Runs `work` on a thread of its own while this one, the caller's, waits with the GIL
/// released and looks for signals every 100 ms: Ctrl-C raises `cancel`, which the engine
/// checks between patches, and KeyboardInterrupt is raised once `work` has returned. Its
/// result or exception is then dropped: an interrupted call has no result.
template <typename Work>
auto run_interruptibly(Work work, std::atomic<bool>& cancel) -> decltype(work())
{
    std::future<decltype(work())> running;
    {
        py::gil_scoped_release released;
        running = std::async(std::launch::async, std::move(work));
    }
    for (;;) {
        std::future_status state;
        {
            py::gil_scoped_release released;
            state = running.wait_for(std::chrono::milliseconds(100));
        }
        if (state == std::future_status::ready) return running.get();
        if (PyErr_CheckSignals() != 0) {
            cancel = true;
            {
                py::gil_scoped_release released;
                running.wait();
            }
            throw py::error_already_set();
        }
    }
}

ExtractedFrame extract_interruptibly(const ImageView& view, const GaussHermitePsf& psf,
                                     const ExtractionOptions& opt, ExtractionBackend& backend)
{
    std::atomic<bool> cancel{false};
    Result<ExtractedFrame> result = run_interruptibly(
        [&] { return extract_frame(view, psf, opt, backend, {}, &cancel); }, cancel);
    if (!result.is_ok()) raise(result.status(), kExitRuntime);
    return std::move(result).value();
}

/// One ex2d command line in this process (tool::run_in_process), interruptible; the steps
/// the extract command timed, {name: (start, stop)} in seconds since the epoch. With
/// `share`, extract extracts this process's share of the frame's bundles (PythonFrameShare).
py::dict run_command_line(const std::vector<std::string>& args, const py::object& share)
{
    follow_python_log_level();
    std::atomic<bool> cancel{false};
    StepTimer steps;
    std::optional<PythonFrameShare> frame_share;
    if (!share.is_none()) frame_share.emplace(share);
    const tool::RunContext context{false, &cancel, &steps, frame_share ? &*frame_share : nullptr};
    try {
        run_interruptibly([&] { tool::run_in_process(args, context); }, cancel);
    } catch (const tool::CommandExit& e) {
        raise(e.code(), e.what());
    }
    py::dict out;
    for (const auto& [name, step] : steps)
        out[py::str(name)] = py::make_tuple(step.start_unix, step.stop_unix);
    return out;
}

py::object extract(const py::handle& image, const py::handle& ivar, const py::handle& mask,
                   const PythonPsf& psf, const py::object& wavelength, int specmin,
                   std::optional<int> nspec, const py::object& backend, int threads, int device,
                   double gpu_memory_gib, double regularize, std::optional<double> psferr,
                   int bundlesize, int nsubbundles, int nwavestep, double wavepad_frac,
                   double pixpad_frac, bool model)
{
    follow_python_log_level();
    ExtractionOptions opt;
    if (py::isinstance<py::str>(wavelength)) {
        raise_if_error(
            parse_wavelength_option(wavelength.cast<std::string>(), opt.wmin, opt.wmax, opt.dw),
            kExitUsage);
    } else if (!wavelength.is_none()) {
        std::tie(opt.wmin, opt.wmax, opt.dw) =
            wavelength.cast<std::tuple<double, double, double>>();
        if (!(opt.wmin > 0 && opt.wmax > opt.wmin && opt.dw > 0)) {
            raise(kExitUsage, "wavelength (wmin, wmax, dw) needs 0 < wmin < wmax and dw > 0");
        }
    }
    raise_if_error(check_wave_range(opt, *psf.psf, psf.path), kExitUsage);
    opt.specmin = specmin;
    opt.nspec = nspec.value_or(psf.psf->nspec() - specmin);
    opt.regularize = regularize;
    if (psferr) {
        raise_if_error(check_psferr_option(*psferr), kExitUsage);
        opt.psferr = *psferr;
    }
    opt.bundlesize = bundlesize;
    opt.nsubbundles = nsubbundles;
    opt.nwavestep = nwavestep;
    opt.wavepad_frac = wavepad_frac;
    opt.pixpad_frac = pixpad_frac;
    opt.want_model = model;
    raise_if_error(validate_options(*psf.psf, opt), kExitUsage);

    const PythonBackend chosen =
        py::isinstance<PythonBackend>(backend)
            ? backend.cast<PythonBackend>()
            : make_python_backend(backend.cast<std::string>(), threads, device, gpu_memory_gib);
    PreprocImage planes = preproc_from_arrays(image, ivar, mask, *psf.psf);
    const LargeArray<double> weights = planes.take_weights();
    const ImageView view{planes.ny, planes.nx, planes.image.data(), weights.data()};
    auto frame = std::make_shared<const ExtractedFrame>(
        extract_interruptibly(view, *psf.psf, opt, *chosen.backend));
    return py::cast(PythonExtraction{frame});
}

void bind_classes(py::module_& m)
{
    py::class_<PythonPsf>(m, "Psf", "A Gauss-Hermite PSF (PSFVER 3) read by read_psf")
        .def_property_readonly("path", [](const PythonPsf& p) { return p.path; })
        .def_property_readonly("nspec", [](const PythonPsf& p) { return p.psf->nspec(); })
        .def_property_readonly("fibermin", [](const PythonPsf& p) { return p.psf->fibermin; })
        .def_property_readonly("npix_y", [](const PythonPsf& p) { return p.psf->npix_y; })
        .def_property_readonly("npix_x", [](const PythonPsf& p) { return p.psf->npix_x; })
        .def_property_readonly("psferr", [](const PythonPsf& p) { return p.psf->psferr; })
        .def_property_readonly(
            "wavelength",
            [](const PythonPsf& p) {
                const WaveGrids grids = make_wave_grids(*p.psf, ExtractionOptions{});
                return py::array_t<double>(py::ssize_t(grids.wave.size()), grids.wave.data());
            },
            "The default extraction grid: the PSF's WAVEMIN to WAVEMAX in steps of 0.8 A")
        .def("__repr__", [](const PythonPsf& p) {
            return "<ex2d.Psf " + p.path + ": " + std::to_string(p.psf->nspec()) + " fibres, " +
                   std::to_string(p.psf->npix_y) + " x " + std::to_string(p.psf->npix_x) + ">";
        });

    py::class_<PythonPreproc>(m, "Preproc", "A preproc frame read by read_preproc")
        .def_property_readonly("path", [](const PythonPreproc& p) { return p.image->source; })
        .def_property_readonly(
            "image",
            [](const PythonPreproc& p) {
                return view_of(p.image->image.data(), {p.image->ny, p.image->nx}, p.image);
            })
        .def_property_readonly(
            "ivar",
            [](const PythonPreproc& p) {
                return view_of(p.image->ivar.data(), {p.image->ny, p.image->nx}, p.image);
            })
        .def_property_readonly(
            "mask",
            [](const PythonPreproc& p) {
                return view_of(p.image->mask.data(), {p.image->ny, p.image->nx}, p.image);
            })
        .def_property_readonly("header_cards",
                               [](const PythonPreproc& p) { return p.image->header.cards; });

    py::class_<PythonBackend>(m, "Backend",
                              "A backend kept between extractions (a CUDA one keeps its device "
                              "memory): pass it as extract(..., backend=)")
        .def(py::init(&make_python_backend), py::arg("name") = "cpu", py::arg("threads") = 0,
             py::arg("device") = 0,
             py::arg("gpu_memory_gib") =
                 double(CudaBackendOptions{}.memory_budget_bytes) / double(std::size_t(1) << 30))
        .def_property_readonly("name", [](const PythonBackend& b) { return b.backend->name(); });

    const auto array2 = [](auto member) {
        return [member](const PythonExtraction& e) {
            const ExtractedFrame& f = *e.frame;
            return view_of((f.*member).data(), {f.nspec, f.nwave}, e.frame);
        };
    };
    py::class_<PythonExtraction>(m, "Extraction",
                                 "An extracted frame; its arrays are views of the engine's "
                                 "buffers, [spectrum, wavelength] unless noted")
        .def_property_readonly("specmin",
                               [](const PythonExtraction& e) { return e.frame->specmin; })
        .def_property_readonly("wave",
                               [](const PythonExtraction& e) {
                                   return view_of(e.frame->wave.data(), {e.frame->nwave}, e.frame);
                               })
        .def_property_readonly("flux", array2(&ExtractedFrame::flux), "electrons / A")
        .def_property_readonly("ivar", array2(&ExtractedFrame::ivar), "(electrons / A)^-2")
        .def_property_readonly("mask", array2(&ExtractedFrame::mask), "specmask bits")
        .def_property_readonly("chi2pix", array2(&ExtractedFrame::chi2pix))
        .def_property_readonly("pixmask_fraction", array2(&ExtractedFrame::pixmask_fraction))
        .def_property_readonly("xflux", array2(&ExtractedFrame::xflux),
                               "deconvolved flux, electrons per bin")
        .def_property_readonly(
            "resolution",
            [](const PythonExtraction& e) {
                const ExtractedFrame& f = *e.frame;
                return view_of(f.resolution.data(), {f.nspec, f.ndiag, f.nwave}, e.frame);
            },
            "[spectrum, diagonal, wavelength], desispec's RESOLUTION layout")
        .def_property_readonly(
            "model",
            [](const PythonExtraction& e) -> py::object {
                const ExtractedFrame& f = *e.frame;
                if (f.model.empty()) return py::none();
                return view_of(f.model.data(), {f.model_ny, f.model_nx}, e.frame);
            },
            "the model image A . xflux (electrons), or None unless extract(model=True)")
        .def_property_readonly("psferr", [](const PythonExtraction& e) { return e.frame->psferr; })
        .def_property_readonly("npatch", [](const PythonExtraction& e) { return e.frame->npatch; })
        .def_property_readonly("npatch_retried",
                               [](const PythonExtraction& e) { return e.frame->npatch_retried; })
        .def_property_readonly("npatch_failed",
                               [](const PythonExtraction& e) { return e.frame->npatch_failed; });
}

}  // namespace
}  // namespace ex2d::python

PYBIND11_MODULE(_ex2d, m)
{
    using namespace ex2d;
    using namespace ex2d::python;
    m.doc() = "ex2d's extraction engine in-process (import ex2d)";
    m.attr("__version__") = EX2D_VERSION;
    define_exceptions(m);
    prepare_numpy();
    route_log_to_python();
    bind_classes(m);

    m.def(
        "read_psf",
        [](const std::string& path) {
            auto psf = [&] {
                py::gil_scoped_release released;
                return ex2d::read_psf(path);
            }();
            if (!psf.is_ok()) raise(psf.status(), kExitInput);
            return PythonPsf{std::make_shared<const GaussHermitePsf>(std::move(psf).value()), path};
        },
        py::arg("path"), "Reads a Gauss-Hermite PSF file (PSFVER 3)");
    m.def(
        "read_preproc",
        [](const std::string& path) {
            auto image = [&] {
                py::gil_scoped_release released;
                return ex2d::read_preproc(path);
            }();
            if (!image.is_ok()) raise(image.status(), kExitInput);
            return PythonPreproc{std::make_shared<const PreprocImage>(std::move(image).value())};
        },
        py::arg("path"),
        "Reads a preproc file (IMAGE, IVAR, MASK; non-finite pixels masked as ex2d extract does)");
    m.def("cuda_device_count", &cuda_device_count,
          "The CUDA devices this process sees (0 where none is, or in a build without the CUDA "
          "backend)");
    m.def("run", &run_command_line, py::arg("args"), py::arg("share") = py::none(),
          "Runs one ex2d command line in this process, as the ex2d program runs it, e.g. "
          "run(['extract', '-i', 'preproc.fits', '-p', 'psf.fits', '-o', 'frame.fits']): the same "
          "code, files and log lines (into logging). A failure raises the class of the program's "
          "exit code with its message; Ctrl-C stops an extraction (KeyboardInterrupt, no frame "
          "written). Returns the extract command's steps, {'read'|'extract'|'write': (start, "
          "stop)} in seconds since the epoch; {} for other commands. share (for extract): an "
          "object with index, count and gather(part), by which several processes extract one "
          "frame, each its share of the bundles; the one whose gather returns every part "
          "writes the frame (ex2d_desi's MPI ranks).");
    m.def("extract", &extract, py::arg("image"), py::arg("ivar"), py::arg("mask"), py::arg("psf"),
          py::kw_only(), py::arg("wavelength") = py::none(), py::arg("specmin") = 0,
          py::arg("nspec") = py::none(), py::arg("backend") = "cpu", py::arg("threads") = 0,
          py::arg("device") = 0,
          py::arg("gpu_memory_gib") =
              double(CudaBackendOptions{}.memory_budget_bytes) / double(std::size_t(1) << 30),
          py::arg("regularize") = 0.0, py::arg("psferr") = py::none(),
          py::arg("bundlesize") = ExtractionOptions{}.bundlesize,
          py::arg("nsubbundles") = ExtractionOptions{}.nsubbundles,
          py::arg("nwavestep") = ExtractionOptions{}.nwavestep,
          py::arg("wavepad_frac") = ExtractionOptions{}.wavepad_frac,
          py::arg("pixpad_frac") = ExtractionOptions{}.pixpad_frac, py::arg("model") = false,
          "Extracts spectra from pixels in memory: the image, its ivar and mask (rows, columns) "
          "and a Psf. wavelength is None (the PSF's range), (wmin, wmax, dw) or 'wmin,wmax,dw'; "
          "nspec None takes every fibre from specmin. backend is a name ('cpu', 'cuda', 'auto') "
          "or a Backend. Returns an Extraction.");
}
