# SPDX-License-Identifier: BSD-3-Clause
"""Unit tests of ex2d_qa's pure functions (checks, stats, fits, render, report, fleet) on
hand-made records and small FITS files; no ex2d program, no Redis. test_ex2d_qa.py covers the
whole report on frames that ex2d writes."""

import base64
import gzip
import math
import os
import stat

import numpy as np
import pytest
from astropy.io import fits

from ex2d_qa import checks, fleet, render, report, stats
from ex2d_qa.fits import FitsError, read_hdus

NAN = float("nan")


def record(**kw):
    """A clean frame record as stats.frame_stats gives it: 1000 bins, nothing wrong."""
    rec = {"error": None, "nbins": 1000, "nan_flux": 0, "nan_ivar": 0, "nan_chi2pix": 0,
           "ivar0": 0, "chi2_median": 1.0, "chi2_above5": 0, "bright_chi2_median": 1.0,
           "mask": {b: 0 for b in stats.SUMMARY_BITS}, "trace_shifts": None}
    rec.update(kw)
    return rec


# ---- checks -------------------------------------------------------------------------------

@pytest.mark.parametrize("value, text", [
    (0, "0"), (7, "7"), (0.0, "0"), (2.0, "2"), (0.02, "0.02"), (1 / 3, "0.3333"),
    (1e-4, "1.00e-04"), (-2.5e-4, "-2.50e-04"), (123456.0, "1.23e+05"), (54321.0, "5.432e+04"),
    (NAN, "nan")])
def test_fmt(value, text):
    assert checks.fmt(value) == text


@pytest.mark.parametrize("shifts, want", [
    (None, 0.0), ({}, 0.0),
    ({"mindx": None, "maxdx": None, "mindy": None, "maxdy": None}, 0.0),
    ({"mindx": -2.5, "maxdx": 0.1, "mindy": None, "maxdy": 0.3}, 2.5),
    # MEANDX is not an extreme: a large mean with small extremes cannot happen, and is ignored.
    ({"meandx": 9.0, "mindx": 0.0, "maxdx": 0.2, "mindy": -0.4, "maxdy": 0.0}, 0.4)])
def test_trace_shift_max(shifts, want):
    assert checks.trace_shift_max(shifts) == want


def test_quantities_are_fractions_of_the_bins():
    rec = record(nbins=400, nan_flux=1, nan_ivar=2, nan_chi2pix=3, ivar0=10, chi2_above5=4,
                 chi2_median=1.5, mask={"SOMEBADPIX": 8, "ALLBADPIX": 0, "BAD2DFIT": 2,
                                        "BADCOLUMN": 40},
                 trace_shifts={"mindx": -0.2, "maxdx": 0.7, "mindy": 0.0, "maxdy": 0.1})
    q = checks.quantities(rec)
    assert q == {"nan": 6, "ivar0_frac": 0.025, "chi2_median": 1.5, "chi2_above5_frac": 0.01,
                 "SOMEBADPIX": 0.02, "ALLBADPIX": 0.0, "BAD2DFIT": 0.005, "BADCOLUMN": 0.1,
                 "bright_chi2_median": 1.0, "trace_shift_max": 0.7}
    assert {k for k, *_ in checks.THRESHOLDS} == set(q)


def test_quantities_of_an_empty_frame_do_not_divide_by_zero():
    q = checks.quantities(record(nbins=0, ivar0=0, chi2_above5=0))
    assert q["ivar0_frac"] == 0.0 and q["chi2_above5_frac"] == 0.0


SHIFTS = {"method": "failed", "reason": "", "mindx": None, "maxdx": None, "mindy": None,
          "maxdy": None}


