// SPDX-License-Identifier: BSD-3-Clause
#include "frame_meta.hpp"

#include <cstdlib>
#include <ctime>
#include <random>
#include <string>

#include <fitsio.h>

#include "../io/fits_util.hpp"

namespace ex2d::sim {

namespace {

constexpr int kFibersPerPetal = 500;
constexpr double kExposureTime = 900.0;  // s, a standard DESI dark-time science exposure
constexpr long long kTileId = 1000;
// Kitt Peak is at UTC-7: the middle of the night of NIGHT is about 06:00 UTC the next day.
constexpr double kMidNightUtcHours = 30.0;

/// Seconds since 1970-01-01 UTC of 00:00 UTC on the date YYYYMMDD.
std::time_t night_start_utc(int night)
{
    std::tm date{};
    date.tm_year = night / 10000 - 1900;
    date.tm_mon = (night / 100) % 100 - 1;
    date.tm_mday = night % 100;
    return ::timegm(&date);
}

std::string iso_time(std::time_t seconds)
{
    std::tm utc{};
    ::gmtime_r(&seconds, &utc);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
    return std::string(text) + ".000";
}

/// Writes the FIBERMAP table into an open (empty) in-memory FITS file.
int write_fibermap_hdu(fitsfile* fits, const SimulationOptions& opt, int petal,
                       const std::vector<TargetKind>& kinds)
{
    int status = 0;
    fits_create_img(fits, BYTE_IMG, 0, nullptr, &status);
    char* names[] = {const_cast<char*>("TARGETID"),   const_cast<char*>("PETAL_LOC"),
                     const_cast<char*>("DEVICE_LOC"), const_cast<char*>("LOCATION"),
                     const_cast<char*>("FIBER"),      const_cast<char*>("FIBERSTATUS"),
                     const_cast<char*>("TARGET_RA"),  const_cast<char*>("TARGET_DEC"),
                     const_cast<char*>("OBJTYPE")};
    char* forms[] = {const_cast<char*>("K"), const_cast<char*>("I"), const_cast<char*>("J"),
                     const_cast<char*>("K"), const_cast<char*>("J"), const_cast<char*>("J"),
                     const_cast<char*>("D"), const_cast<char*>("D"), const_cast<char*>("3A")};
    fits_create_tbl(fits, BINARY_TBL, kFibersPerPetal, 9, names, forms, nullptr, "FIBERMAP",
                    &status);
    long long tile_id = kTileId;
    int expid = opt.expid;
    int night = opt.night;
    fits_write_key(fits, TLONGLONG, "TILEID", &tile_id, "tile", &status);
    fits_write_key(fits, TINT, "EXPID", &expid, "exposure id", &status);
    fits_write_key(fits, TINT, "NIGHT", &night, "YYYYMMDD observing night", &status);

    // Positions scattered over a petal (a 1.6 deg wide wedge) around an arbitrary tile centre;
    // their own generator keeps the spectra independent of the fibermap.
    std::mt19937_64 sky_positions(opt.seed ^ 0x5eedf1be7a9ULL);
    std::uniform_real_distribution<double> offset(-0.8, 0.8);
    const double tile_ra = 150.0 + 36.0 * petal / 10.0;
    const double tile_dec = 30.0;
    std::vector<long long> target_id(kFibersPerPetal), location(kFibersPerPetal);
    std::vector<short> petal_loc(kFibersPerPetal, short(petal));
    std::vector<int> device_loc(kFibersPerPetal), fiber(kFibersPerPetal);
    std::vector<int> fiber_status(kFibersPerPetal, 0);
    std::vector<double> ra(kFibersPerPetal), dec(kFibersPerPetal);
    std::vector<std::string> objtype(kFibersPerPetal);
    for (int row = 0; row < kFibersPerPetal; ++row) {
        const int lit_index = row - opt.specmin;
        const bool lit = lit_index >= 0 && lit_index < int(kinds.size());
        objtype[row] = !lit ? "NON" : kinds[lit_index] == TargetKind::sky ? "SKY" : "TGT";
        fiber[row] = kFibersPerPetal * petal + row;
        // DESI petals have 543 device locations, of which 500 hold fibres.
        device_loc[row] = row + row / 12;
        location[row] = 1000LL * petal + device_loc[row];
        // Unassigned positioners carry negative TARGETIDs in DESI fibermaps.
        target_id[row] = lit ? 39627000000000000LL + 10000LL * petal + row : -(location[row] + 1);
        ra[row] = tile_ra + offset(sky_positions);
        dec[row] = tile_dec + offset(sky_positions);
    }
    std::vector<char*> objtype_ptrs;
    for (std::string& s : objtype) objtype_ptrs.push_back(s.data());
    fits_write_col(fits, TLONGLONG, 1, 1, 1, kFibersPerPetal, target_id.data(), &status);
    fits_write_col(fits, TSHORT, 2, 1, 1, kFibersPerPetal, petal_loc.data(), &status);
    fits_write_col(fits, TINT, 3, 1, 1, kFibersPerPetal, device_loc.data(), &status);
    fits_write_col(fits, TLONGLONG, 4, 1, 1, kFibersPerPetal, location.data(), &status);
    fits_write_col(fits, TINT, 5, 1, 1, kFibersPerPetal, fiber.data(), &status);
    fits_write_col(fits, TINT, 6, 1, 1, kFibersPerPetal, fiber_status.data(), &status);
    fits_write_col(fits, TDOUBLE, 7, 1, 1, kFibersPerPetal, ra.data(), &status);
    fits_write_col(fits, TDOUBLE, 8, 1, 1, kFibersPerPetal, dec.data(), &status);
    fits_write_col_str(fits, 9, 1, 1, kFibersPerPetal, objtype_ptrs.data(), &status);
    return status;
}

}  // namespace

FitsHeader make_image_header(const SimulationOptions& opt, int petal, int npix_x, int npix_y)
{
    FitsHeader h;
    const std::time_t mid_night =
        night_start_utc(opt.night) + std::time_t(kMidNightUtcHours * 3600);
    const double mjd = double(mid_night) / 86400.0 + 40587.0;  // MJD of 1970-01-01 is 40587
    h.set_string("CAMERA", opt.camera, "camera");
    h.set_int("EXPID", opt.expid, "exposure id");
    h.set_int("NIGHT", opt.night, "YYYYMMDD observing night");
    h.set_string("FLAVOR", "science", "exposure flavor");
    h.set_string("OBSTYPE", "SCIENCE", "observation type");
    h.set_double("EXPTIME", kExposureTime, "exposure time (s)");
    h.set_int("SPECGRPH", petal, "spectrograph (petal)");
    h.set_int("TILEID", kTileId, "tile");
    h.set_double("MJD-OBS", mjd, "MJD of the start of the exposure");
    // A fixed pointing (the COSMOS field), so that a barycentric correction can be computed.
    h.set_double("TARGTRA", 150.1, "target right ascension (deg)");
    h.set_double("TARGTDEC", 2.2, "target declination (deg)");
    h.set_string("DATE-OBS", iso_time(mid_night), "UTC start of the exposure");
    h.set_string("CCDSIZE", std::to_string(npix_x) + "," + std::to_string(npix_y),
                 "preproc CCD size (columns,rows)");
    h.set_string("DETECTOR", opt.camera[0] == 'b' ? "SIM-E2V" : "SIM-LBNL", "simulated detector");
    h.set_string("BUNIT", "electron", "pixel units");
    h.set_string("ORIGIN", "ex2d simulate", "simulated frame with known truth");
    return h;
}

Result<FitsTableBlob> make_fibermap(const SimulationOptions& opt, int petal,
                                    const std::vector<TargetKind>& kinds)
{
    auto bytes = fits::write_memory_file("FIBERMAP (in memory)", [&](fitsfile* fits) {
        return write_fibermap_hdu(fits, opt, petal, kinds);
    });
    if (!bytes.is_ok()) return bytes.status();
    FitsTableBlob blob;
    blob.fits_bytes = std::move(bytes).value();
    blob.nrows = kFibersPerPetal;
    return blob;
}

}  // namespace ex2d::sim
