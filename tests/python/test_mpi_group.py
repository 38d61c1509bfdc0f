# SPDX-License-Identifier: BSD-3-Clause
"""desi_proc's extraction group under real MPI (Open MPI, mpi4py): three ranks of mpirun, each
in a UTS namespace of its own named for the node it stands for (ranks 0 and 1 on node0, rank 2
on node1), call ex2d_desi.main_ex2d on one frame. Ranks 0 and 2 extract a share of the bundles
each (one extractor per node), rank 0 writes: the frame must be the one `ex2d extract` writes,
with nothing else left; then a frame whose input is missing must raise the same Ex2dError on
every rank. Exits 77 (skipped) without mpirun, mpi4py, the module or root for unshare.

    python3 test_mpi_group.py              the test (it runs mpirun)
    python3 test_mpi_group.py rank ARGS    one rank, as mpirun starts it"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
EX2D = os.environ.get("EX2D_BINARY", "ex2d")
OPTIONS = dict(nspec=25, bundlesize=5, nsubbundles=1, wavelength="6000.0,6200.0,0.8",
               psferr=0.01)


def namespace(**values):
    """desispec.scripts.extract.parse's namespace for this frame, desispec's defaults else."""
    args = argparse.Namespace(
        fibermap=None, model=None, specmin=0, regularize=0.0, nwavestep=50, verbose=False,
        mpi=True, decorrelate_fibers=False, no_scores=False, barycentric_correction=False,
        use_specter=False, no_gpu=False, pixpad_frac=0.8, wavepad_frac=0.2, **OPTIONS)
    for key, value in values.items():
        setattr(args, key, value)
    return args


def rank_main(preproc, psf, output, report):
    """One rank: main_ex2d with MPI.COMM_WORLD; writes what happened to report.RANK.json."""
    from mpi4py import MPI
    import ex2d_desi

    comm = MPI.COMM_WORLD
    timing = {}
    outcome = {"rank": comm.rank, "error": None}
    try:
        ex2d_desi.main_ex2d(namespace(input=preproc, psf=psf, output=output), comm=comm,
                            timing=timing)
    except ex2d_desi.Ex2dError as err:
        outcome["error"] = [err.returncode, str(err)]
    outcome["steps"] = sorted(timing)
    with open("%s.%d.json" % (report, comm.rank), "w") as out:
        json.dump(outcome, out)


def mpirun(folder, preproc, psf, output):
    report = os.path.join(folder, "report")
    rank = ("hostname node$((OMPI_COMM_WORLD_RANK / 2)) && exec %s %s rank %s %s %s %s" % (
        sys.executable, os.path.abspath(__file__), preproc, psf, output, report))
    done = subprocess.run(["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", "3",
                           "unshare", "--uts", "sh", "-c", rank],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=300)
    outcomes = {}
    for r in range(3):
        path = "%s.%d.json" % (report, r)
        if os.path.exists(path):
            with open(path) as f:
                outcomes[r] = json.load(f)
            os.unlink(path)
    return done, outcomes


def skip_reason():
    if shutil.which("mpirun") is None or shutil.which("unshare") is None:
        return "mpirun or unshare is not installed (Debian python3-mpi4py, util-linux)"
    for module in ("mpi4py", "ex2d"):
        probe = subprocess.run([sys.executable, "-c", "import " + module],
                               capture_output=True, check=False)
        if probe.returncode != 0:
            return "%s does not import here" % module
    if subprocess.run(["unshare", "--uts", "true"], capture_output=True).returncode != 0:
        return "unshare --uts needs root"
    return None


def main():
    reason = skip_reason()
    if reason:
        print("skipped: " + reason)
        return 77
    failures = []
    with tempfile.TemporaryDirectory(prefix="ex2d-mpi-") as folder:
        psf = os.path.join(folder, "psf-r0.fits")
        preproc = os.path.join(folder, "preproc-r0-00000001.fits")
        subprocess.run([EX2D, "make-psf", "--camera", "r0", "-o", psf], check=True,
                       capture_output=True)
        subprocess.run([EX2D, "simulate", "-p", psf, "-o", preproc, "--truth",
                        os.path.join(folder, "truth.fits"), "-s", "0", "-n", "25", "-w",
                        OPTIONS["wavelength"]], check=True, capture_output=True)
        reference = os.path.join(folder, "reference.fits")
        subprocess.run([EX2D, "extract", "-i", preproc, "-p", psf, "-o", reference,
                        "-w", OPTIONS["wavelength"], "-n", "25", "--bundlesize", "5",
                        "--nsubbundles", "1", "--psferr", "0.01"], check=True,
                       capture_output=True)

        output = os.path.join(folder, "frame-r0-00000001.fits")
        done, outcomes = mpirun(folder, preproc, psf, output)
        print(done.stdout[-3000:])
        if done.returncode != 0 or sorted(outcomes) != [0, 1, 2]:
            failures.append("mpirun exited %d with reports of ranks %s" % (
                done.returncode, sorted(outcomes)))
        else:
            errors = {r: o["error"] for r, o in outcomes.items() if o["error"]}
            if errors:
                failures.append("ranks failed: %s" % errors)
            steps = {r: o["steps"] for r, o in outcomes.items()}
            wanted = {0: ["ex2d-extract", "ex2d-frame-start", "ex2d-read", "ex2d-write"],
                      1: [], 2: ["ex2d-extract", "ex2d-frame-start", "ex2d-read"]}
            if steps != wanted:
                failures.append("steps per rank %s, expected %s (ranks 0 and 2 extract, 0 "
                                "writes)" % (steps, wanted))
            compared = subprocess.run(
                [sys.executable, os.path.join(HERE, "..", "..", "docker", "compare-fits"),
                 output, reference], stdout=subprocess.PIPE, text=True)
            print(compared.stdout)
            if compared.returncode != 0:
                failures.append("the group's frame differs from ex2d extract's")
        left = sorted(set(os.listdir(folder)) - {"psf-r0.fits", "preproc-r0-00000001.fits",
                                                  "truth.fits", "reference.fits",
                                                  "frame-r0-00000001.fits"})
        if left:
            failures.append("files left: %s" % left)

        missing = os.path.join(folder, "preproc-r0-00000002.fits")
        done, outcomes = mpirun(folder, missing, psf, os.path.join(folder, "frame-2.fits"))
        codes = {r: (o["error"] or [None])[0] for r, o in outcomes.items()}
        if codes != {0: 3, 1: 3, 2: 3}:
            failures.append("a missing input gave exit codes %s per rank, expected 3 on each"
                            % codes)
        if os.path.exists(os.path.join(folder, "frame-2.fits")):
            failures.append("a frame was written for a missing input")
    for failure in failures:
        print("FAIL: " + failure)
    print("test_mpi_group: %s" % ("FAIL" if failures else "PASS"))
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "rank":
        rank_main(*sys.argv[2:6])
    else:
        sys.exit(main())
