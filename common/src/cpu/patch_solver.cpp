// SPDX-License-Identifier: BSD-3-Clause
#include "patch_solver.hpp"

#include <algorithm>
#include <climits>
#include <cmath>

#include "band_solve.hpp"
#include "cpu_clock.hpp"
#include "indefinite_patch.hpp"
#include "lapack_fortran.hpp"
#include "vector_ops.hpp"

namespace ex2d::cpu {

namespace {

// Rows of Z per rank-k update in covariance_block, in units of nfiber (one wavelength each).
constexpr int kRowsPerBlock = 8;
// Stamp sides are at most 63 pixels (check_stamp_limits in psf.cpp).
constexpr int kMaxStampSide = 64;

// Sums over a stamp's pixels run down each column first, one independent sum per column, so
// that the loop over a row's columns vectorises without reordering any one sum (a single
// running sum would chain every addition). The columns' sums are then added left to right.
double sum_columns(const double* column_sums, int ncol)
{
    double sum = 0;
    for (int k = 0; k < ncol; ++k) sum += column_sums[k];
    return sum;
}

// sum over rows r < nrows and columns k < ncol of a[r * stride + k] * b[r * stride + k]: one
// element of A^T W A (B&S eq. 4) over the overlap of two stamps. Columns go four at a time
// into four running sums, so that a row's multiply-adds do not wait on each other. The one to
// three columns left over (a spot's 17 columns leave one) go into a fifth: the row's last four
// columns with the lanes already summed masked off, which reads nothing outside the overlap.
// A scalar sum there chained two or three dependent additions a row and set the pace of the
// whole loop (docs/benchmarks-log.md, "CPU speed, fourth step"). Overlaps narrower than four
// columns are summed one column at a time.
double overlap_sum(const double* a, const double* b, int stride, int nrows, int ncol)
{
    if (ncol < 4) {
        double sum = 0;
        for (int r = 0; r < nrows; ++r) {
            for (int k = 0; k < ncol; ++k)
                sum += a[size_t(r) * stride + k] * b[size_t(r) * stride + k];
        }
        return sum;
    }
    const int left_over = ncol % 4;
    const Vec4Mask tail_mask = last_lanes(left_over);
    Vec4 s0{}, s1{}, s2{}, s3{}, tail{};
    for (int r = 0; r < nrows; ++r) {
        const double* ar = a + size_t(r) * stride;
        const double* br = b + size_t(r) * stride;
        int k = 0;
        for (; k + 16 <= ncol; k += 16) {
            s0 += load4(ar + k) * load4(br + k);
            s1 += load4(ar + k + 4) * load4(br + k + 4);
            s2 += load4(ar + k + 8) * load4(br + k + 8);
            s3 += load4(ar + k + 12) * load4(br + k + 12);
        }
        if (k + 8 <= ncol) {
            s0 += load4(ar + k) * load4(br + k);
            s1 += load4(ar + k + 4) * load4(br + k + 4);
            k += 8;
        }
        if (k + 4 <= ncol) {
            s2 += load4(ar + k) * load4(br + k);
        }
        if (left_over) {
            tail += keep_lanes(tail_mask, load4(ar + ncol - 4) * load4(br + ncol - 4));
        }
    }
    const Vec4 total = ((s0 + s1) + (s2 + s3)) + tail;
    return (total[0] + total[1]) + (total[2] + total[3]);
}

struct Layout {
    int nfiber, nwave, nunknown, ny, nx, stamp_size;
};

const double* stamp_of(const BundleSpots& spots, const PatchGeometry& patch, int f, int w)
{
    return spots.spots->stamp(patch.fiber_begin + f - spots.spots->fiber_begin,
                              patch.wave_begin + w - spots.wave_offset);
}

SpotRect rect_of(const BundleSpots& spots, const PatchGeometry& patch, int f, int w,
                 const Layout& lay)
{
    const int fi = patch.fiber_begin + f - spots.spots->fiber_begin;
    const int wi = patch.wave_begin + w - spots.wave_offset;
    SpotRect r{};
    r.xc = spots.spots->corner_x(fi, wi);
    r.yc = spots.spots->corner_y(fi, wi);
    r.row0 = std::max(r.yc, patch.row_begin);
    r.row1 = std::min(r.yc + lay.ny, patch.row_end);
    r.col0 = std::max(r.xc, patch.col_begin);
    r.col1 = std::min(r.xc + lay.nx, patch.col_end);
    if (r.row0 >= r.row1 || r.col0 >= r.col1) r.row1 = r.row0;
    return r;
}

bool empty(const SpotRect& r)
{
    return r.row0 >= r.row1;
}

// B&S eq. 4 ingredients from spots and pixels: w*A per spot, y = A^T W p, fluxweight = A^T w,
// and the fraction of each spot on pixels without data (masked or off the CCD).
void gather_spots(const PatchGeometry& patch, const BundleSpots& spots, const ImageView& image,
                  const Layout& lay, std::vector<SpotRect>& rects, PatchWorkspace& ws)
{
    // Only the part of each stamp inside its rect is written and read: no zeroing needed.
    ws.weighted_stamps.resize(size_t(lay.nunknown) * lay.stamp_size);
    ws.fluxweight.assign(lay.nunknown, 0.0);
    ws.rhs.assign(lay.nunknown, 0.0);
    ws.pixmask_fraction.assign(lay.nunknown, 0.0);
    rects.resize(lay.nunknown);
    for (int w = 0; w < lay.nwave; ++w) {
        for (int f = 0; f < lay.nfiber; ++f) {
            const int u = w * lay.nfiber + f;
            const SpotRect r = rect_of(spots, patch, f, w, lay);
            rects[u] = r;
            const double* stamp = stamp_of(spots, patch, f, w);
            double* weighted = &ws.weighted_stamps[size_t(u) * lay.stamp_size];
            const int ncol = r.col1 - r.col0;
            // Only the rect's columns are summed, so only they are zeroed (zeroing all 64 of
            // each array took a string store per spot).
            double fw_cols[kMaxStampSide], y_cols[kMaxStampSide], on_data_cols[kMaxStampSide];
            std::fill_n(fw_cols, ncol, 0.0);
            std::fill_n(y_cols, ncol, 0.0);
            std::fill_n(on_data_cols, ncol, 0.0);
            for (int row = r.row0; row < r.row1; ++row) {
                const double* wrow = image.weights + image.index(row, r.col0);
                const double* prow = image.pixels + image.index(row, r.col0);
                const int s0 = (row - r.yc) * lay.nx - r.xc + r.col0;
                for (int k = 0; k < ncol; ++k) {
                    const double a = stamp[s0 + k];
                    const double wpix = wrow[k];
                    const double aw = a * wpix;
                    weighted[s0 + k] = aw;
                    fw_cols[k] += aw;
                    y_cols[k] += aw * prow[k];
                    on_data_cols[k] += wpix > 0 ? a : 0.0;
                }
            }
            const double fw = sum_columns(fw_cols, ncol);
            const double on_data = sum_columns(on_data_cols, ncol);
            ws.fluxweight[u] = fw;
            ws.rhs[u] = sum_columns(y_cols, ncol);
            // 1 - (spot weight on usable pixels); exactly 1 when no pixel is usable, as
            // desispec's ALLBADPIX test compares with 1.0.
            ws.pixmask_fraction[u] = fw > 0 ? std::max(0.0, 1.0 - on_data) : 1.0;
        }
    }
}

// iCov = A^T W A from overlapping spot pairs only. Returns the band half-width kd.
int couple_spots(const PatchGeometry& patch, const BundleSpots& spots, const Layout& lay,
                 const std::vector<SpotRect>& rects, PatchWorkspace& ws)
{
    ws.wave_row_min.assign(lay.nwave, INT_MAX);
    for (int u = 0; u < lay.nunknown; ++u) {
        if (!empty(rects[u])) {
            int& m = ws.wave_row_min[u / lay.nfiber];
            m = std::min(m, rects[u].row0);
        }
    }
    // suffix minimum lets the pair loop stop once no later wavelength can reach this spot,
    // without assuming the traces are monotonic in wavelength
    ws.wave_row_suffix_min.assign(lay.nwave + 1, INT_MAX);
    for (int w = lay.nwave - 1; w >= 0; --w) {
        ws.wave_row_suffix_min[w] = std::min(ws.wave_row_min[w], ws.wave_row_suffix_min[w + 1]);
    }
    ws.couplings.clear();
    ws.coupling_pairs.clear();
    int kd = 0;
    for (int u = 0; u < lay.nunknown; ++u) {
        const SpotRect& ru = rects[u];
        if (empty(ru)) continue;
        const double* wu = &ws.weighted_stamps[size_t(u) * lay.stamp_size];
        const int wave_u = u / lay.nfiber;
        for (int v = u; v < lay.nunknown; ++v) {
            const int wave_v = v / lay.nfiber;
            if (wave_v > wave_u && ws.wave_row_suffix_min[wave_v] >= ru.row1) break;
            const SpotRect& rv = rects[v];
            if (empty(rv)) continue;
            const int r0 = std::max(ru.row0, rv.row0), r1 = std::min(ru.row1, rv.row1);
            const int c0 = std::max(ru.col0, rv.col0), c1 = std::min(ru.col1, rv.col1);
            if (r0 >= r1 || c0 >= c1) continue;
            const double* av = stamp_of(spots, patch, v % lay.nfiber, wave_v);
            const double sum =
                overlap_sum(wu + (r0 - ru.yc) * lay.nx - ru.xc + c0,
                            av + (r0 - rv.yc) * lay.nx - rv.xc + c0, lay.nx, r1 - r0, c1 - c0);
            if (sum == 0 && v != u) continue;
            ws.couplings.push_back(sum);
            ws.coupling_pairs.push_back(u);
            ws.coupling_pairs.push_back(v);
            kd = std::max(kd, v - u);
        }
    }
    return kd;
}

struct SolveOutcome {
    bool ok = true;
    std::string reason;
};

bool all_finite(const double* x, size_t n)
{
    for (size_t i = 0; i < n; ++i) {
        if (!std::isfinite(x[i])) return false;
    }
    return true;
}

// Diagonal block C_ss of C = iCov^-1 for fibre f: with iCov = L L^T, C_ss = Z^T Z where
// Z = L^-1 E_s (solve_unit_columns, from the rows of L in ws.factor_rows). Column w of Z is
// zero above row w*nfiber + f, so Z^T Z is summed over blocks of rows, each over the columns
// its last row has started: about a third of the flops of one rank-k update over all of Z.
void covariance_block(const Layout& lay, int f, PatchWorkspace& ws, double* block)
{
    const int m = lay.nunknown, nw = lay.nwave, nf = lay.nfiber;
    const int ldz = (nw + kBandSolveChunk - 1) / kBandSolveChunk * kBandSolveChunk;
    auto active_columns = [&](int k) { return k >= f ? std::min(nw, (k - f) / nf + 1) : 0; };
    const int block_rows = kRowsPerBlock * nf;
    ws.z.resize(size_t(m) * ldz);
    solve_unit_columns(ws.factor_rows, f, nf, nw, block_rows, ws.z.data(), ldz);
    std::fill_n(block, size_t(nw) * nw, 0.0);
    for (int k0 = f; k0 < m; k0 += block_rows) {
        const int k1 = std::min(m, k0 + block_rows);
        // Rows k0..k1 of Z (row-major, ldz) are, column-major, an n x k matrix Z_cm; the
        // row-major upper triangle of Z^T Z is the column-major lower one of Z_cm Z_cm^T.
        lapack::dsyrk('L', 'N', active_columns(k1 - 1), k1 - k0, 1.0, &ws.z[size_t(k0) * ldz], ldz,
                      1.0, block, nw);
    }
}

// Q = (C_ss)^-1/2 with eigenvalues clipped at 1e-14 * max (B&S eqs. 10-19, "signal"
// blocks), as its factor U = V diag(w^-1/4), Q = U U^T, held row-major in ws.q_factor, from
// block `block` of the last decomposition. Decorrelation needs all row sums of Q, a few rows
// times a vector and the band of Q around the kept wavelengths: about a third of the work of
// forming Q.
bool inverse_sqrt(int n, int block, PatchWorkspace& ws)
{
    const double* eigval = ws.eigen.eigenvalues(block);
    const double max_eig = *std::max_element(eigval, eigval + n);
    if (!(max_eig > 0)) return false;
    const double floor_eig = SolverConstants::eig_clip * max_eig;
    // U = V diag(w^-1/4), so Q = U U^T = V diag(w^-1/2) V^T; eigenvector k is column k of the
    // solver's column-major matrix, and row i of U is contiguous in q_factor.
    const double* vectors = ws.eigen.eigenvectors(block);
    const int stride = ws.eigen.vector_stride();
    ws.q_factor.resize(size_t(n) * n);
    for (int k = 0; k < n; ++k) {
        const double scale = 1.0 / std::sqrt(std::sqrt(std::max(eigval[k], floor_eig)));
        const double* v = &vectors[size_t(k) * stride];
        for (int i = 0; i < n; ++i) ws.q_factor[size_t(i) * n + k] = v[i] * scale;
    }
    return true;
}

// Q[i][j] = U[i] . U[j].
double q_entry(int n, const PatchWorkspace& ws, int i, int j)
{
    const double* ui = &ws.q_factor[size_t(i) * n];
    const double* uj = &ws.q_factor[size_t(j) * n];
    return dot(ui, uj, n);
}

// out = Q x = U (U^T x); x of length n with stride x_stride.
void apply_q(int n, PatchWorkspace& ws, const double* x, int x_stride, std::vector<double>& out)
{
    ws.q_scratch.assign(n, 0.0);
    for (int i = 0; i < n; ++i) {
        const double xi = x[size_t(i) * x_stride];
        const double* ui = &ws.q_factor[size_t(i) * n];
        for (int k = 0; k < n; ++k) ws.q_scratch[k] += ui[k] * xi;
    }
    out.resize(n);
    for (int i = 0; i < n; ++i) out[i] = dot(&ws.q_factor[size_t(i) * n], ws.q_scratch.data(), n);
}

SolveOutcome solve_and_decorrelate(const PatchGeometry& patch, const Layout& lay, int kd,
                                   double regularize, PatchWorkspace& ws, PatchResult& result,
                                   StageClock& clock, StageTimes& times)
{
    const int m = lay.nunknown, ldab = kd + 1;
    ws.band.assign(size_t(ldab) * m, 0.0);
    for (size_t p = 0; p < ws.couplings.size(); ++p) {
        const int u = ws.coupling_pairs[2 * p], v = ws.coupling_pairs[2 * p + 1];
        ws.band[(v - u) + size_t(u) * ldab] = ws.couplings[p];
    }
    // Weak prior on bins with almost no weight (minweight = 1e-4 max fluxweight), plus the
    // 1e-15 floor, both as gpu_specter adds them: iCov += diag(alpha^2 + 1e-15).
    const double max_fw = *std::max_element(ws.fluxweight.begin(), ws.fluxweight.end());
    const double min_weight = SolverConstants::min_weight_frac * max_fw;
    for (int u = 0; u < m; ++u) {
        const double alpha =
            ws.fluxweight[u] < min_weight ? min_weight - ws.fluxweight[u] : regularize;
        ws.band[size_t(u) * ldab] += alpha * alpha + SolverConstants::diag_floor;
    }
    // The tests' seam (indefinite_patch.hpp); compiled away in builds without test hooks.
    if (test_hooks::is_forced_indefinite(patch)) ws.band[0] = -1.0;
    // Factored in place: iCov itself is not needed again (a retry assembles it anew).
    if (band_cholesky(ws.band.data(), m, kd) != 0) {
        return {false, "iCov is not positive definite"};
    }
    ws.xflux = ws.rhs;
    if (lapack::dpbtrs('L', m, kd, 1, ws.band.data(), ldab, ws.xflux.data(), m) != 0 ||
        !all_finite(ws.xflux.data(), m)) {
        return {false, "non-finite deconvolved flux"};
    }
    band_rows_from_factor(ws.band.data(), m, kd, ws.factor_rows);
    clock.charge(times.solve);

    const int nd = lay.ny / 2, ndiag = 2 * nd + 1, nw = lay.nwave, nf = lay.nfiber;
    const int ncore_f = patch.ncore_fiber(), ncore_w = patch.ncore_wave;
    // The core fibres' blocks, each holding its upper triangle row-major, which is the lower
    // triangle column-major that the eigen-solver reads; decomposed together.
    ws.cov_blocks.resize(size_t(ncore_f) * nw * nw);
    for (int cf = 0; cf < ncore_f; ++cf) {
        covariance_block(lay, patch.core_fiber_begin + cf - patch.fiber_begin, ws,
                         &ws.cov_blocks[size_t(cf) * nw * nw]);
    }
    clock.charge(times.solve);
    if (!ws.eigen.decompose(nw, ncore_f, ws.cov_blocks.data())) {
        return {false, "covariance block's eigen-decomposition did not converge"};
    }
    for (int cf = 0; cf < ncore_f; ++cf) {
        const int f = patch.core_fiber_begin + cf - patch.fiber_begin;
        if (!inverse_sqrt(nw, cf, ws)) {
            return {false, "covariance block has no positive eigenvalue"};
        }
        // B&S eqs. 12-13: R = diag(1/s) Q with s the row sums of Q; f~ = R f = diag(1/s) Q f.
        ws.ones.assign(nw, 1.0);
        apply_q(nw, ws, ws.ones.data(), 1, ws.row_sums);
        apply_q(nw, ws, &ws.xflux[f], nf, ws.q_times_flux);
        for (int jj = 0; jj < ncore_w; ++jj) {
            const int j = patch.core_wave_offset + jj;
            const int u = j * nf + f;
            const size_t out = size_t(cf) * ncore_w + jj;
            const double s = ws.row_sums[j];
            const bool usable = ws.fluxweight[u] > 0;
            result.flux[out] = usable ? ws.q_times_flux[j] / s : 0.0;
            result.ivar[out] = usable ? s * s : 0.0;
            result.xflux[out] = usable ? ws.xflux[u] : 0.0;
            for (int d = 0; d < ndiag; ++d) {
                const int row = j - nd + d;
                result.resolution[(size_t(cf) * ndiag + d) * ncore_w + jj] =
                    q_entry(nw, ws, row, j) / ws.row_sums[row];
            }
        }
        clock.charge(times.decorrelate);
    }
    if (!all_finite(result.flux.data(), result.flux.size()) ||
        !all_finite(result.ivar.data(), result.ivar.size()) ||
        !all_finite(result.resolution.data(), result.resolution.size())) {
        return {false, "non-finite flux, ivar or resolution"};
    }
    return {};
}

// chi2pix (desispec's CHI2PIX): model = A xflux over the window with every solved spot, pixel
// variance 1/ivar + (psferr * model)^2, chi2 averaged over each kept bin's spot weights.
void compute_chi2pix(const PatchGeometry& patch, const BundleSpots& spots, const ImageView& image,
                     const Layout& lay, const std::vector<SpotRect>& rects, double psferr,
                     PatchWorkspace& ws, PatchResult& result)
{
    const int wrows = patch.row_end - patch.row_begin, wcols = patch.col_end - patch.col_begin;
    ws.model.assign(size_t(wrows) * wcols, 0.0);
    for (int u = 0; u < lay.nunknown; ++u) {
        const SpotRect& r = rects[u];
        const double x = ws.xflux[u];
        const double* stamp = stamp_of(spots, patch, u % lay.nfiber, u / lay.nfiber);
        for (int row = r.row0; row < r.row1; ++row) {
            double* mrow = &ws.model[size_t(row - patch.row_begin) * wcols - patch.col_begin];
            const double* a = stamp + (row - r.yc) * lay.nx - r.xc;
            for (int col = r.col0; col < r.col1; ++col) mrow[col] += a[col] * x;
        }
    }
    ws.chi2.assign(ws.model.size(), 0.0);
    ws.chi2_weight.assign(ws.model.size(), 0.0);
    for (int row = 0; row < wrows; ++row) {
        for (int col = 0; col < wcols; ++col) {
            const size_t pix = image.index(row + patch.row_begin, col + patch.col_begin);
            const double ivar = image.weights[pix];
            if (!(ivar > 0)) continue;
            const size_t k = size_t(row) * wcols + col;
            const double model_sigma = psferr * ws.model[k] + 1e-32;
            const double v = 1.0 / (1.0 / ivar + model_sigma * model_sigma);
            const double resid = image.pixels[pix] - ws.model[k];
            ws.chi2[k] = resid * resid * v;
            ws.chi2_weight[k] = v > 0 ? 1.0 : 0.0;
        }
    }
    const int ncore_w = patch.ncore_wave;
    for (int cf = 0; cf < patch.ncore_fiber(); ++cf) {
        const int f = patch.core_fiber_begin + cf - patch.fiber_begin;
        for (int jj = 0; jj < ncore_w; ++jj) {
            const int u = (patch.core_wave_offset + jj) * lay.nfiber + f;
            const SpotRect& r = rects[u];
            const double* stamp = stamp_of(spots, patch, f, u / lay.nfiber);
            double num = 0, den = 0;
            for (int row = r.row0; row < r.row1; ++row) {
                const size_t k0 = size_t(row - patch.row_begin) * wcols - patch.col_begin;
                const double* a = stamp + (row - r.yc) * lay.nx - r.xc;
                for (int col = r.col0; col < r.col1; ++col) {
                    num += a[col] * ws.chi2[k0 + col];
                    den += a[col] * ws.chi2_weight[k0 + col];
                }
            }
            result.chi2pix[size_t(cf) * ncore_w + jj] = den > 0 ? num / den : 0.0;
        }
    }
}

}  // namespace

void solve_patch(const PatchGeometry& patch, const BundleSpots& spots, const ImageView& image,
                 double regularize, double psferr, PatchWorkspace& ws, PatchResult& result,
                 StageTimes& times)
{
    const Layout lay{patch.nfiber(),  patch.nwave,     patch.nunknown(),
                     spots.spots->ny, spots.spots->nx, spots.spots->ny * spots.spots->nx};
    const int ndiag = lay.ny;
    result.zero_for(patch, ndiag);
    result.status = PatchStatus::ok;
    result.failure.clear();

    StageClock clock;
    std::vector<SpotRect>& rects = ws.rects;
    gather_spots(patch, spots, image, lay, rects, ws);
    const int kd = couple_spots(patch, spots, lay, rects, ws);
    clock.charge(times.build);
    for (int cf = 0; cf < patch.ncore_fiber(); ++cf) {
        const int f = patch.core_fiber_begin + cf - patch.fiber_begin;
        for (int jj = 0; jj < patch.ncore_wave; ++jj) {
            const int u = (patch.core_wave_offset + jj) * lay.nfiber + f;
            result.pixmask_fraction[size_t(cf) * patch.ncore_wave + jj] = ws.pixmask_fraction[u];
        }
    }

    SolveOutcome outcome =
        solve_and_decorrelate(patch, lay, kd, regularize, ws, result, clock, times);
    if (!outcome.ok) {
        result.status = PatchStatus::retried;
        result.failure = outcome.reason;
        outcome = solve_and_decorrelate(patch, lay, kd, SolverConstants::retry_regularize, ws,
                                        result, clock, times);
    }
    if (!outcome.ok) {
        const std::vector<double> pixmask = result.pixmask_fraction;
        result.zero_for(patch, ndiag);
        result.pixmask_fraction = pixmask;
        result.status = PatchStatus::failed;
        result.failure += "; retry: " + outcome.reason;
        return;
    }
    compute_chi2pix(patch, spots, image, lay, rects, psferr, ws, result);
    clock.charge(times.chi2);
}

}  // namespace ex2d::cpu