@pytest.mark.parametrize("rec, flag, reasons", [
    (record(), "PASS", []),
    ({"error": "f.fits: truncated"}, "FAIL", ["f.fits: truncated"]),
    # 20 of 1000 bins is exactly the WARN threshold 0.02: not above it.
    (record(ivar0=20), "PASS", []),
    (record(ivar0=21), "WARN", ["fraction of bins with IVAR = 0 0.021 > 0.02"]),
    (record(ivar0=101), "FAIL", ["fraction of bins with IVAR = 0 0.101 > 0.1"]),
    (record(nan_ivar=1), "FAIL", ["bins with NaN or Inf in FLUX, IVAR or CHI2PIX 1 > 0"]),
    # A warning after a failure does not lower the flag.
    (record(chi2_median=12.0, bright_chi2_median=3.0), "FAIL",
     ["median CHI2PIX 12 > 10", "median CHI2PIX of the brightest 5% of fibres 3 > 2"]),
    (record(chi2_median=NAN, bright_chi2_median=NAN), "FAIL",
     ["median CHI2PIX is NaN", "median CHI2PIX of the brightest 5% of fibres is NaN"]),
    (record(trace_shifts=SHIFTS), "WARN", ["traces not shifted: the step failed"]),
    (record(trace_shifts=dict(SHIFTS, method="FAILED", reason="no line", maxdx=-3.5)), "FAIL",
     ["traces not shifted: no line", "largest trace shift |dx| or |dy| (px) 3.5 > 3"])])
def test_judge(rec, flag, reasons):
    assert checks.judge(rec) == (flag, reasons)


def test_worst():
    assert checks.worst([]) == "PASS"
    assert checks.worst(iter(["PASS", "WARN", "PASS"])) == "WARN"
    assert checks.worst(["WARN", "FAIL", "PASS"]) == "FAIL"
    with pytest.raises(KeyError):
        checks.worst(["PASS", "UNKNOWN"])


# ---- stats --------------------------------------------------------------------------------

@pytest.mark.parametrize("path, want", [
    ("frame-r0-00051060.fits", ("r0", "00051060")),
    ("/data/20201214/00051060/frame-z9-00051060.fits.gz", ("z9", "00051060")),
    ("frame-x0-00051060.fits", (None, None)), ("frame-b0-0005106.fits", (None, None)),
    ("frame-b0-00051060.fits.fz", (None, None)), ("frame-b0-00051060.fits.gzip", (None, None)),
    ("frame-b0-00051060.fits/other", (None, None))])
def test_identify(path, want):
    assert stats.identify(path) == want


def test_reduce_mean_and_or_drop_the_remainder():
    a = np.arange(35, dtype=np.float64).reshape(5, 7)
    # Blocks of 2 x 3: rows 0-1 and 2-3, columns 0-2 and 3-5; row 4 and column 6 are dropped.
    want = np.array([[(0 + 1 + 2 + 7 + 8 + 9) / 6, (3 + 4 + 5 + 10 + 11 + 12) / 6],
                     [(14 + 15 + 16 + 21 + 22 + 23) / 6, (17 + 18 + 19 + 24 + 25 + 26) / 6]])
    np.testing.assert_array_equal(stats._reduce(a, 2, 3, "mean"), want)
    m = np.zeros((4, 4), np.uint32)
    m[0, 1], m[1, 0], m[3, 3], m[2, 2] = 1, 1024, 2 ** 31, 128
    np.testing.assert_array_equal(stats._reduce(m, 2, 2, "or"),
                                  [[1025, 0], [0, 2 ** 31 + 128]])
    assert stats._reduce(m, 2, 2, "or").dtype == np.uint32


@pytest.mark.parametrize("shape, want", [
    ((0, 0), (1, 1)), ((250, 600), (1, 1)), ((251, 601), (2, 2)), ((500, 2881), (2, 5))])
def test_factors(shape, want):
    assert stats._factors(shape) == want


def test_bright_fibres_chi2():
    assert math.isnan(stats._bright_fibres_chi2(np.zeros((0, 4)), np.zeros((0, 4)),
                                                np.zeros((0, 4), bool)))
    # 100 fibres, fibre s at flux level s: the brightest 5 are 95..99, whose CHI2PIX is s/10.
    flux = np.repeat(np.arange(100.0)[:, None], 4, axis=1)
    chi2 = flux / 10
    finite = np.ones(flux.shape, bool)
    assert stats._bright_fibres_chi2(flux, chi2, finite) == pytest.approx(9.7)
    # A fibre without a finite bin ranks last even where the others are negative.
    flux[:4] = -5.0
    finite[0] = False
    chi2[0] = 1e6
    assert stats._bright_fibres_chi2(flux[:4], chi2[:4], finite[:4]) == pytest.approx(0.2)
    # Bins left out by ``finite`` are left out of the median too; none left gives NaN.
    finite[1:4, :3] = False
    assert stats._bright_fibres_chi2(flux[:4], chi2[:4], finite[:4]) == pytest.approx(0.2)
    assert math.isnan(stats._bright_fibres_chi2(flux[:1], chi2[:1], finite[:1]))


