#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Reference barycentric radial-velocity corrections for tests/unit/test_barycentric.cpp.

Computes what desispec.heliocentric does: astropy
SkyCoord(ra, dec, frame='icrs').radial_velocity_correction(kind='barycentric', obstime,
location=KPNO) with KPNO = EarthLocation.from_geodetic(lon=-111.59989 deg, lat=31.96403 deg,
height=2097 m) (the coordinates desispec uses, not astropy's 'kpno' site entry) and obstime =
Time(mjd, format='mjd', scale='utc'), the mid-exposure MJD.

Runs offline: astropy's builtin ephemeris (ERFA epv00/plan94/moon98, not jplephem) and the
IERS-B table bundled with astropy, with automatic IERS downloads disabled. Prints C++ table
rows (velocity in m/s with 17 significant digits) to paste into the test.
Tested with Debian 12 python3-astropy 5.2.1.
"""

import warnings

import astropy.units as u
from astropy.coordinates import EarthLocation, SkyCoord, solar_system_ephemeris
from astropy.time import Time
from astropy.utils import iers

iers.conf.auto_download = False
solar_system_ephemeris.set("builtin")

KPNO = EarthLocation.from_geodetic(lon=-111.59989 * u.deg, lat=31.96403 * u.deg,
                                   height=2097 * u.m)

# (RA deg, Dec deg, MJD UTC): all quadrants of the sky, both hemispheres and the poles, dates
# spread over the year and over the DESI survey (2019-2022, inside the bundled IERS-B table).
CASES = [
    (0.0, 0.0, 58840.25),
    (150.1, 2.2, 59215.40),
    (210.8, 54.3, 59300.30),
    (270.0, 66.56, 59390.20),
    (36.5, -5.0, 59480.45),
    (320.25, -30.0, 59560.10),
    (83.63, 22.01, 59640.15),
    (185.0, 89.9, 59700.33),
    (115.0, -60.0, 59750.05),
    (10.68, 41.27, 59830.41),
]

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    for ra, dec, mjd in CASES:
        sc = SkyCoord(ra=ra * u.deg, dec=dec * u.deg, frame="icrs")
        obstime = Time(mjd, format="mjd", scale="utc")
        v = sc.radial_velocity_correction(kind="barycentric", obstime=obstime, location=KPNO)
        print(f"    {{{ra!r}, {dec!r}, {mjd!r}, {v.to_value(u.m / u.s):.17g}}},")
