// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/air_vacuum.hpp"

#include <cmath>

namespace ex2d {

double air_refractive_index(double vacuum_angstrom)
{
    const double s2 = std::pow(1e4 / vacuum_angstrom, 2);  // (1/micron)^2
    return 1.0 + 8.34254e-5 + 2.406147e-2 / (130.0 - s2) + 1.5998e-4 / (38.9 - s2);
}

double vacuum_to_air(double vacuum_angstrom)
{
    return vacuum_angstrom / air_refractive_index(vacuum_angstrom);
}

double air_to_vacuum(double air_angstrom)
{
    // n varies by ~1e-8 per A, so each pass gains about eight digits.
    double vacuum = air_angstrom;
    for (int pass = 0; pass < 10; ++pass) {
        const double next = air_angstrom * air_refractive_index(vacuum);
        if (std::fabs(next - vacuum) < 1e-9) return next;
        vacuum = next;
    }
    return vacuum;
}

}  // namespace ex2d
