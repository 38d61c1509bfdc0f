// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file psf.hpp
/// DESI Gauss-Hermite PSF (PSFVER 3) held in memory, and its evaluation: trace positions,
/// PSF parameters and pixel-integrated spots (DESI's PSFVER 3 Gauss-Hermite PSF; the formulas
/// are in docs/algorithm-notes.md).

#include <map>
#include <string>
#include <vector>

#include "ex2d/fits_header.hpp"
#include "ex2d/scratch_allocator.hpp"
#include "ex2d/status.hpp"

namespace ex2d {

/// One quantity per fibre as a Legendre series in reduced wavelength
/// u = (w - wavemin) * 2 / (wavemax - wavemin) - 1 (no clipping: extrapolated outside).
struct LegendreTable {
    double wavemin = 0;
    double wavemax = 0;
    int nfiber = 0;
    int ncoef = 0;             ///< Legendre degree + 1; every stored coefficient is used
    std::vector<double> coef;  ///< [nfiber][ncoef], row-major

    /// Value for fibre index `fiber` (0-based, relative to FIBERMIN) at wavelength `wave` (A).
    double eval(int fiber, double wave) const;
    /// Values for one fibre at many wavelengths (same result as eval, faster).
    void eval_many(int fiber, const double* waves, int nwave, double* out) const;
};

/// A Gauss-Hermite PSF: traces X(fibre, w), Y(fibre, w) and the PSF table parameters.
struct GaussHermitePsf {
    LegendreTable xtrace;  ///< CCD column of the spot centre (pixel centres at integers)
    LegendreTable ytrace;  ///< CCD row of the spot centre
    /// PSF-table rows by PARAM name ("GHSIGX", "GHSIGY", "GH-i-j", "TAILAMP", ...); each with
    /// the PSF HDU's own WAVEMIN/WAVEMAX.
    std::map<std::string, LegendreTable> params;

    int hsizex = 8;  ///< spot stamp is (2*hsizey+1) rows x (2*hsizex+1) columns
    int hsizey = 5;
    int ghdegx = 6;
    int ghdegy = 6;
    int npix_x = 0;  ///< CCD columns (NPIX_X)
    int npix_y = 0;  ///< CCD rows (NPIX_Y)
    int fibermin = 0;
    double psferr = 0.01;  ///< PSFERR header value, 0.01 when absent

    FitsHeader xtrace_header;  ///< headers kept for provenance (e.g. IN_PSF -> ORIG_PSF)
    FitsHeader psf_header;
    std::string source = "memory";  ///< file name, for messages

    int nspec() const { return xtrace.nfiber; }
    int stamp_nx() const { return 2 * hsizex + 1; }
    int stamp_ny() const { return 2 * hsizey + 1; }
    /// Checks internal consistency (all GH-i-j rows present, fibre counts agree, sizes > 0).
    Status validate() const;
    const LegendreTable& param(const std::string& name) const;  ///< throws ex2d::Error if absent
};

/// Number of Gauss-Hermite coefficients per spot, (ghdegx+1)*(ghdegy+1).
inline int gh_ncoef(const GaussHermitePsf& psf)
{
    return (psf.ghdegx + 1) * (psf.ghdegy + 1);
}

/// Spots of a block of fibres on a wavelength grid.
/// values[(f * nwave + w) * ny * nx + iy * nx + ix] is the stamp of fibre `fiber_begin + f`
/// at waves[w]; its pixel [iy, ix] is CCD pixel (yc + iy, xc + ix). Each stamp is clipped at 0
/// and sums to 1.
struct SpotGrid {
    int fiber_begin = 0;
    int nfiber = 0;
    int nwave = 0;
    int ny = 0;
    int nx = 0;
    std::vector<double, ScratchAllocator<double>> values;  ///< [nfiber][nwave][ny][nx]
    std::vector<int> xc;  ///< [nfiber][nwave] CCD column of stamp pixel [.,0]
    std::vector<int> yc;  ///< [nfiber][nwave] CCD row of stamp pixel [0,.]

    const double* stamp(int f, int w) const
    {
        return values.data() + (size_t(f) * nwave + w) * ny * nx;
    }
    double* stamp(int f, int w) { return values.data() + (size_t(f) * nwave + w) * ny * nx; }
    int corner_x(int f, int w) const { return xc[size_t(f) * nwave + w]; }
    int corner_y(int f, int w) const { return yc[size_t(f) * nwave + w]; }
};

/// Stamp corner floor(center - hsize + 0.5), as specter places stamps.
int stamp_corner(double center, int hsize);

/// Evaluates the spots of fibres [fiber_begin, fiber_begin + nfiber) at `waves`.
/// Work is split over `nthreads` threads by fibre; results do not depend on nthreads.
SpotGrid evaluate_spots(const GaussHermitePsf& psf, int fiber_begin, int nfiber,
                        const std::vector<double>& waves, int nthreads = 1);
/// The same into `grid`, reusing its memory (a backend keeps one grid across bundles).
void evaluate_spots(const GaussHermitePsf& psf, int fiber_begin, int nfiber,
                    const std::vector<double>& waves, int nthreads, SpotGrid& grid);

/// Evaluates only the stamp corners (cheap; used to plan pixel windows).
void evaluate_corners(const GaussHermitePsf& psf, int fiber, const std::vector<double>& waves,
                      std::vector<int>& xc, std::vector<int>& yc);

/// One spot, for tests and the simulator: stamp [ny][nx] plus its corner.
struct Spot {
    int xc = 0;
    int yc = 0;
    std::vector<double> values;
};
Spot evaluate_spot(const GaussHermitePsf& psf, int fiber, double wave);

}  // namespace ex2d
