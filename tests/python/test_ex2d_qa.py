# SPDX-License-Identifier: BSD-3-Clause
"""ex2dctl qa (python/ex2d_qa) on small frames made by the real ex2d: the summary's numbers
against astropy's reading of frames with injected NaN, IVAR = 0, mask bits and CHI2PIX
outliers; PASS, WARN and FAIL; missing and truncated frames shown as FAIL with the file and
the reason while the report is still written; "not available" where Redis does not answer."""

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

EX2D = os.environ.get("EX2D_BINARY", "ex2d")
EX2DCTL = os.environ.get("EX2DCTL_BINARY", "ex2dctl")
NIGHT, EXPID = "20261122", "00000001"
GRID = "6000.0,6200.0,0.8"

try:
    from astropy.io import fits
except ImportError:  # the reference reading needs astropy (.ci/install-deps --tests)
    fits = None


def run(*command):
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)


def make_frame(folder, camera="r0"):
    """A 25-fibre frame of a simulated r0 exposure, written by ex2d extract."""
    psf = os.path.join(folder, "psf-r0.fits")
    if not os.path.exists(psf):
        run(EX2D, "make-psf", "--camera", "r0", "-o", psf)
    pre = os.path.join(folder, "preproc-%s.fits" % camera)
    run(EX2D, "simulate", "-p", psf, "-o", pre, "--truth", os.path.join(folder, "truth.fits"),
        "-s", "0", "-n", "25", "-w", GRID, "--camera", camera, "--night", NIGHT, "--expid", "1")
    out = os.path.join(folder, "frame-%s-%s.fits" % (camera, EXPID))
    run(EX2D, "extract", "-i", pre, "-p", psf, "-o", out, "-w", GRID, "-n", "25")
    return out


def report_data(html):
    m = re.search(r'<script type="application/json" id="qa-data">(.*?)</script>', html, re.S)
    return json.loads(m.group(1).replace("<\\/", "</"))


