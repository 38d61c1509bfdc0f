// SPDX-License-Identifier: BSD-3-Clause
// The simulator's lines are at vacuum wavelengths, as DESI's (issue 31, item 1): the [O I]
// sky line comes out of a simulated and extracted frame at 6302.05 A, not at 6300.30 (air).
#include <cmath>

#include <gtest/gtest.h>

#include "ex2d/air_vacuum.hpp"
#include "ex2d/synthetic_psf.hpp"
#include "sim_extract.hpp"

namespace ex2d {
namespace {

/// Continuum-subtracted flux-weighted wavelength of the line within +-`half` A of `guess`,
/// summed over every fibre; the continuum is the mean 10-20 A to each side.
double line_centroid(const ExtractedFrame& frame, double guess, double half)
{
    double sum = 0, moment = 0;
    for (int s = 0; s < frame.nspec; ++s) {
        const double* flux = frame.flux.data() + size_t(s) * frame.nwave;
        double cont = 0;
        int ncont = 0;
        for (int i = 0; i < frame.nwave; ++i) {
            const double d = std::fabs(frame.wave[i] - guess);
            if (d > 10 && d < 20) {
                cont += flux[i];
                ++ncont;
            }
        }
        cont /= ncont;
        for (int i = 0; i < frame.nwave; ++i) {
            if (std::fabs(frame.wave[i] - guess) > half) continue;
            sum += flux[i] - cont;
            moment += (flux[i] - cont) * frame.wave[i];
        }
    }
    return moment / sum;
}

TEST(VacuumLines, OxygenSkyLineAtItsVacuumWavelength)
{
    const GaussHermitePsf psf = make_synthetic_psf(Arm::r, 0);
    ExtractionOptions opt = test::r_grid_options(100, 25);
    opt.wmin = 6260.0;
    opt.wmax = 6340.0;
    const test::SimExtract r = test::simulate_and_extract(psf, opt, 5);
    const double vacuum = air_to_vacuum(6300.304);
    const double centroid = line_centroid(r.frame, vacuum, 4.0);
    std::printf("[O I] centroid %.4f A (vacuum %.4f, air 6300.304)\n", centroid, vacuum);
    EXPECT_NEAR(centroid, vacuum, 0.03);
}

}  // namespace
}  // namespace ex2d
