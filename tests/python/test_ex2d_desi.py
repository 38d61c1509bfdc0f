# SPDX-License-Identifier: BSD-3-Clause
"""The desi_proc hook (python/ex2d_desi) against the real ex2d binary: the translation of every
desi_extract_spectra option, ex2d's exit codes raised as Ex2dError, a frame written for a
simulated preproc, and the MPI group protocol (rank 0 extracts, the others wait and raise the
same error) with a stand-in communicator."""

import argparse
import collections
import json
import os
import pickle
import queue
import subprocess
import sys
import tempfile
import threading
import time
import unittest

# The build's python folder (PYTHONPATH) where ctest gives it, else the source tree, whose
# ex2d package has no compiled module: the hook then runs the program.
if os.environ.get("EX2D_EXPECT_MODULE") != "1":
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import ex2d_desi  # noqa: E402
from ex2d_desi import extract as hook  # noqa: E402
from ex2d_desi import fibermap_columns as columns  # noqa: E402
from ex2d_desi import ranks  # noqa: E402

EX2D = os.environ.get("EX2D_BINARY", "ex2d")
# 1: the hook must run ex2d in-process (ctest's python_ex2d_desi); else it runs the program.
IN_PROCESS = os.environ.get("EX2D_EXPECT_MODULE") == "1"


def namespace(**values):
    """A namespace as desispec.scripts.extract.parse returns it, with desispec's defaults."""
    args = argparse.Namespace(
        input=None, fibermap=None, psf=None, output=None, model=None, wavelength=None,
        specmin=0, nspec=None, regularize=0.0, bundlesize=25, nsubbundles=5, nwavestep=50,
        verbose=False, mpi=False, decorrelate_fibers=False, no_scores=False, psferr=None,
        barycentric_correction=False, use_specter=False, no_gpu=False, pixpad_frac=0.8,
        wavepad_frac=0.2)
    for key, value in values.items():
        setattr(args, key, value)
    return args


class Translation(unittest.TestCase):
    def test_every_option(self):
        args = namespace(input="pre.fits", fibermap="fm.fits", psf="psf.fits", output="f.fits",
                         model="m.fits", wavelength="5760.0,7620.0,0.8", specmin=25, nspec=50,
                         regularize=0.5, bundlesize=25, nsubbundles=5, nwavestep=40, psferr=0.04,
                         pixpad_frac=0.7, wavepad_frac=0.3, verbose=True, mpi=True,
                         no_scores=True, barycentric_correction=True, no_gpu=True)
        self.assertEqual(hook.extract_command(args, threads=8, binary="ex2d"), [
            "ex2d", "extract", "-i", "pre.fits", "-f", "fm.fits", "-p", "psf.fits",
            "-o", "f.fits", "-m", "m.fits", "-w", "5760.0,7620.0,0.8", "-s", "25", "-n", "50",
            "-r", "0.5", "--bundlesize", "25", "--nsubbundles", "5", "--nwavestep", "40",
            "--psferr", "0.04", "--pixpad-frac", "0.7", "--wavepad-frac", "0.3", "-v", "--mpi",
            "--no-scores", "--barycentric-correction", "--no-gpu", "--threads", "8"])

    def test_defaults_leave_options_out(self):
        args = namespace(input="p", psf="q", output="o")
        command = hook.extract_command(args, binary="ex2d")
        for absent in ("-f", "-m", "-w", "-n", "--psferr", "--no-gpu", "--threads"):
            self.assertNotIn(absent, command)
        self.assertIn("-s", command)  # desispec's default 0 is passed as it is

    def test_refused_options_reach_ex2d(self):
        command = hook.extract_command(
            namespace(use_specter=True, decorrelate_fibers=True), binary="ex2d")
        self.assertIn("--use-specter", command)
        self.assertIn("--decorrelate-fibers", command)


