// SPDX-License-Identifier: BSD-3-Clause
// x offsets from cross-dispersion centroids (the method of desispec's
// compute_dx_from_cross_dispersion_profiles, with the PSF's own centroid subtracted so that
// an asymmetric PSF or a window off-centre on the pixel grid does not bias the result).
#include <algorithm>
#include <cmath>
#include <string>

#include "measure.hpp"

namespace ex2d::traceshift {

namespace {

constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kMinSnr = 3.0;

/// Integral over [t0, t1] (in units of sigma) of He_a(t) phi(t)-weighted Gauss-Hermite
/// terms, as the spot's pixel integrals (datamodel 2.4 step 5), summed with `coef`.
double gauss_hermite_pixel(const std::vector<double>& coef, double t0, double t1)
{
    double sum = coef[0] * 0.5 * (std::erf(t1 * kInvSqrt2) - std::erf(t0 * kInvSqrt2));
    const double phi0 = kInvSqrt2Pi * std::exp(-0.5 * t0 * t0);
    const double phi1 = kInvSqrt2Pi * std::exp(-0.5 * t1 * t1);
    double he0_prev = 0, he0 = 1, he1_prev = 0, he1 = 1;  // He_{k-1} at t0 and t1
    for (size_t k = 1; k < coef.size(); ++k) {
        sum += coef[k] * (he0 * phi0 - he1 * phi1);
        const double n0 = t0 * he0 - double(k - 1) * he0_prev;
        const double n1 = t1 * he1 - double(k - 1) * he1_prev;
        he0_prev = he0;
        he0 = n0;
        he1_prev = he1;
        he1 = n1;
    }
    return sum;
}

}  // namespace

XCentroidModel::XCentroidModel(const GaussHermitePsf& psf, int nfibers, int ny, int width)
{
    nblocks_ = (ny + kRowsPerXOffset - 1) / kRowsPerXOffset;
    table_.assign(size_t(nfibers) * nblocks_ * kPhases, 0.0);
    const int hw = width / 2;
    // Summed over the spot's rows only the GH-i-0 terms remain (the others integrate to 0):
    // the cross-dispersion profile is a 1-D Gauss-Hermite series in x.
    const LegendreTable& sigx = psf.param("GHSIGX");
    std::vector<const LegendreTable*> terms;
    for (int i = 0; i <= psf.ghdegx; ++i)
        terms.push_back(&psf.param("GH-" + std::to_string(i) + "-0"));
    std::vector<double> coef(terms.size()), profile(size_t(2 * hw + 1));
    for (int fiber = 0; fiber < nfibers; ++fiber) {
        const TraceSamples trace(psf, fiber);
        for (int block = 0; block < nblocks_; ++block) {
            const double row =
                std::clamp((block + 0.5) * kRowsPerXOffset, trace.first_row(), trace.last_row());
            double x, wave;
            trace.at_row(row, x, wave);
            const double sigma = sigx.eval(fiber, wave);
            for (size_t i = 0; i < terms.size(); ++i) coef[i] = terms[i]->eval(fiber, wave);
            double* out = &table_[(size_t(fiber) * nblocks_ + block) * kPhases];
            for (int p = 0; p < kPhases; ++p) {
                const double phase = -0.5 + double(p) / (kPhases - 1);
                double s0 = 0, s1 = 0;
                for (int k = -hw; k <= hw; ++k) {
                    const double v =
                        std::max(0.0, gauss_hermite_pixel(coef, (k - 0.5 - phase) / sigma,
                                                          (k + 0.5 - phase) / sigma));
                    s0 += v;
                    s1 += (k - phase) * v;
                }
                out[p] = s0 > 0 ? s1 / s0 : 0.0;
            }
        }
    }
}

double XCentroidModel::centroid(int fiber, int block, double phase) const
{
    const double* t = &table_[(size_t(fiber) * nblocks_ + std::min(block, nblocks_ - 1)) * kPhases];
    const double u = std::clamp((phase + 0.5) * (kPhases - 1), 0.0, double(kPhases - 1));
    const int k = std::min(int(u), kPhases - 2);
    return t[k] + (u - k) * (t[k + 1] - t[k]);
}

template <typename View>
std::vector<TraceOffset> measure_x_offsets(const View& image, const GaussHermitePsf& psf,
                                           const XCentroidModel& model, int nfibers, int width,
                                           int rows_rebin)
{
    const int hw = width / 2;
    const int groups_per_block = std::max(1, kRowsPerXOffset / rows_rebin);
    const int block_rows = groups_per_block * rows_rebin;
    const int ngroups = image.ny / rows_rebin;
    std::vector<TraceOffset> offsets;
    for (int fiber = 0; fiber < nfibers; ++fiber) {
        const TraceSamples trace(psf, fiber);
        // Per block: sum of flux, of flux x offset from the trace, of flux x model centroid,
        // of the pixel variance times 1, offset and offset^2, and flux-weighted x, y, wave.
        double s0 = 0, s1 = 0, sm = 0, v0 = 0, v1 = 0, v2 = 0, sx = 0, sy = 0, sw = 0;
        std::vector<TraceOffset> fiber_offsets;
        int blocks_seen = 0;
        auto flush = [&]() {
            if (v0 > 0) ++blocks_seen;
            if (s0 > 0 && v0 > 0 && s0 / std::sqrt(v0) > kMinSnr) {
                const double c = s1 / s0;
                TraceOffset o;
                o.axis = 1;
                o.fiber = fiber;
                o.x = sx / s0;
                o.y = sy / s0;
                o.wave = sw / s0;
                o.delta = (s1 - sm) / s0;
                o.error = std::sqrt(std::max(0.0, v2 - 2 * c * v1 + c * c * v0)) / s0;
                if (o.error > 0) fiber_offsets.push_back(o);
            }
            s0 = s1 = sm = v0 = v1 = v2 = sx = sy = sw = 0;
        };
        int current_block = -1;
        for (int g = 0; g < ngroups; ++g) {
            const int row0 = g * rows_rebin;
            const int block = row0 / block_rows;
            if (block != current_block) {
                if (current_block >= 0) flush();
                current_block = block;
            }
            const double row = row0 + 0.5 * (rows_rebin - 1);
            if (row < trace.first_row() || row > trace.last_row()) continue;
            double x, wave;
            trace.at_row(row, x, wave);
            const long center = std::lround(x);
            if (center - hw < image.col_begin || center + hw >= image.col_begin + image.stride()) {
                continue;
            }
            const double phase = x - double(center);
            double g0 = 0, g1 = 0, w0 = 0, w1 = 0, w2 = 0;
            bool masked = false;
            for (int r = row0; r < row0 + rows_rebin && !masked; ++r) {
                const size_t base = image.index(r, int(center - hw));
                for (int k = -hw; k <= hw; ++k) {
                    const double weight = image.weights[base + size_t(k + hw)];
                    if (!(weight > 0)) {
                        masked = true;
                        break;
                    }
                    const double value = image.pixels[base + size_t(k + hw)];
                    const double d = k - phase;
                    const double var = 1.0 / weight;
                    g0 += value;
                    g1 += d * value;
                    w0 += var;
                    w1 += d * var;
                    w2 += d * d * var;
                }
            }
            if (masked) continue;
            const int model_block = int(row) / kRowsPerXOffset;
            s0 += g0;
            s1 += g1;
            sm += g0 * model.centroid(fiber, model_block, phase);
            v0 += w0;
            v1 += w1;
            v2 += w2;
            sx += g0 * x;
            sy += g0 * row;
            sw += g0 * wave;
        }
        if (current_block >= 0) flush();
        // Noise alone passes the S/N cut in 0.1% of the blocks: a fibre counts as lit where
        // half of its blocks pass.
        if (2 * fiber_offsets.size() >= size_t(blocks_seen) && blocks_seen > 0) {
            offsets.insert(offsets.end(), fiber_offsets.begin(), fiber_offsets.end());
        }
    }
    return offsets;
}

template std::vector<TraceOffset> measure_x_offsets(const ImageView&, const GaussHermitePsf&,
                                                    const XCentroidModel&, int, int, int);
template std::vector<TraceOffset> measure_x_offsets(const Float32ImageView&, const GaussHermitePsf&,
                                                    const XCentroidModel&, int, int, int);

}  // namespace ex2d::traceshift
