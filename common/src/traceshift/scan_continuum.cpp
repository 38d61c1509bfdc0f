// SPDX-License-Identifier: BSD-3-Clause
// The large-shift scan of continuum frames (the method of desispec's
// compute_x_offset_from_central_band_cross_dispersion_profile): one x offset of all traces
// from the cross-correlation of wide cross-dispersion profiles with a model of the traces.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "ex2d/logging.hpp"
#include "large_shift_scan.hpp"
#include "measure.hpp"

namespace ex2d::traceshift {

namespace {

constexpr int kBands = 7;
constexpr int kBandRows = 100;
constexpr double kModelSigma = 1.5;  // px, about the PSF's
constexpr int kOversample = 4;       // model and offsets in steps of 0.25 px
constexpr int kHalfRange = 50;       // px
constexpr int kOffsets = 2 * kHalfRange * kOversample + 1;
constexpr double kMinPeakSnr = 10.0;
constexpr int kMinBands = 4;  // a majority of the bands must show light

/// Per column of rows [begin, end): the ivar-weighted mean and its variance (0 where every
/// pixel is masked). desispec sums pix * ivar over the whole band instead of per column
/// (np.sum without axis), which leaves a profile shaped by the ivar alone; this is the mean
/// it means to take.
template <typename View>
void band_profile(const View& image, int begin, int end, std::vector<double>& mean,
                  std::vector<double>& var)
{
    const int ncol = image.stride();
    std::vector<double> sw(size_t(ncol), 0.0), swf(size_t(ncol), 0.0);
    for (int r = begin; r < end; ++r) {
        const size_t base = image.index(r, image.col_begin);
        for (int c = 0; c < ncol; ++c) {
            const double w = image.weights[base + size_t(c)];
            if (!(w > 0)) continue;
            sw[size_t(c)] += w;
            swf[size_t(c)] += w * image.pixels[base + size_t(c)];
        }
    }
    mean.assign(size_t(ncol), 0.0);
    var.assign(size_t(ncol), 0.0);
    for (int c = 0; c < ncol; ++c) {
        if (!(sw[size_t(c)] > 0)) continue;
        mean[size_t(c)] = swf[size_t(c)] / sw[size_t(c)];
        var[size_t(c)] = 1.0 / sw[size_t(c)];
    }
}

/// The model profile: Gaussians at the traces `centers` (CCD columns), sampled every
/// 1 / kOversample px from col_begin - kHalfRange to the last column + kHalfRange.
std::vector<double> model_profile(const std::vector<double>& centers, int col_begin, int ncol)
{
    const int nsample = kOversample * (ncol - 1 + 2 * kHalfRange) + 1;
    std::vector<double> model(size_t(nsample), 0.0);
    const double u0 = col_begin - kHalfRange;
    const int reach = int(std::ceil(5 * kModelSigma * kOversample));
    for (double xc : centers) {
        const long k0 = std::lround((xc - u0) * kOversample);
        for (long k = std::max(0L, k0 - reach); k <= std::min(long(nsample) - 1, k0 + reach); ++k) {
            const double d = (u0 + double(k) / kOversample - xc) / kModelSigma;
            model[size_t(k)] += std::exp(-0.5 * d * d);
        }
    }
    return model;
}

struct BandPeak {
    int offset_index = 0;  ///< offset = offset_index / kOversample - kHalfRange
    double snr = 0;        ///< of the peak over the median of the cross-correlation
};

/// Cross-correlation of `mean` with the model moved by each offset; its peak.
BandPeak correlate(const std::vector<double>& mean, const std::vector<double>& var,
                   const std::vector<double>& model)
{
    const int ncol = int(mean.size());
    std::vector<double> xcorr(size_t(kOffsets), 0.0);
    // The model moved by dx = j / kOversample - kHalfRange, at column c: sample
    // kOversample * (c + 2 kHalfRange) - j.
    for (int j = 0; j < kOffsets; ++j) {
        const double* m = model.data() + (2 * kHalfRange * kOversample - j);
        double sum = 0;
        for (int c = 0; c < ncol; ++c) sum += mean[size_t(c)] * m[size_t(c) * kOversample];
        xcorr[size_t(j)] = sum;
    }
    BandPeak peak;
    peak.offset_index = int(std::max_element(xcorr.begin(), xcorr.end()) - xcorr.begin());
    const double* m = model.data() + (2 * kHalfRange * kOversample - peak.offset_index);
    double noise = 0;
    for (int c = 0; c < ncol; ++c) {
        const double v = m[size_t(c) * kOversample];
        noise += var[size_t(c)] * v * v;
    }
    const double top = xcorr[size_t(peak.offset_index)];
    std::nth_element(xcorr.begin(), xcorr.begin() + kOffsets / 2, xcorr.end());
    const double median = xcorr[size_t(kOffsets / 2)];
    peak.snr = noise > 0 ? (top - median) / std::sqrt(noise) : 0.0;
    return peak;
}

std::string format_offsets(const std::vector<double>& offsets)
{
    std::string s;
    for (double d : offsets) {
        if (!s.empty()) s += ',';
        s += std::isnan(d) ? std::string("none") : fmt::format("{:+.2f}", d);
    }
    return s;
}

}  // namespace

template <typename View>
Result<LargeShiftScanResult> scan_continuum(const View& image, const GaussHermitePsf& psf,
                                            const std::string& frame)
{
    LargeShiftScanResult result;
    result.method = LargeShiftScan::continuum;
    result.band_dx.assign(kBands, std::numeric_limits<double>::quiet_NaN());
    const int mid = image.ny / 2;
    // Trace columns of every fibre at each band's centre row.
    std::vector<std::vector<double>> centers(kBands);
    for (int fiber = 0; fiber < psf.nspec(); ++fiber) {
        const TraceSamples trace(psf, fiber);
        for (int b = 0; b < kBands; ++b) {
            // NOLINTNEXTLINE(bugprone-integer-division): the bands lie whole rows from the middle
            const double row = mid + (b - kBands / 2) * kBandRows;
            if (row < trace.first_row() || row > trace.last_row()) continue;
            double x, wave;
            trace.at_row(row, x, wave);
            centers[size_t(b)].push_back(x);
        }
    }
    std::vector<double> mean, var, found;
    for (int b = 0; b < kBands; ++b) {
        const int begin = std::max(0, mid + (b - kBands / 2) * kBandRows - kBandRows / 2);
        const int end = std::min(image.ny, mid + (b - kBands / 2) * kBandRows + kBandRows / 2);
        if (begin >= end || centers[size_t(b)].empty()) continue;
        band_profile(image, begin, end, mean, var);
        const BandPeak peak = correlate(
            mean, var, model_profile(centers[size_t(b)], image.col_begin, image.stride()));
        const double offset = double(peak.offset_index) / kOversample - kHalfRange;
        if (!(peak.snr >= kMinPeakSnr)) {
            logger()->warn(
                "trace-shifts frame={} scan=continuum rows={}..{} no trace light (peak S/N "
                "{:.1f} < {:.0f}); band left out",
                frame, begin, end - 1, peak.snr, kMinPeakSnr);
            continue;
        }
        if (peak.offset_index == 0 || peak.offset_index == kOffsets - 1) {
            return Status::invalid(fmt::format(
                "{}: large-shift scan: the cross-correlation of rows {}..{} peaks at the edge "
                "of its range ({:+.0f} px): the traces are {} px or more off, or the frame is "
                "not of this PSF's camera",
                frame, begin, end - 1, offset, kHalfRange));
        }
        result.band_dx[size_t(b)] = offset;
        found.push_back(offset);
    }
    if (int(found.size()) < kMinBands) {
        return Status::invalid(fmt::format(
            "{}: large-shift scan: trace light (peak S/N >= {:.0f}) in {} of the {} bands of "
            "{} rows around row {}, fewer than {}: a dark or masked frame? "
            "(--no-large-shift-scan skips the scan)",
            frame, kMinPeakSnr, found.size(), kBands, kBandRows, mid, kMinBands));
    }
    result.dx = median_of(found);
    logger()->info("trace-shifts frame={} scan=continuum dx={:+.2f} bands={} band_dx={}", frame,
                   result.dx, found.size(), format_offsets(result.band_dx));
    return result;
}

template Result<LargeShiftScanResult> scan_continuum(const ImageView&, const GaussHermitePsf&,
                                                     const std::string&);
template Result<LargeShiftScanResult> scan_continuum(const Float32ImageView&,
                                                     const GaussHermitePsf&, const std::string&);

}  // namespace ex2d::traceshift
