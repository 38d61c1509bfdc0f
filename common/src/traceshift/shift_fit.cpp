// SPDX-License-Identifier: BSD-3-Clause
#include "shift_fit.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "blas_threads.hpp"
#include "ex2d/logging.hpp"
#include "lapack_fortran.hpp"

namespace ex2d::traceshift {

namespace {

// The fits are a few coefficients, nothing for BLAS threads to share; and OpenBLAS's threaded
// dpotrf/dpotri do not give the bits of its single-threaded ones, so that a process that runs
// no extraction (the fleet's reader, whose BLAS the CPU backend never sets) would measure a
// frame a little differently from one that does (a worker): one thread wherever this links.
[[maybe_unused]] const bool kBlasSingleThreadedAtLoad = (use_single_threaded_blas(), true);

constexpr double kMedianChi2OfOneDof = 0.4549;  // median of chi2 with one degree of freedom
constexpr double kRejectSigmas = 5.0;

void monomials(const ShiftPolynomial& p, double x, double y, double* out)
{
    const double u = 2.0 * x / p.npix_x - 1.0;
    const double v = 2.0 * y / p.npix_y - 1.0;
    double ui = 1.0;
    for (int i = 0, k = 0; i <= p.degx; ++i, ui *= u) {
        double vj = 1.0;
        for (int j = 0; j <= p.degy; ++j, ++k, vj *= v) out[k] = ui * vj;
    }
}

/// Inverts the symmetric positive-definite `a` ([n][n], full) in place; false if singular.
bool invert_spd(std::vector<double>& a, int n)
{
    if (lapack::dpotrf('L', n, a.data(), n) != 0) return false;
    if (lapack::dpotri('L', n, a.data(), n) != 0) return false;
    for (int c = 0; c < n; ++c) {
        for (int r = 0; r < c; ++r) a[size_t(c) * n + r] = a[size_t(r) * n + c];
    }
    return true;
}

/// Weighted least squares of the used points with errors sqrt(error^2 + floor^2).
bool solve(const std::vector<TraceOffset>& offsets, double floor, ShiftPolynomial& p)
{
    const int n = p.npar();
    std::vector<double> normal(size_t(n) * n, 0.0), rhs(n, 0.0), m(n);
    for (const TraceOffset& o : offsets) {
        if (!o.used) continue;
        const double w = 1.0 / (o.error * o.error + floor * floor);
        monomials(p, o.x, o.y, m.data());
        for (int a = 0; a < n; ++a) {
            rhs[a] += w * m[a] * o.delta;
            for (int b = 0; b <= a; ++b) normal[size_t(b) * n + a] += w * m[a] * m[b];
        }
    }
    if (!invert_spd(normal, n)) return false;
    p.covariance = normal;
    p.coef.assign(n, 0.0);
    for (int a = 0; a < n; ++a) {
        for (int b = 0; b < n; ++b) p.coef[a] += normal[size_t(a) * n + b] * rhs[b];
    }
    p.error_floor = floor;
    return true;
}

double median(std::vector<double> values)
{
    if (values.empty()) return 0.0;
    const auto mid = values.begin() + long(values.size() / 2);
    std::nth_element(values.begin(), mid, values.end());
    return *mid;
}

/// Median chi2 of the used points with the given floor.
double median_chi2(const std::vector<TraceOffset>& offsets, const ShiftPolynomial& p, double floor)
{
    std::vector<double> chi2;
    for (const TraceOffset& o : offsets) {
        if (!o.used) continue;
        const double r = o.delta - p(o.x, o.y);
        chi2.push_back(r * r / (o.error * o.error + floor * floor));
    }
    return median(std::move(chi2));
}

/// The floor (px) that brings the median chi2 to that of a unit Gaussian, 0 if below already.
double error_floor_for(const std::vector<TraceOffset>& offsets, const ShiftPolynomial& p)
{
    if (median_chi2(offsets, p, 0.0) <= kMedianChi2OfOneDof) return 0.0;
    double lo = 0.0, hi = 0.01;
    while (median_chi2(offsets, p, hi) > kMedianChi2OfOneDof && hi < 100.0) hi *= 2.0;
    for (int pass = 0; pass < 40; ++pass) {
        const double mid = 0.5 * (lo + hi);
        (median_chi2(offsets, p, mid) > kMedianChi2OfOneDof ? lo : hi) = mid;
    }
    return hi;
}

}  // namespace

double ShiftPolynomial::operator()(double x, double y) const
{
    double m[64];
    monomials(*this, x, y, m);
    double sum = 0.0;
    for (int k = 0; k < npar(); ++k) sum += coef[k] * m[k];
    return sum;
}

double ShiftPolynomial::error(double x, double y) const
{
    double m[64];
    monomials(*this, x, y, m);
    const int n = npar();
    double var = 0.0;
    for (int a = 0; a < n; ++a) {
        for (int b = 0; b < n; ++b) var += m[a] * covariance[size_t(a) * n + b] * m[b];
    }
    return std::sqrt(std::max(0.0, var));
}

Result<ShiftPolynomial> fit_shift_polynomial(std::vector<TraceOffset>& offsets, int degx, int degy,
                                             int npix_x, int npix_y)
{
    ShiftPolynomial p;
    p.degx = degx;
    p.degy = degy;
    p.npix_x = npix_x;
    p.npix_y = npix_y;
    if (p.npar() > 64) return Status::invalid("shift polynomial degrees too high");
    for (TraceOffset& o : offsets) o.used = std::isfinite(o.delta) && o.error > 0;
    double floor = 0.0;
    for (int pass = 0; pass < 100; ++pass) {
        const long nused = std::count_if(offsets.begin(), offsets.end(),
                                         [](const TraceOffset& o) { return o.used; });
        if (nused < p.npar() + 2) {
            return Status::numerical(std::to_string(nused) + " usable offsets for a fit of " +
                                     std::to_string(p.npar()) + " parameters");
        }
        if (!solve(offsets, floor, p)) return Status::numerical("singular shift fit");
        floor = error_floor_for(offsets, p);
        // Reject the points beyond kRejectSigmas, one pass at a time, until none is left.
        long rejected = 0;
        for (TraceOffset& o : offsets) {
            if (!o.used) continue;
            const double r = (o.delta - p(o.x, o.y)) / std::hypot(o.error, floor);
            if (std::fabs(r) > kRejectSigmas) {
                o.used = false;
                ++rejected;
            }
        }
        if (rejected == 0) break;
    }
    if (!solve(offsets, floor, p)) return Status::numerical("singular shift fit");
    return p;
}

Result<ShiftPolynomial> fit_with_degree_rule(std::vector<TraceOffset>& offsets, int& degx,
                                             int& degy, double max_error,
                                             const GaussHermitePsf& psf, int nfibers)
{
    const LegendreTable& xt = psf.xtrace;
    const LegendreTable& yt = psf.ytrace;
    while (true) {
        auto fit = fit_shift_polynomial(offsets, degx, degy, psf.npix_x, psf.npix_y);
        double worst = 0.0;
        if (fit.is_ok()) {
            for (int fiber : {0, nfibers - 1}) {
                for (double wave : {yt.wavemin, yt.wavemax}) {
                    worst = std::max(worst,
                                     fit.value().error(xt.eval(fiber, wave), yt.eval(fiber, wave)));
                }
            }
            if (worst <= max_error) return fit;
            if (degx == 0 && degy == 0) {
                return Status::numerical("the shift's error at the CCD corners, " +
                                         std::to_string(worst) + " px, exceeds --max-error " +
                                         std::to_string(max_error) + " px even at degree 0");
            }
        } else if (degx == 0 && degy == 0) {
            return fit.status();
        }
        logger()->info("trace-shifts fit degx={} degy={} {}; lowering the degree", degx, degy,
                       fit.is_ok() ? "corner error " + std::to_string(worst) + " px" : "failed");
        // The larger degree goes down first, x on a tie (both >= 0 and not both 0 here).
        if (degy > degx) {
            --degy;
        } else {
            --degx;
        }
    }
}

std::vector<double> drop_discrepant_lines(std::vector<TraceOffset>& offsets,
                                          const ShiftPolynomial& shift)
{
    std::map<double, std::vector<double>> residuals;
    for (const TraceOffset& o : offsets) {
        if (o.used) residuals[o.wave].push_back(o.delta - shift(o.x, o.y));
    }
    if (residuals.size() < 3) return {};
    std::map<double, double> line_median;
    std::vector<double> medians;
    for (auto& [wave, r] : residuals) {
        line_median[wave] = median(r);
        medians.push_back(line_median[wave]);
    }
    const double center = median(medians);
    std::vector<double> deviations;
    deviations.reserve(medians.size());
    for (double m : medians) deviations.push_back(std::fabs(m - center));
    const double limit = std::max(0.02, 5.0 * 1.4826 * median(deviations));
    std::vector<double> dropped;
    for (const auto& [wave, m] : line_median) {
        if (std::fabs(m - center) > limit) dropped.push_back(wave);
    }
    if (dropped.empty()) return dropped;
    offsets.erase(std::remove_if(offsets.begin(), offsets.end(),
                                 [&](const TraceOffset& o) {
                                     return std::binary_search(dropped.begin(), dropped.end(),
                                                               o.wave);
                                 }),
                  offsets.end());
    return dropped;
}

LegendreTable shifted_trace(const GaussHermitePsf& psf, TraceAxis axis,
                            const ShiftPolynomial& shift)
{
    const LegendreTable& trace = axis == TraceAxis::x ? psf.xtrace : psf.ytrace;
    constexpr int kSamples = 100;
    const int ncoef = trace.ncoef;
    std::vector<double> waves(kSamples), basis(size_t(kSamples) * ncoef);
    for (int s = 0; s < kSamples; ++s) {
        waves[s] = trace.wavemin + (trace.wavemax - trace.wavemin) * s / (kSamples - 1);
        const double u = 2.0 * s / (kSamples - 1) - 1.0;
        double p0 = 1.0, p1 = u;
        for (int k = 0; k < ncoef; ++k) {
            double pk = k == 0 ? 1.0 : p1;
            if (k >= 2) {
                pk = ((2.0 * k - 1.0) * u * p1 - (k - 1.0) * p0) / k;
                p0 = p1;
                p1 = pk;
            }
            basis[size_t(s) * ncoef + k] = pk;
        }
    }
    std::vector<double> normal(size_t(ncoef) * ncoef, 0.0);
    for (int s = 0; s < kSamples; ++s) {
        for (int a = 0; a < ncoef; ++a) {
            for (int b = 0; b < ncoef; ++b) {
                normal[size_t(a) * ncoef + b] +=
                    basis[size_t(s) * ncoef + a] * basis[size_t(s) * ncoef + b];
            }
        }
    }
    invert_spd(normal, ncoef);  // Legendre polynomials at 100 points: well conditioned
    LegendreTable out = trace;
    std::vector<double> xs(kSamples), ys(kSamples), rhs(ncoef);
    for (int fiber = 0; fiber < trace.nfiber; ++fiber) {
        psf.xtrace.eval_many(fiber, waves.data(), kSamples, xs.data());
        psf.ytrace.eval_many(fiber, waves.data(), kSamples, ys.data());
        const std::vector<double>& own = axis == TraceAxis::x ? xs : ys;
        std::fill(rhs.begin(), rhs.end(), 0.0);
        for (int s = 0; s < kSamples; ++s) {
            const double target = own[s] + shift(xs[s], ys[s]);
            for (int a = 0; a < ncoef; ++a) rhs[a] += basis[size_t(s) * ncoef + a] * target;
        }
        for (int a = 0; a < ncoef; ++a) {
            double c = 0.0;
            for (int b = 0; b < ncoef; ++b) c += normal[size_t(a) * ncoef + b] * rhs[b];
            out.coef[size_t(fiber) * ncoef + a] = c;
        }
    }
    return out;
}

}  // namespace ex2d::traceshift
