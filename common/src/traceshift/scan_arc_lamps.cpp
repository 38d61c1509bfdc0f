// SPDX-License-Identifier: BSD-3-Clause
// The large-shift scan of arc frames (the method of desi_compute_trace_shifts --arc-lamps,
// with desispec's list_of_expected_spot_positions): the spots the traces predict for the
// reference lines, matched to those detected in the image over a wide range of x offsets.
#include <algorithm>
#include <cmath>
#include <string>

#include "ex2d/logging.hpp"
#include "large_shift_scan.hpp"

namespace ex2d::traceshift {

namespace {

constexpr int kMaxLines = 50;             // reference lines predicted per fibre, the strongest
constexpr double kFiberSeparation = 7.0;  // px, about DESI's
constexpr int kStepsPerSeparation = 2;
constexpr int kExcursion = 25;  // fibre separations each side
constexpr long kMaxSpots = 100000;
constexpr double kPassDistances[] = {4.0, 2.0, 1.0};  // fibre separations

/// The strongest kMaxLines lines inside the traces' wavelength range that land on the CCD
/// for the first, middle or last fibre.
std::vector<ReferenceLine> lines_on_ccd(const GaussHermitePsf& psf,
                                        const std::vector<ReferenceLine>& lines)
{
    std::vector<ReferenceLine> chosen;
    const int nspec = psf.nspec();
    for (const ReferenceLine& line : lines) {
        if (line.wave < psf.ytrace.wavemin || line.wave > psf.ytrace.wavemax) continue;
        bool on_ccd = false;
        for (int fiber : {0, nspec / 2, nspec - 1}) {
            const double y = psf.ytrace.eval(fiber, line.wave);
            on_ccd = on_ccd || (y > 0 && y < psf.npix_y);
        }
        if (on_ccd) chosen.push_back(line);
    }
    std::stable_sort(
        chosen.begin(), chosen.end(),
        [](const ReferenceLine& a, const ReferenceLine& b) { return a.strength > b.strength; });
    if (chosen.size() > size_t(kMaxLines)) chosen.resize(size_t(kMaxLines));
    return chosen;
}

std::vector<SpotPosition> predicted_spots(const GaussHermitePsf& psf,
                                          const std::vector<ReferenceLine>& lines)
{
    std::vector<SpotPosition> spots;
    for (int fiber = 0; fiber < psf.nspec(); ++fiber) {
        for (const ReferenceLine& line : lines) {
            const double y = psf.ytrace.eval(fiber, line.wave);
            if (y > 0 && y < psf.npix_y) spots.push_back({psf.xtrace.eval(fiber, line.wave), y});
        }
    }
    // Row by row, as the matcher's grid lies in memory.
    std::sort(spots.begin(), spots.end(),
              [](const SpotPosition& a, const SpotPosition& b) { return a.y < b.y; });
    return spots;
}

}  // namespace

template <typename View>
Result<LargeShiftScanResult> scan_arc_lamps(const View& image, const GaussHermitePsf& psf,
                                            const std::vector<ReferenceLine>& lines,
                                            const std::string& frame)
{
    LargeShiftScanResult result;
    result.method = LargeShiftScan::arc_lamps;
    const std::vector<ReferenceLine> chosen = lines_on_ccd(psf, lines);
    if (chosen.empty()) {
        return Status::invalid(fmt::format(
            "{}: large-shift scan: none of the {} reference lines falls on the CCD (the traces "
            "cover {:.1f}..{:.1f} A)",
            frame, lines.size(), psf.ytrace.wavemin, psf.ytrace.wavemax));
    }
    const std::vector<SpotPosition> predicted = predicted_spots(psf, chosen);
    const std::vector<SpotPosition> detected = detect_spots(image, kMinSpotSnr, kMaxSpots);
    result.spots_predicted = int(predicted.size());
    result.spots_detected = int(detected.size());
    if (long(detected.size()) > kMaxSpots) {
        return Status::invalid(fmt::format(
            "{}: large-shift scan: more than {} spots detected with S/N >= {:.0f}: not an arc "
            "frame?",
            frame, kMaxSpots, kMinSpotSnr));
    }
    if (detected.empty()) {
        return Status::invalid(fmt::format(
            "{}: large-shift scan: no spot detected with S/N >= {:.0f}: a dark frame, or not "
            "an arc?",
            frame, kMinSpotSnr));
    }
    logger()->info(
        "trace-shifts frame={} scan=arc_lamps lines={} spots_predicted={} spots_detected={}", frame,
        chosen.size(), predicted.size(), detected.size());

    double dx = 0, dy = 0;
    std::vector<std::pair<int, int>> pairs;
    std::vector<double> ddx, ddy, dist;
    // Each pass scans around the offset of the one before, so the scan reaches past 25 fibres
    // and an offset on the edge of one pass is no failure.
    for (double separations : kPassDistances) {
        const double max_distance = separations * kFiberSeparation;
        SpotMatcher matcher(detected, max_distance);
        // The most matches; among offsets with as many, the one whose pairs lie closest.
        // (desispec keeps the first, the most negative offset: where spots fall off the CCD an
        // offset a fibre off can match as many, and come first.)
        SpotMatcher::Matches most;
        int best_step = 0;
        for (int step = -kExcursion * kStepsPerSeparation; step <= kExcursion * kStepsPerSeparation;
             ++step) {
            const SpotMatcher::Matches m =
                matcher.match(predicted, dx + step * kFiberSeparation / kStepsPerSeparation, dy);
            if (m.count > most.count || (m.count == most.count && m.distance < most.distance)) {
                most = m;
                best_step = step;
            }
        }
        const int best = most.count;
        const double best_offset = dx + best_step * kFiberSeparation / kStepsPerSeparation;
        if (best == 0) {
            return Status::invalid(fmt::format(
                "{}: large-shift scan: no predicted spot within {:.0f} px of a detected one at "
                "any x offset of {:+.1f} +- {:.1f} px",
                frame, max_distance, dx, kExcursion * kFiberSeparation));
        }
        matcher.match(predicted, best_offset, dy, &pairs);
        ddx.clear();
        ddy.clear();
        for (const auto& [p, d] : pairs) {
            ddx.push_back(detected[size_t(d)].x - predicted[size_t(p)].x);
            ddy.push_back(detected[size_t(d)].y - predicted[size_t(p)].y);
        }
        dx = median_of(ddx);
        dy = median_of(ddy);
        dist.clear();
        for (size_t k = 0; k < ddx.size(); ++k)
            dist.push_back(std::hypot(ddx[k] - dx, ddy[k] - dy));
        result.matches = best;
        logger()->info(
            "trace-shifts frame={} scan=arc_lamps max_distance={:.0f} matches={} "
            "best_offset={:+.1f} dx={:+.3f} dy={:+.3f} median_distance={:.3f}",
            frame, max_distance, best, best_offset, dx, dy, median_of(dist));
    }
    result.dx = dx;
    result.dy = dy;
    logger()->info(
        "trace-shifts frame={} scan=arc_lamps dx={:+.3f} dy={:+.3f} matches={} of {} predicted",
        frame, result.dx, result.dy, result.matches, result.spots_predicted);
    return result;
}

template Result<LargeShiftScanResult> scan_arc_lamps(const ImageView&, const GaussHermitePsf&,
                                                     const std::vector<ReferenceLine>&,
                                                     const std::string&);
template Result<LargeShiftScanResult> scan_arc_lamps(const Float32ImageView&,
                                                     const GaussHermitePsf&,
                                                     const std::vector<ReferenceLine>&,
                                                     const std::string&);

}  // namespace ex2d::traceshift
