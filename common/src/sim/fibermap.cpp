// SPDX-License-Identifier: BSD-3-Clause
// The simulated FIBERMAP: every main-survey column desispec assembles, in its order, with
// plausible values for a dark-time tile, so that frames made from it look like production's.
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "ex2d/fibermap_table.hpp"
#include "frame_meta.hpp"

namespace ex2d::sim {
namespace {

constexpr double kDegreesPerMm = 1.5 / 410.0;  // DESI: a 1.5 deg focal-plane radius on 410 mm
constexpr long long kDesiSkyBit = 1LL << 32;   // desi_mask SKY
constexpr int kFaTypeScience = 1;              // fiberassign target classes
constexpr int kFaTypeSky = 4;

/// One fibre's values, from which every column is derived.
struct Fibre {
    bool lit = false;
    TargetKind kind = TargetKind::dark;
    long long target_id = 0, location = 0;
    int fiber = 0, device_loc = 0;
    double ra = 0, dec = 0, x_mm = 0, y_mm = 0, subpriority = 0;
};

bool main_survey_column(const std::string& name)
{
    return name.rfind("CMX_", 0) != 0 && name.rfind("SV", 0) != 0;
}

/// desiutil's sky-position name: "DESI J" + RA (3.4 digits) + signed Dec (2.4 digits),
/// truncated rather than rounded.
std::string desi_name(double ra, double dec)
{
    char text[32];
    const double ra4 = std::floor(ra * 1e4) / 1e4;
    const double dec4 = std::floor(std::fabs(dec) * 1e4) / 1e4;
    std::snprintf(text, sizeof text, "DESI J%08.4f%c%07.4f", ra4, dec < 0 ? '-' : '+', dec4);
    return text;
}

/// The Legacy Surveys brick holding a position, named by its centre: RRRR then p/m then DDD.
std::string brick_name(double ra, double dec)
{
    char text[32];
    std::snprintf(text, sizeof text, "%04d%c%03d", int(ra * 10) % 3600, dec < 0 ? 'm' : 'p',
                  int(std::fabs(dec) * 10));
    return text;
}

using Value = std::variant<long long, double, std::string>;

/// The value of column `name` for fibre `f`; absent columns get zero or "".
Value column_value(const std::string& name, const Fibre& f)
{
    const bool sky = f.lit && f.kind == TargetKind::sky;
    const bool target = f.lit && !sky;
    const long long desi_target = target ? 1LL << (f.fiber % 3) : sky ? kDesiSkyBit : 0;
    const double flux = target ? (f.kind == TargetKind::bright_star ? 300.0 : 8.0) : 0.0;
    if (name == "TARGETID") return f.target_id;
    if (name == "PETAL_LOC") return (long long)(f.fiber / kFibersPerPetal);
    if (name == "DEVICE_LOC") return (long long)f.device_loc;
    if (name == "LOCATION") return f.location;
    if (name == "FIBER") return (long long)f.fiber;
    if (name == "TARGET_RA" || name == "PLATE_RA") return f.ra;
    if (name == "TARGET_DEC" || name == "PLATE_DEC") return f.dec;
    if (name == "FIBER_RA") return f.ra + 1e-6;
    if (name == "FIBER_DEC") return f.dec - 1e-6;
    if (name == "DESINAME") return f.lit ? desi_name(f.ra, f.dec) : std::string();
    if (name == "OBJTYPE") return std::string(!f.lit ? "NON" : sky ? "SKY" : "TGT");
    if (name == "FIBERASSIGN_X" || name == "FIBER_X") return f.x_mm;
    if (name == "FIBERASSIGN_Y" || name == "FIBER_Y") return f.y_mm;
    if (name == "DELTA_X" || name == "DELTA_Y") return 0.002;
    if (name == "NUM_ITER") return 2LL;
    if (name == "EXPTIME") return kExposureTime;
    if (name == "LAMBDA_REF") return 5400.0;
    if (name == "REF_EPOCH") return 2015.5;
    if (name == "DESI_TARGET" || name == "FA_TARGET") return desi_target;
    if (name == "FA_TYPE") return (long long)(target ? kFaTypeScience : sky ? kFaTypeSky : 0);
    if (name == "PRIORITY" || name == "PRIORITY_INIT") return target ? 3000LL : 0LL;
    if (name == "NUMOBS_INIT") return target ? 1LL : 0LL;
    if (name == "SUBPRIORITY") return f.subpriority;
    if (name == "OBSCONDITIONS") return f.lit ? 1LL : 0LL;  // DARK
    if (name == "RELEASE") return target ? 9010LL : 0LL;    // Legacy Surveys DR9, south
    if (name == "BRICKNAME") return f.lit ? brick_name(f.ra, f.dec) : std::string();
    if (name == "MORPHTYPE") return std::string(!target ? "" : flux > 100 ? "PSF" : "EXP");
    if (name == "PHOTSYS") return std::string(target ? "S" : "");
    if (name == "EBV") return 0.02;
    if (name.rfind("FLUX_IVAR_", 0) == 0) return target ? 100.0 : 0.0;
    if (name.rfind("FLUX_", 0) == 0) return flux;
    if (name.rfind("FIBERFLUX_", 0) == 0 || name.rfind("FIBERTOTFLUX_", 0) == 0) {
        return 0.7 * flux;  // a point source loses about 30% of its light outside a fibre
    }
    if (name == "SHAPE_R") return target && flux < 100 ? 0.5 : 0.0;
    if (name == "SERSIC") return target ? (flux < 100 ? 1.0 : 0.0) : 0.0;
    if (name == "REF_ID") return -1LL;
    return 0LL;
}

/// Column `spec`'s value for every fibre: text where its TFORM is, else the numbers
/// column_value gives (CFITSIO converts them to the column's own type).
FibermapColumnValues column_values(const FibermapColumn& spec, const std::vector<Fibre>& fibres)
{
    const std::string& name = spec.name;
    if (spec.tform.back() == 'A') {
        std::vector<std::string> text;
        text.reserve(fibres.size());
        for (const Fibre& f : fibres) {
            const Value v = column_value(name, f);
            text.push_back(std::holds_alternative<std::string>(v) ? std::get<std::string>(v) : "");
        }
        return {spec, std::move(text)};
    }
    if (std::holds_alternative<double>(column_value(name, fibres[0]))) {
        std::vector<double> numbers;
        numbers.reserve(fibres.size());
        for (const Fibre& f : fibres) numbers.push_back(std::get<double>(column_value(name, f)));
        return {spec, std::move(numbers)};
    }
    std::vector<long long> numbers;
    numbers.reserve(fibres.size());
    for (const Fibre& f : fibres) numbers.push_back(std::get<long long>(column_value(name, f)));
    return {spec, std::move(numbers)};
}

std::vector<Fibre> petal_fibres(const SimulationOptions& opt, int petal,
                                const std::vector<TargetKind>& kinds)
{
    // Positions scattered over a petal (a 1.6 deg wide wedge) around an arbitrary tile centre;
    // their own generator keeps the spectra independent of the fibermap.
    std::mt19937_64 sky_positions(opt.seed ^ 0x5eedf1be7a9ULL);
    std::mt19937_64 subpriorities(opt.seed ^ 0x5ab9a1e77ULL);
    std::uniform_real_distribution<double> offset(-0.8, 0.8), unit(0.0, 1.0);
    const double tile_ra = 150.0 + 36.0 * petal / 10.0;
    const double tile_dec = 30.0;
    std::vector<Fibre> fibres(kFibersPerPetal);
    for (int row = 0; row < kFibersPerPetal; ++row) {
        Fibre& f = fibres[row];
        const int lit_index = row - opt.specmin;
        f.lit = lit_index >= 0 && lit_index < int(kinds.size());
        if (f.lit) f.kind = kinds[lit_index];
        f.fiber = kFibersPerPetal * petal + row;
        // DESI petals have 543 device locations, of which 500 hold fibres.
        f.device_loc = row + row / 12;
        f.location = 1000LL * petal + f.device_loc;
        // Unassigned positioners carry negative TARGETIDs in DESI fibermaps.
        f.target_id = f.lit ? 39627000000000000LL + 10000LL * petal + row : -(f.location + 1);
        const double dra = offset(sky_positions);
        const double ddec = offset(sky_positions);
        f.ra = tile_ra + dra;
        f.dec = tile_dec + ddec;
        f.x_mm = dra * std::cos(tile_dec * M_PI / 180.0) / kDegreesPerMm;
        f.y_mm = ddec / kDegreesPerMm;
        f.subpriority = unit(subpriorities);
    }
    return fibres;
}

}  // namespace

Result<FitsTableBlob> make_fibermap(const SimulationOptions& opt, int petal,
                                    const std::vector<TargetKind>& kinds)
{
    const std::vector<Fibre> fibres = petal_fibres(opt, petal, kinds);
    std::vector<FibermapColumnValues> columns;
    for (const FibermapColumn& c : builtin_fibermap_columns().columns) {
        if (main_survey_column(c.name)) columns.push_back(column_values(c, fibres));
    }
    FitsHeader header;
    header.set_int("TILEID", kTileId, "tile");
    header.set_int("EXPID", opt.expid, "exposure id");
    header.set_int("NIGHT", opt.night, "YYYYMMDD observing night");
    return make_fibermap_table(columns, kFibersPerPetal, header, "FIBERMAP (in memory)");
}

}  // namespace ex2d::sim
