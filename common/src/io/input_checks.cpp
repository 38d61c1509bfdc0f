// SPDX-License-Identifier: BSD-3-Clause
// The messages here are `ex2d extract`'s (tests/integration check them); the fleet records
// them as they are, so an operator reads the same words whichever way a frame was run.
#include "ex2d/input_checks.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <sstream>

#include "ex2d/psf_io.hpp"

namespace ex2d {

namespace {

std::string number(double x)
{
    std::ostringstream out;
    out << x;
    return out.str();
}

Status check_flavor(const FitsHeader& header, const ExtractionInputNames& names)
{
    const auto flavor = header.get_string("FLAVOR");
    if (!flavor) {
        return Status::format(names.image + ": IMAGE header has no FLAVOR keyword (frame " +
                              names.output + " not written)");
    }
    const char* const flavors[] = {"none", "flat", "arc", "zero", "bias", "science"};
    if (std::none_of(std::begin(flavors), std::end(flavors),
                     [&](const char* ok) { return *flavor == ok; })) {
        return Status::format(names.image + ": FLAVOR '" + *flavor +
                              "' is not one of none/flat/arc/zero/bias/science");
    }
    return Status::ok();
}

}  // namespace

Status parse_wavelength_grid(const std::string& text, const std::string& name, double& wmin,
                             double& wmax, double& dw)
{
    double values[3] = {};
    const char* at = text.c_str();
    bool ok = true;
    for (int i = 0; i < 3 && ok; ++i) {
        char* end = nullptr;
        values[i] = std::strtod(at, &end);
        ok = end != at && std::isfinite(values[i]);
        at = end;
        while (*at == ' ' || *at == '\t') ++at;
        if (i < 2) ok = ok && *at++ == ',';
    }
    // The whole text and nothing else: strtod stops at "abc" in "0.8abc" and a fourth value.
    ok = ok && at == text.c_str() + text.size();
    if (!ok || !(values[1] > values[0]) || !(values[2] > 0)) {
        return Status::invalid(name + " must be 'wmin,wmax,dw' with wmax > wmin and dw > 0, got '" +
                               text + "'");
    }
    wmin = values[0];
    wmax = values[1];
    dw = values[2];
    return Status::ok();
}

Status parse_wavelength_option(const std::string& text, double& wmin, double& wmax, double& dw)
{
    if (text.empty()) return Status::ok();
    return parse_wavelength_grid(text, "-w/--wavelength", wmin, wmax, dw);
}

Status check_psferr_option(double psferr)
{
    if (psferr < 0) return Status::invalid("--psferr must be >= 0, got " + number(psferr));
    return Status::ok();
}

Status check_wave_range(const ExtractionOptions& opt, const GaussHermitePsf& psf,
                        const std::string& psf_name)
{
    if ((opt.wmin == 0 && opt.wmax == 0) || psf.params.empty()) return Status::ok();
    const LegendreTable& domain = psf.params.begin()->second;
    if (opt.wmin < domain.wavemin || opt.wmax > domain.wavemax) {
        return Status::invalid("-w range " + number(opt.wmin) + ".." + number(opt.wmax) +
                               " A is outside the range " + number(domain.wavemin) + ".." +
                               number(domain.wavemax) + " A of PSF " + psf_name);
    }
    return Status::ok();
}

Status check_extraction_inputs(const PreprocImage& image, const FitsTableBlob& fibermap,
                               const GaussHermitePsf& psf, const ExtractionOptions& opt,
                               const ExtractionInputNames& names)
{
    if (image.ny != psf.npix_y || image.ccd_width() != psf.npix_x) {
        return Status::format(names.image + ": image is " + std::to_string(image.ccd_width()) +
                              " x " + std::to_string(image.ny) + " pixels but PSF " + names.psf +
                              " is for a " + std::to_string(psf.npix_x) + " x " +
                              std::to_string(psf.npix_y) + " CCD");
    }
    EX2D_RETURN_NOT_OK(check_psf_camera(image.header.get_string("CAMERA").value_or(""), names.image,
                                        psf, names.psf));
    EX2D_RETURN_NOT_OK(check_flavor(image.header, names));
    const long needed = long(opt.specmin) + opt.nspec;
    if (!fibermap.empty() && fibermap.nrows < needed) {
        return Status::format(names.fibermap + ": FIBERMAP has " + std::to_string(fibermap.nrows) +
                              " rows, specmin + nspec needs " + std::to_string(needed));
    }
    return check_wave_range(opt, psf, names.psf);
}

}  // namespace ex2d
