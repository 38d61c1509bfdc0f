# SPDX-License-Identifier: BSD-3-Clause
"""What the report shows of one frame file: the summary numbers (always) and, for the frames
shown in detail, reduced images, the CHI2PIX histogram and three spectra. Only FLUX, IVAR,
MASK, WAVELENGTH, FIBERMAP, CHI2PIX and SCORES are read; RESOLUTION is never touched."""

import os
import re

import numpy as np

from .fits import FitsError, read_hdus

# specmask bits (desispec maskbits.py; docs: datamodel 3.5).
MASKBITS = {"SOMEBADPIX": 1, "ALLBADPIX": 2, "COSMIC": 4, "LOWFLAT": 8, "BADFIBERFLAT": 16,
            "BRIGHTSKY": 32, "BADSKY": 64, "BAD2DFIT": 128, "NODATA": 256, "BADFIBER": 512,
            "BADCOLUMN": 1024, "SATURATED": 2048, "CONTAMINATED": 4096}
SUMMARY_BITS = ("SOMEBADPIX", "ALLBADPIX", "BAD2DFIT", "BADCOLUMN")

# The mask map's categories, highest priority first (a reduced pixel shows the first that
# any of its bins has).
MAP_CATEGORIES = ("NaN", "ALLBADPIX", "BADCOLUMN", "BAD2DFIT", "SOMEBADPIX", "other bit",
                  "IVAR=0")

# Reduced images: at most this many fibres x wavelength bins.
IMAGE_ROWS, IMAGE_COLS = 250, 600

_NAME = re.compile(r"frame-([brz]\d)-(\d{8})\.fits(\.gz)?$")


def identify(path):
    """(camera, expid) from desispec's frame name, else (None, None)."""
    m = _NAME.search(os.path.basename(path))
    return (m.group(1), m.group(2)) if m else (None, None)


def _native(a, dtype=np.float32):
    return np.asarray(a).astype(dtype, copy=True)


