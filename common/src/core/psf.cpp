// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/psf.hpp"

#include <algorithm>
#include <cmath>
#include <thread>

#include "ex2d/legendre_series.hpp"

#if defined(__AVX2__)
#include <immintrin.h>
// glibc's libmvec: exp and erf of four doubles (AVX2 variants).
extern "C" __m256d _ZGVdN4v_exp(__m256d);
extern "C" __m256d _ZGVdN4v_erf(__m256d);
#endif

namespace ex2d {

namespace {

using detail::legendre_sum;

double reduced_wavelength(const LegendreTable& t, double wave)
{
    return detail::reduced_wavelength(wave, t.wavemin, t.wavemax);
}

constexpr int kMaxBoundaries = 64;  // stamp sides are at most 63 pixels (check_stamp_limits)

// phi[i] = exp(-t^2/2)/sqrt(2 pi) and erf_half[i] = erf(t/sqrt 2) for n points. These two
// calls per pixel boundary dominate the spot evaluation; with AVX2 they go four at a time
// through glibc's vector math library (libmvec, within 4 ulp). Arrays hold a multiple of 4.
void gaussian_and_erf(const double* t, int n, double* phi, double* erf_half)
{
    constexpr double inv_sqrt2 = 0.70710678118654752440;
    constexpr double inv_sqrt_2pi = 0.39894228040143267794;
#if defined(__AVX2__)
    const __m256d minus_half = _mm256_set1_pd(-0.5);
    const __m256d scale_erf = _mm256_set1_pd(inv_sqrt2);
    const __m256d scale_phi = _mm256_set1_pd(inv_sqrt_2pi);
    for (int i = 0; i < n; i += 4) {
        const __m256d ti = _mm256_loadu_pd(t + i);
        const __m256d g = _ZGVdN4v_exp(_mm256_mul_pd(minus_half, _mm256_mul_pd(ti, ti)));
        _mm256_storeu_pd(phi + i, _mm256_mul_pd(g, scale_phi));
        _mm256_storeu_pd(erf_half + i, _ZGVdN4v_erf(_mm256_mul_pd(ti, scale_erf)));
    }
#else
    for (int i = 0; i < n; ++i) {
        phi[i] = std::exp(-0.5 * t[i] * t[i]) * inv_sqrt_2pi;
        erf_half[i] = std::erf(t[i] * inv_sqrt2);
    }
#endif
}

// Pixel integrals of the Gauss-Hermite basis over the n pixels of a stamp axis
// (specter's evaluation, steps 2-5): out[k * n + m] for basis order k = 0..degree, pixel m.
void pixel_integrals(double center, double sigma, int n, int degree, double* out)
{
    const double offset = center - std::floor(center + 0.5);
    const int half = n / 2;
    alignas(32) double t[kMaxBoundaries] = {};
    alignas(32) double phi[kMaxBoundaries];
    alignas(32) double erf_t[kMaxBoundaries];
    for (int i = 0; i <= n; ++i) t[i] = ((i - half - 0.5) - offset) / sigma;
    gaussian_and_erf(t, (n + 1 + 3) / 4 * 4, phi, erf_t);
    double hermite[16];
    double prev_phi_he[16];
    for (int i = 0; i <= n; ++i) {
        // probabilists' Hermite He_k(t), k = 0..degree-1
        hermite[0] = 1.0;
        if (degree > 1) hermite[1] = t[i];
        for (int k = 1; k + 1 < degree; ++k)
            hermite[k + 1] = t[i] * hermite[k] - k * hermite[k - 1];
        if (i > 0) {
            const int m = i - 1;
            out[m] = 0.5 * (erf_t[i] - erf_t[i - 1]);
            for (int k = 1; k <= degree; ++k) {
                out[k * n + m] = prev_phi_he[k - 1] - hermite[k - 1] * phi[i];
            }
        }
        for (int k = 0; k < degree; ++k) prev_phi_he[k] = hermite[k] * phi[i];
    }
}

// Parameters of one fibre at many wavelengths, evaluated once and reused for every spot.
struct FiberParams {
    std::vector<double> x, y, sigx, sigy;
    std::vector<double> gh;  // [nwave][ncoef_gh], index i * (ghdegy+1) + j for GH-i-j
};

FiberParams fiber_params(const GaussHermitePsf& psf, int fiber, const std::vector<double>& waves)
{
    const int nwave = int(waves.size());
    const int ngh = gh_ncoef(psf);
    FiberParams p;
    p.x.resize(nwave);
    p.y.resize(nwave);
    p.sigx.resize(nwave);
    p.sigy.resize(nwave);
    p.gh.resize(size_t(nwave) * ngh);
    psf.xtrace.eval_many(fiber, waves.data(), nwave, p.x.data());
    psf.ytrace.eval_many(fiber, waves.data(), nwave, p.y.data());
    psf.param("GHSIGX").eval_many(fiber, waves.data(), nwave, p.sigx.data());
    psf.param("GHSIGY").eval_many(fiber, waves.data(), nwave, p.sigy.data());
    std::vector<double> tmp(nwave);
    for (int i = 0; i <= psf.ghdegx; ++i) {
        for (int j = 0; j <= psf.ghdegy; ++j) {
            const std::string name = "GH-" + std::to_string(i) + "-" + std::to_string(j);
            psf.param(name).eval_many(fiber, waves.data(), nwave, tmp.data());
            const int k = i * (psf.ghdegy + 1) + j;
            for (int w = 0; w < nwave; ++w) p.gh[size_t(w) * ngh + k] = tmp[w];
        }
    }
    return p;
}

// One stamp (specter's evaluation, steps 6-7): core = Py^T . GH . Px, clipped at 0, normalised.
void compute_stamp(const GaussHermitePsf& psf, double x, double y, double sigx, double sigy,
                   const double* gh, double* stamp)
{
    const int nx = psf.stamp_nx();
    const int ny = psf.stamp_ny();
    const int dx = psf.ghdegx + 1;
    const int dy = psf.ghdegy + 1;
    double px[16 * 64];
    double py[16 * 64];
    pixel_integrals(x, sigx, nx, psf.ghdegx, px);
    pixel_integrals(y, sigy, ny, psf.ghdegy, py);
    // row_coef[iy][i] = sum_j GH-i-j * pGHy_j[iy]
    double row_coef[64 * 16];
    for (int iy = 0; iy < ny; ++iy) {
        for (int i = 0; i < dx; ++i) {
            double s = 0;
            for (int j = 0; j < dy; ++j) s += gh[i * dy + j] * py[j * ny + iy];
            row_coef[iy * dx + i] = s;
        }
    }
    // Each pixel sums its dx terms in order i = 0..dx-1, as a dot product would; the loop
    // over the row's pixels is innermost so that it vectorises.
    double total = 0;
    for (int iy = 0; iy < ny; ++iy) {
        double* row = stamp + iy * nx;
        const double* coef = row_coef + iy * dx;
        for (int ix = 0; ix < nx; ++ix) row[ix] = coef[0] * px[ix];
        for (int i = 1; i < dx; ++i) {
            const double c = coef[i];
            const double* p = px + i * nx;
            for (int ix = 0; ix < nx; ++ix) row[ix] += c * p[ix];
        }
        for (int ix = 0; ix < nx; ++ix) {
            row[ix] = row[ix] > 0 ? row[ix] : 0.0;
            total += row[ix];
        }
    }
    const double norm = total > 0 ? 1.0 / total : 0.0;
    for (int k = 0; k < nx * ny; ++k) stamp[k] *= norm;
}

void check_stamp_limits(const GaussHermitePsf& psf)
{
    if (psf.stamp_nx() > 63 || psf.stamp_ny() > 63 || psf.ghdegx > 14 || psf.ghdegy > 14) {
        throw Error("PSF stamp or Hermite degree too large: " + psf.source);
    }
}

}  // namespace

double LegendreTable::eval(int fiber, double wave) const
{
    return legendre_sum(coef.data() + size_t(fiber) * ncoef, ncoef,
                        reduced_wavelength(*this, wave));
}

void LegendreTable::eval_many(int fiber, const double* waves, int nwave, double* out) const
{
    // legendre_sum's recurrence for a block of wavelengths at once, the wavelength loop
    // innermost so that it vectorises (the division of each step would otherwise wait on the
    // one before); every value goes through the same operations in the same order.
    constexpr int kBlock = 64;
    const double* c = coef.data() + size_t(fiber) * ncoef;
    double u[kBlock], p_prev[kBlock], p[kBlock], sum[kBlock];
    for (int w0 = 0; w0 < nwave; w0 += kBlock) {
        const int nb = std::min(kBlock, nwave - w0);
        for (int i = 0; i < nb; ++i) {
            u[i] = reduced_wavelength(*this, waves[w0 + i]);
            p_prev[i] = 1.0;
            p[i] = u[i];
            sum[i] = c[0];
        }
        if (ncoef > 1) {
            for (int i = 0; i < nb; ++i) sum[i] += c[1] * p[i];
        }
        for (int k = 1; k + 1 < ncoef; ++k) {
            for (int i = 0; i < nb; ++i) {
                const double next = detail::legendre_next(k, u[i], p[i], p_prev[i]);
                p_prev[i] = p[i];
                p[i] = next;
                sum[i] += c[k + 1] * next;
            }
        }
        std::copy(sum, sum + nb, out + w0);
    }
}

const LegendreTable& GaussHermitePsf::param(const std::string& name) const
{
    auto it = params.find(name);
    if (it == params.end()) throw Error(source + ": PSF has no parameter " + name);
    return it->second;
}

Status GaussHermitePsf::validate() const
{
    auto bad = [&](const std::string& what) { return Status::format(source + ": " + what); };
    if (xtrace.nfiber <= 0 || xtrace.ncoef <= 0) return bad("empty XTRACE");
    if (ytrace.nfiber != xtrace.nfiber) return bad("XTRACE and YTRACE have different fibre counts");
    if (hsizex <= 0 || hsizey <= 0 || hsizex > 31 || hsizey > 31) return bad("bad HSIZEX/HSIZEY");
    if (ghdegx < 0 || ghdegy < 0 || ghdegx > 14 || ghdegy > 14) return bad("bad GHDEGX/GHDEGY");
    if (npix_x <= 0 || npix_y <= 0) return bad("missing NPIX_X/NPIX_Y");
    std::vector<std::string> required = {"GHSIGX", "GHSIGY"};
    for (int i = 0; i <= ghdegx; ++i) {
        for (int j = 0; j <= ghdegy; ++j) {
            required.push_back("GH-" + std::to_string(i) + "-" + std::to_string(j));
        }
    }
    for (const auto& name : required) {
        auto it = params.find(name);
        if (it == params.end()) return bad("PSF table has no row " + name);
        if (it->second.nfiber != xtrace.nfiber || it->second.ncoef <= 0) {
            return bad("PSF row " + name + " does not match the traces' fibre count");
        }
        if (!(it->second.wavemax > it->second.wavemin))
            return bad("bad WAVEMIN/WAVEMAX of PSF HDU");
    }
    for (const LegendreTable* t : {&xtrace, &ytrace}) {
        if (!(t->wavemax > t->wavemin)) return bad("bad WAVEMIN/WAVEMAX of a trace HDU");
        for (double c : t->coef) {
            if (!std::isfinite(c)) return bad("non-finite trace coefficient");
        }
    }
    for (const auto& [name, table] : params) {
        for (double c : table.coef) {
            if (!std::isfinite(c)) return bad("non-finite coefficient in PSF row " + name);
        }
    }
    return Status::ok();
}

int stamp_corner(double center, int hsize)
{
    return int(std::floor(center - hsize + 0.5));
}

SpotGrid evaluate_spots(const GaussHermitePsf& psf, int fiber_begin, int nfiber,
                        const std::vector<double>& waves, int nthreads)
{
    SpotGrid grid;
    evaluate_spots(psf, fiber_begin, nfiber, waves, nthreads, grid);
    return grid;
}

void evaluate_spots(const GaussHermitePsf& psf, int fiber_begin, int nfiber,
                    const std::vector<double>& waves, int nthreads, SpotGrid& grid)
{
    check_stamp_limits(psf);
    grid.fiber_begin = fiber_begin;
    grid.nfiber = nfiber;
    grid.nwave = int(waves.size());
    grid.ny = psf.stamp_ny();
    grid.nx = psf.stamp_nx();
    // Every element is written below; resize keeps a reused grid's memory (no page faults).
    grid.values.resize(size_t(nfiber) * grid.nwave * grid.ny * grid.nx);
    grid.xc.resize(size_t(nfiber) * grid.nwave);
    grid.yc.resize(size_t(nfiber) * grid.nwave);
    const int ngh = gh_ncoef(psf);
    auto work = [&](int first, int step) {
        for (int f = first; f < nfiber; f += step) {
            const FiberParams p = fiber_params(psf, fiber_begin + f, waves);
            for (int w = 0; w < grid.nwave; ++w) {
                compute_stamp(psf, p.x[w], p.y[w], p.sigx[w], p.sigy[w], &p.gh[size_t(w) * ngh],
                              grid.stamp(f, w));
                grid.xc[size_t(f) * grid.nwave + w] = stamp_corner(p.x[w], psf.hsizex);
                grid.yc[size_t(f) * grid.nwave + w] = stamp_corner(p.y[w], psf.hsizey);
            }
        }
    };
    nthreads = std::max(1, std::min(nthreads, nfiber));
    if (nthreads == 1) {
        work(0, 1);
    } else {
        std::vector<std::thread> threads;
        threads.reserve(std::size_t(nthreads));
        for (int t = 0; t < nthreads; ++t) threads.emplace_back(work, t, nthreads);
        for (auto& t : threads) t.join();
    }
}

void evaluate_corners(const GaussHermitePsf& psf, int fiber, const std::vector<double>& waves,
                      std::vector<int>& xc, std::vector<int>& yc)
{
    const int nwave = int(waves.size());
    std::vector<double> x(nwave), y(nwave);
    psf.xtrace.eval_many(fiber, waves.data(), nwave, x.data());
    psf.ytrace.eval_many(fiber, waves.data(), nwave, y.data());
    xc.resize(nwave);
    yc.resize(nwave);
    for (int w = 0; w < nwave; ++w) {
        xc[w] = stamp_corner(x[w], psf.hsizex);
        yc[w] = stamp_corner(y[w], psf.hsizey);
    }
}

Spot evaluate_spot(const GaussHermitePsf& psf, int fiber, double wave)
{
    SpotGrid grid = evaluate_spots(psf, fiber, 1, {wave}, 1);
    Spot spot;
    spot.xc = grid.xc[0];
    spot.yc = grid.yc[0];
    spot.values.assign(grid.values.begin(), grid.values.end());
    return spot;
}

}  // namespace ex2d
