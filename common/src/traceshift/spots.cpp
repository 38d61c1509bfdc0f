// SPDX-License-Identifier: BSD-3-Clause
// Spots of arc frames: their detection (the method of desispec's detect_spots_in_image) and
// their matching to predicted spots (that of match_same_system, on a grid of cells).
#include <algorithm>
#include <array>
#include <cmath>

#include "large_shift_scan.hpp"

namespace ex2d::traceshift {

namespace {

constexpr int kHalfKernel = 3;  // 7x7 pixels
constexpr int kKernel = 2 * kHalfKernel + 1;

/// The normalised 1-D Gaussian of sigma 1 px; the 2-D kernel is its outer product.
std::array<double, kKernel> gaussian_kernel()
{
    std::array<double, kKernel> g{};
    double sum = 0;
    for (int i = 0; i < kKernel; ++i) {
        const double d = i - kHalfKernel;
        g[size_t(i)] = std::exp(-0.5 * d * d);
        sum += g[size_t(i)];
    }
    for (double& v : g) v /= sum;
    return g;
}

}  // namespace

template <typename View>
std::vector<SpotPosition> detect_spots(const View& image, double min_snr, long max_spots)
{
    const std::array<double, kKernel> g = gaussian_kernel();
    std::array<double, kKernel> g2{};
    for (int i = 0; i < kKernel; ++i) g2[size_t(i)] = g[size_t(i)] * g[size_t(i)];
    const int ny = image.ny;
    const int nx = image.stride();
    const double min_snr2 = min_snr * min_snr;
    // The image (masked pixels as 0) and its variance smoothed along x, in rings of kKernel
    // rows; then along y, in rings of 3 rows (a row is compared with those above and below).
    // The variance of the smoothed image is the variance smoothed by the kernel squared.
    std::vector<double> pad_value(size_t(nx + 2 * kHalfKernel), 0.0);
    std::vector<double> pad_var(size_t(nx + 2 * kHalfKernel), 0.0);
    std::vector<double> across(size_t(kKernel) * nx), across_var(size_t(kKernel) * nx);
    std::vector<double> smooth(size_t(3) * nx), smooth_var(size_t(3) * nx);
    std::vector<SpotPosition> spots;
    for (int r = 0; r < ny + kHalfKernel; ++r) {
        if (r < ny) {
            const size_t base = image.index(r, image.col_begin);
            for (int c = 0; c < nx; ++c) {
                const double w = image.weights[base + size_t(c)];
                const bool good = w > 0;
                pad_value[size_t(c) + kHalfKernel] =
                    good ? double(image.pixels[base + size_t(c)]) : 0.0;
                pad_var[size_t(c) + kHalfKernel] = good ? 1.0 / w : 0.0;
            }
            double* out = across.data() + size_t(r % kKernel) * nx;
            double* out_var = across_var.data() + size_t(r % kKernel) * nx;
            for (int c = 0; c < nx; ++c) {
                double sum = 0, sum_var = 0;
                for (int i = 0; i < kKernel; ++i) {
                    sum += g[size_t(i)] * pad_value[size_t(c) + size_t(i)];
                    sum_var += g2[size_t(i)] * pad_var[size_t(c) + size_t(i)];
                }
                out[c] = sum;
                out_var[c] = sum_var;
            }
        }
        const int rs = r - kHalfKernel;  // the row smoothed now
        if (rs < 0) continue;
        double* out = smooth.data() + size_t(rs % 3) * nx;
        double* out_var = smooth_var.data() + size_t(rs % 3) * nx;
        std::fill(out, out + nx, 0.0);
        std::fill(out_var, out_var + nx, 0.0);
        for (int j = -kHalfKernel; j <= kHalfKernel; ++j) {
            if (rs + j < 0 || rs + j >= ny) continue;
            const double* in = across.data() + size_t((rs + j) % kKernel) * nx;
            const double* in_var = across_var.data() + size_t((rs + j) % kKernel) * nx;
            const int tap = j + kHalfKernel;
            const double gj = g[size_t(tap)];
            const double gj2 = g2[size_t(tap)];
            for (int c = 0; c < nx; ++c) {
                out[c] += gj * in[c];
                out_var[c] += gj2 * in_var[c];
            }
        }
        // Maxima of the row below, now that the rows around it are smoothed.
        const int rc = rs - 1;
        if (rc < 1 || rc > ny - 2) continue;
        const double* below = smooth.data() + size_t((rc - 1) % 3) * nx;
        const double* here = smooth.data() + size_t(rc % 3) * nx;
        const double* above = smooth.data() + size_t((rc + 1) % 3) * nx;
        const double* here_var = smooth_var.data() + size_t(rc % 3) * nx;
        for (int c = 1; c < nx - 1; ++c) {
            const double s = here[c];
            if (!(s > 0) || !(s * s >= min_snr2 * here_var[c]) || !(here_var[c] > 0) ||
                !(s > here[c - 1]) || !(s > here[c + 1]) || !(s > below[c]) || !(s > above[c])) {
                continue;
            }
            double sum = 0, sx = 0, sy = 0;
            for (int y = std::max(0, rc - kHalfKernel); y <= std::min(ny - 1, rc + kHalfKernel);
                 ++y) {
                const size_t base = image.index(y, image.col_begin);
                for (int x = std::max(0, c - kHalfKernel); x <= std::min(nx - 1, c + kHalfKernel);
                     ++x) {
                    const double v = image.weights[base + size_t(x)] > 0
                                         ? double(image.pixels[base + size_t(x)])
                                         : 0.0;
                    sum += v;
                    sx += v * x;
                    sy += v * y;
                }
            }
            if (!(sum > 0)) continue;
            spots.push_back({image.col_begin + sx / sum, sy / sum});
            if (long(spots.size()) > max_spots) return spots;
        }
    }
    return spots;
}

template std::vector<SpotPosition> detect_spots(const ImageView&, double, long);
template std::vector<SpotPosition> detect_spots(const Float32ImageView&, double, long);

SpotMatcher::SpotMatcher(const std::vector<SpotPosition>& detected, double max_distance)
    : cell_(max_distance)
{
    if (detected.empty()) return;
    double x1 = detected.front().x, y1 = detected.front().y;
    x0_ = x1;
    y0_ = y1;
    for (const SpotPosition& s : detected) {
        x0_ = std::min(x0_, s.x);
        y0_ = std::min(y0_, s.y);
        x1 = std::max(x1, s.x);
        y1 = std::max(y1, s.y);
    }
    ncx_ = int((x1 - x0_) / cell_) + 1;
    ncy_ = int((y1 - y0_) / cell_) + 1;
    std::vector<int> cell_of(detected.size());
    cell_start_.assign(size_t(ncx_) * ncy_ + 1, 0);
    for (size_t i = 0; i < detected.size(); ++i) {
        const int cx = std::min(ncx_ - 1, int((detected[i].x - x0_) / cell_));
        const int cy = std::min(ncy_ - 1, int((detected[i].y - y0_) / cell_));
        cell_of[i] = cy * ncx_ + cx;
        ++cell_start_[size_t(cell_of[i]) + 1];
    }
    for (size_t k = 1; k < cell_start_.size(); ++k) cell_start_[k] += cell_start_[k - 1];
    std::vector<int> fill(cell_start_.begin(), cell_start_.end() - 1);
    sorted_.resize(detected.size());
    index_.resize(detected.size());
    for (size_t i = 0; i < detected.size(); ++i) {
        const int k = fill[size_t(cell_of[i])]++;
        sorted_[size_t(k)] = detected[i];
        index_[size_t(k)] = int(i);
    }
    claim_d2_.assign(detected.size(), 0.0);
    claim_by_.assign(detected.size(), -1);
}

SpotMatcher::Matches SpotMatcher::match(const std::vector<SpotPosition>& predicted, double dx,
                                        double dy, std::vector<std::pair<int, int>>* pairs)
{
    for (int k : claimed_) claim_by_[size_t(k)] = -1;
    claimed_.clear();
    if (pairs != nullptr) pairs->clear();
    if (sorted_.empty()) return {};
    const double max_d2 = cell_ * cell_;
    for (size_t p = 0; p < predicted.size(); ++p) {
        const double x = predicted[p].x + dx;
        const double y = predicted[p].y + dy;
        const int cx = int(std::floor((x - x0_) / cell_));
        const int cy = int(std::floor((y - y0_) / cell_));
        if (cx < -1 || cx > ncx_ || cy < -1 || cy > ncy_) continue;
        double best_d2 = max_d2;
        int best = -1;
        for (int iy = std::max(0, cy - 1); iy <= std::min(ncy_ - 1, cy + 1); ++iy) {
            const int row = iy * ncx_;
            const int begin = cell_start_[size_t(row) + size_t(std::max(0, cx - 1))];
            const int end = cell_start_[size_t(row) + size_t(std::min(ncx_ - 1, cx + 1)) + 1];
            for (int k = begin; k < end; ++k) {
                const double ddx = sorted_[size_t(k)].x - x;
                const double ddy = sorted_[size_t(k)].y - y;
                const double d2 = ddx * ddx + ddy * ddy;
                if (d2 < best_d2) {
                    best_d2 = d2;
                    best = k;
                }
            }
        }
        if (best < 0) continue;
        if (claim_by_[size_t(best)] < 0) {
            claimed_.push_back(best);
        } else if (claim_d2_[size_t(best)] <= best_d2) {
            continue;
        }
        claim_by_[size_t(best)] = int(p);
        claim_d2_[size_t(best)] = best_d2;
    }
    Matches m;
    m.count = int(claimed_.size());
    for (int k : claimed_) m.distance += std::sqrt(claim_d2_[size_t(k)]);
    if (pairs != nullptr) {
        std::sort(claimed_.begin(), claimed_.end());
        for (int k : claimed_) pairs->emplace_back(claim_by_[size_t(k)], index_[size_t(k)]);
    }
    return m;
}

}  // namespace ex2d::traceshift
