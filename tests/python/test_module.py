# SPDX-License-Identifier: BSD-3-Clause
"""The Python module (import ex2d) against the ex2d program on the same small frame: every
output array bit-identical to the frame file `ex2d extract` writes; arrays in and out (dtypes,
views, non-contiguous input); bad shapes, dtypes, NaN and options refused with the program's
exception classes; Ctrl-C; the GIL released; log lines in Python's logging."""

import logging
import os
import signal
import subprocess
import threading
import time

import numpy as np
import pytest

import ex2d

EX2D = os.environ.get("EX2D_BINARY", "ex2d")
REAL_PSF = os.environ.get("EX2D_REAL_PSF", "")
NSPEC = 50
GRID = "6000.0,6160.0,0.8"

fits = pytest.importorskip("astropy.io.fits", reason="astropy reads the program's frame files")


def run(*command):
    done = subprocess.run([EX2D, *command], capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"ex2d {' '.join(command)}: {done.stdout}{done.stderr}"


@pytest.fixture(scope="session")
def frame_files(tmp_path_factory):
    """A 50-fibre r frame (the real r0 PSF cut down where ../shared/data has it, else a
    synthetic one) and `ex2d extract`'s frame and model of it."""
    folder = tmp_path_factory.mktemp("frame")
    source = REAL_PSF if os.path.exists(REAL_PSF) else str(folder / "synthetic.fits")
    if source != REAL_PSF:
        run("make-psf", "--camera", "r0", "-o", source)
    psf = str(folder / "psf.fits")
    run("make-psf", "--from", source, "--fibers", str(NSPEC), "--wave-range", "5990,6170",
        "--camera", "r0", "-o", psf)
    preproc = str(folder / "preproc.fits")
    run("simulate", "-p", psf, "-o", preproc, "--truth", str(folder / "truth.fits"), "--seed",
        "7")
    frame, model = str(folder / "frame.fits"), str(folder / "model.fits")
    run("extract", "-i", preproc, "-p", psf, "-o", frame, "-m", model, "-w", GRID, "-n",
        str(NSPEC), "--threads", "2", "--backend", "cpu")
    return {"psf": psf, "preproc": preproc, "frame": frame, "model": model}


@pytest.fixture(scope="session")
def long_frame(tmp_path_factory):
    """A frame that takes seconds on one thread (100 fibres x 1501 bins), so that a Ctrl-C sent
    at 0.2 s always comes while the engine works."""
    folder = tmp_path_factory.mktemp("long")
    source = REAL_PSF if os.path.exists(REAL_PSF) else str(folder / "synthetic.fits")
    if source != REAL_PSF:
        run("make-psf", "--camera", "r0", "-o", source)
    psf = str(folder / "psf.fits")
    run("make-psf", "--from", source, "--fibers", "100", "--wave-range", "5990,7210", "--camera",
        "r0", "-o", psf)
    preproc = str(folder / "preproc.fits")
    run("simulate", "-p", psf, "-o", preproc, "--truth", str(folder / "truth.fits"))
    return {"psf": psf, "preproc": preproc, "wavelength": "6000.0,7200.0,0.8"}


@pytest.fixture(scope="session")
def inputs(frame_files):
    return ex2d.read_psf(frame_files["psf"]), ex2d.read_preproc(frame_files["preproc"])


@pytest.fixture(scope="session")
def extraction(inputs):
    psf, pre = inputs
    return ex2d.extract(pre.image, pre.ivar, pre.mask, psf, wavelength=GRID, nspec=NSPEC,
                        threads=2, model=True)


def same_frame(a, b):
    for name in ("wave", "flux", "ivar", "mask", "chi2pix", "resolution", "xflux"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name


def test_bit_identical_to_the_program(frame_files, extraction):
    with fits.open(frame_files["frame"]) as frame:
        for hdu, array in (("FLUX", extraction.flux), ("IVAR", extraction.ivar),
                           ("MASK", extraction.mask), ("CHI2PIX", extraction.chi2pix),
                           ("RESOLUTION", extraction.resolution),
                           ("WAVELENGTH", extraction.wave)):
            stored = frame[hdu].data
            assert stored.shape == array.shape, hdu
            # The file holds desispec's float32 (WAVELENGTH float64, MASK uint32).
            assert np.array_equal(array.astype(stored.dtype), stored), hdu
    model = fits.getdata(frame_files["model"])
    assert np.array_equal(extraction.model.astype(model.dtype), model)


def test_outputs_are_views_of_the_engine_with_desispec_shapes(inputs, extraction):
    psf, _ = inputs
    nwave = 201  # numpy.arange(6000, 6160 + 0.4, 0.8)
    assert extraction.wave.shape == (nwave,)
    for name in ("flux", "ivar", "chi2pix", "pixmask_fraction", "xflux"):
        array = getattr(extraction, name)
        assert array.shape == (NSPEC, nwave) and array.dtype == np.float64, name
        assert not array.flags["OWNDATA"] and array.base is not None, name
    assert extraction.mask.dtype == np.uint32
    assert extraction.resolution.shape == (NSPEC, 11, nwave)
    assert extraction.model.shape == (psf.npix_y, psf.npix_x)
    assert extraction.npatch > 0 and extraction.npatch_failed == 0
    # A view outlives the Extraction it came from.
    flux = ex2d.extract(*planes(inputs), psf, wavelength=GRID, nspec=25).flux
    assert np.isfinite(flux).all() and flux.shape == (25, nwave)


def planes(inputs):
    _, pre = inputs
    return pre.image, pre.ivar, pre.mask


def test_input_layouts_and_dtypes_give_the_same_frame(inputs, extraction):
    psf, pre = inputs
    image, ivar, mask = planes(inputs)
    wide = np.zeros((image.shape[0], 2 * image.shape[1]))
    wide[:, ::2] = image  # a strided view: not contiguous
    for args in ((wide[:, ::2], ivar, mask),
                 (np.asfortranarray(image), np.asfortranarray(ivar), mask),
                 (image, ivar, mask.astype(np.int32)),
                 (image, ivar, mask.astype(np.int64))):
        same_frame(ex2d.extract(*args, psf, wavelength=GRID, nspec=NSPEC, threads=2),
                   extraction)
    single = ex2d.extract(image.astype(np.float32), ivar, mask, psf, wavelength=GRID,
                          nspec=NSPEC, threads=2)
    reference = ex2d.extract(image.astype(np.float32).astype(np.float64), ivar, mask, psf,
                             wavelength=GRID, nspec=NSPEC, threads=2)
    same_frame(single, reference)
    by_tuple = ex2d.extract(image, ivar, mask, psf, wavelength=(6000.0, 6160.0, 0.8),
                            nspec=NSPEC, threads=2)
    same_frame(by_tuple, extraction)


@pytest.mark.parametrize("change, message", [
    (lambda i, v, m: (i[:, :-1], v, m), "differ in shape"),
    (lambda i, v, m: (i[:-1], v[:-1], m[:-1]), "is for a"),
    (lambda i, v, m: (i[0], v, m), "2-D image"),
    (lambda i, v, m: (i, v, m.astype(np.float64)), "an integer mask is needed"),
    (lambda i, v, m: (i.astype(np.complex128), v, m), "a real array is needed"),
    (lambda i, v, m: (i, np.where(v > 0, np.nan, v), m), "ivar at (0, 0) is nan"),
    (lambda i, v, m: (i, -v, m), "must be finite and >= 0"),
    (lambda i, v, m: (np.where(v > 0, np.inf, i), v, m), "where ivar > 0 and mask == 0"),
    (lambda i, v, m: ("image", v, m), "image has dtype <U5; a real array is needed"),
])
def test_bad_arrays_are_refused_with_what_is_wrong(inputs, change, message):
    psf, _ = inputs
    with pytest.raises(ex2d.UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ex2d.extract(*change(*planes(inputs)), psf, nspec=NSPEC)


def test_nan_where_masked_is_ignored_as_the_program_ignores_it(inputs, extraction):
    psf, _ = inputs
    image, ivar, mask = (a.copy() for a in planes(inputs))
    ivar[10, 10], image[10, 10] = 0.0, np.nan
    masked = ex2d.extract(image, ivar, mask, psf, wavelength=GRID, nspec=NSPEC, threads=2)
    image[10, 10] = 0.0
    same_frame(masked, ex2d.extract(image, ivar, mask, psf, wavelength=GRID, nspec=NSPEC,
                                    threads=2))


@pytest.mark.parametrize("options, error, message", [
    ({"nspec": 7}, ex2d.UsageError, "multiple of bundlesize"),
    ({"wavelength": "6000,5000,0.8"}, ex2d.UsageError, "wavelength"),
    ({"wavelength": (5000.0, 6100.0, 0.8)}, ex2d.UsageError, "outside the range"),
    ({"psferr": -1.0}, ex2d.UsageError, "psferr must be >= 0"),
    ({"threads": -1}, ex2d.UsageError, "threads must be >= 0"),
    ({"backend": "gpu"}, ex2d.UsageError, "unknown backend 'gpu'"),
])
def test_bad_options_are_refused_with_the_programs_message(inputs, options, error, message):
    psf, _ = inputs
    with pytest.raises(error, match=message) as raised:
        ex2d.extract(*planes(inputs), psf, **{"nspec": NSPEC, **options})
    assert raised.value.exit_code == 2 and isinstance(raised.value, ValueError)


def test_missing_and_bad_files_are_input_errors(tmp_path, frame_files):
    with pytest.raises(ex2d.InputError, match="no such file") as raised:
        ex2d.read_psf(str(tmp_path / "missing.fits"))
    assert raised.value.exit_code == 3 and isinstance(raised.value, OSError)
    with pytest.raises(ex2d.InputError, match="preproc.fits"):
        ex2d.read_psf(frame_files["preproc"])
    with pytest.raises(ex2d.InputError):
        ex2d.read_preproc(frame_files["psf"])


def test_cuda_without_a_device_is_an_extraction_error(inputs):
    psf, _ = inputs
    try:
        backend = ex2d.Backend("cuda")
    except ex2d.ExtractionError as error:
        assert error.exit_code == 1 and isinstance(error, RuntimeError)
        assert "not compiled" in str(error) or "device unavailable" in str(error)
    else:
        assert backend.name == "cuda"  # a machine with a device: nothing to refuse


def test_a_backend_is_kept_between_extractions(inputs, extraction):
    psf, _ = inputs
    backend = ex2d.Backend("cpu", threads=2)
    for _ in range(2):
        same_frame(ex2d.extract(*planes(inputs), psf, wavelength=GRID, nspec=NSPEC,
                                backend=backend), extraction)


def test_ctrl_c_stops_the_extraction_and_the_next_one_runs(long_frame):
    psf, pre = ex2d.read_psf(long_frame["psf"]), ex2d.read_preproc(long_frame["preproc"])
    arguments = dict(wavelength=long_frame["wavelength"], nspec=100, threads=1)
    timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
    started = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        ex2d.extract(pre.image, pre.ivar, pre.mask, psf, **arguments)
    stopped = time.monotonic() - started
    timer.join()
    one_thread = time.monotonic()
    whole = ex2d.extract(pre.image, pre.ivar, pre.mask, psf, **arguments)
    seconds = time.monotonic() - one_thread
    # Stopped within the module's 0.1 s look at signals and a patch, long before the end.
    assert stopped < 0.2 + 0.5 * seconds, (stopped, seconds)
    assert whole.npatch > 0 and whole.npatch_failed == 0


def test_the_gil_is_released_while_extracting(long_frame):
    psf, pre = ex2d.read_psf(long_frame["psf"]), ex2d.read_preproc(long_frame["preproc"])
    ticks, results = [0], {}
    done = threading.Event()

    def count():
        while not done.is_set():
            ticks[0] += 1
            time.sleep(0.001)

    def extract(key):
        results[key] = ex2d.extract(pre.image, pre.ivar, pre.mask, psf,
                                    wavelength=long_frame["wavelength"], nspec=100, threads=1)

    counter = threading.Thread(target=count)
    counter.start()
    workers = [threading.Thread(target=extract, args=(k,)) for k in range(2)]
    started = time.monotonic()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    elapsed = time.monotonic() - started
    done.set()
    counter.join()
    same_frame(results[0], results[1])
    # The two extractions take about a second side by side; a counter that could not run
    # while they held the GIL would tick only before and after them, a few times.
    assert elapsed > 0.5 and ticks[0] >= 100, (ticks[0], elapsed)


def test_log_lines_reach_pythons_logging(tmp_path, frame_files, caplog):
    with fits.open(frame_files["preproc"]) as hdus:
        hdus["IMAGE"].data[5, 7:10] = np.nan
        hdus.writeto(tmp_path / "nan.fits")
    with caplog.at_level(logging.INFO, logger="ex2d"):
        pre = ex2d.read_preproc(str(tmp_path / "nan.fits"))
    lines = [r for r in caplog.records if r.name == "ex2d"]
    assert any(r.levelno == logging.WARNING and "3" in r.getMessage() for r in lines), \
        [r.getMessage() for r in lines]
    assert (pre.mask[5, 7:10] != 0).all() and (pre.ivar[5, 7:10] == 0).all()


def same_files(path_a, path_b):
    """Every HDU's data and header card equal; CHECKSUM only differs (its comment carries the
    time of writing)."""
    with fits.open(path_a) as a, fits.open(path_b) as b:
        assert [h.name for h in a] == [h.name for h in b]
        for x, y in zip(a, b):
            if hasattr(x, "columns"):
                assert x.columns.names == y.columns.names, x.name
                for column in x.columns.names:
                    assert np.array_equal(x.data[column], y.data[column]), (x.name, column)
            else:
                assert np.array_equal(x.data, y.data), x.name
            keys = [k for k in x.header if k != "CHECKSUM"]
            assert keys == [k for k in y.header if k != "CHECKSUM"], x.name
            for key in keys:
                assert x.header[key] == y.header[key], (x.name, key)


def test_extract_file_writes_the_programs_frame_in_process(tmp_path, frame_files, caplog):
    output, model = tmp_path / "frame.fits", tmp_path / "model.fits"
    with caplog.at_level(logging.INFO, logger="ex2d"):
        steps = ex2d.extract_file(frame_files["preproc"], frame_files["psf"], output,
                                  model=model, wavelength=(6000.0, 6160.0, 0.8), nspec=NSPEC,
                                  threads=2, backend="cpu")
    same_files(frame_files["frame"], output)
    same_files(frame_files["model"], model)
    assert sorted(steps) == ["extract", "read", "write"]
    assert steps["read"][0] <= steps["read"][1] <= steps["extract"][0] <= steps["extract"][1]
    assert steps["extract"][1] <= steps["write"][0] <= steps["write"][1]
    # The program's log lines, live in Python's logging: progress and the final line.
    messages = [r.getMessage() for r in caplog.records if r.name == "ex2d"]
    assert any(m.startswith("progress task=extract") for m in messages), messages
    assert any(m.startswith("extract done") and f"output={output}" in m for m in messages)


def test_command_line_errors_are_the_programs(tmp_path, frame_files):
    with pytest.raises(ex2d.InputError, match="missing.fits") as raised:
        ex2d.extract_file(tmp_path / "missing.fits", frame_files["psf"], tmp_path / "f.fits",
                          nspec=NSPEC)
    assert raised.value.exit_code == 3
    with pytest.raises(ex2d.UsageError, match="--psferr must be >= 0"):
        ex2d.extract_file(frame_files["preproc"], frame_files["psf"], tmp_path / "f.fits",
                          psferr=-1, nspec=NSPEC)
    with pytest.raises(ex2d.UsageError, match="spectra 0..499 exceed the PSF's 50 fibres"):
        ex2d.extract_file(frame_files["preproc"], frame_files["psf"], tmp_path / "f.fits")
    with pytest.raises(ex2d.UsageError, match="--no-such-option"):
        ex2d.run(["extract", "-i", "a", "-p", "b", "-o", "c", "--no-such-option"])
    (tmp_path / "file").write_text("")
    with pytest.raises(ex2d.OutputError, match="cannot write frame") as raised:
        ex2d.extract_file(frame_files["preproc"], frame_files["psf"],
                          tmp_path / "file" / "f.fits", nspec=NSPEC)
    assert raised.value.exit_code == 4 and isinstance(raised.value, OSError)
    assert not list(tmp_path.glob("f.fits*"))


def test_ctrl_c_in_extract_file_leaves_no_file(tmp_path, long_frame):
    timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        ex2d.extract_file(long_frame["preproc"], long_frame["psf"], tmp_path / "f.fits",
                          wavelength=long_frame["wavelength"], nspec=100, threads=1,
                          backend="cpu")
    timer.join()
    assert list(tmp_path.iterdir()) == []