class FakeTimer:
    """desiutil.timer.Timer's start and stop, recorded."""

    def __init__(self):
        self.calls = []

    def start(self, name, starttime=None):
        self.calls.append(("start", name, starttime))

    def stop(self, name, stoptime=None):
        self.calls.append(("stop", name, stoptime))


class Steps(unittest.TestCase):
    STEPS = {"read": (10.0, 11.0), "extract": (11.0, 15.0), "write": (15.0, 15.5)}

    def test_marks_in_a_dict(self):
        timing = {"frame-start": 1.0}
        hook.record_steps(timing, self.STEPS, "b3")
        self.assertEqual(timing, {"frame-start": 1.0, "ex2d-frame-start": 10.0, "ex2d-read": 11.0,
                                  "ex2d-extract": 15.0, "ex2d-write": 15.5})

    def test_steps_in_a_timer(self):
        timer = FakeTimer()
        hook.record_steps(timer, self.STEPS, "b3")
        self.assertEqual(timer.calls, [
            ("start", "ex2d-read-b3", 10.0), ("stop", "ex2d-read-b3", 11.0),
            ("start", "ex2d-extract-b3", 11.0), ("stop", "ex2d-extract-b3", 15.0),
            ("start", "ex2d-write-b3", 15.0), ("stop", "ex2d-write-b3", 15.5)])
        hook.record_steps(timer, self.STEPS, None)
        self.assertEqual(timer.calls[-1], ("stop", "ex2d-write", 15.5))

    def test_camera_from_the_file_names(self):
        self.assertEqual(hook.camera_of(["ex2d", "extract", "-i", "/a/preproc-z9-00000007.fits",
                                         "-o", "/b/frame-r1-00000007.fits"]), "r1")
        self.assertEqual(hook.camera_of(["ex2d", "extract", "-i", "preproc-b2-1.fits",
                                         "-o", "out.fits"]), "b2")
        self.assertIsNone(hook.camera_of(["ex2d", "extract", "-i", "in.fits", "-o"]))