def _reduce(a, fy, fx, how):
    ny, nx = a.shape[0] // fy * fy, a.shape[1] // fx * fx
    blocks = a[:ny, :nx].reshape(ny // fy, fy, nx // fx, fx)
    if how == "or":
        return np.bitwise_or.reduce(np.bitwise_or.reduce(blocks, axis=3), axis=1)
    return blocks.mean(axis=(1, 3))


def _factors(shape):
    return max(1, -(-shape[0] // IMAGE_ROWS)), max(1, -(-shape[1] // IMAGE_COLS))


def frame_stats(path, detail=False):
    """A dict of plain Python values (and small numpy arrays with detail=True) for the report.
    A file that cannot be read gives {"error": why} with the rest empty."""
    camera, expid = identify(path)
    rec = {"path": path, "camera": camera, "expid": expid, "error": None}
    try:
        if not os.path.exists(path):
            raise FitsError("%s: no such file" % path)
        hdus = read_hdus(path, ("FLUX", "IVAR", "MASK", "WAVELENGTH", "CHI2PIX"),
                         optional=("FIBERMAP", "SCORES"))
        _summarise(hdus, rec, detail)
    except (FitsError, OSError, KeyError, ValueError, TypeError) as e:
        rec["error"] = str(e) if path in str(e) else "%s: %s" % (path, e)
    return rec


def _summarise(hdus, rec, detail):
    head = hdus["FLUX"].header
    rec["camera"] = str(head.get("CAMERA", rec["camera"] or "")).strip().lower() or rec["camera"]
    if head.get("EXPID") is not None:
        rec["expid"] = "%08d" % int(head["EXPID"])
    rec["night"] = str(head.get("NIGHT", "")) or None
    rec["flavor"] = str(head.get("FLAVOR", ""))
    rec["exptime"] = head.get("EXPTIME")
    flux = _native(hdus["FLUX"].data)
    ivar = _native(hdus["IVAR"].data)
    mask = np.asarray(hdus["MASK"].data).astype(np.uint32, copy=False)
    chi2 = _native(hdus["CHI2PIX"].data)
    wave = _native(hdus["WAVELENGTH"].data, np.float64)
    if not (flux.shape == ivar.shape == mask.shape == chi2.shape) or wave.shape[0] != flux.shape[1]:
        raise FitsError("shapes differ: FLUX %s IVAR %s MASK %s CHI2PIX %s WAVELENGTH %s" % (
            flux.shape, ivar.shape, mask.shape, chi2.shape, wave.shape))
    nspec, nwave = flux.shape
    nbins = flux.size
    rec.update(nspec=nspec, nwave=nwave, nbins=nbins,
               wave_min=float(wave[0]), wave_max=float(wave[-1]))
    finite_flux = np.isfinite(flux)
    finite_ivar = np.isfinite(ivar)
    finite_chi2 = np.isfinite(chi2)
    rec["nan_flux"] = int(nbins - np.count_nonzero(finite_flux))
    rec["nan_ivar"] = int(nbins - np.count_nonzero(finite_ivar))
    rec["nan_chi2pix"] = int(nbins - np.count_nonzero(finite_chi2))
    rec["ivar0"] = int(np.count_nonzero(ivar == 0))
    rec["mask"] = {name: int(np.count_nonzero(mask & np.uint32(MASKBITS[name])))
                   for name in SUMMARY_BITS}
    rec["masked_any"] = int(np.count_nonzero(mask))
    good = chi2[finite_chi2]
    median = float(np.median(good)) if good.size else float("nan")
    rec["chi2_median"] = median
    rec["chi2_above5"] = int(np.count_nonzero(good > 5 * median)) if good.size else 0
    rec["bright_chi2_median"] = _bright_fibres_chi2(flux, chi2, finite_flux & finite_chi2)
    rec["trace_shifts"] = _trace_shifts(head)
    rec["scores"] = {}
    if "SCORES" in hdus:
        table = hdus["SCORES"].data
        for name in table.dtype.names:
            if name.startswith(("MEDIAN_RAW_SNR", "MEDIAN_RAW_COUNT", "SUM_RAW_COUNT")):
                col = np.asarray(table[name], dtype=np.float64)
                col = col[np.isfinite(col)]
                rec["scores"][name] = float(np.median(col)) if col.size else float("nan")
    fibers, objtype = None, None
    if "FIBERMAP" in hdus:
        fm = hdus["FIBERMAP"].data
        if "FIBER" in fm.dtype.names:
            fibers = np.asarray(fm["FIBER"], dtype=np.int64)
        if "OBJTYPE" in fm.dtype.names:
            objtype = np.char.strip(np.asarray(fm["OBJTYPE"], dtype=str))
    if fibers is None or fibers.shape[0] != nspec:
        fibers = np.arange(nspec) + int(head.get("FIBERMIN", 0) or 0)
    rec["nsky"] = int(np.count_nonzero(objtype == "SKY")) if objtype is not None else None
    if detail:
        rec["detail"] = _detail(flux, ivar, mask, chi2, wave, fibers, objtype,
                                finite_flux & finite_ivar)


# The brightest fibres show a PSF mismatch first: traces 0.1 px off raise their median
# CHI2PIX from 0.8 to 2.3, 0.2 px to 7 (docs/benchmarks.md, issue 31).
BRIGHT_FIBRE_FRACTION = 0.05


def _bright_fibres_chi2(flux, chi2, finite):
    """Median CHI2PIX over the brightest 5% of fibres (at least 3) by median flux."""
    nspec = flux.shape[0]
    if nspec == 0:
        return float("nan")
    level = np.array([np.median(flux[s][finite[s]]) if finite[s].any() else -np.inf
                      for s in range(nspec)])
    n = max(3, int(round(BRIGHT_FIBRE_FRACTION * nspec)))
    bright = np.argsort(level)[::-1][:min(n, nspec)]
    values = chi2[bright][finite[bright]]
    return float(np.median(values)) if values.size else float("nan")


def _trace_shifts(head):
    """The trace-shift step as the frame's header records it (TRSHIFT, MEANDX..MAXDY,
    TRSHFAIL), or None for a frame made without the step."""
    method = head.get("TRSHIFT")
    if method is None:
        return None
    out = {"method": str(method).strip(), "reason": str(head.get("TRSHFAIL", "") or "")}
    for key in ("MEANDX", "MINDX", "MAXDX", "MEANDY", "MINDY", "MAXDY"):
        value = head.get(key)
        out[key.lower()] = float(value) if value is not None else None
    return out


def _detail(flux, ivar, mask, chi2, wave, fibers, objtype, finite):
    fy, fx = _factors(flux.shape)
    cat = np.zeros(mask.shape, np.uint8)
    order = [("IVAR=0", None), ("other bit", None), ("SOMEBADPIX", "SOMEBADPIX"),
             ("BAD2DFIT", "BAD2DFIT"), ("BADCOLUMN", "BADCOLUMN"), ("ALLBADPIX", "ALLBADPIX"),
             ("NaN", None)]
    # Lowest priority first, so that higher ones overwrite.
    for label, bit in order:
        code = MAP_CATEGORIES.index(label) + 1
        if label == "IVAR=0":
            sel = ivar == 0
        elif label == "other bit":
            known = np.uint32(sum(MASKBITS[b] for b in SUMMARY_BITS))
            sel = (mask & ~known) != 0
        elif label == "NaN":
            sel = ~finite
        else:
            sel = (mask & np.uint32(MASKBITS[bit])) != 0
        cat[sel] = code
    # Priority within a reduced pixel: the smallest non-zero code wins.
    inv = np.where(cat > 0, (len(MAP_CATEGORIES) + 1 - cat), 0).astype(np.uint8)
    ny, nx = inv.shape[0] // fy * fy, inv.shape[1] // fx * fx
    top = inv[:ny, :nx].reshape(ny // fy, fy, nx // fx, fx).max(axis=(1, 3))
    catmap = np.where(top > 0, len(MAP_CATEGORIES) + 1 - top, 0).astype(np.uint8)
    clean_flux = np.where(finite, flux, 0)
    clean_ivar = np.where(finite, ivar, 0)
    positive = chi2[np.isfinite(chi2) & (chi2 > 0)]
    edges = np.linspace(-2, 3, 76)
    # Clipped in log10 and float64: a float32 CHI2PIX clipped to 0.01 has a log10 just below
    # -2 (and 1000's just above 3), which np.histogram would leave out.
    hist = np.histogram(np.clip(np.log10(positive.astype(np.float64)), edges[0], edges[-1]),
                        bins=edges)[0]
    level = np.median(clean_flux, axis=1)
    sky = np.flatnonzero(objtype == "SKY") if objtype is not None else np.array([], int)
    science = np.setdiff1d(np.arange(flux.shape[0]), sky)
    if science.size == 0:
        science = np.arange(flux.shape[0])
    picks = [("brightest", int(science[np.argmax(level[science])]))]
    ordered = science[np.argsort(level[science])]
    picks.append(("median", int(ordered[ordered.size // 2])))
    if sky.size:
        ordered_sky = sky[np.argsort(level[sky])]
        picks.append(("sky", int(ordered_sky[ordered_sky.size // 2])))
    spectra = [{"label": label, "index": i, "fiber": int(fibers[i]),
                "objtype": str(objtype[i]) if objtype is not None else "",
                "flux": clean_flux[i].copy(), "ivar": clean_ivar[i].copy()} for label, i in picks]
    return {
        "flux_image": _reduce(clean_flux, fy, fx, "mean").astype(np.float32),
        "ivar_image": _reduce(clean_ivar, fy, fx, "mean").astype(np.float32),
        "mask_map": catmap,
        "factors": (fy, fx),
        "fiber_range": (int(fibers[0]), int(fibers[-1])),
        "wave": wave.astype(np.float32),
        "chi2_hist": hist, "chi2_edges": edges,
        "chi2_zero": int(np.count_nonzero(chi2 == 0)),
        "spectra": spectra,
        "has_objtype": objtype is not None,
    }
