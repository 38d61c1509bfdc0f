# SPDX-License-Identifier: BSD-3-Clause
"""Just enough FITS to read frame files quickly: headers, images and binary tables as numpy
views on the file's bytes, without astropy. A ``.fits.gz`` is inflated whole (gzip cannot seek)
by libdeflate or ISA-L's ``igzip`` where installed (each twice zlib's speed), else by zlib,
into a buffer reused from frame to frame; a plain ``.fits`` is memory-mapped, so only the HDUs used are read."""

import ctypes
import mmap
import os
import shutil
import struct
import subprocess
import zlib

import numpy as np

BLOCK = 2880


class FitsError(Exception):
    """A file that is not a readable FITS file: the message says why (truncated, bad header)."""


_IMAGE_TYPES = {8: "u1", 16: ">i2", 32: ">i4", 64: ">i8", -32: ">f4", -64: ">f8"}
_TABLE_TYPES = {"L": "i1", "B": "u1", "I": ">i2", "J": ">i4", "K": ">i8", "E": ">f4",
                "D": ">f8", "C": ">c8", "M": ">c16", "A": "S"}


def _value(text):
    text = text.strip()
    if text.startswith("'"):
        end = 1
        out = []
        while end < len(text):
            c = text[end]
            if c == "'":
                if end + 1 < len(text) and text[end + 1] == "'":
                    out.append("'")
                    end += 2
                    continue
                break
            out.append(c)
            end += 1
        return "".join(out).rstrip()
    text = text.split("/", 1)[0].strip()
    if text == "T":
        return True
    if text == "F":
        return False
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text.replace("D", "E"))
    except ValueError:
        return text