class WithTheBinary(unittest.TestCase):
    @staticmethod
    def make_inputs(folder):
        """A synthetic r0 PSF and a 25-fibre simulated preproc in ``folder``."""
        paths = {"psf": os.path.join(folder, "psf-r0.fits"),
                 "preproc": os.path.join(folder, "preproc-r0-00000001.fits")}
        subprocess.run([EX2D, "make-psf", "--camera", "r0", "-o", paths["psf"]], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        subprocess.run([EX2D, "simulate", "-p", paths["psf"], "-o", paths["preproc"], "--truth",
                        os.path.join(folder, "truth.fits"), "-s", "0", "-n", "25",
                        "-w", "6000.0,6200.0,0.8"], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.STDOUT)
        return paths

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        paths = cls.make_inputs(cls.dir.name)
        cls.psf = paths["psf"]
        cls.preproc = paths["preproc"]
        os.environ["EX2D_BINARY"] = EX2D

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def args(self, **values):
        base = dict(input=self.preproc, psf=self.psf, wavelength="6000.0,6200.0,0.8", nspec=25,
                    output=os.path.join(self.dir.name, "frame-r0-00000001.fits"), psferr=0.01)
        base.update(values)
        return namespace(**base)

    def test_a_frame_is_written(self):
        args = self.args()
        ex2d_desi.main_ex2d(args)
        with open(args.output, "rb") as frame:
            self.assertEqual(frame.read(30), b"SIMPLE  =                    T")

    def test_timing_gets_ex2d_marks_in_process(self):
        timing = {"frame-start": 1.0}
        ex2d_desi.main_ex2d(self.args(), timing=timing)
        if not IN_PROCESS:
            self.assertEqual(timing, {"frame-start": 1.0})  # the program's steps stay its own
            return
        marks = [timing[k] for k in ("ex2d-frame-start", "ex2d-read", "ex2d-extract",
                                     "ex2d-write")]
        self.assertEqual(marks, sorted(marks))
        self.assertEqual(len(timing), 5)
        self.assertEqual(timing["frame-start"], 1.0)  # desi_proc's own marks are left alone

    def test_desi_procs_timer_gets_the_cameras_steps(self):
        timer = FakeTimer()
        ex2d_desi.main_ex2d(self.args(), timing=timer)
        if not IN_PROCESS:
            self.assertEqual(timer.calls, [])
            return
        names = ["ex2d-read-r0", "ex2d-extract-r0", "ex2d-write-r0"]
        self.assertEqual([call[1] for call in timer.calls], [n for n in names for _ in (0, 1)])
        self.assertEqual([call[0] for call in timer.calls], ["start", "stop"] * 3)
        times = [call[2] for call in timer.calls]
        self.assertEqual(times, sorted(times))
        self.assertLess(times[0], times[-1])

    def test_exit_codes_become_ex2d_errors(self):
        missing = os.path.join(self.dir.name, "no-such-preproc.fits")
        open(os.path.join(self.dir.name, "file"), "w").close()
        cases = [
            (self.args(input=missing), 3, missing),        # input error
            (self.args(use_specter=True), 2, "specter"),  # usage error
            # output error: a file where the output's folder must be
            (self.args(output=os.path.join(self.dir.name, "file", "sub", "f.fits")), 4, "folder"),
        ]
        for args, code, text in cases:
            with self.assertRaises(ex2d_desi.Ex2dError) as raised:
                ex2d_desi.main_ex2d(args)
            self.assertEqual(raised.exception.returncode, code, str(raised.exception))
            self.assertIn(text, str(raised.exception))


STUB_DESISPEC_FIBERMAP = """
fibermap_columns = (
    ('TARGETID', 'i8', '', 'Stub target words', 'empty'),
    ('FIBER', 'i4', '', 'Stub fibre words', 'empty'),
    ('TARGET_RA', 'f8', 'deg', 'Stub RA words', 'empty'),
    ('OBJTYPE', (str, 3), '', 'Stub type words', 'empty'),
)
"""


def astropy_python():
    """A Python with astropy: this one, else Debian's (python3-astropy), else None."""
    for python in (sys.executable, "/usr/bin/python3"):
        if os.path.exists(python) and subprocess.run(
                [python, "-c", "import astropy.io.fits"], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL).returncode == 0:
            return python
    return None


# Prints {column name: [unit, TTYPE comment]} of a frame's FIBERMAP, read by astropy.
READ_FIBERMAP_HEADER = """
import json, sys
from astropy.io import fits
header = fits.getheader(sys.argv[1], "FIBERMAP")
print(json.dumps({header["TTYPE%d" % i]: [header.get("TUNIT%d" % i, ""),
                                          header.comments["TTYPE%d" % i]]
                  for i in range(1, header["TFIELDS"] + 1)}))
"""


class FibermapColumns(unittest.TestCase):
    """desispec's column table handed to ex2d: exported where desispec imports, else not."""

    def setUp(self):
        self.stub = tempfile.TemporaryDirectory()
        package = os.path.join(self.stub.name, "desispec", "io")
        os.makedirs(package)
        open(os.path.join(self.stub.name, "desispec", "__init__.py"), "w").close()
        open(os.path.join(package, "__init__.py"), "w").close()
        with open(os.path.join(package, "fibermap.py"), "w") as out:
            out.write(STUB_DESISPEC_FIBERMAP)
        columns._exported.clear()

    def tearDown(self):
        for name in [m for m in sys.modules if m == "desispec" or m.startswith("desispec.")]:
            del sys.modules[name]
        if self.stub.name in sys.path:
            sys.path.remove(self.stub.name)
        columns._exported.clear()
        self.stub.cleanup()

    def test_types_become_fits_tforms(self):
        rows = [("A", "i8", "", "a", "empty"), ("B", (str, 22), "", "b", "empty"),
                ("C", "f4", "mag", "c", "empty"), ("D", "u1", "", "d", "empty"),
                ("E", "bool", "", "e", "coadd"), ("F", "i2", "", "f", "empty")]
        self.assertEqual([entry["tform"] for entry in columns.table_from_rows(rows)],
                         ["K", "22A", "E", "B", "L", "I"])
        self.assertEqual(columns.table_from_rows(rows)[2],
                         {"name": "C", "tform": "E", "unit": "mag", "description": "c"})

    def test_without_desispec_nothing_is_passed(self):
        self.assertIsNone(columns.exported_desispec_table())
        script = subprocess.run([sys.executable, "-m", "ex2d_desi.fibermap_columns",
                                 os.path.join(self.stub.name, "out.json")],
                                cwd=os.path.join(os.path.dirname(__file__), "..", "..", "python"),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=dict(os.environ, PYTHONPATH=""))
        self.assertEqual(script.returncode, 1)
        self.assertIn("desispec cannot be imported", script.stdout)

    def test_desispec_table_reaches_the_frame(self):
        sys.path.insert(0, self.stub.name)
        path = columns.exported_desispec_table()
        # No name in any folder, so that an aborted rank leaves nothing behind.
        self.assertRegex(path, r"^/proc/self/fd/\d+$")
        self.assertEqual(os.readlink(path)[-len(" (deleted)"):], " (deleted)")
        with open(path) as table:
            self.assertEqual(json.load(table)[2], {"name": "TARGET_RA", "tform": "D",
                                                   "unit": "deg", "description": "Stub RA words"})
        with tempfile.TemporaryDirectory() as scratch:
            work = WithTheBinary.make_inputs(scratch)
            output = os.path.join(scratch, "frame-r0-00000001.fits")
            ex2d_desi.main_ex2d(namespace(input=work["preproc"], psf=work["psf"], nspec=25,
                                          wavelength="6000.0,6200.0,0.8", output=output))
            python = astropy_python()
            if python is None:
                self.skipTest("astropy not installed: the frame's FIBERMAP is not read")
            read = subprocess.run([python, "-c", READ_FIBERMAP_HEADER, output],
                                  stdout=subprocess.PIPE, text=True, check=True)
            header = json.loads(read.stdout)
            self.assertEqual(header["TARGET_RA"], ["deg", "Stub RA words"])
            self.assertEqual(header["FIBER"], ["", "Stub fibre words"])


class FakeGroup:
    """mpi4py's calls the hook makes (allgather, bcast, send, recv, Ibarrier), for ranks run
    as threads of this process; ``nodes[rank]`` is the node each rank stands for, put in place
    of the real one in what it allgathers. Messages are pickled, as mpi4py's are."""

    def __init__(self, nodes):
        self.nodes = nodes
        self.size = len(nodes)
        self.barrier = threading.Barrier(self.size, timeout=120)
        self.slots = [None] * self.size
        self.mail = collections.defaultdict(queue.Queue)
        self.arrived = 0
        self.lock = threading.Lock()

    def comm(self, rank):
        return FakeComm(self, rank)


class FakeRequest:
    def __init__(self, group):
        self.group = group

    def Test(self):
        with self.group.lock:
            return self.group.arrived == self.group.size

    def Wait(self):
        while not self.Test():
            time.sleep(0.01)


class FakeComm:
    def __init__(self, group, rank):
        self.group = group
        self.rank = rank
        self.size = group.size

    def _exchange(self, value):
        self.group.slots[self.rank] = value
        self.group.barrier.wait()
        values = list(self.group.slots)
        self.group.barrier.wait()
        return values

    def allgather(self, value):
        return self._exchange((self.group.nodes[self.rank],) + tuple(value[1:]))

    def bcast(self, value, root=0):
        return self._exchange(value)[root]

    def send(self, value, dest, tag):
        self.group.mail[(self.rank, dest, tag)].put(pickle.dumps(value))

    def recv(self, source, tag):
        return pickle.loads(self.group.mail[(source, self.rank, tag)].get(timeout=120))

    def Ibarrier(self):
        with self.group.lock:
            self.group.arrived += 1
        return FakeRequest(self.group)


def run_group(nodes, call):
    """``call(comm)`` on every rank of a FakeGroup on ``nodes``, as threads; {rank: None or the
    exit code of the Ex2dError it raised}."""
    group = FakeGroup(nodes)
    outcomes = {}

    def rank(r):
        try:
            call(group.comm(r))
            outcomes[r] = None
        except ex2d_desi.Ex2dError as err:
            outcomes[r] = err.returncode

    threads = [threading.Thread(target=rank, args=(r,)) for r in reversed(range(len(nodes)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    return outcomes


class Plan(unittest.TestCase):
    def test_one_extractor_per_node_on_cpus_with_the_nodes_cpus(self):
        members = [("a", [0, 1]), ("a", [2, 3]), ("b", [0, 1]), ("b", [2, 3]), ("a", [4])]
        self.assertEqual(ranks.plan_extractors(members, ngpu=0, nbundle=20, shareable=True),
                         {0: ([0, 1, 2, 3, 4], None), 2: ([0, 1, 2, 3], None)})

    def test_one_extractor_per_gpu_with_a_share_of_the_cpus(self):
        members = [("a", [0, 1, 2])] + [("a", [3 + r]) for r in range(3)] + \
                  [("b", [0, 1]), ("b", [2, 3])]
        self.assertEqual(ranks.plan_extractors(members, ngpu=2, nbundle=20, shareable=True),
                         {0: ([0, 1, 2], 0), 1: ([3, 4, 5], 1), 4: ([0, 1], 0), 5: ([2, 3], 1)})

    def test_no_more_extractors_than_bundles_and_none_but_rank_0_without_the_module(self):
        members = [("a", [0]), ("b", [0]), ("c", [0])]
        self.assertEqual(sorted(ranks.plan_extractors(members, 0, nbundle=2, shareable=True)),
                         [0, 1])
        self.assertEqual(ranks.plan_extractors(members, 0, nbundle=20, shareable=False),
                         {0: ([0], None)})

    def test_bundles_from_nspec_or_the_psf(self):
        self.assertEqual(ranks.bundles_in(namespace(nspec=50, bundlesize=25)), 2)
        self.assertEqual(ranks.bundles_in(namespace(nspec=25, bundlesize=5)), 5)
        self.assertEqual(ranks.bundles_in(namespace(psf="/no/such/psf.fits")), 1)


class PartExchange(unittest.TestCase):
    def test_the_writer_gets_every_part(self):
        got = {}

        def call(comm):
            if comm.rank in (0, 2, 3):
                exchange = ranks.PartExchange(comm, [0, 2, 3])
                got[comm.rank] = exchange.gather({"specmin": comm.rank})

        self.assertEqual(run_group(["a", "a", "b", "c"], call), {0: None, 1: None, 2: None,
                                                                3: None})
        self.assertEqual(got, {0: [{"specmin": 0}, {"specmin": 2}, {"specmin": 3}], 2: None,
                               3: None})

    def test_a_failed_extractor_is_the_writers_error(self):
        def call(comm):
            exchange = ranks.PartExchange(comm, [0, 1, 2])
            if comm.rank == 1:
                exchange.failed((3, "preproc-r0.fits: no IMAGE HDU"))
            else:
                exchange.gather({"specmin": comm.rank})

        self.assertEqual(run_group(["a", "b", "c"], call), {0: 3, 1: None, 2: None})

    def test_a_writer_that_failed_still_takes_the_parts(self):
        left = {}

        def call(comm):
            exchange = ranks.PartExchange(comm, [0, 1])
            if comm.rank == 0:
                exchange.failed((1, "out of memory"))
                left["mail"] = [q.qsize() for q in comm.group.mail.values()]
            else:
                exchange.gather({"specmin": 1})

        run_group(["a", "b"], call)
        self.assertEqual(left["mail"], [0])


class MpiGroup(unittest.TestCase):
    def test_every_rank_raises_rank_zeros_error(self):
        missing = os.path.join(tempfile.gettempdir(), "ex2d-no-such-file-%d.fits" % os.getpid())
        args = namespace(input=missing, psf=missing, output=missing + ".out")
        self.assertEqual(run_group(["a", "a"], lambda comm: ex2d_desi.main_ex2d(args, comm=comm)),
                         {0: 3, 1: 3})

    def test_ranks_on_two_nodes_share_the_bundles_and_write_the_programs_frame(self):
        with tempfile.TemporaryDirectory() as scratch:
            work = WithTheBinary.make_inputs(scratch)
            options = dict(input=work["preproc"], psf=work["psf"], nspec=25, bundlesize=5,
                           nsubbundles=1, wavelength="6000.0,6200.0,0.8", psferr=0.01)
            reference = os.path.join(scratch, "reference.fits")
            subprocess.run(hook.extract_command(namespace(output=reference, **options),
                                                binary=EX2D), check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
            output = os.path.join(scratch, "frame-r0-00000001.fits")
            timers = {r: {} for r in range(3)}
            args = namespace(output=output, **options)
            self.assertEqual(run_group(["a", "a", "b"], lambda comm: ex2d_desi.main_ex2d(
                args, comm=comm, timing=timers[comm.rank])), {0: None, 1: None, 2: None})
            compared = subprocess.run(
                [sys.executable, os.path.join(os.path.dirname(__file__), "..", "..", "docker",
                                              "compare-fits"), output, reference],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            self.assertEqual(compared.returncode, 0, compared.stdout)
            if IN_PROCESS:
                # Rank 0 (node a) and rank 2 (node b) extracted; only rank 0 wrote.
                self.assertIn("ex2d-write", timers[0])
                self.assertEqual(sorted(timers[2]), ["ex2d-extract", "ex2d-frame-start",
                                                     "ex2d-read"])
                self.assertEqual(timers[1], {})
            self.assertEqual(sorted(os.listdir(scratch)),
                             sorted(["frame-r0-00000001.fits", "preproc-r0-00000001.fits",
                                     "psf-r0.fits", "reference.fits", "truth.fits"]))


class TraceShifts(unittest.TestCase):
    """desi_proc's traceshift step through ex2d_desi.trace_shifts_main: its argument list for
    a FLAT as desi_proc builds it (scripts/proc.py), and a failure as an Ex2dError."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        paths = WithTheBinary.make_inputs(cls.dir.name)
        cls.psf = paths["psf"]
        cls.preproc = paths["preproc"]

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def cmdargs(self, preproc, outpsf):
        cmd = "desi_compute_trace_shifts -i {} --psf {} --degxx 2 --degxy 0".format(
            preproc, self.psf)
        cmd += " --continuum --no-large-shift-scan --outpsf {}".format(outpsf)
        return cmd.split()[1:]

    def test_command(self):
        args = self.cmdargs("p.fits", "o.fits")
        self.assertEqual(ex2d_desi.trace_shifts_command(args, binary="/bin/ex2d"),
                         ["/bin/ex2d", "trace-shifts"] + args)

    def test_the_shifted_psf_is_written(self):
        outpsf = os.path.join(self.dir.name, "psf-r0-00000001.fits")
        ex2d_desi.trace_shifts_main(self.cmdargs(self.preproc, outpsf), binary=EX2D)
        with open(outpsf, "rb") as psf:
            self.assertEqual(psf.read(30), b"SIMPLE  =                    T")

    def test_a_failure_is_an_ex2d_error(self):
        missing = os.path.join(self.dir.name, "no-such-preproc.fits")
        outpsf = os.path.join(self.dir.name, "never.fits")
        with self.assertRaises(ex2d_desi.Ex2dError) as caught:
            ex2d_desi.trace_shifts_main(self.cmdargs(missing, outpsf), binary=EX2D)
        self.assertEqual(caught.exception.returncode, 3)
        self.assertIn("no-such-preproc.fits", str(caught.exception))
        self.assertFalse(os.path.exists(outpsf))


if __name__ == "__main__":
    unittest.main()