def test_trace_shifts_from_the_header():
    assert stats._trace_shifts(fits.Header()) is None
    head = fits.Header([("TRSHIFT", " sky "), ("MEANDX", 0.05), ("MINDX", -1),
                        ("MAXDY", 0.25)])
    assert stats._trace_shifts(head) == {
        "method": "sky", "reason": "", "meandx": 0.05, "mindx": -1.0, "maxdx": None,
        "meandy": None, "mindy": None, "maxdy": 0.25}
    head["TRSHFAIL"] = "no lines"
    assert stats._trace_shifts(head)["reason"] == "no lines"


def frame_arrays():
    """4 fibres x 6 bins with one bin of each mask-map category in fibre 0."""
    flux = np.array([[1.0] * 6, [5.0] * 6, [3.0] * 6, [2.0] * 6], np.float32)
    ivar = np.ones_like(flux)
    mask = np.zeros(flux.shape, np.uint32)
    chi2 = np.full(flux.shape, 1.0, np.float32)
    flux[0, 0] = np.nan           # NaN, over ALLBADPIX
    mask[0, 0] = 2
    mask[0, 1] = 2 | 1            # ALLBADPIX over SOMEBADPIX
    mask[0, 2] = 1024 | 128       # BADCOLUMN over BAD2DFIT
    mask[0, 3] = 4 | 1            # SOMEBADPIX over another bit (COSMIC)
    mask[0, 4] = 4                # another bit, over IVAR = 0
    ivar[0, 4:] = 0
    chi2[1] = [0, 0.001, 0.1, 1, 10, 1e4]
    return flux, ivar, mask, chi2


def test_detail_mask_map_spectra_and_histogram():
    flux, ivar, mask, chi2 = frame_arrays()
    finite = np.isfinite(flux) & np.isfinite(ivar)
    objtype = np.array(["TGT", "TGT", "SKY", "SKY"])
    d = stats._detail(flux, ivar, mask, chi2, np.linspace(6000, 6005, 6), np.arange(10, 14),
                      objtype, finite)
    code = {c: i + 1 for i, c in enumerate(stats.MAP_CATEGORIES)}
    assert d["mask_map"][0].tolist() == [code["NaN"], code["ALLBADPIX"], code["BADCOLUMN"],
                                         code["SOMEBADPIX"], code["other bit"], code["IVAR=0"]]
    assert not d["mask_map"][1:].any()
    assert d["factors"] == (1, 1) and d["fiber_range"] == (10, 13)
    assert d["flux_image"][0, 0] == 0  # NaN shown as 0
    # Fibre 1's CHI2PIX: one at 0, the rest clipped to 0.01..1000 (float32, as frames hold it:
    # 0.001 and 1e4 land in the first and last bins); 23 positive bins in all.
    assert d["chi2_zero"] == 1
    assert d["chi2_hist"].sum() == 23
    assert d["chi2_hist"][0] == 1 and d["chi2_hist"][-1] == 1
    assert [(s["label"], s["fiber"], s["objtype"]) for s in d["spectra"]] == [
        ("brightest", 11, "TGT"), ("median", 11, "TGT"), ("sky", 12, "SKY")]


def test_detail_reduced_pixel_shows_its_highest_category(monkeypatch):
    monkeypatch.setattr(stats, "IMAGE_ROWS", 2)
    monkeypatch.setattr(stats, "IMAGE_COLS", 3)
    flux, ivar, mask, chi2 = frame_arrays()
    d = stats._detail(flux, ivar, mask, chi2, np.arange(6.0), np.arange(4), None,
                      np.isfinite(flux))
    code = {c: i + 1 for i, c in enumerate(stats.MAP_CATEGORIES)}
    assert d["factors"] == (2, 2)
    assert d["mask_map"].tolist() == [[code["NaN"], code["BADCOLUMN"], code["other bit"]],
                                      [0, 0, 0]]
    np.testing.assert_allclose(d["flux_image"], [[(0 + 1 + 5 + 5) / 4, 3, 3], [2.5] * 3])
    # Without OBJTYPE there is no sky spectrum, and every fibre is a science one.
    assert [s["label"] for s in d["spectra"]] == ["brightest", "median"]
    assert not d["has_objtype"]


