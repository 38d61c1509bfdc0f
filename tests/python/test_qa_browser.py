# SPDX-License-Identifier: BSD-3-Clause
"""The QA report of a small simulated exposure, opened in headless Chromium: it loads without
a console error and every image decodes (naturalWidth > 0); a screenshot is kept. The exposure
(cameras r0 and r1, 25 fibres) goes through a real local fleet (tools/ex2d-local-fleet) where
redis-server is installed, so that the page has the fleet's timings, workers and timeline;
else it is extracted by ex2d extract. Exit 77 (skipped) where Chromium is absent."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qa_browser  # noqa: E402

EX2D = os.environ.get("EX2D_BINARY", "ex2d")
EX2DCTL = os.environ.get("EX2DCTL_BINARY", "ex2dctl")
SERVICES = os.environ.get("EX2D_SERVICES_DIR", "")
SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NIGHT, EXPID, GRID = "20261122", "00000001", "6000.0,6200.0,0.8"
CAMERAS = ("r0", "r1")


def run(command, **kw):
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          **kw)
    if done.returncode != 0:
        sys.exit("FAILED: %s exited %d:\n%s" % (" ".join(command), done.returncode,
                                                done.stdout[-3000:]))
    return done.stdout


def make_exposure(root):
    specprod = os.path.join(root, "specprod")
    pre = os.path.join(specprod, "preproc", NIGHT, EXPID)
    calib = os.path.join(specprod, "calib")
    os.makedirs(pre)
    os.makedirs(calib)
    for seed, cam in enumerate(CAMERAS, 1):
        psf = os.path.join(calib, "psf-%s.fits" % cam)
        run([EX2D, "make-psf", "--camera", cam, "-o", psf])
        run([EX2D, "simulate", "-p", psf, "-o", os.path.join(pre, "preproc-%s-%s.fits" % (
            cam, EXPID)), "--truth", os.path.join(root, "truth-%s.fits" % cam), "-s", "0",
            "-n", "25", "-w", GRID, "--camera", cam, "--night", NIGHT, "--expid", "1",
            "--seed", str(seed)])
    return specprod, pre, calib


def main():
    if not qa_browser.chromium():
        print("SKIP: chromium is not installed (apt-get install chromium; .ci/install-deps "
              "--tests installs it): the QA report was not checked in a browser")
        return qa_browser.SKIP
    try:
        import websocket  # noqa: F401 (only whether it is there)
    except ImportError:
        print("SKIP: python3-websocket is not installed (.ci/install-deps --tests)")
        return qa_browser.SKIP
    keep = os.environ.get("EX2D_QA_SCREENSHOT", os.path.abspath("qa-report-screenshot.png"))
    with tempfile.TemporaryDirectory(prefix="ex2d-qa-browser-") as root:
        specprod, pre, calib = make_exposure(root)
        exposure = os.path.join(specprod, "exposures", NIGHT, EXPID)
        html = os.path.join(root, "report.html")
        qa = "%s qa %s -o %s --cameras %s" % (EX2DCTL, exposure, html, ",".join(CAMERAS))
        fleet = shutil.which("redis-server") and SERVICES
        if fleet:
            print(run([os.path.join(SOURCE, "tools", "ex2d-local-fleet"), "--bin", SERVICES,
                       "--workdir", os.path.join(root, "fleet"), "--readers", "1",
                       "--workers", "2", "--writers", "1", "--worker-threads", "1",
                       "--timeout", "120", "--after", qa, "--", "--exposure-dir", pre,
                       "--psf", os.path.join(calib, "psf-{camera}.fits"), "--output-root",
                       specprod, "-w", GRID, "-n", "25", "--badcolumns", "none"]))
        else:
            print("redis-server not installed: frames by ex2d extract, no fleet timings")
            os.makedirs(exposure)
            for cam in CAMERAS:
                run([EX2D, "extract", "-i", os.path.join(pre, "preproc-%s-%s.fits" % (cam, EXPID)),
                     "-p", os.path.join(calib, "psf-%s.fits" % cam), "-w", GRID, "-n", "25",
                     "-o", os.path.join(exposure, "frame-%s-%s.fits.gz" % (cam, EXPID))])
            print(run(qa.split() + ["--no-fleet"]))
        with open(html, encoding="utf-8") as f:
            text = f.read()
        shutil.copy(html, os.path.splitext(keep)[0] + ".html")
        result = qa_browser.check(html, keep)
    problems = list(result["errors"])
    images = result["images"]
    problems += ["image %r did not decode (naturalWidth %d)" % (i[0], i[1])
                 for i in images if not i[3] or i[1] <= 0]
    want = len(CAMERAS) + (1 if fleet else 0)  # a figure per frame, the fleet's timeline
    if len(images) != want:
        problems.append("%d image(s) on the page, %d expected" % (len(images), want))
    data = json.loads(re.search(r'id="qa-data">(.*?)</script>', text, re.S).group(1)
                      .replace("<\\/", "</"))
    if data["flag"] != "PASS":
        problems.append("the simulated exposure is %s: %s" % (
            data["flag"], [f["reasons"] for f in data["frames"]]))
    if fleet:
        workers = sorted({f.get("fleet", {}).get("worker", "") for f in data["frames"]})
        if not all(re.match(r"worker-\d$", w) for w in workers):
            problems.append("the workers that extracted the frames are not shown: %s" % workers)
        if "frames per hour: <span" in text or "not available: " in text.split("Timing")[1]:
            problems.append("the fleet's timings are missing from the page")
    print("%d image(s) decoded (widths %s), %d console error(s); title %r; screenshot %s" % (
        len(images), [i[1] for i in images], len(result["errors"]), result["title"], keep))
    for p in problems:
        print("FAILED: " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
