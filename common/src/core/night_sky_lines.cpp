// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/night_sky_lines.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "ex2d/air_vacuum.hpp"

namespace ex2d {

namespace {

/// Air wavelengths (A) as published: [O I] 5577, 6300, 6364 and the OH lines from the
/// night-sky atlas of Osterbrock et al. (1996, PASP 108, 277); the Hg I street-lamp lines 4358
/// and 5461 (the blue arm's only strong lines) from the NIST Atomic Spectra Database.
/// Strengths are rounded relative intensities (the [O I] 5577 line = 100) for choosing and
/// blending lines, not a flux calibration. A line is left out when another night-sky line
/// lies 0.5-2 A from it in the NOAO night-sky line list (York 1991, its OH wavelengths from
/// Hubbard et al.; noao/lib/linelists/skylines.dat in IRAF): on a frame whose sky is a real
/// night-sky spectrum such a neighbour pulls the line's centroid by up to 0.2 px (the OH Q1
/// heads 6864, 7276, 7751, 7914, 8345, 8827 with their Q2 lines 1.2-1.8 A to the blue; 7965,
/// 8399 and 8886 likewise; Na D with OH 8-2 lines 1.5-1.8 A away). Lambda-doubling pairs,
/// under 0.5 A apart, are one line.
struct AirLine {
    double air_wave;
    double strength;
};
constexpr AirLine kNightSkyAir[] = {
    {4358.328, 10}, {5460.735, 12}, {5577.339, 100}, {6300.304, 80}, {6363.776, 27},
    {6923.220, 4},  {7316.282, 10}, {7340.885, 11},  {7794.112, 12}, {7821.503, 14},
    {7993.332, 13}, {8430.174, 25}, {8919.635, 36},  {8958.083, 19},
};

/// Continuum under a reference spectrum: the running minimum over +-`half_width` A.
std::vector<double> running_minimum(const std::vector<double>& wave,
                                    const std::vector<double>& flux, double half_width)
{
    std::vector<double> out(flux.size());
    size_t lo = 0, hi = 0;
    for (size_t i = 0; i < flux.size(); ++i) {
        while (wave[lo] < wave[i] - half_width) ++lo;
        while (hi + 1 < flux.size() && wave[hi + 1] <= wave[i] + half_width) ++hi;
        out[i] = *std::min_element(flux.begin() + long(lo), flux.begin() + long(hi) + 1);
    }
    return out;
}

/// Centroid and integral of `excess` in a window of +-`half_width` A that is moved onto its
/// own centroid until it stays (samples count by the fraction of their cell inside), starting
/// at sample `peak`: unbiased for a symmetric line whatever the sampling phase.
std::pair<double, double> windowed_centroid(const std::vector<double>& wave,
                                            const std::vector<double>& excess, size_t peak,
                                            double half_width)
{
    const size_t n = wave.size();
    double center = wave[peak], sum = 0;
    for (int pass = 0; pass < 20; ++pass) {
        const auto first = std::lower_bound(wave.begin(), wave.end(), center - 2 * half_width);
        const auto last = std::upper_bound(wave.begin(), wave.end(), center + 2 * half_width);
        double moment = 0;
        sum = 0;
        for (size_t k = size_t(first - wave.begin()); k < size_t(last - wave.begin()); ++k) {
            const double lo_edge = k > 0 ? 0.5 * (wave[k - 1] + wave[k]) : wave[k];
            const double hi_edge = k + 1 < n ? 0.5 * (wave[k] + wave[k + 1]) : wave[k];
            const double inside =
                std::min(hi_edge, center + half_width) - std::max(lo_edge, center - half_width);
            if (inside <= 0) continue;
            sum += excess[k] * inside;
            moment += excess[k] * inside * wave[k];
        }
        if (!(sum > 0)) break;
        const double next = moment / sum;
        const bool settled = std::fabs(next - center) < 1e-6;
        center = next;
        if (settled) break;
    }
    return {center, sum};
}

}  // namespace

const std::vector<ReferenceLine>& night_sky_lines()
{
    static const std::vector<ReferenceLine> lines = [] {
        std::vector<ReferenceLine> out;
        for (const AirLine& line : kNightSkyAir) {
            out.push_back({air_to_vacuum(line.air_wave), line.strength});
        }
        return out;
    }();
    return lines;
}

Result<std::vector<ReferenceLine>> lines_from_spectrum(const std::vector<double>& wave,
                                                       const std::vector<double>& flux,
                                                       const std::string& source,
                                                       double min_fraction)
{
    if (wave.size() != flux.size() || wave.size() < 5) {
        return Status::format(source + ": a reference spectrum needs at least 5 rows of " +
                              "'wavelength flux'");
    }
    for (size_t i = 1; i < wave.size(); ++i) {
        if (!(wave[i] > wave[i - 1])) {
            return Status::format(source + ": wavelengths do not increase at row " +
                                  std::to_string(i + 1));
        }
    }
    // Peaks are found on a scale of a DESI spot (about 1 A); the continuum is what stays
    // under them over +-10 A.
    constexpr double kPeakHalfWidth = 0.5;
    const std::vector<double> continuum = running_minimum(wave, flux, 10.0);
    std::vector<double> excess(flux.size());
    for (size_t i = 0; i < flux.size(); ++i) excess[i] = std::max(0.0, flux[i] - continuum[i]);
    const double highest = *std::max_element(excess.begin(), excess.end());
    if (!(highest > 0)) return Status::format(source + ": no emission line in the spectrum");

    std::vector<ReferenceLine> lines;
    size_t lo = 0, hi = 0;
    for (size_t i = 0; i < excess.size(); ++i) {
        while (wave[lo] < wave[i] - kPeakHalfWidth) ++lo;
        while (hi + 1 < excess.size() && wave[hi + 1] <= wave[i] + kPeakHalfWidth) ++hi;
        if (excess[i] < min_fraction * highest) continue;
        bool is_peak = true;
        for (size_t k = lo; k <= hi && is_peak; ++k) {
            // Ties go to the first sample, so a flat top gives one line.
            is_peak = k == i || excess[k] < excess[i] || (excess[k] == excess[i] && k > i);
        }
        if (!is_peak) continue;
        const auto [center, sum] = windowed_centroid(wave, excess, i, kPeakHalfWidth);
        if (sum > 0) lines.push_back({center, sum});
    }
    if (lines.empty()) return Status::format(source + ": no emission line in the spectrum");
    return lines;
}

}  // namespace ex2d
