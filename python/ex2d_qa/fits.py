# SPDX-License-Identifier: BSD-3-Clause
"""Frame files read with astropy.io.fits. A plain ``.fits`` is memory-mapped and its HDUs are
loaded lazily, so only those asked for are read (RESOLUTION, 51 of a frame's 70 MB, is not).
A ``.fits.gz`` cannot be read in part (gzip cannot seek): it is inflated whole in memory, by
ISA-L (Debian's python3-isal) where installed, else by zlib, and astropy parses that buffer.
Whatever keeps a file from being read (missing, truncated, not FITS, a cut gzip stream)
becomes a FitsError that names the file and the problem."""

import collections
import io
import os
import warnings

from astropy.io import fits
from astropy.utils.exceptions import AstropyWarning

try:  # python3-isal: the API of zlib and gzip, about twice their speed at inflating
    from isal import igzip as _gzip
    from isal import isal_zlib as _zlib
    INFLATER = "ISA-L (python3-isal)"
except ImportError:
    import gzip as _gzip
    import zlib as _zlib
    INFLATER = "zlib"


# What read_hdus gives of one HDU. The data are held here: astropy drops a memory-mapped
# HDU's data when its file is closed unless something else refers to them.
Hdu = collections.namedtuple("Hdu", "header data")


class FitsError(Exception):
    """A file that is not a readable FITS file: the message says why (truncated, bad header)."""


def _inflate(path):
    """The content of the gzip file ``path`` (every member, checked against its CRC)."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] != b"\x1f\x8b":
        raise FitsError("%s: not a gzip file" % path)
    # The trailer's size (ISIZE) sizes the output buffer at once where it is plausible (a cut
    # file's last 4 bytes are no trailer); else the buffer grows as zlib needs.
    isize = int.from_bytes(raw[-4:], "little")
    hint = isize if 0 < isize <= 64 * len(raw) else 1 << 24
    try:
        data = _zlib.decompress(raw, 31, hint)
        # zlib.decompress stops after the first gzip member. A file of several (which the
        # writer never makes, and CFITSIO would not read whole) shows as a length other than
        # the last trailer's: inflate every member then.
        if len(data) & 0xFFFFFFFF != isize:
            data = _gzip.decompress(raw)
    except (_zlib.error, EOFError, OSError) as e:  # gzip.BadGzipFile is an OSError
        raise FitsError("%s: truncated or corrupt gzip file (%s)" % (path, e)) from None
    return data


def read_hdus(path, names, optional=()):
    """{EXTNAME: Hdu(header, data)} of the HDUs ``names`` (each must be there) and ``optional``
    (those that are there) of ``path`` (.fits or .fits.gz), their ``data`` read and checked
    against the file's length. Image data keep the file's byte order (MASK comes as uint32:
    astropy applies BZERO); table data are astropy FITS_rec. Raises FitsError with the file
    named."""
    try:
        if path.endswith(".gz"):
            source = io.BytesIO(_inflate(path))
            memmap = False
        else:
            # memmap=None: memory-mapped as True would be, but an image that astropy must
            # scale (MASK: BZERO 2^31 to uint32) is copied out of the map instead of refused.
            source = path
            memmap = None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", AstropyWarning)
            with fits.open(source, memmap=memmap, lazy_load_hdus=True) as hdul:
                out = {}
                for name in tuple(names) + tuple(optional):
                    try:
                        hdu = hdul[name]
                    except KeyError:
                        # Absent, or in a part of the file that was cut off: an optional
                        # HDU's absence is an error only in a file that looks cut.
                        why = _why_short(source, caught)
                        if name in names or why:
                            raise FitsError("%s: HDU %s missing%s" % (path, name, why)) from None
                        continue
                    out[name] = Hdu(hdu.header, _data(hdu, source, path))
        return out
    except FitsError:
        raise
    except FileNotFoundError:
        raise FitsError("%s: no such file" % path) from None
    except (OSError, ValueError, TypeError, EOFError, IndexError) as e:
        try:
            why = " (empty file)" if _size(source) == 0 else _why_short(source, ())
        except OSError:
            why = ""
        raise FitsError("%s: not a readable FITS file%s (%s: %s)" % (
            path, why, type(e).__name__, e)) from None


def _size(source):
    return source.getbuffer().nbytes if isinstance(source, io.BytesIO) else \
        os.path.getsize(source)


def _data(hdu, source, path):
    try:
        return hdu.data
    except (TypeError, ValueError, OSError, EOFError) as e:
        # A memory map or buffer shorter than the header says gives TypeError (buffer is
        # too small for requested array) or ValueError (cannot reshape).
        name = hdu.name or "PRIMARY"
        info = hdu.fileinfo() or {}
        start, span, size = info.get("datLoc"), info.get("datSpan"), _size(source)
        if start is not None and span is not None and start + span > size:
            raise FitsError("%s: truncated: the data of HDU %s (%d bytes from byte %d) run "
                            "past the end of the file (%d bytes)" % (
                                path, name, span, start, size)) from None
        raise FitsError("%s: cannot read the data of HDU %s (%s: %s)" % (
            path, name, type(e).__name__, e)) from None


def _why_short(source, caught):
    """Why a file may lack an HDU that a frame has: astropy's word that the file is shorter
    than its headers say, or a length that is not a whole number of FITS blocks; else ''."""
    for w in caught:
        if "truncated" in str(w.message):
            return " (truncated: %s)" % w.message
    size = _size(source)
    if size % 2880:
        return " (truncated: the file's %d bytes are not a whole number of 2880-byte " \
               "FITS blocks)" % size
    return ""
