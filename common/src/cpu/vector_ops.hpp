// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Four doubles in one vector register where the target has them (AVX2 in the portable build;
// the compiler splits them into halves on narrower targets), for the CPU kernels whose
// shapes are too small for BLAS to pay.

#include <cstring>

namespace ex2d::cpu {

using Vec4 = double __attribute__((vector_size(32)));

inline Vec4 load4(const double* p)
{
    Vec4 v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

inline void store4(double* p, Vec4 v)
{
    std::memcpy(p, &v, sizeof v);
}

inline Vec4 splat4(double x)
{
    return Vec4{x, x, x, x};
}

/// Lanes to keep (all bits set) or drop (zero), for keep_lanes().
using Vec4Mask = long long __attribute__((vector_size(32)));

/// The last `count` (0 to 4) of a vector's four lanes.
inline Vec4Mask last_lanes(int count)
{
    return Vec4Mask{count >= 4 ? -1LL : 0, count >= 3 ? -1LL : 0, count >= 2 ? -1LL : 0,
                    count >= 1 ? -1LL : 0};
}

/// x in the lanes that `keep` keeps, +0.0 in the others, whatever x holds there (NaN too).
inline Vec4 keep_lanes(Vec4Mask keep, Vec4 x)
{
    return reinterpret_cast<Vec4>(reinterpret_cast<Vec4Mask>(x) & keep);
}

/// sum_k a[k] b[k] in four interleaved partial sums (a fixed order, whatever the target).
inline double dot(const double* a, const double* b, int n)
{
    Vec4 even{}, odd{};
    int k = 0;
    for (; k + 8 <= n; k += 8) {
        even += load4(a + k) * load4(b + k);
        odd += load4(a + k + 4) * load4(b + k + 4);
    }
    const Vec4 sums = even + odd;
    double sum = (sums[0] + sums[1]) + (sums[2] + sums[3]);
    for (; k < n; ++k) sum += a[k] * b[k];
    return sum;
}

}  // namespace ex2d::cpu
