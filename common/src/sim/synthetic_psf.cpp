// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/synthetic_psf.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace ex2d {

namespace {

constexpr int kNumFibers = 500;
constexpr int kBundleSize = 25;
constexpr int kTraceNcoef = 7;  // XTRACE/YTRACE: Legendre degree 6, as in specex output
constexpr int kParamLegdeg = 3;
constexpr int kParamNcoef = kParamLegdeg + 1;

// Fibre layout on the CCD, after the real r0 PSF: fibre 0 near column 121,
// fibre 499 near 3946, 7.3 px between fibres of a bundle and a wider gap between bundles.
constexpr double kFirstFiberX = 122.0;
constexpr double kFiberPitch = 7.3;
constexpr double kBundlePitch = 192.05;
constexpr double kCenterX = kFirstFiberX + 0.5 * (19 * kBundlePitch + 24 * kFiberPitch);
constexpr double kHalfSpanX = 0.5 * (19 * kBundlePitch + 24 * kFiberPitch);

// Rows of the trace below 0 at the blue end of the Legendre domain and above NPIX_Y at the
// red end, like the real r0 PSF (Y from about -5.5 to 4312 for 4128 rows).
constexpr double kYStart = -6.0;
constexpr double kYOvershoot = 150.0;
// Non-linear part of the dispersion: Y = y0 + span * (t + q t (t - 1)); dY/dt stays positive
// for |q| < 1, so Y is strictly increasing in wavelength.
constexpr double kDispersionCurvature = 0.04;

/// A fibre's place in the layout, in the forms the design functions use.
struct FiberCoords {
    int bundle;
    double x0;  ///< column of the trace at the middle of the domain (before curvature)
    double r;   ///< -1 for the first fibre, +1 for the last, by position across the CCD
    double f;   ///< fibre index / 499
};

FiberCoords fiber_coords(int fiber)
{
    FiberCoords c;
    c.bundle = fiber / kBundleSize;
    c.x0 = kFirstFiberX + c.bundle * kBundlePitch + (fiber % kBundleSize) * kFiberPitch;
    c.r = (c.x0 - kCenterX) / kHalfSpanX;
    c.f = double(fiber) / (kNumFibers - 1);
    return c;
}

/// Legendre polynomials P_0..P_{n-1} at u.
void legendre_values(double u, int n, double* p)
{
    p[0] = 1.0;
    if (n > 1) p[1] = u;
    for (int k = 1; k + 1 < n; ++k) p[k + 1] = ((2 * k + 1) * u * p[k] - k * p[k - 1]) / (k + 1);
}

/// Least-squares Legendre coefficients of `fn(t)`, t = (u + 1) / 2 in [0, 1] across the domain,
/// sampled at Chebyshev nodes (well conditioned; exact for polynomials of degree < ncoef).
std::vector<double> fit_legendre(const std::function<double(double)>& fn, int ncoef)
{
    constexpr int kNodes = 64;
    constexpr double kPi = 3.14159265358979323846;
    std::vector<double> normal(size_t(ncoef) * ncoef, 0.0);
    std::vector<double> rhs(ncoef, 0.0);
    std::array<double, 16> p{};
    for (int k = 0; k < kNodes; ++k) {
        const double u = std::cos(kPi * (k + 0.5) / kNodes);
        const double value = fn(0.5 * (u + 1.0));
        legendre_values(u, ncoef, p.data());
        for (int i = 0; i < ncoef; ++i) {
            rhs[i] += p[i] * value;
            for (int j = 0; j < ncoef; ++j) normal[size_t(i) * ncoef + j] += p[i] * p[j];
        }
    }
    // Gaussian elimination with partial pivoting on the small normal matrix.
    for (int col = 0; col < ncoef; ++col) {
        int pivot = col;
        for (int row = col + 1; row < ncoef; ++row) {
            if (std::fabs(normal[size_t(row) * ncoef + col]) >
                std::fabs(normal[size_t(pivot) * ncoef + col])) {
                pivot = row;
            }
        }
        if (pivot != col) {
            for (int j = 0; j < ncoef; ++j) {
                std::swap(normal[size_t(col) * ncoef + j], normal[size_t(pivot) * ncoef + j]);
            }
            std::swap(rhs[col], rhs[pivot]);
        }
        for (int row = col + 1; row < ncoef; ++row) {
            const double factor =
                normal[size_t(row) * ncoef + col] / normal[size_t(col) * ncoef + col];
            for (int j = col; j < ncoef; ++j) {
                normal[size_t(row) * ncoef + j] -= factor * normal[size_t(col) * ncoef + j];
            }
            rhs[row] -= factor * rhs[col];
        }
    }
    std::vector<double> coef(ncoef);
    for (int i = ncoef - 1; i >= 0; --i) {
        double s = rhs[i];
        for (int j = i + 1; j < ncoef; ++j) s -= normal[size_t(i) * ncoef + j] * coef[j];
        coef[i] = s / normal[size_t(i) * ncoef + i];
    }
    return coef;
}

/// A value per fibre as a function of the domain fraction t.
using FiberDesign = std::function<double(const FiberCoords&, double)>;

LegendreTable make_table(double wavemin, double wavemax, int ncoef, const FiberDesign& design)
{
    LegendreTable table;
    table.wavemin = wavemin;
    table.wavemax = wavemax;
    table.nfiber = kNumFibers;
    table.ncoef = ncoef;
    table.coef.resize(size_t(kNumFibers) * ncoef);
    for (int fiber = 0; fiber < kNumFibers; ++fiber) {
        const FiberCoords c = fiber_coords(fiber);
        const std::vector<double> coef =
            fit_legendre([&](double t) { return design(c, t); }, ncoef);
        std::copy(coef.begin(), coef.end(), table.coef.begin() + size_t(fiber) * ncoef);
    }
    return table;
}

/// A table whose every fibre has the constant `value(fibre)` (only c_0 non-zero).
LegendreTable make_constant_table(double wavemin, double wavemax,
                                  const std::function<double(int)>& value)
{
    LegendreTable table;
    table.wavemin = wavemin;
    table.wavemax = wavemax;
    table.nfiber = kNumFibers;
    table.ncoef = kParamNcoef;
    table.coef.assign(size_t(kNumFibers) * kParamNcoef, 0.0);
    for (int fiber = 0; fiber < kNumFibers; ++fiber) {
        table.coef[size_t(fiber) * kParamNcoef] = value(fiber);
    }
    return table;
}

/// Gauss-Hermite coefficient GH-i-j as a smooth function of fibre and wavelength. The core
/// stays close to a Gaussian: GH-0-0 near 1, second orders a few percent (ellipticity and
/// kurtosis-like terms), odd orders ~0.005 (they shift the centroid by sigma * GH-1-0 / GH-0-0,
/// under 0.02 px), orders above 4 at 1e-3 and zero above 6 in total.
double gh_design(int i, int j, const FiberCoords& c, double t)
{
    if (i == 0 && j == 0) return 0.97 + 0.06 * t + 0.02 * c.r * c.r;
    if (i == 2 && j == 0) return -0.02 + 0.04 * t + 0.01 * c.r;
    if (i == 0 && j == 2) return 0.01 + 0.03 * c.r * c.r - 0.02 * t;
    if (i == 1 && j == 1) return 0.01 * c.r;
    const int order = i + j;
    double amplitude = 0.0;
    if (order % 2 == 1 && order <= 4) {
        amplitude = 0.005;
    } else if (order <= 4) {
        amplitude = 0.003;
    } else if (order <= 6) {
        amplitude = 0.001;
    }
    return amplitude * std::cos(0.9 * i + 1.7 * j) * (1.0 + 0.5 * c.r - 0.4 * t);
}

std::string gh_name(int i, int j)
{
    return "GH-" + std::to_string(i) + "-" + std::to_string(j);
}

void fill_headers(GaussHermitePsf& psf, const std::string& camera, const ArmDefaults& arm)
{
    for (FitsHeader* h : {&psf.xtrace_header, &psf.psf_header}) {
        h->set_double("WAVEMIN", arm.psf_wavemin, "minimum wavelength (A) of the Legendre domain");
        h->set_double("WAVEMAX", arm.psf_wavemax, "maximum wavelength (A) of the Legendre domain");
        h->set_int("FIBERMIN", 0, "first fiber (starting at 0)");
        h->set_int("FIBERMAX", kNumFibers - 1, "last fiber (included)");
        h->set_string("PSFTYPE", "GAUSS-HERMITE");
        h->set_int("PSFVER", 3);
        h->set_string("CAMERA", camera, "camera ID");
        h->set_int("NPIX_X", arm.npix_x, "number of columns in input CCD image");
        h->set_int("NPIX_Y", arm.npix_y, "number of rows in input CCD image");
    }
    FitsHeader& h = psf.psf_header;
    h.set_int("HSIZEX", psf.hsizex, "Half size of PSF in fit, NX=2*HSIZEX+1");
    h.set_int("HSIZEY", psf.hsizey, "Half size of PSF in fit, NY=2*HSIZEY+1");
    h.set_int("LEGDEG", kParamLegdeg, "degree of Legendre pol.(wave) for parameters");
    h.set_int("GHDEGX", psf.ghdegx, "degree of Hermite polynomial along CCD columns");
    h.set_int("GHDEGY", psf.ghdegy, "degree of Hermite polynomial along CCD rows");
    h.set_double("PSFERR", arm.psferr, "assumed PSF fractional error in chi2");
    h.set_string("ORIGIN", "ex2d make-psf", "synthetic PSF, not fitted to data");
}

}  // namespace

