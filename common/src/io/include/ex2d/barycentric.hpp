// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file barycentric.hpp
/// The barycentric wavelength correction of `desi_extract_spectra --barycentric-correction`
/// (desispec's heliocentric correction): one factor f = 1 + v/c per exposure,
/// where v is astropy's `SkyCoord.radial_velocity_correction(kind='barycentric')` for the
/// exposure's pointing, at mid-exposure, seen from Kitt Peak. desispec extracts on the grid
/// (wmin, wmax, dw) / f, labels the frame with the uncorrected grid and writes HELIOCOR = f.
/// Computed with ERFA (the library inside astropy), offline: no IERS tables, no JPL ephemeris.

#include <string>

#include "ex2d/fits_header.hpp"
#include "ex2d/fits_table.hpp"
#include "ex2d/status.hpp"

namespace ex2d {

/// An observatory, geodetic on the WGS84 ellipsoid (astropy EarthLocation.from_geodetic).
struct GeodeticSite {
    double longitude_deg = 0;  ///< east positive
    double latitude_deg = 0;
    double height_m = 0;
};

/// The Mayall telescope as desispec.heliocentric defines it: lat 31.96403,
/// lon -111.59989, height 2097 m. (astropy's own 'kpno' site entry is not used by desispec
/// and needs the online site registry.)
inline constexpr GeodeticSite kpno_site{-111.59989, 31.96403, 2097.0};

/// Speed of light (km/s), exact (SI definition), as astropy.constants.c.
inline constexpr double speed_of_light_km_s = 299792.458;

struct BarycentricCorrection {
    double velocity_km_s = 0;  ///< v: add to an observed radial velocity to get a barycentric one
    double factor = 1;         ///< f = 1 + v/c: barycentric wavelength = f * observed wavelength
};

/// The correction for a fixed ICRS direction (no proper motion, no parallax, as desispec
/// passes bare RA/DEC) at UTC time `mjd_utc`, observed from `site`.
/// Bad input (non-finite values, |dec| > 90, an MJD that ERFA cannot convert) is
/// invalid_argument, as are dates outside 1960-2100. Agrees with astropy 5.2 to < 0.01 m/s
/// on the test cases; UT1 - UTC and polar motion, neglected, bound the error at 0.03 m/s.
Result<BarycentricCorrection> barycentric_correction(double ra_deg, double dec_deg, double mjd_utc,
                                                     const GeodeticSite& site = kpno_site);

/// What desispec takes from a header for the correction (extract.py:87-134).
struct ExposurePointing {
    double ra_deg = 0;
    double dec_deg = 0;
    double mjd_obs = 0;  ///< exposure start (MJD-OBS, else MJD)
    double exptime_s = 0;
    double mid_mjd = 0;  ///< mjd_obs + exptime / 2 / 86400: the time the correction is for
    std::string source;  ///< "IMAGE" or "FIBERMAP": the header the values came from
    std::string ra_key;  ///< the keyword RA came from, e.g. "TARGTRA"
    std::string dec_key;
};

/// desispec's choice of header and keywords: the IMAGE header when it has RA or TARGTRA,
/// else the FIBERMAP header; RA = TARGTRA > SKYRA > TELRA > RA, Dec = TARGTDEC > SKYDEC >
/// TELDEC > DEC; start MJD-OBS else MJD; EXPTIME. A missing keyword is a format error.
Result<ExposurePointing> exposure_pointing(const FitsHeader& image_header,
                                           const FitsHeader& fibermap_header);

/// exposure_pointing() then barycentric_correction() at mid-exposure from Kitt Peak, with the
/// FIBERMAP header read from the table blob (only when the IMAGE header lacks a pointing).
Result<BarycentricCorrection> exposure_barycentric_correction(const FitsHeader& image_header,
                                                              const FitsTableBlob& fibermap);

/// Writes HELIOCOR = factor into a frame header as desispec does (extract.py:342-343): only
/// when the factor differs from 1, without a comment.
void set_heliocor(FitsHeader& header, double factor);

}  // namespace ex2d
