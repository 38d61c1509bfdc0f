// SPDX-License-Identifier: BSD-3-Clause
// y offsets from reference emission lines: per fibre and line, the centroid along the rows of
// the line summed across the trace, continuum subtracted, less the centroid of the PSF's own
// spots of the same lines in the same window (so that an asymmetric PSF or blended lines do
// not bias the result). desispec instead cross-correlates boxcar spectra with each other and
// with a reference spectrum; the facts used are the same: lines at known vacuum wavelengths.
#include <algorithm>
#include <cmath>

#include "measure.hpp"

namespace ex2d::traceshift {

namespace {

constexpr int kSidebandRows = 3;  // rows each side for the continuum under a line
constexpr double kMinSnr = 10.0;

/// Lines of one fibre closer than a spot, measured in one window of rows.
struct Feature {
    std::vector<double> waves;
    std::vector<double> strengths;
    std::vector<double> rows;  ///< Y of each line on the current trace
    double x = 0;              ///< column of the trace at the strongest line
    size_t strongest = 0;      ///< index of the strongest line
};

std::vector<Feature> features_of_fiber(const GaussHermitePsf& psf, int fiber,
                                       const std::vector<ReferenceLine>& lines)
{
    std::vector<Feature> features;
    double strongest = 0;
    for (const ReferenceLine& line : lines) {
        if (line.wave < psf.ytrace.wavemin || line.wave > psf.ytrace.wavemax) continue;
        const double row = psf.ytrace.eval(fiber, line.wave);
        if (features.empty() || row - features.back().rows.back() > 2 * psf.hsizey) {
            features.emplace_back();
            strongest = 0;
        }
        Feature& f = features.back();
        f.waves.push_back(line.wave);
        f.strengths.push_back(line.strength);
        f.rows.push_back(row);
        if (line.strength > strongest) {
            strongest = line.strength;
            f.x = psf.xtrace.eval(fiber, line.wave);
            f.strongest = f.waves.size() - 1;
        }
    }
    return features;
}

/// Rows [first, first + model.size()) of a fibre's window as the reference spectrum lights
/// them: every sample of `spectrum` is laid with `profile` (the PSF's spot of the feature's
/// strongest line, at `profile_row` and summed over the window's columns, whose first row is
/// `profile_first`), moved to the sample's row by linear interpolation, which moves its
/// centroid exactly. Neighbours of the measured lines, in the window or under the continuum
/// sidebands, thus count in the model as they do in the data.
void model_from_spectrum(const GaussHermitePsf& psf, int fiber,
                         const std::vector<ReferenceLine>& spectrum,
                         const std::vector<double>& profile, long profile_first, double profile_row,
                         double profile_wave, long first, std::vector<double>& model)
{
    const double step = 1.0;  // A
    const double rows_per_angstrom = (psf.ytrace.eval(fiber, profile_wave + step) -
                                      psf.ytrace.eval(fiber, profile_wave - step)) /
                                     (2 * step);
    if (!(rows_per_angstrom > 0)) return;
    const long reach = long(profile.size()) + 1;
    const double wave_lo = profile_wave + (first - reach - profile_row) / rows_per_angstrom;
    const double wave_hi =
        profile_wave + (first + long(model.size()) + reach - profile_row) / rows_per_angstrom;
    auto it =
        std::lower_bound(spectrum.begin(), spectrum.end(), wave_lo,
                         [](const ReferenceLine& sample, double w) { return sample.wave < w; });
    for (; it != spectrum.end() && it->wave <= wave_hi; ++it) {
        if (!(it->strength > 0)) continue;
        const double shift = psf.ytrace.eval(fiber, it->wave) - profile_row;
        const double whole = std::floor(shift);
        const double t = shift - whole;
        // profile[k] lands on row profile_first + k + whole (weight 1 - t) and the next row.
        const long base = profile_first + long(whole) - first;
        for (size_t k = 0; k < profile.size(); ++k) {
            const long r = base + long(k);
            const double v = it->strength * profile[k];
            if (r >= 0 && r < long(model.size())) model[size_t(r)] += (1 - t) * v;
            if (r + 1 >= 0 && r + 1 < long(model.size())) model[size_t(r + 1)] += t * v;
        }
    }
}

}  // namespace

template <typename View>
std::vector<TraceOffset> measure_y_offsets(const View& image, const GaussHermitePsf& psf,
                                           const std::vector<ReferenceLine>& lines,
                                           const std::vector<ReferenceLine>& spectrum, int nfibers,
                                           int width)
{
    std::vector<ReferenceLine> sorted = lines;
    std::sort(sorted.begin(), sorted.end(),
              [](const ReferenceLine& a, const ReferenceLine& b) { return a.wave < b.wave; });
    const int hw = width / 2;
    const int hy = psf.hsizey;
    std::vector<TraceOffset> offsets;
    std::vector<double> data, var, model, profile;
    for (int fiber = 0; fiber < nfibers; ++fiber) {
        const std::vector<Feature> features = features_of_fiber(psf, fiber, sorted);
        std::vector<double> waves;
        for (const Feature& f : features) waves.insert(waves.end(), f.waves.begin(), f.waves.end());
        if (waves.empty()) continue;
        const SpotGrid spots = evaluate_spots(psf, fiber, 1, waves, 1);
        int spot_index = 0;
        for (const Feature& f : features) {
            const int first_spot = spot_index;
            spot_index += int(f.waves.size());
            const long lo = std::lround(f.rows.front()) - hy;
            const long hi = std::lround(f.rows.back()) + hy;
            const long center = std::lround(f.x);
            if (lo - kSidebandRows < 0 || hi + kSidebandRows >= image.ny ||
                center - hw < image.col_begin || center + hw >= image.col_begin + image.stride()) {
                continue;
            }
            // Column sums and their variances over the window and both sidebands.
            const long nrows = hi - lo + 1 + 2 * kSidebandRows;
            data.assign(size_t(nrows), 0.0);
            var.assign(size_t(nrows), 0.0);
            bool masked = false;
            for (long r = 0; r < nrows && !masked; ++r) {
                const size_t base = image.index(int(lo - kSidebandRows + r), int(center - hw));
                for (int k = 0; k <= 2 * hw; ++k) {
                    const double weight = image.weights[base + size_t(k)];
                    if (!(weight > 0)) {
                        masked = true;
                        break;
                    }
                    data[size_t(r)] += image.pixels[base + size_t(k)];
                    var[size_t(r)] += 1.0 / weight;
                }
            }
            if (masked) continue;
            // Continuum: the straight line through the means of the two sidebands.
            double left = 0, right = 0, left_var = 0, right_var = 0;
            for (int r = 0; r < kSidebandRows; ++r) {
                left += data[size_t(r)] / kSidebandRows;
                right += data[size_t(nrows - 1 - r)] / kSidebandRows;
                left_var += var[size_t(r)] / (kSidebandRows * kSidebandRows);
                right_var += var[size_t(nrows - 1 - r)] / (kSidebandRows * kSidebandRows);
            }
            const double left_row = lo - 0.5 * (kSidebandRows + 1);
            const double right_row = hi + 0.5 * (kSidebandRows + 1);
            double weight_sum = 0;
            for (size_t k = 0; k < f.strengths.size(); ++k) weight_sum += f.strengths[k];
            double ref_row = 0;
            for (size_t k = 0; k < f.rows.size(); ++k) ref_row += f.strengths[k] * f.rows[k];
            ref_row /= weight_sum;
            // The model of the window: the PSF's spots of the feature's lines, or the whole
            // reference spectrum when there is one, summed over the same columns.
            model.assign(size_t(nrows), 0.0);
            const long model_first = lo - kSidebandRows;
            for (size_t k = 0; k < f.waves.size(); ++k) {
                const int s = first_spot + int(k);
                const double* stamp = spots.stamp(0, s);
                const int xc = spots.corner_x(0, s), yc = spots.corner_y(0, s);
                const bool as_profile = !spectrum.empty();
                if (as_profile && k != f.strongest) continue;
                profile.assign(size_t(spots.ny), 0.0);
                for (int iy = 0; iy < spots.ny; ++iy) {
                    for (int ix = 0; ix < spots.nx; ++ix) {
                        const long col = xc + ix;
                        if (col >= center - hw && col <= center + hw)
                            profile[size_t(iy)] += stamp[iy * spots.nx + ix];
                    }
                }
                if (as_profile) {
                    model_from_spectrum(psf, fiber, spectrum, profile, yc, f.rows[k], f.waves[k],
                                        model_first, model);
                    continue;
                }
                for (int iy = 0; iy < spots.ny; ++iy) {
                    const long r = yc + iy - lo;
                    if (r < 0 || r > hi - lo) continue;
                    model[size_t(r + kSidebandRows)] += f.strengths[k] * profile[size_t(iy)];
                }
            }
            double model_left = 0, model_right = 0;
            for (int r = 0; r < kSidebandRows; ++r) {
                model_left += model[size_t(r)] / kSidebandRows;
                model_right += model[size_t(nrows - 1 - r)] / kSidebandRows;
            }
            double flux = 0, moment = 0, flux_var = 0, model_flux = 0, model_moment = 0;
            for (long r = lo; r <= hi; ++r) {
                const size_t i = size_t(r - lo + kSidebandRows);
                const double t = (r - left_row) / (right_row - left_row);
                const double value = data[i] - (left + t * (right - left));
                const double model_value = model[i] - (model_left + t * (model_right - model_left));
                flux += value;
                moment += (r - ref_row) * value;
                flux_var += var[i];
                model_flux += model_value;
                model_moment += (r - ref_row) * model_value;
            }
            if (!(flux > 0) || flux < kMinSnr * std::sqrt(flux_var) || !(model_flux > 0)) continue;
            const double c = moment / flux;
            // Error of the centroid from the pixel noise of the window and of the continuum.
            double c_var = 0, continuum_left = 0, continuum_right = 0;
            for (long r = lo; r <= hi; ++r) {
                const size_t i = size_t(r - lo + kSidebandRows);
                const double d = r - ref_row - c;
                const double t = (r - left_row) / (right_row - left_row);
                c_var += d * d * var[i];
                continuum_left += d * (1 - t);
                continuum_right += d * t;
            }
            c_var += continuum_left * continuum_left * left_var +
                     continuum_right * continuum_right * right_var;
            TraceOffset o;
            o.axis = 0;
            o.fiber = fiber;
            o.wave = f.waves.front();
            o.x = f.x;
            o.y = ref_row;
            o.delta = c - model_moment / model_flux;
            o.error = std::sqrt(c_var) / flux;
            offsets.push_back(o);
        }
    }
    return offsets;
}

template std::vector<TraceOffset> measure_y_offsets(const ImageView&, const GaussHermitePsf&,
                                                    const std::vector<ReferenceLine>&,
                                                    const std::vector<ReferenceLine>&, int, int);
template std::vector<TraceOffset> measure_y_offsets(const Float32ImageView&, const GaussHermitePsf&,
                                                    const std::vector<ReferenceLine>&,
                                                    const std::vector<ReferenceLine>&, int, int);

}  // namespace ex2d::traceshift
