// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/simulate.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <random>

#include "ex2d/cpu_count.hpp"
#include "ex2d/logging.hpp"
#include "frame_meta.hpp"
#include "spectra.hpp"

namespace ex2d {

namespace {

constexpr int kFibersPerChunk = 25;    // one bundle of spots in memory at a time
constexpr int kWavesPerChunk = 512;    // bounds a chunk to ~20 MB of stamps
constexpr long kMaxExtension = 20000;  // photon-grid points added beyond each end, at most

constexpr std::uint32_t kMaskBad = 1;
constexpr std::uint32_t kMaskCosmic = 16;

/// The photon grid: the extraction grid's step and phase, extended to cover the CCD.
struct PhotonGrid {
    std::vector<double> wave;
    long first_extraction_index = 0;  ///< index of the extraction grid's first point
    long n_extraction = 0;
};

/// numpy.arange(wmin, wmax + dw/2, dw): x[i] = wmin + i * ((wmin + dw) - wmin).
double arange_step(double wmin, double dw)
{
    return (wmin + dw) - wmin;
}

long arange_count(double wmin, double wmax, double dw)
{
    return long(std::ceil((wmax + 0.5 * dw - wmin) / dw));
}

/// Whether the spot of any lit fibre at `wave` overlaps the CCD rows.
bool spots_reach_ccd(const GaussHermitePsf& psf, int fiber_begin, int fiber_end, double wave)
{
    for (int fiber = fiber_begin; fiber < fiber_end; ++fiber) {
        const int yc = stamp_corner(psf.ytrace.eval(fiber, wave), psf.hsizey);
        if (yc + psf.stamp_ny() > 0 && yc < psf.npix_y) return true;
    }
    return false;
}

PhotonGrid make_photon_grid(const GaussHermitePsf& psf, const SimulationOptions& opt, double wmin,
                            double wmax)
{
    const double delta = arange_step(wmin, opt.dw);
    const long n = std::max(0L, arange_count(wmin, wmax, opt.dw));
    const LegendreTable& sig = psf.param("GHSIGX");
    const double domain_min = std::max({psf.xtrace.wavemin, psf.ytrace.wavemin, sig.wavemin});
    const double domain_max = std::min({psf.xtrace.wavemax, psf.ytrace.wavemax, sig.wavemax});
    const int fiber_end = opt.specmin + opt.nspec;
    // Points k * delta from wmin for negative k and k >= n, while inside the PSF domain and
    // some spot still lands on the CCD (Y grows with wavelength, so one miss ends the walk).
    long k_low = 0;
    while (k_low > -kMaxExtension) {
        const double w = wmin + (k_low - 1) * delta;
        if (w < domain_min || !spots_reach_ccd(psf, opt.specmin, fiber_end, w)) break;
        --k_low;
    }
    long k_high = n;
    while (k_high < n + kMaxExtension) {
        const double w = wmin + k_high * delta;
        if (w > domain_max || !spots_reach_ccd(psf, opt.specmin, fiber_end, w)) break;
        ++k_high;
    }
    PhotonGrid grid;
    grid.first_extraction_index = -k_low;
    grid.n_extraction = n;
    grid.wave.reserve(size_t(k_high - k_low));
    for (long k = k_low; k < k_high; ++k) grid.wave.push_back(wmin + k * delta);
    return grid;
}

/// A tabulated sky must have lines where the CCD sees light, or the frame would have no sky
/// lines at all without saying so.
Status check_sky_spectrum(const GaussHermitePsf& psf, const SimulationOptions& opt)
{
    const auto& wave = opt.sky_spectrum_wave;
    const auto& flux = opt.sky_spectrum_flux;
    if (wave.size() != flux.size()) {
        return Status::invalid("simulate: the sky spectrum has " + std::to_string(wave.size()) +
                               " wavelengths and " + std::to_string(flux.size()) + " fluxes");
    }
    if (wave.empty()) return Status::ok();
    const LegendreTable& sig = psf.param("GHSIGX");
    for (size_t i = 0; i < wave.size(); ++i) {
        if (!std::isfinite(wave[i]) || !std::isfinite(flux[i])) {
            return Status::invalid("simulate: the sky spectrum's row " + std::to_string(i + 1) +
                                   " is not finite");
        }
    }
    for (size_t i = 0; i < wave.size(); ++i) {
        if (flux[i] > 0 && wave[i] >= sig.wavemin && wave[i] <= sig.wavemax) return Status::ok();
    }
    return Status::invalid("simulate: the sky spectrum has no positive flux within " + psf.source +
                           "'s wavelengths " + std::to_string(int(sig.wavemin)) + "-" +
                           std::to_string(int(sig.wavemax)) + " A");
}

/// The options checked against the PSF; the camera's petal.
Result<int> check_options(const GaussHermitePsf& psf, const SimulationOptions& opt)
{
    const std::string& cam = opt.camera;
    if (cam.size() != 2 || std::string("brz").find(cam[0]) == std::string::npos ||
        !std::isdigit(static_cast<unsigned char>(cam[1]))) {
        return Status::invalid("simulate: camera '" + cam + "' is not b0..z9");
    }
    const int petal = cam[1] - '0';
    if (opt.nspec < 0 || opt.specmin < 0 || opt.specmin + opt.nspec > psf.nspec()) {
        return Status::invalid("simulate: fibres [" + std::to_string(opt.specmin) + ", " +
                               std::to_string(opt.specmin + opt.nspec) + ") outside the " +
                               std::to_string(psf.nspec()) + " fibres of " + psf.source);
    }
    if (!(opt.dw > 0)) return Status::invalid("simulate: wavelength step must be > 0");
    if ((opt.wmin != 0 || opt.wmax != 0) && !(opt.wmax > opt.wmin)) {
        return Status::invalid("simulate: wavelength range needs wmin < wmax");
    }
    if (opt.flat && opt.arc) {
        return Status::invalid("simulate: a frame is a flat or an arc, not both");
    }
    if (!(opt.arc_level >= 0)) return Status::invalid("simulate: arc level must be >= 0");
    if (!(opt.read_noise >= 0) || !(opt.sky_level >= 0)) {
        return Status::invalid("simulate: read noise and sky level must be >= 0");
    }
    if (opt.n_bright_stars < 0 || opt.n_bad_columns < 0 || opt.n_cosmics < 0) {
        return Status::invalid("simulate: counts of stars, bad columns and cosmics must be >= 0");
    }
    EX2D_RETURN_NOT_OK(check_sky_spectrum(psf, opt));
    const int month = (opt.night / 100) % 100;
    const int day = opt.night % 100;
    if (opt.night < 19000101 || month < 1 || month > 12 || day < 1 || day > 31) {
        return Status::invalid("simulate: night " + std::to_string(opt.night) + " is not YYYYMMDD");
    }
    if (psf.npix_x <= 0 || psf.npix_y <= 0) {
        return Status::invalid(psf.source + ": PSF has no CCD size (NPIX_X, NPIX_Y)");
    }
    return petal;
}

/// expected[row * nx + col] += photons x spot over all lit fibres and photon-grid points.
void render_expected(const GaussHermitePsf& psf, const SimulationOptions& opt,
                     const PhotonGrid& grid, const std::vector<double>& photons,
                     std::vector<double>& expected)
{
    const int nx = psf.npix_x;
    const int ny = psf.npix_y;
    const int ngrid = int(grid.wave.size());
    const int nthreads = default_thread_count();
    ProgressBar progress("simulate", opt.nspec);
    for (int f0 = 0; f0 < opt.nspec; f0 += kFibersPerChunk) {
        const int nfiber = std::min(kFibersPerChunk, opt.nspec - f0);
        for (int w0 = 0; w0 < ngrid; w0 += kWavesPerChunk) {
            const int nwave = std::min(kWavesPerChunk, ngrid - w0);
            const std::vector<double> waves(grid.wave.begin() + w0, grid.wave.begin() + w0 + nwave);
            const SpotGrid spots = evaluate_spots(psf, opt.specmin + f0, nfiber, waves, nthreads);
            for (int f = 0; f < nfiber; ++f) {
                const double* fiber_photons = photons.data() + size_t(f0 + f) * ngrid + w0;
                for (int w = 0; w < nwave; ++w) {
                    const double amount = fiber_photons[w];
                    if (amount == 0) continue;
                    const double* stamp = spots.stamp(f, w);
                    const int xc = spots.corner_x(f, w);
                    const int yc = spots.corner_y(f, w);
                    const int ix_begin = std::max(0, -xc);
                    const int ix_end = std::min(spots.nx, nx - xc);
                    for (int iy = std::max(0, -yc); iy < std::min(spots.ny, ny - yc); ++iy) {
                        double* row = expected.data() + size_t(yc + iy) * nx + xc;
                        const double* stamp_row = stamp + size_t(iy) * spots.nx;
                        for (int ix = ix_begin; ix < ix_end; ++ix) {
                            row[ix] += amount * stamp_row[ix];
                        }
                    }
                }
            }
        }
        progress.update(f0 + nfiber);
    }
    progress.finish();
}

/// Bad columns (mask BAD) over long row ranges, inside the lit fibres' columns.
void add_bad_columns(const GaussHermitePsf& psf, const SimulationOptions& opt, double mid_wave,
                     std::mt19937_64& rng, PreprocImage& img)
{
    if (opt.n_bad_columns == 0) return;
    double x_lo = 0;
    double x_hi = img.nx - 1;
    if (opt.nspec > 0) {
        x_lo = psf.xtrace.eval(opt.specmin, mid_wave);
        x_hi = psf.xtrace.eval(opt.specmin + opt.nspec - 1, mid_wave);
    }
    const int col_lo = std::clamp(int(std::floor(x_lo)), 0, img.nx - 1);
    const int col_hi = std::clamp(int(std::ceil(x_hi)), col_lo, img.nx - 1);
    std::uniform_int_distribution<int> column(col_lo, col_hi);
    std::uniform_int_distribution<int> first_row(0, img.ny / 2);
    std::uniform_int_distribution<int> length(img.ny / 4, img.ny / 2);
    for (int k = 0; k < opt.n_bad_columns; ++k) {
        const int col = column(rng);
        const int row0 = first_row(rng);
        const int row1 = std::min(img.ny, row0 + length(rng));
        for (int row = row0; row < row1; ++row) img.mask[size_t(row) * img.nx + col] |= kMaskBad;
    }
}

/// Cosmic-ray tracks: straight segments of 2-10 pixels, each pixel hit by 500-5000 e.
void add_cosmics(const SimulationOptions& opt, std::mt19937_64& rng, PreprocImage& img)
{
    constexpr double kPi = 3.14159265358979323846;
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    std::uniform_real_distribution<double> deposit(500.0, 5000.0);
    std::uniform_int_distribution<int> track_length(2, 10);
    for (int k = 0; k < opt.n_cosmics; ++k) {
        const double x0 = unit(rng) * img.nx;
        const double y0 = unit(rng) * img.ny;
        const double angle = unit(rng) * kPi;
        const int npix = track_length(rng);
        int last_col = -1;
        int last_row = -1;
        for (int step = 0; step < npix; ++step) {
            const int col = int(std::floor(x0 + step * std::cos(angle)));
            const int row = int(std::floor(y0 + step * std::sin(angle)));
            const double energy = deposit(rng);
            if (col < 0 || col >= img.nx || row < 0 || row >= img.ny) continue;
            if (col == last_col && row == last_row) continue;
            last_col = col;
            last_row = row;
            const size_t i = size_t(row) * img.nx + col;
            img.image[i] += energy;
            img.mask[i] |= kMaskCosmic;
        }
    }
}

}  // namespace

Result<SimulatedFrame> simulate_frame(const GaussHermitePsf& psf, const SimulationOptions& opt)
{
    EX2D_RETURN_NOT_OK(psf.validate());
    EX2D_ASSIGN_OR_RETURN(const int petal, check_options(psf, opt));
    const LegendreTable& sig = psf.param("GHSIGX");
    const bool default_range = opt.wmin == 0 && opt.wmax == 0;
    const double wmin = default_range ? sig.wavemin : opt.wmin;
    const double wmax = default_range ? sig.wavemax : opt.wmax;

    const PhotonGrid grid = make_photon_grid(psf, opt, wmin, wmax);
    const size_t ngrid = grid.wave.size();
    logger()->info(
        "simulate camera={} fibers={}-{} extraction_grid={}..{} step={} nwave={} "
        "photon_grid={}..{} nphoton={} seed={}",
        opt.camera, opt.specmin, opt.specmin + opt.nspec - 1, wmin, wmax, opt.dw, grid.n_extraction,
        ngrid ? grid.wave.front() : 0.0, ngrid ? grid.wave.back() : 0.0, ngrid, opt.seed);

    // One generator for everything, used in a fixed order: spectra, bad columns, noise in
    // row-major pixel order, cosmics. The same seed thus gives the same frame.
    std::mt19937_64 rng(opt.seed);
    sim::FrameSpectra spectra = sim::make_spectra(grid.wave, opt.dw, opt, rng);

    SimulatedFrame frame;
    PreprocImage& img = frame.preproc;
    img.nx = psf.npix_x;
    img.ny = psf.npix_y;
    const size_t npix = size_t(img.nx) * img.ny;
    std::vector<double> expected(npix, 0.0);
    render_expected(psf, opt, grid, spectra.photons, expected);

    img.mask.assign(npix, 0);
    add_bad_columns(psf, opt, 0.5 * (wmin + wmax), rng, img);

    // Pixel variance of the model: read noise plus Poisson variance of the expected signal.
    // ivar comes from the model, not the noisy pixel, which would bias the extraction low.
    const double read_var = opt.read_noise * opt.read_noise;
    img.image.resize(npix);
    img.ivar.resize(npix);
    std::normal_distribution<double> read_noise(0.0, opt.read_noise > 0 ? opt.read_noise : 1.0);
    for (size_t i = 0; i < npix; ++i) {
        const double signal = std::max(expected[i], 0.0);
        const double variance = read_var + signal;
        img.ivar[i] = variance > 0 ? 1.0 / variance : 0.0;
        if (!opt.noise) {
            img.image[i] = expected[i];
            continue;
        }
        double value = 0;
        if (signal > 0) value = double(std::poisson_distribution<long long>(signal)(rng));
        if (opt.read_noise > 0) value += read_noise(rng);
        img.image[i] = value;
    }
    add_cosmics(opt, rng, img);
    img.readnoise.assign(npix, opt.read_noise);
    img.header = sim::make_image_header(opt, petal, img.nx, img.ny);
    EX2D_ASSIGN_OR_RETURN(img.fibermap, sim::make_fibermap(opt, petal, spectra.kinds));
    img.source = "simulated-" + opt.camera;

    SimulationTruth& truth = frame.truth;
    truth.specmin = opt.specmin;
    truth.nspec = opt.nspec;
    const auto first = grid.wave.begin() + grid.first_extraction_index;
    truth.wave.assign(first, first + grid.n_extraction);
    truth.photons.resize(size_t(opt.nspec) * grid.n_extraction);
    for (int s = 0; s < opt.nspec; ++s) {
        const double* src =
            spectra.photons.data() + size_t(s) * ngrid + grid.first_extraction_index;
        std::copy(src, src + grid.n_extraction,
                  truth.photons.begin() + size_t(s) * grid.n_extraction);
    }

    long n_masked = 0;
    for (std::uint32_t m : img.mask) n_masked += m != 0;
    double total = 0;
    for (double v : expected) total += v;
    logger()->info(
        "simulated camera={} pixels={}x{} expected_electrons={:.6g} masked_pixels={} "
        "noise={}",
        opt.camera, img.nx, img.ny, total, n_masked, opt.noise ? "poisson+read" : "none");
    return frame;
}

}  // namespace ex2d
