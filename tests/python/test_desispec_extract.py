# SPDX-License-Identifier: BSD-3-Clause
"""desispec's own entry point with the ex2d backend, where desispec can be imported: the run
desi_proc makes without MPI once the patch (python/desispec-patch) is applied,
``desispec.util.runcmd(ex2d_desi.extract_main_timed(timer), args=..., inputs, outputs)`` with
desi_extract_spectra's argument list and desiutil's Timer. The frame is the one `ex2d
extract` writes with desispec's FIBERMAP column table, desispec reads it, desi_proc's timer
holds the camera's read, extract and write steps, and a failure is runcmd's failure with no
frame left. Exits 77 (skipped) where desispec cannot be imported, as in CI; a developer points
ctest at a Python that has it with -DEX2D_DESISPEC_PYTHON=PATH."""

import os
import subprocess
import sys
import tempfile
import unittest

try:
    import desiutil.timer
    from desispec.io import read_frame
    from desispec.io.fibermap import fibermap_columns
    from desispec.util import runcmd
except ImportError as err:
    print("skipped: desispec is not importable here (%s)" % err)
    sys.exit(77)

import numpy as np
from astropy.io import fits

import ex2d_desi
from ex2d_desi import fibermap_columns as columns

EX2D = os.environ.get("EX2D_BINARY", "ex2d")
GRID = "6000.0,6100.0,0.8"


def ex2d(*command):
    subprocess.run([EX2D, *command], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.STDOUT)


class DesispecEntryPoint(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory(prefix="ex2d-desispec-")
        folder = cls.dir.name
        cls.psf = os.path.join(folder, "psf-r0-00000007.fits")
        cls.preproc = os.path.join(folder, "preproc-r0-00000007.fits")
        ex2d("make-psf", "--camera", "r0", "-o", cls.psf)
        ex2d("simulate", "-p", cls.psf, "-o", cls.preproc, "--truth",
             os.path.join(folder, "truth.fits"), "--camera", "r0", "--expid", "7", "-s", "0",
             "-n", "25", "-w", GRID)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def command(self, output, psf=None):
        return ("desi_extract_spectra -i {} -p {} -o {} -w {} -s 0 -n 25 --psferr 0.01".format(
            self.preproc, psf or self.psf, output, GRID))

    def test_runcmd_extracts_the_programs_frame(self):
        output = os.path.join(self.dir.name, "frame-r0-00000007.fits")
        timer = desiutil.timer.Timer(silent=True)
        result, success = runcmd(ex2d_desi.extract_main_timed(timer),
                                 args=self.command(output).split()[1:],
                                 inputs=[self.preproc, self.psf], outputs=[output])
        self.assertTrue(success, result)

        table = os.path.join(self.dir.name, "columns.json")
        columns.write_table(columns.table_from_rows(fibermap_columns), table)
        reference = os.path.join(self.dir.name, "reference.fits")
        ex2d("extract", "-i", self.preproc, "-p", self.psf, "-o", reference, "-w", GRID,
             "-s", "0", "-n", "25", "--psferr", "0.01", "--fibermap-columns", table)
        with fits.open(output) as a, fits.open(reference) as b:
            self.assertEqual([h.name for h in a], [h.name for h in b])
            for x, y in zip(a, b):
                if hasattr(x, "columns"):
                    for name in x.columns.names:
                        self.assertTrue(np.array_equal(x.data[name], y.data[name]), (x.name, name))
                else:
                    self.assertTrue(np.array_equal(x.data, y.data), x.name)
                keys = [k for k in x.header if k != "CHECKSUM"]
                self.assertEqual(keys, [k for k in y.header if k != "CHECKSUM"], x.name)
                for key in keys:
                    self.assertEqual(x.header[key], y.header[key], (x.name, key))

        frame = read_frame(output)
        self.assertEqual(frame.flux.shape, (25, 126))
        self.assertEqual(frame.meta["CAMERA"].strip(), "r0")
        self.assertTrue(np.all(frame.ivar[frame.mask == 0] > 0))
        with fits.open(output) as hdus:
            header = hdus["FIBERMAP"].header
            described = {header["TTYPE%d" % i]: header.comments["TTYPE%d" % i]
                         for i in range(1, header["TFIELDS"] + 1)}
        descriptions = {row[0]: row[3] for row in fibermap_columns}
        for name in ("TARGETID", "FIBER", "TARGET_RA"):
            self.assertEqual(described[name], descriptions[name])

        steps = ["ex2d-%s-r0" % step for step in ("read", "extract", "write")]
        self.assertEqual([name for name in timer.timers if name in steps], steps)
        for name in steps:
            self.assertGreaterEqual(timer.timers[name]["duration"], 0.0)
        self.assertLessEqual(timer.timers[steps[0]]["stop"], timer.timers[steps[1]]["start"])

    def test_a_failure_is_runcmds_failure_with_no_frame(self):
        output = os.path.join(self.dir.name, "frame-r0-00000008.fits")
        result, success = runcmd(ex2d_desi.extract_main_timed(desiutil.timer.Timer(silent=True)),
                                 args=self.command(output, psf=self.preproc).split()[1:],
                                 inputs=[self.preproc], outputs=[output])
        self.assertFalse(success)
        self.assertIsInstance(result, ex2d_desi.Ex2dError)
        self.assertEqual(result.returncode, 3)
        self.assertIn(self.preproc, str(result))
        # Neither the frame nor a temporary of it.
        self.assertEqual([name for name in os.listdir(self.dir.name) if "00000008" in name], [])


if __name__ == "__main__":
    unittest.main()
