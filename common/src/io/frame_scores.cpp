// SPDX-License-Identifier: BSD-3-Clause
#include <algorithm>
#include <cctype>
#include <cmath>
#include <numeric>

#include "frame_internal.hpp"

namespace ex2d::frame_detail {

std::vector<double> numpy_gradient(const std::vector<double>& x, double fallback)
{
    const size_t n = x.size();
    std::vector<double> g(n, fallback);
    if (n < 2) return g;
    g[0] = x[1] - x[0];
    g[n - 1] = x[n - 1] - x[n - 2];
    for (size_t i = 1; i + 1 < n; ++i) g[i] = (x[i + 1] - x[i - 1]) / 2.0;
    return g;
}

double numpy_median(std::vector<double> values)
{
    const size_t n = values.size();
    if (n == 0) return std::nan("");
    const size_t mid = n / 2;
    std::nth_element(values.begin(), values.begin() + long(mid), values.end());
    double upper = values[mid];
    if (n % 2 == 1) return upper;
    double lower = *std::max_element(values.begin(), values.begin() + long(mid));
    return (lower + upper) / 2.0;
}

FrameScores compute_scores(const ExtractedFrame& frame, double dw)
{
    FrameScores s;
    const std::vector<double>& wave = frame.wave;
    double mean =
        wave.empty() ? 0.0 : std::accumulate(wave.begin(), wave.end(), 0.0) / double(wave.size());
    // desispec's fixed top hats, each inside the sensitive range of its arm.
    if (mean <= 5800) {
        s.band = 'b';
        s.lo = 4000;
        s.hi = 5800;
    } else if (mean >= 7600) {
        s.band = 'z';
        s.lo = 7600;
        s.hi = 9800;
    } else {
        s.band = 'r';
        s.lo = 5800;
        s.hi = 7600;
    }
    std::vector<int> bins;
    for (int j = 0; j < frame.nwave; ++j) {
        if (wave[size_t(j)] >= s.lo && wave[size_t(j)] < s.hi) bins.push_back(j);
    }
    s.nbins = int(bins.size());

    const std::string band(1, char(std::toupper(s.band)));
    const std::string range = std::to_string(int(s.lo)) + "," + std::to_string(int(s.hi)) + "A";
    s.names = {"SUM_RAW_COUNT_" + band, "MEDIAN_RAW_COUNT_" + band, "MEDIAN_RAW_SNR_" + band};
    s.comments = {"sum counts in wave. range " + range, "median counts/A in wave. range " + range,
                  "median SNR/sqrt(A) in wave. range " + range};
    s.columns.assign(3, std::vector<double>(size_t(frame.nspec), 0.0));
    if (bins.empty()) return s;

    const std::vector<double> dwave = numpy_gradient(wave, dw);
    std::vector<double> counts(bins.size());
    std::vector<double> snr(bins.size());
    for (int i = 0; i < frame.nspec; ++i) {
        const size_t row = size_t(i) * size_t(frame.nwave);
        double sum = 0;
        for (size_t k = 0; k < bins.size(); ++k) {
            const size_t j = size_t(bins[k]);
            const double flux = frame.flux[row + j];
            const double ivar = std::max(frame.ivar[row + j], 0.0);
            sum += flux;
            counts[k] = flux / dwave[j];
            snr[k] = std::sqrt(ivar) * flux / std::sqrt(dwave[j]);
        }
        s.columns[0][size_t(i)] = sum;
        s.columns[1][size_t(i)] = numpy_median(counts);
        s.columns[2][size_t(i)] = numpy_median(snr);
    }
    return s;
}

}  // namespace ex2d::frame_detail
