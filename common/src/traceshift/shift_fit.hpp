// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file shift_fit.hpp
/// The smooth part of trace shifts: a weighted polynomial in CCD (x, y) fitted to measured
/// offsets with outliers rejected, and traces moved by it.

#include <vector>

#include "ex2d/psf.hpp"
#include "ex2d/trace_shifts.hpp"

namespace ex2d::traceshift {

/// Polynomial sum_{i<=degx, j<=degy} c_ij u^i v^j in reduced CCD coordinates
/// u = 2 x / npix_x - 1, v = 2 y / npix_y - 1 (the same space of functions as desispec's
/// monomials of x and y, better conditioned).
struct ShiftPolynomial {
    int degx = 0;
    int degy = 0;
    double npix_x = 1;
    double npix_y = 1;
    std::vector<double> coef;        ///< [(degx+1)*(degy+1)], i outer, j inner
    std::vector<double> covariance;  ///< [npar][npar] of coef
    double error_floor = 0;          ///< px added in quadrature to every error (see fit)

    int npar() const { return (degx + 1) * (degy + 1); }
    double operator()(double x, double y) const;
    /// Standard error of the polynomial's value at (x, y), from the covariance.
    double error(double x, double y) const;
};

/// Fits offsets[k].delta (those with `used` set; outliers get it cleared) with errors
/// offsets[k].error. Points further than 5 robust sigmas from the fit are rejected one pass
/// at a time; the error floor is set so that the median chi2 of the kept points is that of a
/// unit Gaussian (0.455). Fails (Status::numerical) with fewer points than parameters + 2 or
/// a singular system.
Result<ShiftPolynomial> fit_shift_polynomial(std::vector<TraceOffset>& offsets, int degx, int degy,
                                             int npix_x, int npix_y);

/// Fits like fit_shift_polynomial, lowering the degrees while the fit's error at the four CCD
/// corners the traces reach (first and last fibre, first and last wavelength) exceeds
/// `max_error` px, or the fit fails: first along y while degy > 0 and degy > degx, then
/// along x (desi_compute_trace_shifts' rule). degx and degy return the degrees used. Fails
/// (Status::numerical, naming --max-error) where even a constant's error exceeds it.
Result<ShiftPolynomial> fit_with_degree_rule(std::vector<TraceOffset>& offsets, int& degx,
                                             int& degy, double max_error,
                                             const GaussHermitePsf& psf, int nfibers);

/// Removes the offsets of every reference line (offsets sharing a wavelength) whose median
/// residual from `shift` stands out from the other lines' by more than 5 robust sigmas and
/// 0.02 px: a line the reference has and the frame lacks, or has blended with another.
/// Returns the wavelengths of the lines removed.
std::vector<double> drop_discrepant_lines(std::vector<TraceOffset>& offsets,
                                          const ShiftPolynomial& shift);

enum class TraceAxis { x, y };

/// XTRACE or YTRACE of `psf` moved by `shift` evaluated along every fibre's trace: the
/// Legendre series of the same degree fitted to trace + shift at 100 wavelengths.
LegendreTable shifted_trace(const GaussHermitePsf& psf, TraceAxis axis,
                            const ShiftPolynomial& shift);

}  // namespace ex2d::traceshift
