// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The Legendre series of DESI's PSF tables, shared by the host evaluation (psf.cpp) and the
// CUDA spot kernel so that both backends evaluate traces and PSF parameters identically.

#if defined(__CUDACC__)
#define EX2D_HOST_DEVICE __host__ __device__
#else
#define EX2D_HOST_DEVICE
#endif

namespace ex2d::detail {

/// P_{k+1}(u) from P_k = p and P_{k-1} = p_prev: (k+1) P_{k+1} = (2k+1) u P_k - k P_{k-1}.
EX2D_HOST_DEVICE inline double legendre_next(int k, double u, double p, double p_prev)
{
    return ((2 * k + 1) * u * p - k * p_prev) / (k + 1);
}

/// sum_k c[k] P_k(u) by the three-term recurrence (legendre_next).
EX2D_HOST_DEVICE inline double legendre_sum(const double* c, int ncoef, double u)
{
    double p_prev = 1.0;
    double sum = c[0];
    if (ncoef == 1) return sum;
    double p = u;
    sum += c[1] * p;
    for (int k = 1; k + 1 < ncoef; ++k) {
        const double p_next = legendre_next(k, u, p, p_prev);
        p_prev = p;
        p = p_next;
        sum += c[k + 1] * p;
    }
    return sum;
}

/// Reduced wavelength u = (w - wavemin) * 2 / (wavemax - wavemin) - 1 (no clipping).
EX2D_HOST_DEVICE inline double reduced_wavelength(double wave, double wavemin, double wavemax)
{
    return (wave - wavemin) * (2.0 / (wavemax - wavemin)) - 1.0;
}

}  // namespace ex2d::detail
