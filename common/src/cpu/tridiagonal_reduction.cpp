// SPDX-License-Identifier: BSD-3-Clause
#include "tridiagonal_reduction.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "vector_ops.hpp"

namespace ex2d::cpu {

namespace {

// Entries are scaled by a power of two (exact) when the largest lies outside this range, so
// that the sum of a column's squares neither overflows nor loses digits to underflow.
constexpr double kLargestSafe = 0x1p500;
constexpr double kSmallestSafe = 0x1p-450;

double horizontal_sum(Vec4 v)
{
    return (v[0] + v[1]) + (v[2] + v[3]);
}

// The working copy, column-major with leading dimension ld and ld columns: column j holds A's
// lower triangle from row j and, in rows j & ~3 .. j-1, the entries above the diagonal that
// share its aligned four-row group, so that every four-column diagonal block is full. Rows
// and columns n..ld-1 are zero. Returns the largest |entry| (NaN entries are copied, not
// counted).
double load_symmetric(int n, const double* lower, double* a, int ld)
{
    std::fill(a, a + std::size_t(ld) * ld, 0.0);
    for (int j = 0; j < n; ++j) {
        double* col = a + std::size_t(j) * ld;
        for (int i = j & ~3; i < j; ++i) col[i] = lower[j + std::size_t(i) * n];
        std::copy(lower + std::size_t(j) * n + j, lower + std::size_t(j + 1) * n, col + j);
    }
    Vec4 high{}, low{};
    for (std::size_t i = 0; i < std::size_t(ld) * ld; i += 4) {
        const Vec4 x = load4(a + i);
        high = x > high ? x : high;
        low = x < low ? x : low;
    }
    const double high_max = std::max(std::max(high[0], high[1]), std::max(high[2], high[3]));
    const double low_min = std::min(std::min(low[0], low[1]), std::min(low[2], low[3]));
    return std::max(high_max, -low_min);
}

// Householder vector v (v[b] = 1, zero outside rows b..n-1) with (I - tau v v^T) x = alpha e_b
// for x = column k below its diagonal, b = k + 1 (GVL algorithm 5.1.1, LAPACK dlarfg's signs:
// alpha = -sign(x_b) |x|). Returns tau, 0 when x is already a multiple of e_b; alpha goes into
// *alpha.
double make_reflector(int k, const double* col, int ld, double* v, double* alpha)
{
    const int b = k + 1, first = b & ~3;
    const double head = col[b];
    std::fill(v + first, v + b + 1, 0.0);
    std::copy(col + b + 1, col + ld, v + b + 1);
    Vec4 squares{};
    for (int i = first; i < ld; i += 4) squares += load4(v + i) * load4(v + i);
    const double tail = horizontal_sum(squares);
    if (tail == 0) {
        std::fill(v + first, v + ld, 0.0);
        *alpha = head;
        return 0;
    }
    const double norm = std::sqrt(head * head + tail);
    *alpha = head > 0 ? -norm : norm;
    const double pivot = head - *alpha;
    const Vec4 inv_pivot = splat4(1.0 / pivot);
    for (int i = first; i < ld; i += 4) store4(v + i, load4(v + i) * inv_pivot);
    v[b] = 1.0;
    return -pivot / *alpha;
}

// w = tau A22 v - (tau^2 / 2)(v^T A22 v) v, the vector of the rank-2 update A22 - v w^T - w v^T
// (GVL eq. 8.3.2), from the lower block triangle of A22 (rows and columns `first`..ld-1; v and
// the rows of w before row b are zero). Each four-column block contributes its diagonal block
// times v, dot products of its columns with v below that block (into w of its own columns)
// and its columns times v's entries (into w of the rows below): A's lower triangle is read
// once for both halves of the symmetric product.
void update_vector(int b, int ld, const double* a, const double* v, double tau, double* w)
{
    const int first = b & ~3;
    std::fill(w + first, w + ld, 0.0);
    for (int j0 = first; j0 < ld; j0 += 4) {
        const double* c0 = a + std::size_t(j0) * ld;
        const double* c1 = c0 + ld;
        const double* c2 = c1 + ld;
        const double* c3 = c2 + ld;
        const Vec4 v0 = splat4(v[j0]), v1 = splat4(v[j0 + 1]);
        const Vec4 v2 = splat4(v[j0 + 2]), v3 = splat4(v[j0 + 3]);
        Vec4 own =
            load4(c0 + j0) * v0 + load4(c1 + j0) * v1 + load4(c2 + j0) * v2 + load4(c3 + j0) * v3;
        Vec4 dot0{}, dot1{}, dot2{}, dot3{};
        for (int i = j0 + 4; i < ld; i += 4) {
            const Vec4 a0 = load4(c0 + i), a1 = load4(c1 + i), a2 = load4(c2 + i),
                       a3 = load4(c3 + i);
            const Vec4 vi = load4(v + i);
            dot0 += a0 * vi;
            dot1 += a1 * vi;
            dot2 += a2 * vi;
            dot3 += a3 * vi;
            store4(w + i, load4(w + i) + a0 * v0 + a1 * v1 + a2 * v2 + a3 * v3);
        }
        own += Vec4{horizontal_sum(dot0), horizontal_sum(dot1), horizontal_sum(dot2),
                    horizontal_sum(dot3)};
        store4(w + j0, load4(w + j0) + own);
    }
    // Rows before b are not in A22 (the columns there, zero in v, gave dot products): zero, so
    // that the update leaves the reduced rows and columns as they are.
    std::fill(w + first, w + b, 0.0);
    const Vec4 tau4 = splat4(tau);
    Vec4 wv{};
    for (int i = first; i < ld; i += 4) {
        const Vec4 p = tau4 * load4(w + i);
        store4(w + i, p);
        wv += p * load4(v + i);
    }
    const Vec4 shift = splat4(0.5 * tau * horizontal_sum(wv));
    for (int i = first; i < ld; i += 4) store4(w + i, load4(w + i) - shift * load4(v + i));
}

// A22 -= v w^T + w v^T over the lower block triangle (the diagonal blocks whole, so they stay
// symmetric), four columns a pass.
void rank2_update(int b, int ld, double* a, const double* v, const double* w)
{
    for (int j0 = b & ~3; j0 < ld; j0 += 4) {
        double* c0 = a + std::size_t(j0) * ld;
        double* c1 = c0 + ld;
        double* c2 = c1 + ld;
        double* c3 = c2 + ld;
        const Vec4 v0 = splat4(v[j0]), v1 = splat4(v[j0 + 1]);
        const Vec4 v2 = splat4(v[j0 + 2]), v3 = splat4(v[j0 + 3]);
        const Vec4 w0 = splat4(w[j0]), w1 = splat4(w[j0 + 1]);
        const Vec4 w2 = splat4(w[j0 + 2]), w3 = splat4(w[j0 + 3]);
        for (int i = j0; i < ld; i += 4) {
            const Vec4 vi = load4(v + i), wi = load4(w + i);
            store4(c0 + i, load4(c0 + i) - vi * w0 - wi * v0);
            store4(c1 + i, load4(c1 + i) - vi * w1 - wi * v1);
            store4(c2 + i, load4(c2 + i) - vi * w2 - wi * v2);
            store4(c3 + i, load4(c3 + i) - vi * w3 - wi * v3);
        }
    }
}

// Q = H_0 H_1 ... H_{n-3} by backward accumulation (GVL section 5.1.6): starting from I,
// H_k acts on rows and columns k+1.. only. Two reflectors a pass over Q's columns: with
// s1 = v_k . q and s2 = v_m . q - tau_k s1 (v_m . v_k) for m = k - 1,
// H_m H_k q = q - tau_k s1 v_k - tau_m s2 v_m.
void form_q(int n, const double* reflectors, const double* tau, double* q, int ld)
{
    std::fill(q, q + std::size_t(ld) * n, 0.0);
    for (int j = 0; j < n; ++j) q[std::size_t(j) * ld + j] = 1.0;
    int k = n - 3;
    for (; k >= 1; k -= 2) {
        const double tau_k = tau[k], tau_m = tau[k - 1];
        const double* vk = reflectors + std::size_t(k) * ld;
        const double* vm = vk - ld;
        const int first = k & ~3;  // v_m starts at row k; column k is e_k until H_m
        Vec4 cross{};
        for (int i = first; i < ld; i += 4) cross += load4(vk + i) * load4(vm + i);
        const double vm_vk = horizontal_sum(cross);
        for (int j = k; j < n; j += 4) {
            const int width = std::min(4, n - j);
            double* col[4];
            for (int c = 0; c < 4; ++c) col[c] = q + std::size_t(j + std::min(c, width - 1)) * ld;
            Vec4 sk[4] = {}, sm[4] = {};
            for (int i = first; i < ld; i += 4) {
                const Vec4 x = load4(vk + i), y = load4(vm + i);
                for (int c = 0; c < 4; ++c) {
                    const Vec4 qc = load4(col[c] + i);
                    sk[c] += x * qc;
                    sm[c] += y * qc;
                }
            }
            Vec4 tk[4], tm[4];
            for (int c = 0; c < 4; ++c) {
                const double s1 = horizontal_sum(sk[c]);
                const double s2 = horizontal_sum(sm[c]) - tau_k * s1 * vm_vk;
                tk[c] = splat4(tau_k * s1);
                tm[c] = splat4(tau_m * s2);
            }
            for (int i = first; i < ld; i += 4) {
                const Vec4 x = load4(vk + i), y = load4(vm + i);
                for (int c = 0; c < width; ++c)
                    store4(col[c] + i, load4(col[c] + i) - x * tk[c] - y * tm[c]);
            }
        }
    }
    for (; k >= 0; --k) {  // the last reflector when n - 2 is odd
        const double* v = reflectors + std::size_t(k) * ld;
        const int first = (k + 1) & ~3;
        for (int j = k + 1; j < n; ++j) {
            double* col = q + std::size_t(j) * ld;
            Vec4 s{};
            for (int i = first; i < ld; i += 4) s += load4(v + i) * load4(col + i);
            const Vec4 t = splat4(tau[k] * horizontal_sum(s));
            for (int i = first; i < ld; i += 4) store4(col + i, load4(col + i) - t * load4(v + i));
        }
    }
}

}  // namespace

void reduce_to_tridiagonal(int n, const double* lower, double* diagonal, double* off_diagonal,
                           double* q, int ldq, TridiagonalReductionWorkspace& ws)
{
    const int ld = ldq;
    const std::size_t square = std::size_t(ld) * ld;
    if (ws.matrix.size() < square) {
        ws.matrix.resize(square);
        ws.reflectors.resize(square);
        ws.tau.resize(std::size_t(ld));
        ws.product.resize(std::size_t(ld));
    }
    double* a = ws.matrix.data();
    const double largest = load_symmetric(n, lower, a, ld);
    int exponent = 0;
    if (largest > kLargestSafe || (largest > 0 && largest < kSmallestSafe)) {
        std::frexp(largest, &exponent);
        const double factor = std::ldexp(1.0, -exponent);
        for (std::size_t i = 0; i < square; ++i) a[i] *= factor;
    }
    // Rows before each reflector's aligned start stay zero from here on.
    std::fill(ws.reflectors.begin(), ws.reflectors.begin() + square, 0.0);
    for (int k = 0; k + 2 < n; ++k) {
        const double* col = a + std::size_t(k) * ld;
        double* v = &ws.reflectors[std::size_t(k) * ld];
        diagonal[k] = col[k];
        const double tau = make_reflector(k, col, ld, v, &off_diagonal[k]);
        ws.tau[std::size_t(k)] = tau;
        if (tau == 0) continue;
        update_vector(k + 1, ld, a, v, tau, ws.product.data());
        rank2_update(k + 1, ld, a, v, ws.product.data());
    }
    if (n >= 2) {
        diagonal[n - 2] = a[std::size_t(n - 2) * ld + n - 2];
        off_diagonal[n - 2] = a[std::size_t(n - 2) * ld + n - 1];
    }
    diagonal[n - 1] = a[std::size_t(n - 1) * ld + n - 1];
    if (exponent != 0) {
        for (int i = 0; i < n; ++i) diagonal[i] = std::ldexp(diagonal[i], exponent);
        for (int i = 0; i + 1 < n; ++i) off_diagonal[i] = std::ldexp(off_diagonal[i], exponent);
    }
    form_q(n, ws.reflectors.data(), ws.tau.data(), q, ld);
}

}  // namespace ex2d::cpu
