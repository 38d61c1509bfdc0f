// SPDX-License-Identifier: BSD-3-Clause
// desispec's bad-column rule (py/desispec/badcolumn.py; datamodel 4.7): the bias a bad column
// puts on a trace falls off as 1 / (1 + |dx/2|^5) and is cut at 4.5 pixels.
#include "ex2d/badcolumns.hpp"

#include <cmath>

namespace ex2d {

std::int64_t badamp_fibermask(char arm)
{
    switch (arm) {
        case 'b':
            return std::int64_t(1) << 22;
        case 'r':
            return std::int64_t(1) << 23;
        case 'z':
            return std::int64_t(1) << 24;
        default:
            throw Error(std::string("badamp_fibermask: no arm '") + arm + "'");
    }
}

double badcolumn_flux_bias(double dx)
{
    const double distance = std::abs(dx);
    if (!(distance < 4.5)) return 0.0;
    return 1.1 / (1.0 + std::pow(distance / 2.0, 5));
}

Result<BadColumnOutcome> apply_badcolumn_mask(const BadColumns& table, BadColumnFrame frame,
                                              const BadColumnThresholds& thresholds)
{
    if (frame.xtrace == nullptr || frame.wave == nullptr || frame.mask == nullptr ||
        frame.fibermap == nullptr || frame.nspec < 0 || frame.specmin < 0 ||
        frame.specmin + frame.nspec > frame.xtrace->nfiber) {
        throw Error("apply_badcolumn_mask: frame does not fit the trace set");
    }
    const std::int64_t badamp = badamp_fibermask(frame.arm);
    BadColumnOutcome outcome;
    // desispec returns without touching the frame when the table is empty.
    if (table.column.empty()) return outcome;
    if (!frame.fibermap->empty()) {
        auto fiberstatus = read_int_column(*frame.fibermap, "FIBERSTATUS");
        if (!fiberstatus.is_ok() ||
            fiberstatus.value().size() < std::size_t(frame.specmin) + std::size_t(frame.nspec)) {
            return Status::format(table.source + ": cannot mark fibres in FIBERMAP: " +
                                  (fiberstatus.is_ok()
                                       ? "it has fewer rows than the frame's spectra"
                                       : fiberstatus.status().message()));
        }
    }
    const int nwave = int(frame.wave->size());
    std::vector<std::uint32_t> added(std::size_t(frame.nspec) * std::size_t(nwave), 0);
    std::vector<double> x(std::size_t(nwave), 0.0);
    std::vector<long long> fiberstatus_bits(std::size_t(frame.nspec), 0);
    for (int i = 0; i < frame.nspec; ++i) {
        frame.xtrace->eval_many(frame.specmin + i, frame.wave->data(), nwave, x.data());
        std::uint32_t* bins = added.data() + std::size_t(i) * std::size_t(nwave);
        for (std::size_t c = 0; c < table.column.size(); ++c) {
            for (int w = 0; w < nwave; ++w) {
                const double bias = table.elec_per_sec[c] *
                                    badcolumn_flux_bias(x[std::size_t(w)] - table.column[c]);
                if (std::abs(bias) >= thresholds.elec_per_sec) bins[w] = kSpecmaskBadColumn;
            }
        }
        // The fraction counts BADCOLUMN in the resulting mask, as desispec does.
        const std::uint32_t* existing = frame.mask + std::size_t(i) * std::size_t(nwave);
        long long marked = 0;
        long long added_here = 0;
        for (int w = 0; w < nwave; ++w) {
            added_here += (bins[w] & ~existing[w]) != 0;
            marked += ((bins[w] | existing[w]) & kSpecmaskBadColumn) != 0;
        }
        outcome.masked_bins += added_here;
        if (added_here > 0) ++outcome.masked_fibers;
        if (double(marked) >= thresholds.fiber_fraction * double(nwave)) {
            fiberstatus_bits[std::size_t(i)] = badamp;
            outcome.flagged_spectra.push_back(i);
        }
    }
    if (!outcome.flagged_spectra.empty() && !frame.fibermap->empty()) {
        const Status updated =
            or_int_column_bits(*frame.fibermap, "FIBERSTATUS", frame.specmin, fiberstatus_bits);
        if (!updated.is_ok()) {
            return Status(updated.code(),
                          table.source + ": cannot set FIBERMAP FIBERSTATUS: " + updated.message());
        }
    }
    for (std::size_t k = 0; k < added.size(); ++k) frame.mask[k] |= added[k];
    return outcome;
}

}  // namespace ex2d