GaussHermitePsf make_synthetic_psf(Arm arm, int petal)
{
    const ArmDefaults d = arm_defaults(arm);
    const double wmin = d.psf_wavemin;
    const double wmax = d.psf_wavemax;

    GaussHermitePsf psf;
    psf.hsizex = 8;
    psf.hsizey = 5;
    psf.ghdegx = 6;
    psf.ghdegy = 6;
    psf.npix_x = d.npix_x;
    psf.npix_y = d.npix_y;
    psf.fibermin = 0;
    psf.psferr = d.psferr;
    psf.source = std::string("synthetic-") + arm_letter(arm);

    // X: the bundle layout, fanning out slightly towards the red end (a few px over the CCD,
    // larger for the outer fibres, as camera distortion does) plus a small common S-bend.
    psf.xtrace = make_table(wmin, wmax, kTraceNcoef, [](const FiberCoords& c, double t) {
        const double fan = 28.0 * (t - 0.3) * (t - 0.3);
        const double bend = 8.0 * (t - 0.5) * (t - 0.5) * (t - 0.5);
        return c.x0 + c.r * fan + bend;
    });
    // Y: about 1.4-1.5 px per 0.8 A bin with a mild quadratic term; fibres differ by < 2 px
    // (the slit is not exactly straight).
    const double y_span = d.npix_y + kYOvershoot - kYStart;
    psf.ytrace = make_table(wmin, wmax, kTraceNcoef, [y_span](const FiberCoords& c, double t) {
        const double along = t + kDispersionCurvature * t * (t - 1.0);
        const double fiber_offset = -1.2 * c.f + 0.5 * c.r * c.r + 0.1 * t * c.r;
        return kYStart + y_span * along + fiber_offset;
    });

    // PSF-table rows in file order (the order of a DESI PSF file's table). The b camera is slightly sharper in x.
    const double sigx_base = arm == Arm::b ? 1.00 : 1.02;
    psf.params["GHSIGX"] =
        make_table(wmin, wmax, kParamNcoef, [sigx_base](const FiberCoords& c, double t) {
            return sigx_base + 0.05 * c.r * c.r + 0.10 * (t - 0.35) * (t - 0.35);
        });
    psf.params["GHSIGY"] = make_table(wmin, wmax, kParamNcoef, [](const FiberCoords& c, double t) {
        return 1.05 + 0.04 * c.r * c.r + 0.14 * (t - 0.4) * (t - 0.4) - 0.02 * c.r * t;
    });
    for (int j = 0; j <= psf.ghdegy; ++j) {
        for (int i = 0; i <= psf.ghdegx; ++i) {
            psf.params[gh_name(i, j)] = make_table(
                wmin, wmax, kParamNcoef,
                [i, j](const FiberCoords& c, double t) { return gh_design(i, j, c, t); });
        }
    }
    // Tails are present for format compatibility but switched off (TAILAMP 0), as in the
    // real test PSFs; the other tail values are specex's defaults.
    psf.params["TAILAMP"] = make_constant_table(wmin, wmax, [](int) { return 0.0; });
    psf.params["TAILCORE"] = make_constant_table(wmin, wmax, [](int) { return 1.0; });
    psf.params["TAILXSCA"] = make_constant_table(wmin, wmax, [](int) { return 1.0; });
    psf.params["TAILYSCA"] = make_constant_table(wmin, wmax, [](int) { return 1.0; });
    psf.params["TAILINDE"] = make_constant_table(wmin, wmax, [](int) { return 2.0; });
    // The index of the fibre's bundle: an integer division.
    // NOLINTBEGIN(bugprone-integer-division)
    psf.params["BUNDLE"] =
        make_constant_table(wmin, wmax, [](int fiber) { return double(fiber / kBundleSize); });
    // NOLINTEND(bugprone-integer-division)
    psf.params["STATUS"] = make_constant_table(wmin, wmax, [](int) { return 0.0; });
    psf.params["CONT"] = make_constant_table(wmin, wmax, [](int) { return 0.0; });

    fill_headers(psf, std::string(1, arm_letter(arm)) + std::to_string(petal), d);
    return psf;
}

}  // namespace ex2d

