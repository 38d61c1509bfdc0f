// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// Small in-memory PSFs and forward models for tests that must not depend on files.

#include <cmath>
#include <random>
#include <vector>

#include "ex2d/extraction.hpp"
#include "ex2d/psf.hpp"

namespace ex2d::test {

/// A Gaussian-core PSF (GH-0-0 = 1 plus a small GH-2-0 term) of `nfiber` straight traces
/// `pitch` px apart starting at column `x0`, with Y = y_mid + y_half * u over [4900, 5400] A.
inline GaussHermitePsf tiny_psf(int nfiber, int npix_x, int npix_y, double x0 = 30,
                                double pitch = 8.0, double y_mid = 470, double y_half = 470)
{
    GaussHermitePsf psf;
    psf.npix_x = npix_x;
    psf.npix_y = npix_y;
    psf.hsizex = 8;
    psf.hsizey = 5;
    psf.ghdegx = 2;
    psf.ghdegy = 2;
    psf.source = "tiny-psf";
    auto table = [&](int ncoef) {
        LegendreTable t;
        t.wavemin = 4900;
        t.wavemax = 5400;
        t.nfiber = nfiber;
        t.ncoef = ncoef;
        t.coef.assign(size_t(nfiber) * ncoef, 0.0);
        return t;
    };
    psf.xtrace = table(2);
    psf.ytrace = table(2);
    for (int f = 0; f < nfiber; ++f) {
        psf.xtrace.coef[f * 2] = x0 + pitch * f + 0.37 * std::sin(0.7 * f);
        psf.xtrace.coef[f * 2 + 1] = 0.6;
        psf.ytrace.coef[f * 2] = y_mid + 0.3 * std::cos(0.5 * f);
        psf.ytrace.coef[f * 2 + 1] = y_half;
    }
    for (int i = 0; i <= 2; ++i) {
        for (int j = 0; j <= 2; ++j) {
            LegendreTable t = table(2);
            const double c0 = (i == 0 && j == 0) ? 1.0 : (i == 2 && j == 0) ? 0.04 : 0.0;
            for (int f = 0; f < nfiber; ++f) t.coef[f * 2] = c0;
            psf.params["GH-" + std::to_string(i) + "-" + std::to_string(j)] = t;
        }
    }
    LegendreTable sx = table(2), sy = table(2);
    for (int f = 0; f < nfiber; ++f) {
        sx.coef[f * 2] = 1.0 + 0.002 * f;
        sx.coef[f * 2 + 1] = 0.05;
        sy.coef[f * 2] = 1.1;
        sy.coef[f * 2 + 1] = -0.04;
    }
    psf.params["GHSIGX"] = sx;
    psf.params["GHSIGY"] = sy;
    return psf;
}

/// Image = A . photons (+ Gaussian noise of variance rn^2 + expected when seed != 0).
struct ForwardModel {
    std::vector<double> photon_wave;  ///< grid the photons live on
    std::vector<double> photons;      ///< [nfiber][nwave]
    std::vector<double> expected, image, ivar;
};

inline ForwardModel forward_model(const GaussHermitePsf& psf, const std::vector<double>& wave,
                                  unsigned seed, double read_noise = 3.0)
{
    ForwardModel fm;
    fm.photon_wave = wave;
    const int nf = psf.nspec(), nw = int(wave.size());
    fm.photons.resize(size_t(nf) * nw);
    for (int f = 0; f < nf; ++f) {
        for (int w = 0; w < nw; ++w) {
            double v = 200 + 120 * std::sin(0.013 * w + f) + 40 * f % 7;
            const double dl = wave[w] - (5100 + 7 * f);
            v += 3000 * std::exp(-0.5 * dl * dl / 0.5);
            fm.photons[size_t(f) * nw + w] = v;
        }
    }
    const SpotGrid spots = evaluate_spots(psf, 0, nf, wave, 2);
    fm.expected.assign(size_t(psf.npix_y) * psf.npix_x, 0.0);
    for (int f = 0; f < nf; ++f) {
        for (int w = 0; w < nw; ++w) {
            const double* s = spots.stamp(f, w);
            for (int iy = 0; iy < spots.ny; ++iy) {
                const int row = spots.corner_y(f, w) + iy;
                if (row < 0 || row >= psf.npix_y) continue;
                for (int ix = 0; ix < spots.nx; ++ix) {
                    const int col = spots.corner_x(f, w) + ix;
                    if (col < 0 || col >= psf.npix_x) continue;
                    fm.expected[size_t(row) * psf.npix_x + col] +=
                        s[iy * spots.nx + ix] * fm.photons[size_t(f) * nw + w];
                }
            }
        }
    }
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> gauss(0.0, 1.0);
    fm.image.resize(fm.expected.size());
    fm.ivar.resize(fm.expected.size());
    for (size_t k = 0; k < fm.expected.size(); ++k) {
        const double var = read_noise * read_noise + std::max(0.0, fm.expected[k]);
        fm.ivar[k] = 1.0 / var;
        fm.image[k] = fm.expected[k] + (seed != 0 ? std::sqrt(var) * gauss(rng) : 0.0);
    }
    return fm;
}

/// (R . photons) on the extraction grid, per bin, from a frame's stored diagonals; the photon
/// grid must contain the extraction grid at offset `offset`.
inline std::vector<double> convolved_truth(const ExtractedFrame& frame, const ForwardModel& fm,
                                           int offset)
{
    const int nw = frame.nwave, nd = frame.ndiag / 2, npw = int(fm.photon_wave.size());
    std::vector<double> out(size_t(frame.nspec) * nw, 0.0);
    for (int s = 0; s < frame.nspec; ++s) {
        const int fiber = frame.specmin + s;
        for (int d = 0; d < frame.ndiag; ++d) {
            for (int j = 0; j < nw; ++j) {
                const int row = j - nd + d;
                if (row < 0 || row >= nw) continue;
                const double r = frame.resolution[(size_t(s) * frame.ndiag + d) * nw + j];
                out[size_t(s) * nw + row] += r * fm.photons[size_t(fiber) * npw + offset + j];
            }
        }
    }
    return out;
}

}  // namespace ex2d::test
