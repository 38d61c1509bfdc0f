// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/barycentric.hpp"

#include <cmath>
#include <optional>
#include <sstream>

#include <erfa.h>
#include <erfam.h>

namespace ex2d {

namespace {

constexpr double kMjdZero = 2400000.5;         // JD of MJD 0 (ERFA two-part dates)
constexpr double kSpeedOfLight = 299792458.0;  // m/s
constexpr double kAuPerDayToMs = ERFA_DAU / ERFA_DAYSEC;
// Dates accepted: UTC exists from 1960 (eraDat only flags earlier years as "dubious" and
// returns 0 s), and eraEpv00 is fitted for 1900-2100.
constexpr double kMjd1960 = 36934.0;
constexpr double kMjd2100 = 88069.0;

// Earth's rotation rate as astropy (coordinates/earth.py OMEGA_EARTH): 1.00273781191135448
// cycles per day, about the Celestial Intermediate Pole.
constexpr double kOmegaEarth = ERFA_D2PI * 1.00273781191135448 / ERFA_DAYSEC;  // rad/s

// Gravitational parameters (m^3/s^2) of astropy 5.2 EarthLocation.gravitational_redshift:
// IAU 2015 nominal GM_sun, GM_jup, GM_earth (astropy.constants iau2015) and the Moon as
// G (CODATA 2018) * 7.34767309e22 kg.
constexpr double kGmSun = 1.3271244e20;
constexpr double kGmJupiter = 1.2668653e17;
constexpr double kGmMoon = 6.67430e-11 * 7.34767309e22;
constexpr double kGmEarth = 3.986004e14;

using Vec3 = double[3];

double dot(const Vec3 a, const Vec3 b)
{
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

double distance(const Vec3 a, const Vec3 b)
{
    const double d[3] = {a[0] - b[0], a[1] - b[1], a[2] - b[2]};
    return std::sqrt(dot(d, d));
}

std::string describe(double ra_deg, double dec_deg, double mjd)
{
    std::ostringstream s;
    s.precision(12);
    s << "barycentric correction (RA " << ra_deg << ", DEC " << dec_deg << ", MJD " << mjd << ")";
    return s.str();
}

/// TT and TDB as ERFA two-part Julian dates, and UT1 taken equal to UTC.
struct Times {
    double tt1 = 0, tt2 = 0;
    double tdb1 = 0, tdb2 = 0;
    double ut1_1 = 0, ut1_2 = 0;
};

// UTC -> TAI -> TT with ERFA's leap-second table (eraDat), then TDB = TT + eraDtdb at the
// geocentre, as astropy Time.tdb does for a Time without location. UT1 - UTC (|DUT1| < 0.9 s,
// IERS data) is neglected: it turns the site's 0.4 km/s rotation velocity by at most 6.6e-5 rad,
// i.e. < 0.03 m/s. Polar motion (< 1e-6 rad) is neglected for the same reason.
Status utc_to_times(double mjd_utc, const std::string& what, Times& t)
{
    double tai1 = 0, tai2 = 0;
    const int j = eraUtctai(kMjdZero, mjd_utc, &tai1, &tai2);
    // j = +1 ("dubious year": past the leap-second table's horizon) is still usable: a missed
    // leap second moves the velocity by < 0.03 m/s (the site's rotation turns 7e-5 rad/s).
    if (j < 0) {
        return Status::invalid(what + ": MJD not convertible to TAI (ERFA eraUtctai " +
                               std::to_string(j) + ")");
    }
    if (eraTaitt(tai1, tai2, &t.tt1, &t.tt2) != 0) {
        return Status::invalid(what + ": ERFA eraTaitt failed");
    }
    t.ut1_1 = kMjdZero;
    t.ut1_2 = mjd_utc;
    const double ut_fraction = mjd_utc - std::floor(mjd_utc);
    t.tdb1 = t.tt1;
    t.tdb2 = t.tt2 + eraDtdb(t.tt1, t.tt2, ut_fraction, 0.0, 0.0, 0.0) / ERFA_DAYSEC;
    return Status::ok();
}

// Site position and velocity in GCRS (m, m/s), as astropy EarthLocation.get_gcrs_posvel:
// ITRS position rotated by (RPOM * R3(ERA) * C2I)^T, velocity = omega x position with the
// rotation axis = the CIP (third row of the GCRS->CIRS matrix C2I, IAU 2006/2000A).
Status site_gcrs_posvel(const GeodeticSite& site, const Times& t, const std::string& what,
                        double itrs[3], double pos[3], double vel[3])
{
    const int j = eraGd2gc(ERFA_WGS84, site.longitude_deg * ERFA_DD2R,
                           site.latitude_deg * ERFA_DD2R, site.height_m, itrs);
    if (j != 0) {
        return Status::invalid(what + ": bad site (ERFA eraGd2gc " + std::to_string(j) + ")");
    }
    double rc2i[3][3], rpom[3][3], rc2t[3][3];
    eraC2i06a(t.tt1, t.tt2, rc2i);
    eraPom00(0.0, 0.0, eraSp00(t.tt1, t.tt2), rpom);
    eraC2tcio(rc2i, eraEra00(t.ut1_1, t.ut1_2), rpom, rc2t);
    eraTrxp(rc2t, itrs, pos);
    double omega[3] = {rc2i[2][0] * kOmegaEarth, rc2i[2][1] * kOmegaEarth,
                       rc2i[2][2] * kOmegaEarth};
    eraPxp(omega, pos, vel);
    return Status::ok();
}

// astropy EarthLocation.gravitational_redshift with its default bodies (m/s, negative):
// sum of -GM / (c d) over the Sun, Jupiter and the Moon at their distance from the geocentre
// and the Earth at the site's geocentric distance. Builtin-ephemeris positions as astropy's
// get_body_barycentric: Sun = eraEpv00 barycentric minus heliocentric Earth, Jupiter =
// eraPlan94 (heliocentric) + Sun, Moon = eraMoon98 (geocentric) + Earth, all at TDB.
// Jupiter and the Moon contribute < 1e-3 m/s; kept so the sum is astropy's.
// (ERFA's C interface takes non-const arrays, hence the mutable parameters.)
std::optional<double> gravitational_redshift(const Times& t, double earth_helio[2][3],
                                             double earth_bary[2][3], const double site_itrs[3])
{
    double sun[3], jupiter[2][3], moon[2][3];
    eraPmp(earth_bary[0], earth_helio[0], sun);
    const int j = eraPlan94(t.tdb1, t.tdb2, 5, jupiter);
    if (j < 0 || j > 1) return std::nullopt;
    eraPpp(jupiter[0], sun, jupiter[0]);
    eraMoon98(t.tdb1, t.tdb2, moon);
    eraPpp(moon[0], earth_bary[0], moon[0]);
    // Summed smallest first, as astropy, though the order changes nothing at double precision.
    const double earth_term = kGmEarth / std::sqrt(dot(site_itrs, site_itrs));
    const double moon_term = kGmMoon / (distance(moon[0], earth_bary[0]) * ERFA_DAU);
    const double jupiter_term = kGmJupiter / (distance(jupiter[0], earth_bary[0]) * ERFA_DAU);
    const double sun_term = kGmSun / (distance(sun, earth_bary[0]) * ERFA_DAU);
    return -(earth_term + moon_term + jupiter_term + sun_term) / kSpeedOfLight;
}

std::optional<double> first_number(const FitsHeader& h, const char* const* keys, size_t n,
                                   std::string& key_found)
{
    for (size_t i = 0; i < n; ++i) {
        if (auto v = h.get_double(keys[i])) {
            key_found = keys[i];
            return v;
        }
    }
    return std::nullopt;
}

}  // namespace

Result<BarycentricCorrection> barycentric_correction(double ra_deg, double dec_deg, double mjd_utc,
                                                     const GeodeticSite& site)
{
    const std::string what = describe(ra_deg, dec_deg, mjd_utc);
    if (!std::isfinite(ra_deg) || !std::isfinite(dec_deg) || !std::isfinite(mjd_utc)) {
        return Status::invalid(what + ": RA, DEC and MJD must be finite");
    }
    if (std::fabs(dec_deg) > 90.0) return Status::invalid(what + ": |DEC| > 90 deg");
    if (mjd_utc < kMjd1960 || mjd_utc >= kMjd2100) {
        return Status::invalid(what + ": MJD outside 1960-2100 (UTC and ERFA eraEpv00 range)");
    }
    Times t;
    EX2D_RETURN_NOT_OK(utc_to_times(mjd_utc, what, t));

    // Barycentric position (au) and velocity (au/day) of the geocentre, ERFA's VSOP2000-based
    // series: the same call as astropy's 'builtin' ephemeris.
    double earth_helio[2][3], earth_bary[2][3];
    if (eraEpv00(t.tdb1, t.tdb2, earth_helio, earth_bary) != 0) {
        return Status::invalid(what + ": ERFA eraEpv00 rejected the date");
    }
    double site_itrs[3], site_pos[3], site_vel[3];
    EX2D_RETURN_NOT_OK(site_gcrs_posvel(site, t, what, site_itrs, site_pos, site_vel));
    const auto gr = gravitational_redshift(t, earth_helio, earth_bary, site_itrs);
    if (!gr) return Status::invalid(what + ": ERFA eraPlan94 failed for this date");

    // astropy SkyCoord.radial_velocity_correction(kind='barycentric') for a direction without
    // distance: Wright & Eastman (2014, PASP 126, 838) eq. 28 without the Shapiro delay and the
    // target's motion: zb = gamma (1 + beta . n) / (1 + gr / c), v = c (zb - 1), with
    // beta = observer's barycentric velocity / c and n = ICRS unit vector to the target.
    double n[3];
    eraS2c(ra_deg * ERFA_DD2R, dec_deg * ERFA_DD2R, n);
    double beta[3];
    for (int k = 0; k < 3; ++k) {
        beta[k] = (earth_bary[1][k] * kAuPerDayToMs + site_vel[k]) / kSpeedOfLight;
    }
    const double gamma = 1.0 / std::sqrt(1.0 - dot(beta, beta));
    const double zb = gamma * (1.0 + dot(beta, n)) / (1.0 + *gr / kSpeedOfLight);

    BarycentricCorrection out;
    out.velocity_km_s = (zb - 1.0) * kSpeedOfLight / 1000.0;
    // desispec heliocentric.barycentric_correction_multiplicative_factor: 1 + v/c.
    out.factor = 1.0 + out.velocity_km_s / speed_of_light_km_s;
    return out;
}

Result<ExposurePointing> exposure_pointing(const FitsHeader& image_header,
                                           const FitsHeader& fibermap_header)
{
    // desispec extract.py: the IMAGE header when it has RA or TARGTRA, else the FIBERMAP's.
    const bool use_image = image_header.has("RA") || image_header.has("TARGTRA");
    const FitsHeader& h = use_image ? image_header : fibermap_header;
    ExposurePointing p;
    p.source = use_image ? "IMAGE" : "FIBERMAP";
    const std::string what = "barycentric correction: " + p.source + " header";

    static const char* const ra_keys[] = {"TARGTRA", "SKYRA", "TELRA", "RA"};
    static const char* const dec_keys[] = {"TARGTDEC", "SKYDEC", "TELDEC", "DEC"};
    const auto ra = first_number(h, ra_keys, 4, p.ra_key);
    const auto dec = first_number(h, dec_keys, 4, p.dec_key);
    if (!ra) return Status::format(what + ": none of TARGTRA, SKYRA, TELRA, RA");
    if (!dec) return Status::format(what + ": none of TARGTDEC, SKYDEC, TELDEC, DEC");
    const auto mjd = h.has("MJD-OBS") ? h.get_double("MJD-OBS") : h.get_double("MJD");
    if (!mjd) return Status::format(what + ": no numeric MJD-OBS or MJD");
    const auto exptime = h.get_double("EXPTIME");
    if (!exptime) return Status::format(what + ": no numeric EXPTIME");
    if (!std::isfinite(*exptime) || *exptime < 0) {
        return Status::format(what + ": EXPTIME " + std::to_string(*exptime) + " is invalid");
    }
    p.ra_deg = *ra;
    p.dec_deg = *dec;
    p.mjd_obs = *mjd;
    p.exptime_s = *exptime;
    // Mid-exposure (desispec #971; heliocentric.py): MJD + EXPTIME / 2 / 86400.
    p.mid_mjd = *mjd + *exptime / 2.0 / 86400.0;
    return p;
}

Result<BarycentricCorrection> exposure_barycentric_correction(const FitsHeader& image_header,
                                                              const FitsTableBlob& fibermap)
{
    FitsHeader fibermap_header;
    if (!(image_header.has("RA") || image_header.has("TARGTRA"))) {
        if (fibermap.empty()) {
            return Status::format(
                "barycentric correction: the IMAGE header has no RA/TARGTRA "
                "and there is no FIBERMAP");
        }
        auto h = read_table_header(fibermap);
        if (!h.is_ok()) return h.status();
        fibermap_header = std::move(h).value();
    }
    auto p = exposure_pointing(image_header, fibermap_header);
    if (!p.is_ok()) return p.status();
    return barycentric_correction(p.value().ra_deg, p.value().dec_deg, p.value().mid_mjd);
}

void set_heliocor(FitsHeader& header, double factor)
{
    if (factor != 1.0) header.set_double("HELIOCOR", factor);
}

}  // namespace ex2d