namespace ex2d {

GaussHermitePsf crop_psf(const GaussHermitePsf& psf, int nfiber, double wmin, double wmax,
                         int margin)
{
    if (nfiber <= 0 || nfiber > psf.nspec() || !(wmax > wmin) || margin < 0) {
        throw Error("crop_psf: need 0 < nfiber <= " + std::to_string(psf.nspec()) +
                    ", wmax > wmin and margin >= 0");
    }
    GaussHermitePsf out = psf;
    auto keep_fibers = [nfiber](LegendreTable& t) {
        t.nfiber = nfiber;
        t.coef.resize(std::size_t(nfiber) * t.ncoef);
    };
    keep_fibers(out.xtrace);
    keep_fibers(out.ytrace);
    for (auto& [name, table] : out.params) keep_fibers(table);
    double xmin = 1e300, xmax = -1e300, ymin = 1e300, ymax = -1e300;
    constexpr int nsample = 256;
    for (int f = 0; f < nfiber; ++f) {
        for (int i = 0; i <= nsample; ++i) {
            const double w = wmin + (wmax - wmin) * i / nsample;
            xmin = std::min(xmin, out.xtrace.eval(f, w));
            xmax = std::max(xmax, out.xtrace.eval(f, w));
            ymin = std::min(ymin, out.ytrace.eval(f, w));
            ymax = std::max(ymax, out.ytrace.eval(f, w));
        }
    }
    const int x0 = std::max(0, int(std::floor(xmin)) - margin - out.hsizex);
    const int y0 = std::max(0, int(std::floor(ymin)) - margin - out.hsizey);
    // P0 = 1, so the first Legendre coefficient is a plain offset of the trace.
    for (int f = 0; f < nfiber; ++f) {
        out.xtrace.coef[std::size_t(f) * out.xtrace.ncoef] -= x0;
        out.ytrace.coef[std::size_t(f) * out.ytrace.ncoef] -= y0;
    }
    out.npix_x = std::min(psf.npix_x - x0, int(std::ceil(xmax)) - x0 + margin + out.hsizex + 1);
    out.npix_y = std::min(psf.npix_y - y0, int(std::ceil(ymax)) - y0 + margin + out.hsizey + 1);
    out.psf_header.set_int("NPIX_X", out.npix_x);
    out.psf_header.set_int("NPIX_Y", out.npix_y);
    out.source = psf.source + " (cropped)";
    return out;
}

}  // namespace ex2d
