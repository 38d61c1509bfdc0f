# SPDX-License-Identifier: BSD-3-Clause
"""ex2d trace-shifts against desispec's desi_compute_trace_shifts on the same frame (issue 31,
item 3): a full r frame simulated by ex2d through traces moved by a known amount, its sky drawn
from desispec's own night-sky reference (data/spec-sky.dat, so that neither tool measures
against lines the frame lacks), both tools run with desi_proc's science options (ex2d also
with that reference as --spectrum), and their output traces compared with each other and
with the truth. Exits 77 (skipped) where desispec cannot be imported, as in CI."""

import os
import subprocess
import sys
import tempfile
from importlib import resources

try:
    import numpy as np
    from astropy.io import fits
    from desispec.scripts import trace_shifts as desispec_trace_shifts
except ImportError as e:
    print("skipped: desispec is not importable here (%s)" % e)
    sys.exit(77)

EX2D = os.environ.get("EX2D_BINARY", "ex2d")
PSF = os.environ.get("EX2D_REAL_PSF", "")
ARGS = ["--degxx", "2", "--degxy", "0", "--degyx", "2", "--degyy", "0", "--sky"]
DX, DY = 0.25, -0.3  # px the frame's traces are moved from the PSF's


def legendre_traces(path, nwave=5):
    """X and Y of every fibre at nwave wavelengths spanning XTRACE's domain."""
    with fits.open(path) as h:
        out = []
        for name in ("XTRACE", "YTRACE"):
            coef = h[name].data
            # the same reduced wavelengths for every file: XTRACE's domain is not changed
            u = np.linspace(-1, 1, nwave)
            out.append(np.array([np.polynomial.legendre.legval(u, c) for c in coef]))
        return out


def fake_calibration(tmp, preproc):
    """desispec looks up the frame's hardware in $DESI_SPECTRO_CALIB before it measures (its
    BROKENFIBERS); a frame taken after 2019-12-11 is found by SPECID. Give the frame a SPECID
    and the folder one calibration entry for its camera and detector, with no broken fibre."""
    with fits.open(preproc, mode="update") as h:
        h[0].header["SPECID"] = 1
        camera = h[0].header["CAMERA"].strip().lower()
        detector = h[0].header["DETECTOR"].strip()
    folder = os.path.join(tmp, "calib", "spec", "sm1")
    os.makedirs(folder)
    with open(os.path.join(folder, "sm1-%s.yaml" % camera[0]), "w") as f:
        f.write("sm1-%s:\n  V0:\n    DATE-OBS-BEGIN: 20191211\n    DETECTOR: %s\n" % (
            camera[0], detector))
    os.environ["DESI_SPECTRO_CALIB"] = os.path.join(tmp, "calib")


def fibers_only_fibermap():
    """desispec's boxcar extraction makes an empty fibermap to carry the FIBER numbers of an
    image read without one, from desimodel's focal-plane data, which is not in desimodel's
    repository (it is installed separately). FIBER is the only column it uses there."""
    from astropy.table import Table
    from desispec.qproc import qextract
    qextract.empty_fibermap = lambda n: Table({"FIBER": np.arange(n, dtype=np.int32)})


def main():
    if not os.path.exists(PSF):
        print("skipped: no real PSF at EX2D_REAL_PSF=%r" % PSF)
        return 77
    with tempfile.TemporaryDirectory(prefix="ex2d-vs-desispec-") as tmp:
        truth = os.path.join(tmp, "psf-truth.fits")
        with fits.open(PSF) as h:
            h["XTRACE"].data[:, 0] += DX
            h["YTRACE"].data[:, 0] += DY
            h.writeto(truth)
        sky = str(resources.files("desispec").joinpath("data/spec-sky.dat"))
        pre = os.path.join(tmp, "preproc-r0.fits")
        subprocess.run([EX2D, "simulate", "-p", truth, "-o", pre, "--truth",
                        os.path.join(tmp, "truth.fits"), "-w", "5760,7620,0.8",
                        "--sky-spectrum", sky], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        fake_calibration(tmp, pre)
        fibers_only_fibermap()
        ours = os.path.join(tmp, "psf-ex2d.fits")
        subprocess.run([EX2D, "trace-shifts", "-i", pre, "--psf", PSF, "-o", ours] + ARGS,
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ours_spectrum = os.path.join(tmp, "psf-ex2d-spectrum.fits")
        subprocess.run([EX2D, "trace-shifts", "-i", pre, "--psf", PSF, "-o", ours_spectrum,
                        "--spectrum", sky] + ARGS,
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        theirs = os.path.join(tmp, "psf-desispec.fits")
        desispec_trace_shifts.main(desispec_trace_shifts.parse(
            ["-i", pre, "--psf", PSF, "-o", theirs] + ARGS))
        tx, ty = legendre_traces(truth)
        failures = []
        for name, path in (("ex2d --sky", ours), ("ex2d --spectrum", ours_spectrum),
                           ("desispec --sky", theirs)):
            x, y = legendre_traces(path)
            print("%-15s x: mean %+.4f rms %.4f   y: mean %+.4f rms %.4f (px, minus truth)" % (
                name, np.mean(x - tx), np.sqrt(np.mean((x - tx) ** 2)), np.mean(y - ty),
                np.sqrt(np.mean((y - ty) ** 2))))
        # With the frame's own reference, ex2d must be within issue 31's targets.
        x, y = legendre_traces(ours_spectrum)
        for axis, d in (("x", x - tx), ("y", y - ty)):
            if abs(np.mean(d)) > 0.01 or np.sqrt(np.mean(d ** 2)) > 0.015:
                failures.append("%s: ex2d --spectrum is %.4f px (mean) from the truth" % (
                    axis, np.mean(d)))
        ox, oy = legendre_traces(ours)
        dx, dy = legendre_traces(theirs)
        print("ex2d - desispec: x mean %+.4f rms %.4f, y mean %+.4f rms %.4f" % (
            np.mean(ox - dx), np.sqrt(np.mean((ox - dx) ** 2)), np.mean(oy - dy),
            np.sqrt(np.mean((oy - dy) ** 2))))
        # desispec recovers x shifts with a -0.011 px constant bias; on this sky its y is
        # 0.026 px off and ex2d's own line list 0.018 (docs/benchmarks-log.md, "Trace shifts").
        for axis, ours_, theirs_ in (("x", ox, dx), ("y", oy, dy)):
            rms = np.sqrt(np.mean((ours_ - theirs_) ** 2))
            if rms > 0.03:
                failures.append("%s: ex2d and desispec differ by %.4f px rms" % (axis, rms))
        for f in failures:
            print("FAIL " + f)
        return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
