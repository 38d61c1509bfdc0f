# SPDX-License-Identifier: BSD-3-Clause
"""desispec's FIBERMAP column table as the JSON that ``ex2d extract --fibermap-columns`` and the
fleet writer's ``writer.fibermap_columns`` read, so that frames carry desispec's own column
descriptions (datamodel 4.8). ex2d's built-in table has the same names, types and units.

    python3 -m ex2d_desi.fibermap_columns OUTPUT.json

needs desispec importable (as it is inside desi_proc); ``main_ex2d`` does this by itself.
"""

import argparse
import atexit
import json
import os
import sys
import tempfile

# numpy type codes of desispec's table and the FITS TFORM letter each is written as.
TFORMS = {"i8": "K", "i4": "J", "i2": "I", "u1": "B", "f4": "E", "f8": "D", "bool": "L"}


def tform_of(dtype):
    """The FITS TFORM of a desispec column type: "K" for "i8", "22A" for (str, 22)."""
    if isinstance(dtype, tuple):
        return "{}A".format(dtype[1])
    return TFORMS.get(dtype, "")


def table_from_rows(rows):
    """JSON-ready entries from desispec's rows (name, dtype, unit, description, provenance)."""
    return [{"name": row[0], "tform": tform_of(row[1]), "unit": row[2], "description": row[3]}
            for row in rows]


def desispec_table():
    """desispec's table, or None where desispec cannot be imported."""
    try:
        from desispec.io.fibermap import fibermap_columns
    except ImportError:
        return None
    return table_from_rows(fibermap_columns)


def write_table(table, path):
    """Writes ``table`` to ``path`` under a temporary name renamed at the end."""
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(prefix=".fibermap-columns-", dir=folder)
    try:
        with os.fdopen(handle, "w") as out:
            json.dump(table, out, indent=1)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


_exported = {}


def exported_desispec_table():
    """desispec's table for ``ex2d extract --fibermap-columns`` in this process and the
    programs it starts, or None without desispec: ``/proc/self/fd/N``, a file that has no name
    from the moment it is written, so that nothing is left behind however the process ends
    (an MPI abort or a kill included). Run the program with ``pass_fds=exported_fds()``."""
    if "path" not in _exported:
        table = desispec_table()
        path = None
        if table is not None:
            handle = tempfile.TemporaryFile("w+")
            json.dump(table, handle, indent=1)
            handle.flush()
            atexit.register(handle.close)
            _exported["file"] = handle
            path = "/proc/self/fd/{}".format(handle.fileno())
        _exported["path"] = path
    return _exported["path"]


def exported_fds():
    """The descriptors a started program must inherit for ``exported_desispec_table()``."""
    handle = _exported.get("file")
    return (handle.fileno(),) if handle is not None else ()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", help="JSON file to write")
    args = parser.parse_args(argv)
    table = desispec_table()
    if table is None:
        print("desispec cannot be imported: run this where desispec is installed",
              file=sys.stderr)
        return 1
    write_table(table, args.output)
    print("{}: {} columns".format(args.output, len(table)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