def write_frame(path, nspec=6, nwave=8, scores=True, fibermap=True):
    rng = np.random.default_rng(7)
    flux = rng.normal(10, 1, (nspec, nwave)).astype(np.float32)
    ivar = np.ones((nspec, nwave), np.float32)
    mask = np.zeros((nspec, nwave), np.uint32)
    chi2 = rng.uniform(0.5, 1.5, (nspec, nwave)).astype(np.float32)
    flux[1, 2], ivar[2, 3], chi2[3, 4] = np.nan, np.inf, np.nan
    ivar[4, :3] = 0
    mask[5, :] = 1 | 2 ** 31
    chi2[0, 0] = 100.0
    head = fits.Header([("CAMERA", "B1"), ("EXPID", 42), ("NIGHT", 20261122),
                        ("FIBERMIN", 250)])
    hdus = [fits.PrimaryHDU(), fits.ImageHDU(flux, head, name="FLUX"),
            fits.ImageHDU(ivar, name="IVAR"), fits.ImageHDU(mask, name="MASK"),
            fits.ImageHDU(np.linspace(6000, 6007, nwave), name="WAVELENGTH"),
            fits.ImageHDU(chi2, name="CHI2PIX")]
    if fibermap:
        hdus.append(fits.BinTableHDU.from_columns(
            [fits.Column("FIBER", "J", array=np.arange(500, 500 + nspec)),
             fits.Column("OBJTYPE", "3A", array=["TGT"] * (nspec - 2) + ["SKY"] * 2)],
            name="FIBERMAP"))
    if scores:
        hdus.append(fits.BinTableHDU.from_columns(
            [fits.Column("MEDIAN_RAW_SNR_B", "E", array=[1, 2, np.nan, 4, 8, 16][:nspec]),
             fits.Column("OTHER", "E", array=np.zeros(nspec))], name="SCORES"))
    fits.HDUList(hdus).writeto(path)
    return flux, ivar, mask, chi2


def test_frame_stats_numbers(tmp_path):
    path = str(tmp_path / "frame-r0-00000001.fits")
    flux, ivar, mask, chi2 = write_frame(path)
    rec = stats.frame_stats(path)
    good = chi2[np.isfinite(chi2)]
    assert rec["error"] is None
    assert (rec["camera"], rec["expid"], rec["night"]) == ("b1", "00000042", "20261122")
    assert (rec["nspec"], rec["nwave"], rec["nbins"]) == (6, 8, 48)
    assert (rec["wave_min"], rec["wave_max"]) == (6000.0, 6007.0)
    assert (rec["nan_flux"], rec["nan_ivar"], rec["nan_chi2pix"], rec["ivar0"]) == (1, 1, 1, 3)
    assert rec["mask"] == {"SOMEBADPIX": 8, "ALLBADPIX": 0, "BAD2DFIT": 0, "BADCOLUMN": 0}
    assert rec["masked_any"] == 8
    assert rec["chi2_median"] == pytest.approx(float(np.median(good)))
    assert rec["chi2_above5"] == 1
    assert rec["scores"] == {"MEDIAN_RAW_SNR_B": 4.0}
    assert rec["nsky"] == 2 and rec["trace_shifts"] is None
    assert "detail" not in rec
    assert stats.frame_stats(path, detail=True)["detail"]["fiber_range"] == (500, 505)
    # Without FIBERMAP the fibres count from FIBERMIN; without SCORES there are none.
    bare = str(tmp_path / "bare.fits")
    write_frame(bare, scores=False, fibermap=False)
    rec = stats.frame_stats(bare, detail=True)
    assert (rec["camera"], rec["nsky"], rec["scores"]) == ("b1", None, {})
    assert rec["detail"]["fiber_range"] == (250, 255)


