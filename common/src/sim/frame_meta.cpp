// SPDX-License-Identifier: BSD-3-Clause
#include "frame_meta.hpp"

#include <cstdlib>
#include <ctime>
#include <string>

namespace ex2d::sim {

namespace {

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
    h.set_string("FLAVOR", opt.flat ? "flat" : opt.arc ? "arc" : "science", "exposure flavor");
    h.set_string("OBSTYPE", opt.flat ? "FLAT" : opt.arc ? "ARC" : "SCIENCE", "observation type");
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

}  // namespace ex2d::sim
