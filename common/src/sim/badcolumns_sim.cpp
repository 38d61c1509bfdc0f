// SPDX-License-Identifier: BSD-3-Clause
#include <algorithm>
#include <cmath>

#include "ex2d/simulate.hpp"

namespace ex2d {

BadColumns simulated_badcolumns(const GaussHermitePsf& psf, const SimulationOptions& opt)
{
    BadColumns table;
    table.source = "simulation";
    const int nspec = opt.nspec >= 0 ? opt.nspec : psf.nspec() - opt.specmin;
    if (nspec <= 0) return table;
    const double wmin = opt.wmin > 0 ? opt.wmin : psf.xtrace.wavemin;
    const double wmax = opt.wmax > 0 ? opt.wmax : psf.xtrace.wavemax;
    const double mid_wave = 0.5 * (wmin + wmax);
    auto x_of = [&](int offset) { return psf.xtrace.eval(opt.specmin + offset, mid_wave); };
    // CCD column indices are integers in desispec's tables.
    table.column.push_back(std::round(x_of(nspec / 10)));
    table.elec_per_sec.push_back(1.0);
    if (nspec >= 2) {
        const int middle = std::min(nspec / 2, nspec - 2);
        table.column.push_back(std::round(0.5 * (x_of(middle) + x_of(middle + 1))));
        table.elec_per_sec.push_back(0.3);
    }
    table.column.push_back(std::round(x_of(8 * nspec / 10)));
    table.elec_per_sec.push_back(0.002);
    return table;
}

}  // namespace ex2d