class Hdu:
    """One HDU: its header (dict of the keywords read), where its data lie, and accessors."""

    def __init__(self, header, data_offset, data_size, buf):
        self.header = header
        self.offset = data_offset
        self.size = data_size
        self._buf = buf

    @property
    def name(self):
        return str(self.header.get("EXTNAME", "")).strip()

    def image(self):
        """The image as a numpy array (FITS axis order reversed, big-endian view); uint32
        where BITPIX 32 comes with BZERO 2^31, as frames store MASK."""
        h = self.header
        naxis = int(h.get("NAXIS", 0))
        shape = tuple(int(h["NAXIS%d" % i]) for i in range(naxis, 0, -1))
        count = int(np.prod(shape)) if shape else 0
        dtype = _IMAGE_TYPES[int(h["BITPIX"])]
        data = np.frombuffer(self._buf, dtype=dtype, count=count, offset=self.offset)
        if int(h["BITPIX"]) == 32 and h.get("BZERO") == 2147483648:
            data = data.view(">u4") ^ np.uint32(0x80000000)
        return data.reshape(shape)

    def table(self):
        """The binary table as a numpy record array (big-endian fields; strings as bytes)."""
        h = self.header
        names, formats, offsets = [], [], []
        pos = 0
        for i in range(1, int(h["TFIELDS"]) + 1):
            form = str(h["TFORM%d" % i]).strip()
            digits = "".join(c for c in form if c.isdigit())
            code = form[len(digits):][:1]
            repeat = int(digits) if digits else 1
            if code == "A":
                fmt, width = "S%d" % repeat, repeat
            elif code == "X":
                fmt, width = ("u1", (repeat + 7) // 8), (repeat + 7) // 8
            elif code in ("P", "Q"):
                fmt = (">i4" if code == "P" else ">i8", 2)
                width = 8 if code == "P" else 16
            else:
                base = _TABLE_TYPES[code]
                fmt = base if repeat == 1 else (base, repeat)
                width = np.dtype(base).itemsize * repeat
            names.append(str(h.get("TTYPE%d" % i, "COL%d" % i)).strip())
            formats.append(fmt)
            offsets.append(pos)
            pos += width
        dtype = np.dtype({"names": names, "formats": formats, "offsets": offsets,
                          "itemsize": int(h["NAXIS1"])})
        return np.frombuffer(self._buf, dtype=dtype, count=int(h["NAXIS2"]), offset=self.offset)


def _parse(buf, path):
    """The HDUs of a FITS file held in ``buf`` (bytes-like of the file's content)."""
    hdus = []
    pos = 0
    total = len(buf)
    while pos < total:
        header = {}
        start = pos
        ended = False
        while not ended:
            if pos + BLOCK > total:
                raise FitsError("%s: truncated in the header of HDU %d (%d bytes)" % (
                    path, len(hdus), total))
            block = bytes(buf[pos:pos + BLOCK])
            pos += BLOCK
            for i in range(0, BLOCK, 80):
                card = block[i:i + 80].decode("ascii", "replace")
                key = card[:8].strip()
                if key == "END":
                    ended = True
                    break
                if card[8:10] == "= " and key not in header:
                    header[key] = _value(card[10:])
        if start == 0 and header.get("SIMPLE") is not True:
            raise FitsError("%s: not a FITS file (no SIMPLE = T)" % path)
        bitpix = abs(int(header.get("BITPIX", 8)))
        naxis = int(header.get("NAXIS", 0))
        size = 0
        if naxis:
            size = 1
            for i in range(1, naxis + 1):
                size *= int(header.get("NAXIS%d" % i, 0))
            size = bitpix // 8 * int(header.get("GCOUNT", 1)) * (size + int(header.get("PCOUNT", 0)))
        if pos + size > total:
            raise FitsError("%s: truncated: HDU %d (%s) needs %d bytes of data, %d are left" % (
                path, len(hdus), header.get("EXTNAME", "PRIMARY"), size, total - pos))
        hdus.append(Hdu(header, pos, size, buf))
        pos += (size + BLOCK - 1) // BLOCK * BLOCK
        if total - pos < BLOCK:
            break
    return hdus


_scratch = bytearray()
_compressed = bytearray()


def _gunzip_size(path):
    with open(path, "rb") as f:
        head = f.read(2)
        if head != b"\x1f\x8b":
            raise FitsError("%s: not a gzip file" % path)
        f.seek(-4, os.SEEK_END)
        size = struct.unpack("<I", f.read(4))[0]
        compressed = f.tell()
    # Deflate cannot shrink data more than 1032 times: a larger claim is not a trailer (the
    # file was cut) and must not size the buffer.
    if size > 1032 * compressed or size < BLOCK:
        raise FitsError("%s: truncated or corrupt gzip file (no valid gzip trailer: it claims "
                        "%d bytes inflated from %d)" % (path, size, compressed))
    return size


_libdeflate = None


def _load_libdeflate():
    """libdeflate (Debian libdeflate0) through ctypes, or False where it is not installed."""
    global _libdeflate
    if _libdeflate is None:
        try:
            lib = ctypes.CDLL("libdeflate.so.0")
            lib.libdeflate_alloc_decompressor.restype = ctypes.c_void_p
            lib.libdeflate_gzip_decompress.argtypes = [
                ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
                ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]
            lib.libdeflate_gzip_decompress.restype = ctypes.c_int
            _libdeflate = (lib, lib.libdeflate_alloc_decompressor())
        except (OSError, AttributeError):
            _libdeflate = False
    return _libdeflate


def _inflate(path):
    """The content of a gzip file, in a buffer reused by the next call (a memoryview):
    libdeflate in this process where installed, else ISA-L's igzip, else zlib."""
    global _scratch
    size = _gunzip_size(path)
    if len(_scratch) < size:
        _scratch = bytearray(size + (1 << 20))
    view = memoryview(_scratch)
    deflate = _load_libdeflate()
    if deflate:
        lib, decompressor = deflate
        global _compressed
        with open(path, "rb") as f:
            csize = os.fstat(f.fileno()).st_size
            if len(_compressed) < csize:
                _compressed = bytearray(csize + (1 << 20))
            got = f.readinto(memoryview(_compressed)[:csize])
        src = (ctypes.c_char * len(_compressed)).from_buffer(_compressed)
        out = (ctypes.c_char * len(_scratch)).from_buffer(_scratch)
        n = ctypes.c_size_t()
        code = lib.libdeflate_gzip_decompress(decompressor, src, got, out, size,
                                              ctypes.byref(n))
        del src, out
        if code != 0 or n.value != size:
            raise FitsError("%s: truncated or corrupt gzip file (libdeflate error %d)" % (
                path, code))
        return view[:size]
    igzip = shutil.which("igzip")
    if igzip:
        proc = subprocess.Popen([igzip, "-dc", path], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, bufsize=0)
        fd = proc.stdout.fileno()
        n = 0
        while n < size:
            k = os.readv(fd, [view[n:min(size, n + (1 << 22))]])
            if not k:
                break
            n += k
        extra = proc.stdout.read(1)
        proc.stdout.close()
        err = proc.stderr.read().decode("utf-8", "replace").strip()
        proc.stderr.close()
        if proc.wait() != 0 or n != size or extra:
            reason = err.splitlines()[-1] if err else "inflated %d of %d bytes" % (n, size)
            raise FitsError("%s: truncated or corrupt gzip file (%s)" % (path, reason))
        return view[:n]
    d = zlib.decompressobj(wbits=31)
    n = 0
    with open(path, "rb") as f:
        while True:
            chunk = f.read(1 << 22)
            if not chunk:
                break
            out = d.decompress(chunk)
            if n + len(out) > len(_scratch):
                raise FitsError("%s: corrupt gzip file (larger than its trailer says)" % path)
            view[n:n + len(out)] = out
            n += len(out)
    if not d.eof or n != size:
        raise FitsError("%s: truncated or corrupt gzip file (inflated %d of %d bytes)" % (
            path, n, size))
    return view[:n]


def open_fits(path):
    """The HDUs of ``path`` (.fits or .fits.gz). Raises FitsError (or OSError) with the file
    named. The arrays are views on a buffer that the next call may reuse: copy what must last."""
    if path.endswith(".gz"):
        return _parse(_inflate(path), path)
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            raise FitsError("%s: empty file" % path)
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    return _parse(buf, path)


def by_name(hdus):
    """EXTNAME -> HDU (the primary as 'PRIMARY' too)."""
    out = {"PRIMARY": hdus[0]} if hdus else {}
    for h in hdus:
        if h.name:
            out.setdefault(h.name, h)
    return out
