// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file extraction_types.hpp
/// Options, patch geometry and results of spectro-perfectionism extraction (Bolton & Schlegel
/// 2010). Shared by the driver and every backend; compiles without nvcc.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ex2d/scratch_allocator.hpp"

namespace ex2d {

/// Extraction settings; defaults are desi_extract_spectra's.
struct ExtractionOptions {
    double wmin = 0;  ///< wavelength grid start (A); 0 = take the PSF HDU's WAVEMIN
    double wmax = 0;  ///< grid end (A); 0 = PSF WAVEMAX
    double dw = 0.8;  ///< grid step (A)
    int specmin = 0;
    int nspec = 500;
    double regularize = 0.0;
    double psferr = -1;  ///< < 0: take the PSF's PSFERR (0.01 when absent)
    int bundlesize = 25;
    int nsubbundles = 5;
    int nwavestep = 50;
    int wavepad = 10;
    double wavepad_frac = 0.2;
    double pixpad_frac = 0.8;
    bool want_model = false;  ///< also compute the model image A . xflux
};

/// Constants of the solve, fixed by the anchors (algorithm.md section 3) and written into
/// the frame header.
struct SolverConstants {
    static constexpr double min_weight_frac = 1e-4;   ///< minweight = 1e-4 * max(fluxweight)
    static constexpr double diag_floor = 1e-15;       ///< iCov += diag(alpha^2 + 1e-15)
    static constexpr double eig_clip = 1e-14;         ///< eigenvalues clipped below 1e-14 * max
    static constexpr double retry_regularize = 1e-4;  ///< regularize of the single retry
};

/// One patch: the fibres solved together (core plus in-bundle neighbours), the padded
/// wavelength range and the pixel window (already clipped to the CCD).
struct PatchGeometry {
    int bundle = 0;  ///< ids for logs
    int subbundle = 0;
    int wave_step = 0;
    int fiber_begin = 0;  ///< solved fibres [fiber_begin, fiber_end), PSF fibre indices
    int fiber_end = 0;
    int core_fiber_begin = 0;  ///< kept fibres [core_fiber_begin, core_fiber_end)
    int core_fiber_end = 0;
    int wave_begin = 0;        ///< first padded wavelength, index into the padded grid
    int nwave = 0;             ///< padded wavelengths solved (nwavestep + 2*wavepad_eff)
    int core_wave_offset = 0;  ///< first kept wavelength relative to wave_begin (wavepad_eff)
    int ncore_wave = 0;        ///< kept wavelengths (nwavestep, fewer at the grid's end)
    int row_begin = 0;  ///< pixel window [row_begin,row_end) x [col_begin,col_end) on the CCD
    int row_end = 0;
    int col_begin = 0;
    int col_end = 0;

    int nfiber() const { return fiber_end - fiber_begin; }
    int ncore_fiber() const { return core_fiber_end - core_fiber_begin; }
    int nunknown() const { return nfiber() * nwave; }
};

/// Outcome of one patch. A failure is data, not an exception: the driver zeroes and masks it.
enum class PatchStatus : std::uint8_t {
    ok = 0,
    retried = 1,  ///< first solve failed; the retry with regularize 1e-4 succeeded
    failed = 2,   ///< both solves failed or gave non-finite values; outputs are zero
};

/// Results for the core block of one patch, arrays [ncore_fiber][ncore_wave] row-major, in
/// units of electrons per wavelength bin (the driver converts to per Angstrom).
struct PatchResult {
    PatchStatus status = PatchStatus::ok;
    std::string failure;             ///< reason when status != ok
    std::vector<double> flux;        ///< resolution-convolved flux R f (B&S eq. 16)
    std::vector<double> ivar;        ///< s^2 (B&S eq. 13); exactly 0 where no usable pixel
    std::vector<double> xflux;       ///< deconvolved flux f (B&S eq. 4)
    std::vector<double> resolution;  ///< [ncore_fiber][ndiag][ncore_wave], R[j-nd+d, j]
    std::vector<double> chi2pix;
    std::vector<double> pixmask_fraction;

    /// Zeroed outputs sized for `patch` with `ndiag` resolution diagonals; status unchanged.
    void zero_for(const PatchGeometry& patch, int ndiag)
    {
        const std::size_t n = std::size_t(patch.ncore_fiber()) * patch.ncore_wave;
        for (std::vector<double>* v : {&flux, &ivar, &xflux, &chi2pix, &pixmask_fraction})
            v->assign(n, 0.0);
        resolution.assign(n * ndiag, 0.0);
    }
};

/// Seconds spent per stage, summed over threads (core-seconds on the CPU).
struct StageTimes {
    double psf = 0;          ///< coefficients and spots
    double build = 0;        ///< iCov, y, fluxweight from spots and pixels
    double solve = 0;        ///< Cholesky factorisation, solve and covariance blocks
    double decorrelate = 0;  ///< block inverse square roots, R, flux, ivar
    double chi2 = 0;         ///< model, chi2pix, pixmask_fraction
    double total() const { return psf + build + solve + decorrelate + chi2; }
    StageTimes& operator+=(const StageTimes& o)
    {
        psf += o.psf;
        build += o.build;
        solve += o.solve;
        decorrelate += o.decorrelate;
        chi2 += o.chi2;
        return *this;
    }
};

/// An extracted frame, before it is written. Arrays [nspec][nwave] row-major unless noted.
struct ExtractedFrame {
    int specmin = 0;
    int nspec = 0;
    int nwave = 0;
    int ndiag = 11;                   ///< 2 * HSIZEY + 1
    std::vector<double> wave;         ///< extraction grid (A), numpy.arange fill rule
    std::vector<double> flux;         ///< electrons / A
    std::vector<double> ivar;         ///< (electrons / A)^-2
    std::vector<std::uint32_t> mask;  ///< specmask bits
    LargeArray<double> resolution;    ///< [nspec][ndiag][nwave]
    std::vector<double> chi2pix;
    std::vector<double> pixmask_fraction;
    std::vector<double> xflux;  ///< deconvolved flux, electrons per bin
    std::vector<double> model;  ///< [ny][nx] model image (electrons); empty unless asked
    int model_ny = 0;
    int model_nx = 0;
    double psferr = 0.01;  ///< value used for chi2pix
    long npatch = 0;
    long npatch_retried = 0;
    long npatch_failed = 0;
    StageTimes stage_times;
};

/// specmask bits set by extraction.
namespace specmask {
constexpr std::uint32_t somebadpix = 1;
constexpr std::uint32_t allbadpix = 2;
constexpr std::uint32_t bad2dfit = 128;
}  // namespace specmask

}  // namespace ex2d