def test_frame_stats_errors_name_the_file(tmp_path):
    missing = str(tmp_path / "frame-r0-00000001.fits")
    assert stats.frame_stats(missing)["error"] == "%s: no such file" % missing
    assert stats.frame_stats(missing)["camera"] == "r0"
    path = str(tmp_path / "frame-b0-00000001.fits")
    write_frame(path)
    with fits.open(path, mode="update") as h:
        h["WAVELENGTH"].data = np.zeros(5)
    err = stats.frame_stats(path)["error"]
    assert err.startswith(path + ": shapes differ: FLUX (6, 8)") and "WAVELENGTH (5,)" in err


# ---- fits ---------------------------------------------------------------------------------

REQUIRED = ("FLUX", "IVAR", "MASK", "WAVELENGTH", "CHI2PIX")


@pytest.fixture
def frame(tmp_path):
    path = str(tmp_path / "frame.fits")
    return path, write_frame(path)


def test_read_hdus_plain_and_gzip(frame, tmp_path):
    path, (flux, _, mask, _) = frame
    gz = str(tmp_path / "frame.fits.gz")
    with open(path, "rb") as f, gzip.open(gz, "wb") as out:
        out.write(f.read())
    for name in (path, gz):
        hdus = read_hdus(name, REQUIRED, optional=("FIBERMAP", "SCORES", "RESOLUTION"))
        assert sorted(hdus) == sorted(REQUIRED + ("FIBERMAP", "SCORES"))
        np.testing.assert_array_equal(hdus["FLUX"].data, flux)
        assert hdus["MASK"].data.dtype == np.uint32  # BZERO 2^31 applied
        np.testing.assert_array_equal(hdus["MASK"].data, mask)
        assert hdus["FLUX"].header["CAMERA"] == "B1"


def test_read_hdus_gzip_of_several_members(frame, tmp_path):
    path, (flux, *_) = frame
    with open(path, "rb") as f:
        raw = f.read()
    gz = str(tmp_path / "two.fits.gz")
    with open(gz, "wb") as out:  # cut at a FITS block, so that zlib alone stops half way
        out.write(gzip.compress(raw[:2880 * 3]) + gzip.compress(raw[2880 * 3:]))
    hdus = read_hdus(gz, REQUIRED, ("SCORES",))  # the first member ends after FLUX
    np.testing.assert_array_equal(hdus["FLUX"].data, flux)
    np.testing.assert_array_equal(hdus["SCORES"].data["MEDIAN_RAW_SNR_B"][:2], [1, 2])


def test_read_hdus_missing_required_and_optional(tmp_path):
    path = str(tmp_path / "bare.fits")
    write_frame(path, scores=False, fibermap=False)
    with pytest.raises(FitsError, match="^%s: HDU SCORES missing$" % path):
        read_hdus(path, REQUIRED + ("SCORES",))
    # An optional HDU absent from a whole file is no error.
    assert "SCORES" not in read_hdus(path, REQUIRED, optional=("SCORES",))


def cut(path, size):
    with open(path, "rb") as f:
        raw = f.read()
    with open(path, "wb") as f:
        f.write(raw[:size])
    return len(raw)


def test_read_hdus_optional_hdu_cut_off(frame):
    path = frame[0]
    with fits.open(path) as h:
        start = h["SCORES"].fileinfo()["hdrLoc"]
    cut(path, start + 100)  # in the SCORES header: the HDU is gone, and the file looks cut
    with pytest.raises(FitsError, match=r"^%s: HDU SCORES missing \(truncated: the file's %d "
                       "bytes are not a whole number of 2880-byte FITS blocks\\)$"
                       % (path, start + 100)):
        read_hdus(path, REQUIRED, optional=("SCORES",))


def test_read_hdus_data_cut_off(frame):
    path = frame[0]
    with fits.open(path) as h:
        start, span = h["IVAR"].fileinfo()["datLoc"], h["IVAR"].fileinfo()["datSpan"]
    cut(path, start + 10)
    with pytest.raises(FitsError) as e:
        read_hdus(path, REQUIRED)
    assert str(e.value) == (
        "%s: truncated: the data of HDU IVAR (%d bytes from byte %d) run past the end of the "
        "file (%d bytes)" % (path, span, start, start + 10))


