// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file input_checks.hpp
/// The checks that `ex2d extract` runs on its options, PSF and image before it extracts,
/// shared with the fleet (ex2dctl submit and the reader), so that the fleet accepts nothing
/// that `ex2d extract` refuses and refuses it with the same message.

#include <string>

#include "ex2d/extraction_types.hpp"
#include "ex2d/fits_table.hpp"
#include "ex2d/preproc.hpp"
#include "ex2d/psf.hpp"
#include "ex2d/status.hpp"

namespace ex2d {

/// The one parser of a wavelength grid text "wmin,wmax,dw" (Angstrom): three finite numbers
/// separated by commas (blanks around them allowed) and nothing after the third, with
/// wmax > wmin and dw > 0. Sets `wmin`, `wmax` and `dw` only when the text is one;
/// otherwise invalid_argument "<name> must be 'wmin,wmax,dw' with wmax > wmin and dw > 0,
/// got '<text>'", `name` being what the caller calls the text (an option, a JSON field).
Status parse_wavelength_grid(const std::string& text, const std::string& name, double& wmin,
                             double& wmax, double& dw);

/// desi_extract_spectra's -w/--wavelength: parse_wavelength_grid under that name; an empty
/// text leaves `wmin`, `wmax` and `dw` as they are.
Status parse_wavelength_option(const std::string& text, double& wmin, double& wmax, double& dw);

/// --psferr as given on a command line: invalid_argument when negative (a negative value
/// inside ExtractionOptions means "the PSF's PSFERR", which a user does not ask for so).
Status check_psferr_option(double psferr);

/// The grid opt.wmin..opt.wmax against the PSF HDU's WAVEMIN..WAVEMAX, where the PSF is
/// defined; invalid_argument outside it. A grid left to the PSF (both 0) passes.
Status check_wave_range(const ExtractionOptions& opt, const GaussHermitePsf& psf,
                        const std::string& psf_name);

/// File names for the messages of check_extraction_inputs.
struct ExtractionInputNames {
    std::string image;     ///< the preproc file
    std::string psf;       ///< the PSF file
    std::string fibermap;  ///< where the FIBERMAP comes from (the preproc file or its own file)
    std::string output;    ///< the frame file to be written
};

/// The image against the PSF and the options, in `ex2d extract`'s order: the CCD size, the
/// IMAGE header's CAMERA against the PSF's, FLAVOR (present and one of desispec's), the
/// FIBERMAP's rows against specmin + nspec (when there is a FIBERMAP), then
/// check_wave_range (a PSF of the wrong arm is better reported as such than as a range).
/// `image` needs only its header and sizes (read_preproc_metadata). format_error for the
/// image, invalid_argument for the grid.
Status check_extraction_inputs(const PreprocImage& image, const FitsTableBlob& fibermap,
                               const GaussHermitePsf& psf, const ExtractionOptions& opt,
                               const ExtractionInputNames& names);

}  // namespace ex2d