def qa(args):
    done = subprocess.run([EX2DCTL, "--redis-port", "1", "qa"] + args, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    return done


def reference(path):
    """The summary's numbers for one frame, computed with astropy."""
    with fits.open(path) as h:
        flux, ivar = h["FLUX"].data, h["IVAR"].data
        mask = h["MASK"].data.astype(np.uint32)
        chi2 = h["CHI2PIX"].data
        n = flux.size
        finite = chi2[np.isfinite(chi2)]
        med = float(np.median(finite))
        return {
            "nan": int((~np.isfinite(flux)).sum() + (~np.isfinite(ivar)).sum() +
                       (~np.isfinite(chi2)).sum()),
            "ivar0_frac": float((ivar == 0).sum()) / n,
            "chi2_median": med,
            "chi2_above5_frac": float((finite > 5 * med).sum()) / n,
            "SOMEBADPIX": float(((mask & 1) != 0).sum()) / n,
            "ALLBADPIX": float(((mask & 2) != 0).sum()) / n,
            "BAD2DFIT": float(((mask & 128) != 0).sum()) / n,
            "BADCOLUMN": float(((mask & 1024) != 0).sum()) / n,
        }


class Base(unittest.TestCase):
    def assertInPage(self, needle, page):
        """assertIn without the whole page in the message."""
        self.assertTrue(needle in page, "%r is not on the page" % needle)

    def assertPageMatches(self, pattern, page):
        self.assertTrue(re.search(pattern, page), "%r matches nothing on the page" % pattern)


@unittest.skipIf(fits is None, "astropy is not installed (.ci/install-deps --tests)")
class TraceShifts(Base):
    """Issue 31, item 7: each frame's shifts from its header (TRSHIFT, MEANDX..MAXDY), a
    frame whose shifts pass the threshold or whose step failed flagged, the bright fibres'
    CHI2PIX judged."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="ex2d-qa-shifts-")
        root = cls.tmp.name
        work = os.path.join(root, "work")
        os.makedirs(work)
        exposure = os.path.join(root, "exposures", NIGHT, EXPID)
        os.makedirs(exposure)
        good = make_frame(work)
        cards = {"r0": {"TRSHIFT": "sky", "MEANDX": 0.05, "MINDX": 0.01, "MAXDX": 0.09,
                        "MEANDY": -0.02, "MINDY": -0.04, "MAXDY": 0.0},
                 "b0": {"TRSHIFT": "sky", "MEANDX": 1.2, "MINDX": 1.1, "MAXDX": 1.4,
                        "MEANDY": 0.0, "MINDY": 0.0, "MAXDY": 0.0},
                 "z0": {"TRSHIFT": "FAILED", "TRSHFAIL": "preproc-z0.fits: no reference line"}}
        for camera, keys in cards.items():
            with fits.open(good) as h:
                for key, value in keys.items():
                    h["FLUX"].header[key] = value
                h["MASK"].data = h["MASK"].data.astype(np.uint32)
                h.writeto(os.path.join(exposure, "frame-%s-%s.fits" % (camera, EXPID)))
        html = os.path.join(root, "report.html")
        cls.result = qa([exposure, "-o", html, "--cameras", "b0,r0,z0"])
        with open(html, encoding="utf-8") as f:
            cls.text = f.read()
        cls.frames = {f["camera"]: f for f in report_data(cls.text)["frames"]}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_shifts_and_flags(self):
        self.assertEqual(self.result.returncode, 0, self.result.stdout)
        self.assertEqual(self.frames["r0"]["flag"], "PASS", self.frames["r0"]["reasons"])
        self.assertAlmostEqual(self.frames["r0"]["quantities"]["trace_shift_max"], 0.09)
        self.assertEqual(self.frames["b0"]["flag"], "WARN")
        self.assertIn("largest trace shift", self.frames["b0"]["reasons"][0])
        self.assertEqual(self.frames["z0"]["flag"], "WARN")
        self.assertIn("traces not shifted: preproc-z0.fits: no reference line",
                      self.frames["z0"]["reasons"][0])

    def test_table_on_the_page(self):
        self.assertInPage("<h4>Trace shifts</h4>", self.text)
        self.assertInPage("+0.050 [+0.010, +0.090]", self.text)
        self.assertInPage("+1.200 [+1.100, +1.400]", self.text)
        self.assertPageMatches(r"FAILED</span>: preproc-z0.fits: no reference line", self.text)
        self.assertInPage("median CHI2PIX of the brightest 5% of fibres", self.text)

    def test_bright_fibres_chi2_is_the_frames(self):
        with fits.open(os.path.join(self.tmp.name, "exposures", NIGHT, EXPID,
                                    "frame-r0-%s.fits" % EXPID)) as h:
            flux, chi2 = h["FLUX"].data, h["CHI2PIX"].data
            bright = np.argsort(np.median(flux, axis=1))[::-1][:3]
            want = float(np.median(chi2[bright]))
        self.assertAlmostEqual(self.frames["r0"]["quantities"]["bright_chi2_median"], want,
                               places=6)


@unittest.skipIf(fits is None, "astropy is not installed (.ci/install-deps --tests)")
class Summary(Base):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="ex2d-qa-test-")
        root = cls.tmp.name
        work = os.path.join(root, "work")
        os.makedirs(work)
        cls.exposure = os.path.join(root, "exposures", NIGHT, EXPID)
        os.makedirs(cls.exposure)
        good = make_frame(work)
        cls.good = os.path.join(cls.exposure, os.path.basename(good))
        shutil.copy(good, cls.good)
        # b0: NaN in FLUX (FAIL) plus every other injection; z0: IVAR = 0 on one fibre (WARN),
        # written .fits.gz by astropy.
        cls.bad = os.path.join(cls.exposure, "frame-b0-%s.fits" % EXPID)
        with fits.open(good) as h:
            flux, ivar = h["FLUX"].data, h["IVAR"].data
            mask = h["MASK"].data.astype(np.uint32)
            chi2 = h["CHI2PIX"].data
            flux[3, 10:13] = np.nan                    # 3 NaN bins
            ivar[1, :] = 0                             # one fibre of 25: 4 %
            mask[2, :] |= 1 | 2                        # SOMEBADPIX and ALLBADPIX: 4 %
            mask[5:9, 100:125] |= 1024                 # BADCOLUMN: 100 bins
            mask[10, 0:20] |= 128                      # BAD2DFIT: 20 bins
            chi2[12, 0:126] = 1e4                      # CHI2PIX outliers: 2 %
            h["MASK"].data = mask
            h.writeto(cls.bad)
        cls.warn = os.path.join(cls.exposure, "frame-z0-%s.fits.gz" % EXPID)
        with fits.open(good) as h:
            h["IVAR"].data[4, :] = 0
            h["MASK"].data = h["MASK"].data.astype(np.uint32)
            h.writeto(cls.warn)
        # r1: a gzip cut in half; z1: a plain FITS file cut inside its data; b9: missing.
        cls.cut_gz = os.path.join(cls.exposure, "frame-r1-%s.fits.gz" % EXPID)
        with open(good, "rb") as f:
            data = gzip.compress(f.read())
        with open(cls.cut_gz, "wb") as f:
            f.write(data[:len(data) // 2])
        cls.cut = os.path.join(cls.exposure, "frame-z1-%s.fits" % EXPID)
        with open(good, "rb") as f:
            data = f.read()
        with open(cls.cut, "wb") as f:
            f.write(data[:5 * 2880 + 1000])
        cls.missing = os.path.join(cls.exposure, "frame-b9-%s.fits.gz" % EXPID)
        cls.html = os.path.join(root, "report.html")
        cls.result = qa([cls.exposure, "-o", cls.html, "--cameras", "b0,r0,z0,r1,z1,b9"])
        with open(cls.html, encoding="utf-8") as f:
            cls.text = f.read()
        cls.data = report_data(cls.text)
        cls.frames = {f["camera"]: f for f in cls.data["frames"]}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_the_report_is_written_despite_bad_frames(self):
        self.assertEqual(self.result.returncode, 0, self.result.stdout)
        self.assertIn("QA report", self.result.stdout)
        self.assertEqual(sorted(self.frames), ["b0", "b9", "r0", "r1", "z0", "z1"])

    def test_numbers_match_astropy(self):
        for camera, path in (("r0", self.good), ("b0", self.bad), ("z0", self.warn)):
            want = reference(path)
            got = self.frames[camera]["quantities"]
            for key, value in want.items():
                self.assertAlmostEqual(got[key], value, places=9, msg="%s %s" % (camera, key))

    def test_injected_fractions(self):
        q = self.frames["b0"]["quantities"]
        n = 25 * 251
        self.assertEqual(q["nan"], 3)
        self.assertAlmostEqual(q["ivar0_frac"], 251 / n)
        self.assertAlmostEqual(q["ALLBADPIX"], 251 / n)
        self.assertGreaterEqual(q["SOMEBADPIX"], 251 / n)
        self.assertGreaterEqual(q["BADCOLUMN"], 100 / n)
        self.assertGreaterEqual(q["BAD2DFIT"], 20 / n)
        self.assertGreaterEqual(q["chi2_above5_frac"], 126 / n)

    def test_flags(self):
        self.assertEqual(self.frames["r0"]["flag"], "PASS", self.frames["r0"]["reasons"])
        self.assertEqual(self.frames["b0"]["flag"], "FAIL")
        self.assertTrue(any("NaN" in r for r in self.frames["b0"]["reasons"]))
        self.assertEqual(self.frames["z0"]["flag"], "WARN")
        self.assertEqual(len(self.frames["z0"]["reasons"]), 1)
        self.assertIn("IVAR = 0", self.frames["z0"]["reasons"][0])
        self.assertEqual(self.data["flag"], "FAIL")

    def test_unreadable_frames_fail_with_file_and_reason(self):
        for camera, path, why in (("r1", self.cut_gz, "truncated or corrupt gzip"),
                                  ("z1", self.cut, "truncated"),
                                  ("b9", self.missing, "no such file")):
            frame = self.frames[camera]
            self.assertEqual(frame["flag"], "FAIL")
            self.assertIn(path, frame["reasons"][0])
            self.assertIn(why, frame["reasons"][0])
            # Shown on the page, with the file and the reason, not only in the data.
            visible = self.text.split('id="qa-data"')[0]
            self.assertPageMatches(r"FAIL</span> %s \(<code>%s</code>\): [^<]*%s" % (
                camera, re.escape(path), re.escape(why)), visible)

    def test_a_cut_anywhere_is_named(self):
        # Read through the package itself (astropy underneath): a frame cut inside a header,
        # inside the data of the last HDU, or inflating to such a file, is an error that says
        # "truncated"; the file's full content reads.
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                        "python"))
        from ex2d_qa.stats import frame_stats
        with open(self.good, "rb") as f:
            data = f.read()
        with fits.open(self.good) as h:
            last = h.fileinfo(len(h) - 1)
        folder = os.path.join(self.tmp.name, "cuts")
        os.makedirs(folder, exist_ok=True)
        cases = {"in-header.fits": data[:last["hdrLoc"] + 100],
                 "in-last-data.fits": data[:last["datLoc"] + 8],
                 "in-last-data.fits.gz": gzip.compress(data[:last["datLoc"] + 8]),
                 "in-header.fits.gz": gzip.compress(data[:last["hdrLoc"] + 100]),
                 "whole.fits.gz": gzip.compress(data)}
        for name, content in cases.items():
            path = os.path.join(folder, name)
            with open(path, "wb") as f:
                f.write(content)
            rec = frame_stats(path)
            if name.startswith("whole"):
                self.assertIsNone(rec["error"])
                self.assertEqual(rec["nspec"], 25)
            else:
                self.assertIn(path, rec["error"] or "", name)
                self.assertIn("truncated", rec["error"], name)

    def test_camera_rows(self):
        rows = self.data["cameras"][NIGHT]
        self.assertEqual((rows["r0"]["done"], rows["r0"]["failed"], rows["r0"]["flag"]),
                         (1, 0, "PASS"))
        self.assertEqual((rows["b9"]["done"], rows["b9"]["failed"], rows["b9"]["flag"]),
                         (0, 1, "FAIL"))
        self.assertEqual(rows["b0"]["nan"], 3)
        self.assertAlmostEqual(rows["b0"]["ALLBADPIX_frac"], 1 / 25)
        self.assertIsNotNone(rows["r0"]["snr"])

    def test_thresholds_and_fleet_state_on_the_page(self):
        self.assertInPage('id="thresholds"', self.text)
        self.assertInPage("fraction of bins with CHI2PIX &gt; 5 x the frame&#39;s median</td>"
                          "<td>&gt; 0.01</td><td>&gt; 0.05</td>", self.text)
        self.assertPageMatches(r"Timing \(from the fleet's Redis\)</h4>\s*<p class=na>not "
                               r"available: ex2dctl: [^<]*127\.0\.0\.1:1", self.text)

    def test_figures_and_links(self):
        shown = [f for f in self.data["frames"] if f["detail_shown"]]
        self.assertEqual(sorted(f["camera"] for f in shown), ["b0", "r0", "z0"])
        for f in shown:
            anchor = "frame-%s-%s-%s" % (NIGHT, EXPID, f["camera"])
            self.assertInPage('id="%s"' % anchor, self.text)
            self.assertInPage('href="#%s"' % anchor, self.text)
        self.assertInPage('id="exp-%s-%s"' % (NIGHT, EXPID), self.text)
        self.assertInPage('href="#night-%s"' % NIGHT, self.text)
        self.assertEqual(self.text.count("data:image/png;base64,iVBORw0KGgo"), 3)
        self.assertFalse(re.search(r'(src|href)="(https?:)?//', self.text), "a network address")

    def test_a_missing_input_still_gives_a_report(self):
        html = os.path.join(self.tmp.name, "missing.html")
        done = qa([self.missing, "-o", html])
        self.assertEqual(done.returncode, 0, done.stdout)
        with open(html, encoding="utf-8") as f:
            data = report_data(f.read())
        self.assertEqual(data["flag"], "FAIL")
        self.assertIn("no such file", data["frames"][0]["reasons"][0])

    def test_a_report_that_cannot_be_written_exits_with_the_output_code(self):
        html = os.path.join(self.tmp.name, "no-such-folder", "report.html")
        done = qa([self.missing, "-o", html])
        self.assertEqual(done.returncode, 4, done.stdout)  # docs/usage.md, "Exit codes"
        self.assertIn("ex2dctl qa: cannot write " + html, done.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
