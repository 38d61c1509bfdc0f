# SPDX-License-Identifier: BSD-3-Clause
"""The report's figures, drawn by matplotlib (Agg) into small PNGs returned as base64 text."""

import base64
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import ListedColormap  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from .stats import MAP_CATEGORIES  # noqa: E402

DPI = 64
plt.rcParams.update({"font.size": 8, "axes.titlesize": 9, "axes.labelsize": 8,
                     "legend.fontsize": 7, "figure.dpi": DPI})

CATEGORY_COLOURS = ["#ffffff", "#000000", "#d62728", "#9467bd", "#ff7f0e", "#1f77b4",
                    "#8c564b", "#7f7f7f"]


def png(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _stretch(image):
    finite = image[np.isfinite(image)]
    if finite.size == 0:
        return 0.0, 1.0
    lo, hi = np.percentile(finite, [1, 99.5])
    return float(lo), float(hi if hi > lo else lo + 1)


def frame_figure(rec):
    """FLUX and IVAR images (fibre x wavelength), the mask-bit map, CHI2PIX's distribution and
    three spectra with their ivar, for one frame (rec from stats.frame_stats(detail=True))."""
    d = rec["detail"]
    wave = d["wave"]
    f0, f1 = d["fiber_range"]
    extent = (float(wave[0]), float(wave[-1]), f0 - 0.5, f1 + 0.5)
    fig = plt.figure(figsize=(11, 9.5))
    grid = fig.add_gridspec(4, 2, height_ratios=[1, 1, 0.9, 0.9], hspace=0.55, wspace=0.18,
                            left=0.06, right=0.94, top=0.95, bottom=0.06)
    fy, fx = d["factors"]
    note = " (mean of %d x %d bins)" % (fy, fx) if fy * fx > 1 else ""
    for col, (key, title, cmap) in enumerate((("flux_image", "FLUX [electron/A]", "viridis"),
                                              ("ivar_image", "IVAR", "magma"))):
        ax = fig.add_subplot(grid[0, col])
        lo, hi = _stretch(d[key])
        im = ax.imshow(d[key], aspect="auto", origin="lower", extent=extent, cmap=cmap,
                       vmin=lo, vmax=hi, interpolation="nearest")
        ax.set_title(title + note)
        ax.set_xlabel("wavelength [A]")
        ax.set_ylabel("fibre")
        fig.colorbar(im, ax=ax, fraction=0.04, pad=0.01)
    ax = fig.add_subplot(grid[1, 0])
    cmap = ListedColormap(CATEGORY_COLOURS[:len(MAP_CATEGORIES) + 1])
    ax.imshow(d["mask_map"], aspect="auto", origin="lower", extent=extent, cmap=cmap,
              vmin=-0.5, vmax=len(MAP_CATEGORIES) + 0.5, interpolation="nearest")
    present = sorted(set(np.unique(d["mask_map"]).tolist()) - {0})
    ax.legend(handles=[Patch(facecolor=CATEGORY_COLOURS[c], edgecolor="k",
                             label=MAP_CATEGORIES[c - 1]) for c in present] or
              [Patch(facecolor="w", edgecolor="k", label="no bin masked")],
              loc="upper right", framealpha=0.85)
    ax.set_title("MASK bits (a reduced pixel shows the highest of its bins)")
    ax.set_xlabel("wavelength [A]")
    ax.set_ylabel("fibre")
    ax = fig.add_subplot(grid[1, 1])
    edges = d["chi2_edges"]
    ax.stairs(d["chi2_hist"], 10 ** edges, fill=True, color="#4c72b0")
    ax.set_xscale("log")
    ax.set_yscale("log")
    med = rec["chi2_median"]
    if np.isfinite(med) and med > 0:
        ax.axvline(med, color="k", lw=1, label="median %.3g" % med)
        ax.axvline(5 * med, color="r", lw=1, ls="--", label="5 x median")
    ax.set_title("CHI2PIX distribution (%d bins at 0; clipped to 0.01..1000)" % d["chi2_zero"])
    ax.set_xlabel("CHI2PIX")
    ax.set_ylabel("bins")
    ax.legend(loc="upper right")
    spectra = d["spectra"]
    for k, s in enumerate(spectra):
        ax = fig.add_subplot(grid[2 + k // 2, k % 2])
        ax.plot(wave, s["flux"], lw=0.6, color="#1f77b4")
        ax.set_ylabel("flux", color="#1f77b4")
        lo, hi = _stretch(s["flux"])
        pad = 0.1 * (hi - lo)
        ax.set_ylim(lo - pad, hi + pad)
        twin = ax.twinx()
        twin.plot(wave, s["ivar"], lw=0.6, color="#ff7f0e", alpha=0.8)
        twin.set_ylabel("ivar", color="#ff7f0e")
        ax.set_title("%s fibre %d%s" % (s["label"], s["fiber"],
                                          " (OBJTYPE %s)" % s["objtype"] if s["objtype"] else ""))
        ax.set_xlabel("wavelength [A]")
    if len(spectra) < 3:
        ax = fig.add_subplot(grid[3, 1])
        ax.axis("off")
        ax.text(0.5, 0.5, "no sky fibre (OBJTYPE == 'SKY') in FIBERMAP" if d["has_objtype"]
                else "no OBJTYPE column in FIBERMAP", ha="center", va="center")
    return png(fig)


def timeline_figure(rows, title):
    """Each frame's queue wait, read, extract and write as bars over time, one row per frame,
    coloured by step; rows: [(label, timing dict, worker)]."""
    rows = [r for r in rows if r[1].get("start") is not None]
    if not rows:
        return None
    t0 = min(r[1]["start"] - (r[1]["queue_wait"] or 0) for r in rows)
    fig, ax = plt.subplots(figsize=(10, 1.4 + 0.16 * len(rows)))
    colours = {"queue_wait": "#c7c7c7", "read": "#2ca02c", "extract": "#1f77b4",
               "write": "#d62728"}
    for y, (label, t, worker) in enumerate(rows):
        x = t["start"] - (t["queue_wait"] or 0) - t0
        for step in ("queue_wait", "read", "extract", "write"):
            if t[step] is None:
                break
            ax.barh(y, t[step], left=x, color=colours[step], height=0.8)
            x += t[step]
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r[0] for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel("seconds since the first frame was queued")
    ax.set_title(title, loc="left")
    ax.legend(handles=[Patch(color=c, label=k.replace("_", " ")) for k, c in colours.items()],
              loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=4, frameon=False)
    fig.tight_layout()
    return png(fig)