def test_read_hdus_unreadable_files(tmp_path, frame):
    missing = str(tmp_path / "none.fits")
    with pytest.raises(FitsError, match="^%s: no such file$" % missing):
        read_hdus(missing, REQUIRED)
    empty = tmp_path / "empty.fits"
    empty.write_bytes(b"")
    with pytest.raises(FitsError, match=r"^%s: not a readable FITS file \(empty file\)"
                       % empty):
        read_hdus(str(empty), REQUIRED)
    text = tmp_path / "text.fits"
    text.write_bytes(b"not FITS at all\n" * 400)
    with pytest.raises(FitsError, match="^%s: not a readable FITS file" % text):
        read_hdus(str(text), REQUIRED)
    fake = tmp_path / "fake.fits.gz"
    fake.write_bytes(b"SIMPLE  =")
    with pytest.raises(FitsError, match="^%s: not a gzip file$" % fake):
        read_hdus(str(fake), REQUIRED)
    gz = tmp_path / "cut.fits.gz"
    with open(frame[0], "rb") as f:
        gz.write_bytes(gzip.compress(f.read())[:-50])
    with pytest.raises(FitsError, match="^%s: truncated or corrupt gzip file" % gz):
        read_hdus(str(gz), REQUIRED)


# ---- render -------------------------------------------------------------------------------

def test_stretch():
    assert render._stretch(np.array([])) == (0.0, 1.0)
    assert render._stretch(np.array([np.nan, np.inf, -np.inf])) == (0.0, 1.0)
    assert render._stretch(np.full((3, 3), 4.0)) == (4.0, 5.0)
    # 0, 1, ..., 1000 with NaN and Inf left out: the 1st and 99.5th percentiles are 10 and 995.
    ramp = np.concatenate([np.arange(1001.0), [np.nan, np.inf, -np.inf]])
    assert render._stretch(ramp) == pytest.approx((10.0, 995.0))


def png_size(text):
    raw = base64.b64decode(text)
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(raw[16:20], "big"), int.from_bytes(raw[20:24], "big")


def test_png_encodes_and_closes_the_figure():
    fig = render.plt.figure(figsize=(2, 1))
    assert png_size(render.png(fig)) == (2 * render.DPI, render.DPI)
    assert fig.number not in render.plt.get_fignums()


def test_timeline_and_frame_figures():
    assert render.timeline_figure([("b0", {"start": None}, "w")], "t") is None
    t = {"start": 10.0, "queue_wait": 2.0, "read": 1.0, "extract": None, "write": None}
    assert png_size(render.timeline_figure([("b0", t, "w1")], "exposure 1")) > (0, 0)
    flux, ivar, mask, chi2 = frame_arrays()
    d = stats._detail(flux, ivar, mask, chi2, np.arange(6.0), np.arange(4), None,
                      np.isfinite(flux))
    assert png_size(render.frame_figure({"detail": d, "chi2_median": NAN})) > (0, 0)


# ---- report -------------------------------------------------------------------------------

def test_find_frames(tmp_path):
    night = tmp_path / "exposures" / "20261122"
    for expid in ("00000002", "00000001"):
        (night / expid).mkdir(parents=True)
        for name in ("frame-r0-%s.fits.gz" % expid, "frame-b0-%s.fits" % expid,
                     "frame-b0-%s.fits.tmp" % expid, "sframe-b0-%s.fits" % expid):
            (night / expid / name).write_bytes(b"")
    got = report.find_frames([str(tmp_path), str(tmp_path / "missing.fits")])
    assert [os.path.relpath(p, str(night)) for p, _ in got[:4]] == [
        "00000001/frame-b0-00000001.fits", "00000001/frame-r0-00000001.fits.gz",
        "00000002/frame-b0-00000002.fits", "00000002/frame-r0-00000002.fits.gz"]
    assert [n for _, n in got] == ["20261122"] * 4 + [None]
    assert report._frames_in(str(tmp_path / "nowhere")) == []


def frame_obj(camera="b0", expid="00000001", night="20261122", rec=None, state=None,
              error=None):
    f = report.Frame("/x/frame-%s-%s.fits" % (camera, expid), camera, expid, night)
    f.rec = rec
    if error is None:
        error = "worker died" if state in ("failed", "dead") else ""
    f.fleet = {"state": state, "error": error} if state else None
    return f


