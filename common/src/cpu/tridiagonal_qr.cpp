// SPDX-License-Identifier: BSD-3-Clause
#include "tridiagonal_qr.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "vector_ops.hpp"

namespace ex2d::cpu {

namespace {

// LAPACK's limit on QR sweeps, per row of the matrix.
constexpr int kMaxSweepsPerRow = 30;

}  // namespace

// Where one system stands. Rows start..end are the unreduced block being chased; (x, z) is
// the pair the next rotation, k, brings to (r, 0).
struct TridiagonalQrWorkspace::Chase {
    TridiagonalSystem* system = nullptr;
    double* cosines = nullptr;  // this sweep's rotations, one per k in start..end-1
    double* sines = nullptr;
    int start = 0, end = 0, k = 0, sweeps = 0;
    double x = 0, z = 0;
    int scale_exponent = 0;  // the matrix was scaled by 2^-scale_exponent
    bool active = false;
};

TridiagonalQrWorkspace::TridiagonalQrWorkspace() = default;
TridiagonalQrWorkspace::~TridiagonalQrWorkspace() = default;

namespace {

using Chase = TridiagonalQrWorkspace::Chase;

// Scales the matrix by a power of two (exact) so that its largest entry is below 1: the
// rotations then form x^2 + z^2 without overflow and without the cost of std::hypot. False
// for a matrix with a non-finite entry, which no sweep would reduce.
bool scale(Chase& ch)
{
    TridiagonalSystem& s = *ch.system;
    double largest = 0;
    bool finite = true;
    for (int i = 0; i < s.n; ++i) {
        finite = finite && std::isfinite(s.diagonal[i]);
        largest = std::max(largest, std::abs(s.diagonal[i]));
    }
    for (int i = 0; i + 1 < s.n; ++i) {
        finite = finite && std::isfinite(s.off_diagonal[i]);
        largest = std::max(largest, std::abs(s.off_diagonal[i]));
    }
    if (!finite) return false;
    if (largest == 0) return true;
    std::frexp(largest, &ch.scale_exponent);
    for (int i = 0; i < s.n; ++i) s.diagonal[i] = std::ldexp(s.diagonal[i], -ch.scale_exponent);
    for (int i = 0; i + 1 < s.n; ++i)
        s.off_diagonal[i] = std::ldexp(s.off_diagonal[i], -ch.scale_exponent);
    return true;
}

// Sets off-diagonal entries that no longer matter to zero, finds the last unreduced block and
// starts a sweep over it. False when the matrix is diagonal or the sweeps ran out.
bool begin_sweep(Chase& ch)
{
    TridiagonalSystem& s = *ch.system;
    double* d = s.diagonal;
    double* e = s.off_diagonal;
    // LAPACK dsteqr's test: e_i is negligible when |e_i| <= eps sqrt(|d_i| |d_i+1|). Only the
    // block just chased changed since the last test.
    const double eps = std::numeric_limits<double>::epsilon();
    const double safe_min = std::numeric_limits<double>::min();
    for (int i = ch.start; i < ch.end; ++i) {
        if (e[i] * e[i] <= eps * eps * std::abs(d[i]) * std::abs(d[i + 1]) + safe_min) e[i] = 0;
    }
    while (ch.end > 0 && e[ch.end - 1] == 0) --ch.end;
    if (ch.end == 0) {
        s.converged = true;
        return false;
    }
    if (++ch.sweeps > kMaxSweepsPerRow * s.n) return false;
    ch.start = ch.end - 1;
    while (ch.start > 0 && e[ch.start - 1] != 0) --ch.start;
    // Wilkinson shift: the eigenvalue of the trailing 2 x 2 block nearer d[end] (GVL 8.3.5).
    const double last = d[ch.end], coupling = e[ch.end - 1];
    const double half_gap = 0.5 * (d[ch.end - 1] - last);
    const double root = std::sqrt(half_gap * half_gap + coupling * coupling);
    const double shift =
        half_gap == 0 ? last - std::abs(coupling)
                      : last - coupling * (coupling / (half_gap + std::copysign(root, half_gap)));
    ch.x = d[ch.start] - shift;
    ch.z = e[ch.start];
    ch.k = ch.start;
    return true;
}

// One rotation G of the chase, with G^T (x, z) = (r, 0), applied as T <- G^T T G to rows and
// columns k, k+1; it pushes the bulge to (k, k+2).
inline void chase_step(Chase& ch)
{
    double* d = ch.system->diagonal;
    double* e = ch.system->off_diagonal;
    const int k = ch.k;
    const double r = std::sqrt(ch.x * ch.x + ch.z * ch.z);
    const double c = r > 0 ? ch.x / r : 1.0;
    const double s = r > 0 ? -ch.z / r : 0.0;
    if (k > ch.start) e[k - 1] = r;
    const double a = d[k], b = e[k], next = d[k + 1];
    const double cs = c * s, cc = c * c, ss = s * s;
    d[k] = a * cc - 2 * b * cs + next * ss;
    d[k + 1] = a * ss + 2 * b * cs + next * cc;
    e[k] = (a - next) * cs + b * (cc - ss);
    ch.cosines[k - ch.start] = c;
    ch.sines[k - ch.start] = s;
    ch.x = e[k];
    if (k + 1 < ch.end) {
        ch.z = -s * e[k + 1];
        e[k + 1] *= c;
    }
    ++ch.k;
}

// The sweep's rotations applied to M vectors of rows (4 M rows from row0) of the vectors:
// column k <- c col_k - s col_k+1, column k+1 <- s col_k + c col_k+1, for k = start..end-1.
// The new column k+1 stays in registers for the next rotation, and the M chains are
// independent.
template <int M>
void rotate_rows(double* v, int stride, int row0, int start, int end, const double* cosines,
                 const double* sines)
{
    Vec4 carried[M];
    for (int m = 0; m < M; ++m) carried[m] = load4(v + size_t(start) * stride + row0 + 4 * m);
    for (int k = start; k < end; ++k) {
        const Vec4 c = splat4(cosines[k - start]), s = splat4(sines[k - start]);
        double* column = v + size_t(k) * stride + row0;
        const double* following = column + stride;
        for (int m = 0; m < M; ++m) {
            const Vec4 b = load4(following + 4 * m);
            store4(column + 4 * m, c * carried[m] - s * b);
            carried[m] = s * carried[m] + c * b;
        }
    }
    for (int m = 0; m < M; ++m) store4(v + size_t(end) * stride + row0 + 4 * m, carried[m]);
}

// Rows in passes of at most 10 vectors (the registers AVX2 leaves for them), split evenly.
void apply_sweep(const Chase& ch)
{
    using Pass = void (*)(double*, int, int, int, int, const double*, const double*);
    static constexpr Pass passes[] = {
        rotate_rows<1>, rotate_rows<2>, rotate_rows<3>, rotate_rows<4>, rotate_rows<5>,
        rotate_rows<6>, rotate_rows<7>, rotate_rows<8>, rotate_rows<9>, rotate_rows<10>};
    constexpr int kMaxVectors = 10;
    const TridiagonalSystem& s = *ch.system;
    const int nvec = s.stride / 4;
    const int npass = (nvec + kMaxVectors - 1) / kMaxVectors;
    int done = 0;
    for (int p = 0; p < npass; ++p) {
        const int m = (nvec - done + (npass - p) - 1) / (npass - p);
        passes[m - 1](s.vectors, s.stride, 4 * done, ch.start, ch.end, ch.cosines, ch.sines);
        done += m;
    }
}

}  // namespace

void tridiagonal_qr(TridiagonalSystem* systems, int count, TridiagonalQrWorkspace& workspace)
{
    std::vector<double>& scratch = workspace.rotations_;
    int largest = 0;
    for (int i = 0; i < count; ++i) largest = std::max(largest, systems[i].n);
    if (largest == 0) {
        for (int i = 0; i < count; ++i) systems[i].converged = true;  // nothing to decompose
        return;
    }
    scratch.resize(size_t(2) * size_t(count) * size_t(largest));
    std::vector<Chase>& chases = workspace.chases_;
    chases.assign(static_cast<size_t>(count), Chase{});
    for (int i = 0; i < count; ++i) {
        Chase& ch = chases[size_t(i)];
        ch.system = &systems[i];
        ch.cosines = &scratch[size_t(2 * i) * size_t(largest)];
        ch.sines = ch.cosines + largest;
        ch.end = systems[i].n - 1;
        systems[i].converged = systems[i].n <= 1;
        ch.active = systems[i].n > 1 && scale(ch);
    }
    for (;;) {
        int longest = 0;
        for (Chase& ch : chases) {
            if (ch.active && !begin_sweep(ch)) ch.active = false;
            if (ch.active) longest = std::max(longest, ch.end - ch.start);
        }
        if (longest == 0) break;
        // One rotation of each chase in turn: their dependency chains overlap.
        for (int step = 0; step < longest; ++step) {
            for (Chase& ch : chases) {
                if (ch.active && ch.k < ch.end) chase_step(ch);
            }
        }
        for (const Chase& ch : chases) {
            if (ch.active) apply_sweep(ch);
        }
    }
    for (Chase& ch : chases) {
        TridiagonalSystem& s = *ch.system;
        for (int i = 0; i < s.n; ++i) s.diagonal[i] = std::ldexp(s.diagonal[i], ch.scale_exponent);
    }
}

}  // namespace ex2d::cpu
