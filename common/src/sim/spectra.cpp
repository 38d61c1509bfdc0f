// SPDX-License-Identifier: BSD-3-Clause
#include "spectra.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "ex2d/air_vacuum.hpp"

namespace ex2d::sim {

namespace {

constexpr double kSqrt2 = 1.41421356237309504880;
constexpr double kSpeedOfLightKms = 299792.458;

/// A spectral line: rest (or observed, for the sky) wavelength in A, in air as the atlases
/// publish it, and a strength. Every use converts the wavelength to vacuum (vacuum_wave), as
/// DESI's wavelength solutions are in vacuum.
struct Line {
    double wave;
    double strength;

    double vacuum_wave() const { return air_to_vacuum(wave); }
};

// Night-sky emission (observed air wavelengths, A) with their total electrons per exposure at
// sky_level 1: [OI] 5577, 6300, 6364, Na D, the OH Meinel bands that dominate the red and
// near-IR sky, and the Hg street-lamp lines 4358, 5461 in the blue arm. The lines that trace
// shifts use as their reference (night_sky_lines.cpp) have the same published wavelengths;
// the others (blends, street lamps) are there as a real sky has them.
constexpr Line kSkyLines[] = {
    {4358.328, 600},  {5460.735, 800},  {5577.339, 5000}, {5889.950, 800},  {5895.924, 600},
    {6300.304, 2500}, {6363.776, 800},  {6498.7, 400},    {6553.6, 500},    {6863.955, 1500},
    {6923.220, 1200}, {7276.405, 1500}, {7316.282, 2000}, {7340.885, 1800}, {7369.2, 1500},
    {7401.7, 1200},   {7571.8, 1000},   {7750.640, 2500}, {7794.112, 2500}, {7821.503, 2000},
    {7913.708, 2500}, {7964.650, 3000}, {7993.332, 3500}, {8344.602, 5000}, {8399.170, 4000},
    {8430.174, 4000}, {8465.4, 3500},   {8504.8, 3000},   {8791.2, 4000},   {8827.096, 5000},
    {8885.850, 6000}, {8919.635, 5000}, {8958.083, 5500}, {9375.9, 6000},   {9439.7, 7000},
};
constexpr double kSkyLineSigma = 0.7;  // A: instrumental width of unresolved sky lines
// A: width given to each sample of a tabulated sky, the narrowest that keeps a line's
// centroid where it is once integrated over 0.8 A bins (the bins' sawtooth error falls as
// exp(-2 pi^2 sigma^2 / dw^2): 1e-4 A here); a tabulated sky is resolved already, and the
// PSF adds the spectrograph's own width.
constexpr double kTabulatedSampleSigma = 0.5;

// Galaxy emission lines (rest frame, A) with flux relative to the brightest line: the [OII]
// doublet, Hbeta, the [OIII] pair (1:3 by atomic physics), Halpha with [NII] (1:3) and [SII].
constexpr Line kGalaxyLines[] = {
    {3726.03, 0.43}, {3728.82, 0.57}, {4861.33, 0.35}, {4958.91, 0.20}, {5006.84, 0.60},
    {6548.05, 0.10}, {6562.80, 1.00}, {6583.45, 0.30}, {6716.44, 0.15}, {6730.82, 0.15},
};

// Stellar absorption lines (rest frame, A): Ca II K and H, Balmer series, Mg b, Na D and the
// Ca II infrared triplet. strength = 1 for hydrogen, 0 for metals (depths depend on that).
constexpr Line kStellarLines[] = {
    {3933.66, 0}, {3968.47, 0}, {4101.74, 1}, {4340.47, 1}, {4861.33, 1},
    {5172.68, 0}, {5183.60, 0}, {5889.95, 0}, {5895.92, 0}, {6562.80, 1},
    {8498.02, 0}, {8542.09, 0}, {8662.14, 0},
};

// Arc-lamp lines (air wavelengths, A, of strong lines of the NIST Atomic Spectra Database)
// with electrons per fibre at arc_level 1, set for the simulation (bright, within a factor 4
// of each other), not the lamps' own ratios. Lines closer than about 5 A to a stronger one are
// left out, so that every line is a spot of its own.
constexpr Line kArcLines[] = {
    {3610.508, 20000}, {4046.563, 30000}, {4077.831, 15000}, {4273.969, 15000}, {4319.580, 15000},
    {4358.328, 40000}, {4500.977, 15000}, {4624.276, 15000}, {4671.226, 20000}, {4799.912, 20000},
    {4923.152, 15000}, {5085.822, 25000}, {5460.735, 50000}, {5570.289, 15000}, {5769.598, 25000},
    {5790.663, 25000}, {5852.488, 30000}, {5881.895, 15000}, {5944.834, 20000}, {5975.534, 15000},
    {6029.997, 15000}, {6074.338, 20000}, {6096.163, 20000}, {6143.063, 30000}, {6163.594, 20000},
    {6217.281, 15000}, {6266.495, 25000}, {6304.789, 15000}, {6334.428, 25000}, {6382.992, 30000},
    {6402.246, 50000}, {6438.470, 30000}, {6506.528, 40000}, {6532.882, 15000}, {6598.953, 30000},
    {6678.276, 25000}, {6717.043, 15000}, {6929.467, 30000}, {6965.431, 40000}, {7032.413, 30000},
    {7067.218, 40000}, {7147.042, 20000}, {7173.938, 15000}, {7245.167, 20000}, {7272.936, 15000},
    {7383.980, 30000}, {7438.898, 15000}, {7488.871, 15000}, {7503.869, 50000}, {7514.652, 30000},
    {7535.774, 15000}, {7587.413, 20000}, {7601.544, 25000}, {7635.106, 60000}, {7685.246, 15000},
    {7694.539, 15000}, {7723.761, 30000}, {7948.176, 40000}, {8006.157, 30000}, {8014.786, 40000},
    {8082.458, 15000}, {8115.311, 60000}, {8136.406, 15000}, {8190.054, 20000}, {8231.634, 20000},
    {8264.522, 40000}, {8300.326, 20000}, {8377.607, 30000}, {8408.210, 40000}, {8424.648, 50000},
    {8495.360, 20000}, {8521.442, 40000}, {8591.259, 15000}, {8634.647, 20000}, {8654.383, 30000},
    {8667.944, 20000}, {8780.622, 30000}, {8819.410, 30000}, {8853.867, 20000}, {8928.692, 20000},
    {8952.251, 15000}, {9045.446, 15000}, {9122.967, 50000}, {9148.672, 20000}, {9162.652, 20000},
    {9201.759, 20000}, {9224.499, 40000}, {9300.853, 20000}, {9326.507, 20000}, {9425.379, 20000},
    {9534.163, 20000}, {9657.786, 40000}, {9665.424, 20000}, {9799.697, 20000},
};
// A: the lines are unresolved (the PSF is the instrument's width); this width lets the photon
// grid's bins sample them without moving their centroid.
constexpr double kArcLineSigma = 0.7;

constexpr double kFaintContinuum = 20.0;  // e/bin scale of the bright-star multiplier

double uniform(std::mt19937_64& rng, double lo, double hi)
{
    return std::uniform_real_distribution<double>(lo, hi)(rng);
}

double log_uniform(std::mt19937_64& rng, double lo, double hi)
{
    return std::exp(uniform(rng, std::log(lo), std::log(hi)));
}

/// Adds a Gaussian line of `total` electrons integrated exactly over each bin [w-dw/2, w+dw/2].
void add_gaussian_line(const std::vector<double>& grid, double dw, double center, double sigma,
                       double total, double* out)
{
    if (grid.empty() || total == 0) return;
    const double step = grid.size() > 1 ? grid[1] - grid[0] : dw;
    const double reach = 8.0 * sigma + dw;
    const long first = std::max(0L, long(std::floor((center - reach - grid[0]) / step)));
    const long last =
        std::min(long(grid.size()) - 1, long(std::ceil((center + reach - grid[0]) / step)));
    const double scale = 1.0 / (kSqrt2 * sigma);
    for (long i = first; i <= last; ++i) {
        const double lo = (grid[i] - 0.5 * dw - center) * scale;
        const double hi = (grid[i] + 0.5 * dw - center) * scale;
        out[i] += total * 0.5 * (std::erf(hi) - std::erf(lo));
    }
}

/// Planck's law B_lambda(T) up to a constant, for stellar continua.
double planck(double wave_angstrom, double temperature)
{
    constexpr double hc_over_k = 1.438776877e8;  // h c / k_B in A K
    const double x = hc_over_k / (wave_angstrom * temperature);
    return 1.0 / (std::pow(wave_angstrom, 5) * std::expm1(x));
}

void add_listed_sky_lines(const std::vector<double>& grid, double dw, double sky_level, double* out)
{
    for (const Line& line : kSkyLines) {
        add_gaussian_line(grid, dw, line.vacuum_wave(), kSkyLineSigma, sky_level * line.strength,
                          out);
    }
}

/// The lines of opt's tabulated sky spectrum on the grid, scaled to carry as many electrons
/// over the grid as ex2d's list; empty without a tabulated spectrum.
std::vector<double> tabulated_sky_lines(const std::vector<double>& grid, double dw,
                                        const SimulationOptions& opt)
{
    const auto& wave = opt.sky_spectrum_wave;
    const auto& flux = opt.sky_spectrum_flux;
    if (wave.empty() || grid.empty()) return {};
    std::vector<double> listed(grid.size(), 0.0), tabulated(grid.size(), 0.0);
    add_listed_sky_lines(grid, dw, opt.sky_level, listed.data());
    const double lo = grid.front() - 0.5 * dw, hi = grid.back() + 0.5 * dw;
    for (size_t i = 0; i < wave.size(); ++i) {
        if (flux[i] <= 0 || wave[i] < lo || wave[i] > hi) continue;
        add_gaussian_line(grid, dw, wave[i], kTabulatedSampleSigma, flux[i], tabulated.data());
    }
    double listed_total = 0, tabulated_total = 0;
    for (size_t i = 0; i < grid.size(); ++i) {
        listed_total += listed[i];
        tabulated_total += tabulated[i];
    }
    const double scale = tabulated_total > 0 ? listed_total / tabulated_total : 0.0;
    for (double& v : tabulated) v *= scale;
    return tabulated;
}

/// The sky: a continuum, and ex2d's lines or `tabulated_lines` when there are any.
void add_sky(const std::vector<double>& grid, double dw, double sky_level,
             const std::vector<double>& tabulated_lines, double* out)
{
    if (sky_level == 0) return;
    // Continuum rising to the red (zodiacal light and the airglow pseudo-continuum).
    for (size_t i = 0; i < grid.size(); ++i) {
        const double red_fraction = std::clamp((grid[i] - 3500.0) / 6500.0, 0.0, 1.0);
        out[i] += sky_level * (20.0 + 40.0 * red_fraction);
    }
    if (tabulated_lines.empty()) {
        add_listed_sky_lines(grid, dw, sky_level, out);
        return;
    }
    for (size_t i = 0; i < grid.size(); ++i) out[i] += tabulated_lines[i];
}

void add_galaxy(const std::vector<double>& grid, double dw, std::mt19937_64& rng, double* out)
{
    const double redshift = uniform(rng, 0.05, 1.6);
    const double amplitude = log_uniform(rng, 2.0, 40.0);
    const int shape = std::uniform_int_distribution<int>(0, 4)(rng);
    const double slope = uniform(rng, -2.5, 2.5);
    const double break_wave = 4000.0 * (1.0 + redshift);
    for (size_t i = 0; i < grid.size(); ++i) {
        const double w = grid[i];
        double c = amplitude;
        switch (shape) {
            case 0:  // flat in electrons per bin
                break;
            case 1:  // power law
                c *= std::pow(w / 6500.0, slope);
                break;
            case 2:  // red galaxy: faint in the blue
                c *= 0.2 + 0.8 * std::clamp((w - 3500.0) / 6500.0, 0.0, 1.0);
                break;
            case 3:  // blue galaxy: declining to the red
                c *= std::exp(-(w - 3500.0) / 4000.0);
                break;
            default:  // 4000 A break of an old stellar population, redshifted
                c *= 0.4 + 0.3 * (1.0 + std::tanh((w - break_wave) / 40.0));
                break;
        }
        out[i] += c;
    }
    const double line_flux = log_uniform(rng, 50.0, 3000.0);
    const double velocity_dispersion = uniform(rng, 40.0, 150.0);  // km/s
    for (const Line& line : kGalaxyLines) {
        const double observed = line.vacuum_wave() * (1.0 + redshift);
        const double sigma = std::hypot(observed * velocity_dispersion / kSpeedOfLightKms, 0.3);
        add_gaussian_line(grid, dw, observed, sigma, line_flux * line.strength, out);
    }
}

void add_star(const std::vector<double>& grid, double amplitude, std::mt19937_64& rng, double* out)
{
    const double temperature = uniform(rng, 4000.0, 10000.0);
    const double velocity = uniform(rng, -300.0, 300.0);  // km/s
    const double line_sigma = uniform(rng, 2.0, 6.0);     // A
    // Balmer lines peak in A stars; metal lines deepen in cool stars.
    const double hot = (temperature - 4000.0) / 6000.0;
    const double norm = 1.0 / planck(6000.0, temperature);
    const double doppler = 1.0 + velocity / kSpeedOfLightKms;
    double centers[std::size(kStellarLines)];
    for (size_t k = 0; k < std::size(kStellarLines); ++k) {
        centers[k] = kStellarLines[k].vacuum_wave() * doppler;
    }
    for (size_t i = 0; i < grid.size(); ++i) {
        const double w = grid[i];
        double transmission = 1.0;
        for (size_t k = 0; k < std::size(kStellarLines); ++k) {
            const Line& line = kStellarLines[k];
            const double depth = line.strength > 0 ? 0.25 + 0.35 * hot : 0.55 - 0.35 * hot;
            const double d = (w - centers[k]) / line_sigma;
            if (std::fabs(d) < 8.0) transmission *= 1.0 - depth * std::exp(-0.5 * d * d);
        }
        out[i] += amplitude * planck(w, temperature) * norm * transmission;
    }
}

/// A continuum lamp seen through every fibre: a broad hump across the spectrograph's range,
/// with a fibre-to-fibre throughput within +-5% as a real flat has.
void add_lamp(const std::vector<double>& grid, double level, int nspec, FrameSpectra& spectra)
{
    const size_t ngrid = grid.size();
    for (int s = 0; s < nspec; ++s) {
        spectra.kinds[s] = TargetKind::lamp;
        const double throughput = 1.0 + 0.05 * std::sin(0.7 * s);
        double* out = spectra.photons.data() + size_t(s) * ngrid;
        for (size_t i = 0; i < ngrid; ++i) {
            const double d = (grid[i] - 6500.0) / 4000.0;
            out[i] = level * throughput * (1.0 - 0.5 * d * d);
        }
    }
}

/// An arc lamp seen through every fibre: its lines, with the flat's fibre-to-fibre throughput.
void add_arc(const std::vector<double>& grid, double dw, double level, int nspec,
             FrameSpectra& spectra)
{
    const size_t ngrid = grid.size();
    for (int s = 0; s < nspec; ++s) {
        spectra.kinds[s] = TargetKind::lamp;
        const double throughput = 1.0 + 0.05 * std::sin(0.7 * s);
        double* out = spectra.photons.data() + size_t(s) * ngrid;
        for (const ReferenceLine& line : simulated_arc_lines()) {
            add_gaussian_line(grid, dw, line.wave, kArcLineSigma,
                              level * throughput * line.strength, out);
        }
    }
}

}  // namespace

FrameSpectra make_spectra(const std::vector<double>& grid, double dw, const SimulationOptions& opt,
                          std::mt19937_64& rng)
{
    const int nspec = std::max(0, opt.nspec);
    const size_t ngrid = grid.size();
    FrameSpectra spectra;
    spectra.kinds.assign(nspec, TargetKind::galaxy);
    spectra.photons.assign(size_t(nspec) * ngrid, 0.0);
    if (opt.flat) {
        add_lamp(grid, opt.flat_level, nspec, spectra);
        return spectra;
    }
    if (opt.arc) {
        add_arc(grid, dw, opt.arc_level, nspec, spectra);
        return spectra;
    }

    // About one fibre in ten is a sky fibre, as on a DESI petal; the bright stars are drawn
    // among the others, then the remaining targets are galaxies (3 in 4) or faint stars.
    std::vector<int> targets;
    for (int s = 0; s < nspec; ++s) {
        if (uniform(rng, 0.0, 1.0) < 0.1) {
            spectra.kinds[s] = TargetKind::sky;
        } else {
            targets.push_back(s);
        }
    }
    std::shuffle(targets.begin(), targets.end(), rng);
    const size_t nbright = std::min(targets.size(), size_t(std::max(0, opt.n_bright_stars)));
    for (size_t k = 0; k < nbright; ++k) spectra.kinds[targets[k]] = TargetKind::bright_star;
    for (size_t k = nbright; k < targets.size(); ++k) {
        const bool galaxy = uniform(rng, 0.0, 1.0) < 0.75;
        spectra.kinds[targets[k]] = galaxy ? TargetKind::galaxy : TargetKind::star;
    }

    const std::vector<double> tabulated_lines = tabulated_sky_lines(grid, dw, opt);
    for (int s = 0; s < nspec; ++s) {
        double* out = spectra.photons.data() + size_t(s) * ngrid;
        add_sky(grid, dw, opt.sky_level, tabulated_lines, out);
        switch (spectra.kinds[s]) {
            case TargetKind::galaxy:
                add_galaxy(grid, dw, rng, out);
                break;
            case TargetKind::star:
                add_star(grid, log_uniform(rng, 3.0, 60.0), rng, out);
                break;
            case TargetKind::bright_star:
                add_star(grid, kFaintContinuum * uniform(rng, 50.0, 200.0), rng, out);
                break;
            case TargetKind::sky:
            case TargetKind::dark:
            case TargetKind::lamp:
                break;
        }
    }
    return spectra;
}

}  // namespace ex2d::sim

namespace ex2d {

const std::vector<ReferenceLine>& simulated_arc_lines()
{
    static const std::vector<ReferenceLine> lines = [] {
        std::vector<ReferenceLine> out;
        for (const sim::Line& line : sim::kArcLines) {
            out.push_back({line.vacuum_wave(), line.strength});
        }
        return out;
    }();
    return lines;
}

}  // namespace ex2d