def test_frame_state_and_anchor():
    f = frame_obj()
    assert f.anchor == "frame-20261122-00000001-b0"
    assert (f.state, f.readable) == ("missing or unreadable", False)
    f.rec = record()
    assert (f.state, f.readable) == ("done", True)
    f.fleet = {"state": "extracting"}
    assert f.state == "extracting"


@pytest.mark.parametrize("rec, state, want", [
    (record(), None, ("PASS", [])),
    (record(), "dead", ("FAIL", ["the fleet's state is dead: worker died"])),
    (record(ivar0=21), "writing", ("WARN", ["the fleet's state is writing",
                                            "fraction of bins with IVAR = 0 0.021 > 0.02"])),
    (record(nan_flux=1), "writing", ("FAIL", ["the fleet's state is writing",
                                              "bins with NaN or Inf in FLUX, IVAR or CHI2PIX 1 "
                                              "> 0"])),
    (None, "queued", ("WARN", ["not written yet: the fleet's state is queued"])),
    (None, None, ("FAIL", ["/x/frame-b0-00000001.fits: no such file"])),
    ({"error": "bad"}, "done", ("FAIL", ["bad"]))])
def test_report_judge(rec, state, want):
    assert report.Report([])._judge(frame_obj(rec=rec, state=state)) == want


def test_report_judge_shows_the_last_error_of_a_frame_in_flight():
    error = "output storage failing: /o/frame-b0.fits: No space left on device"
    f = frame_obj(state="writing", error=error)
    assert report.Report([])._judge(f) == (
        "WARN", ["not written yet: the fleet's state is writing", "last error: " + error])


def test_choose_details_puts_failures_first_then_the_latest_exposures():
    r = report.Report([], detail=3)
    frames = [frame_obj("b0", "00000001"), frame_obj("r0", "00000002"),
              frame_obj("b0", "00000002"), frame_obj("z0", "00000001"), frame_obj("r0", "00000003")]
    for f, flag in zip(frames, ("PASS", "PASS", "PASS", "WARN", "FAIL")):
        f.rec, f.flag = record(), flag
        r._place(f)
    frames.append(frame_obj("z0", "00000004"))  # unreadable: never drawn
    r._place(frames[-1])
    got = [(f.camera, f.expid) for f in r._choose_details()]
    assert got == [("r0", "00000003"), ("z0", "00000001"), ("b0", "00000002")]
    r.detail = None
    assert len(r._choose_details()) == 5


def test_place_and_expected_cameras():
    r = report.Report([], cameras=["b0", "r0"])
    r._place(frame_obj("b0", night=None))
    dup = frame_obj("b0", night=None)
    dup.path += ".gz"
    r._place(dup)
    r._add_expected()
    cams = r.nights["unknown"]["00000001"]
    assert sorted(cams) == ["b0", "b0 (frame-b0-00000001.fits.gz)", "r0"]
    assert cams["r0"].rec["error"] == "/x/frame-r0-00000001.fits.gz: no such file"


class FakeFleet:
    unavailable = None

    def night(self, night):
        return [{"expid": "00000001", "campaign": "reprocess"}]

    def exposure(self, expid, campaign):
        if expid != "00000001":
            return None
        return {"exposure": {"state": "extracting", "campaign": campaign},
                "frames": {"b0": {"state": "done"}, "r0": {"state": "queued"},
                           "z0": {"state": "failed", "error": "boom"}}}


def test_add_fleet_adds_the_frames_it_knows():
    r = report.Report([], fleet=FakeFleet())
    for expid in ("00000001", "00000002"):
        f = frame_obj("b0", expid, rec=record())
        r._place(f)
    r._add_fleet()
    cams = r.nights["20261122"]["00000001"]
    assert sorted(cams) == ["b0", "r0", "z0"] and cams["b0"].fleet == {"state": "done"}
    assert cams["r0"].path == "/x/frame-r0-00000001.fits.gz"
    # Frames the fleet has not written have no numbers to judge or sum on the page.
    assert not cams["r0"].readable and not cams["z0"].readable
    assert r._judge(cams["r0"]) == ("WARN", ["not written yet: the fleet's state is queued"])
    assert r._judge(cams["z0"]) == ("FAIL", ["the fleet's state is failed: boom"])
    assert r.timing[("20261122", "00000001")]["exposure"]["campaign"] == "reprocess"
    assert r.timing[("20261122", "00000002")] == {
        "available": False, "campaign": "nightly",
        "why": "the fleet's Redis does not know exposure 00000002"}


def test_report_with_frames_not_written_yet(tmp_path):
    folder = tmp_path / "20261122" / "00000001"
    folder.mkdir(parents=True)
    write_frame(str(folder / "frame-b0-00000001.fits"))
    r = report.Report([str(tmp_path)], fleet=FakeFleet(), processes=1, timelines=False).build()
    assert {f.camera: f.flag for f in r.all_frames()} == {"b0": "FAIL", "r0": "WARN",
                                                         "z0": "FAIL"}
    with open(r.write(str(tmp_path / "qa.html")), encoding="utf-8") as f:
        assert "not written yet: the fleet&#39;s state is queued" in f.read()


# ---- fleet --------------------------------------------------------------------------------

def test_frame_timing():
    h = {"state": "done", "queued_at": "1000", "reading_at": "3500", "extracting_at": 4000,
         "writing_at": "9000.5", "done_at": "9100.5"}
    assert fleet.frame_timing(h) == pytest.approx({"queue_wait": 2.5, "read": 0.5,
                                                   "extract": 5.0005, "write": 0.1,
                                                   "start": 3.5, "done": 9.1005})
    # A step not reached, a time that runs backwards or is not a number gives None.
    h.update(state="writing", done_at="", extracting_at="3000")
    assert fleet.frame_timing(h) == pytest.approx({"queue_wait": 2.5, "read": None,
                                                   "extract": 6.0005, "write": None,
                                                   "start": 3.5, "done": None})
    assert set(fleet.frame_timing({}).values()) == {None}


def fake_ctl(tmp_path, script):
    path = tmp_path / "ex2dctl"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_fleet_without_ex2dctl_runs_nothing():
    f = fleet.Fleet()
    assert f.unavailable == "no ex2dctl given (--no-fleet or run directly)"
    assert f.night("20261122") == [] and f.exposure("00000001") is None


def test_fleet_answers(tmp_path):
    ctl = fake_ctl(tmp_path, 'echo "$@" >> %s/args\ncase "$*" in *--night*) echo '
                   '\'{"exposures": [{"expid": "1"}]}\';; *) echo \'{"exposure": {}, "frames":'
                   ' [{"camera": "b0", "state": "done"}, {"state": "x"}]}\';; esac\n' % tmp_path)
    f = fleet.Fleet(ctl, ["--redis-port", "1"])
    assert f.night(20261122) == [{"expid": "1"}]
    assert f.exposure("00000001", "c") == {"exposure": {}, "frames": {"b0": {
        "camera": "b0", "state": "done"}}}
    assert (tmp_path / "args").read_text().splitlines() == [
        "--redis-port 1 --json status --night 20261122",
        "--redis-port 1 --json status --exposure 00000001 --campaign c"]
    assert f.unavailable is None


@pytest.mark.parametrize("script, why", [
    ("echo warming >&2\necho 'cannot reach Redis' >&2\nexit 3\n", "cannot reach Redis"),
    ("exit 4\n", "ex2dctl exited 4"),
    ("echo '{not json'\n", "ex2dctl status: unreadable answer ("),
    ("echo '{\"exposure\": {}, \"frames\": [{\"state\": \"done\"}]}'\n", None)])
def test_fleet_unavailable(tmp_path, script, why):
    f = fleet.Fleet(fake_ctl(tmp_path, script))
    assert f.exposure("00000001") is None  # also an answer without a state or a camera
    if why is None:
        assert f.unavailable is None
    else:
        assert f.unavailable.startswith(why)
        os.remove(f.ex2dctl)  # once unavailable, ex2dctl is not run again
        assert f.night("20261122") == [] and f.unavailable.startswith(why)


def test_fleet_missing_program(tmp_path):
    f = fleet.Fleet(str(tmp_path / "no-ex2dctl"))
    assert f.night("1") == []
    assert f.unavailable.startswith("ex2dctl status: [Errno 2]")
