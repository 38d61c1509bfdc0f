#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The engine's layers and the programs on them only use what they may (docs/architecture.md,
"Layers").

includes SOURCE_DIR: every `#include "..."` of a component's files resolves to the component's
own files, or to the public headers of a component it may use (TABLE), or to the private
folders CMake lets it reach (PRIVATE_ACCESS). Anything else, such as a core file including an io
header or the simulator reaching into io's private helpers, is reported with file and line.

symbols NM CFITSIO_LIB CORE_LIB IO_LIB SIM_LIB [PROGRAM ...]: what the linker sees. No object of
a layer's library refers to an ex2d symbol that neither it nor a layer below it defines;
ex2d::core refers to no function of the CFITSIO library; and no service PROGRAM holds any
function of the simulator.
"""

import os
import re
import subprocess
import sys

# Component -> its folders (relative to the source tree). A file belongs to the first match.
COMPONENTS = {
    "core": ["common/src/core"],
    "io": ["common/src/io"],
    "sim": ["common/src/sim"],
    "test_hooks": ["common/src/test_hooks"],
    "cpu": ["common/src/cpu"],
    "cuda": ["common/src/cuda"],
    "traceshift": ["common/src/traceshift"],
    "backends": ["common/src/backend_factory.cpp", "common/src/standin", "common/src/stubs"],
    "service": ["services/common"],
    "trace_shift_step": ["services/trace_shift"],
    "reader": ["services/reader"],
    "worker": ["services/worker"],
    "writer": ["services/writer"],
    "ctl": ["services/ctl"],
    "tool": ["services/ex2d"],
    "python": ["python/src"],
}

# Component -> the folder of its public headers (the PUBLIC include folder of its library).
PUBLIC = {
    "core": "common/src/core/include",
    "io": "common/src/io/include",
    "sim": "common/src/sim/include",
    "test_hooks": "common/src/test_hooks",
    "service": "services/common/include",
    "trace_shift_step": "services/trace_shift",
    "reader": "services/reader",
    "writer": "services/writer",
    "tool": "services/ex2d",
}

# Component -> the components whose public headers it may include. One way only: core at the
# bottom, io on core, the simulator on both; no service uses the simulator.
TABLE = {
    "core": [],
    "io": ["core"],
    "sim": ["core", "io"],
    "test_hooks": ["core"],
    "cpu": ["core", "test_hooks"],
    "cuda": ["core", "test_hooks"],
    "traceshift": ["core"],
    "backends": ["core", "io", "test_hooks"],
    "service": ["core", "io"],
    "trace_shift_step": ["core", "io", "service"],
    "reader": ["core", "io", "service", "trace_shift_step"],
    "worker": ["core", "io", "service", "trace_shift_step"],
    "writer": ["core", "io", "service"],
    "ctl": ["core", "io", "service"],
    "tool": ["core", "io", "sim"],
    "python": ["core", "io", "tool"],
}

# Private folders a component reaches through its own CMake target (PRIVATE include folders):
# the trace-shift fits keep the CPU backend's BLAS to one thread (blas_threads.hpp).
PRIVATE_ACCESS = {
    "traceshift": ["common/src/cpu"],
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCE_SUFFIXES = (".cpp", ".hpp", ".cu", ".cuh", ".h")


def owner(path):
    """The component a source-relative path belongs to, or None."""
    for name, folders in COMPONENTS.items():
        for folder in folders:
            if path == folder or path.startswith(folder + "/"):
                return name
    return None


def files_of(root, name):
    for folder in COMPONENTS[name]:
        full = os.path.join(root, folder)
        if os.path.isfile(full):
            yield folder
            continue
        for base, _, names in os.walk(full):
            for n in sorted(names):
                if n.endswith(SOURCE_SUFFIXES):
                    yield os.path.relpath(os.path.join(base, n), root)


def resolve(root, including, target):
    """Where an include resolves in the whole tree: the including file's folder first, then
    every public and private folder; None for a header outside the tree (a library's)."""
    candidates = [os.path.join(os.path.dirname(including), target)]
    candidates += [os.path.join(folder, target) for folder in PUBLIC.values()]
    for folders in COMPONENTS.values():
        candidates += [os.path.join(f, target) for f in folders]
    candidates += [os.path.join("common/src", target)]
    for c in candidates:
        c = os.path.normpath(c)
        if os.path.isfile(os.path.join(root, c)):
            return c
    return None


def allowed(name, header):
    """May a file of component `name` include `header` (source-relative)?"""
    home = owner(header)
    if home == name:
        return True
    if home is None:
        return True
    for dep in TABLE[name]:
        if dep in PUBLIC and header.startswith(PUBLIC[dep] + "/"):
            return True
    return any(header.startswith(f + "/") for f in PRIVATE_ACCESS.get(name, []))


def check_includes(root):
    problems = []
    count = 0
    for name in COMPONENTS:
        for path in files_of(root, name):
            with open(os.path.join(root, path), encoding="utf-8") as f:
                for number, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    count += 1
                    header = resolve(root, path, m.group(1))
                    if header is not None and not allowed(name, header):
                        home = owner(header)
                        public = home in PUBLIC and header.startswith(PUBLIC[home] + "/")
                        what = f"{home}'s header" if public else f"{home}'s private header"
                        problems.append(
                            f"{path}:{number}: {name} includes \"{m.group(1)}\" ({header}, "
                            f"{what}); {name} may use the public headers of "
                            f"{', '.join(TABLE[name]) or 'nothing but its own'}"
                        )
    return count, problems


def nm_symbols(nm, path, kinds, dynamic=False):
    """Demangled names of the symbols of `path` (its dynamic symbols: a shared library's
    exports) whose nm type letter is in `kinds`."""
    command = [nm, "-C", "-D", path] if dynamic else [nm, "-C", path]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        m = re.match(r"^[0-9a-fA-F]*\s+([A-Za-z])\s+(.*)$", line)
        if m and m.group(1) in kinds:
            names.add(m.group(2))
    return names


def check_symbols(nm, cfitsio, core, io, sim, programs):
    defined_kinds = "TtWwVvDdBbRr"
    libs = {"core": core, "io": io, "sim": sim}
    defined = {n: nm_symbols(nm, p, defined_kinds) for n, p in libs.items()}
    shared = cfitsio.endswith(".so") or ".so." in cfitsio
    fits_functions = nm_symbols(nm, cfitsio, "T", dynamic=shared)
    problems = []
    for name, below in (("core", []), ("io", ["core"]), ("sim", ["core", "io"])):
        reachable = set().union(defined[name], *(defined[b] for b in below))
        for symbol in sorted(nm_symbols(nm, libs[name], "U")):
            if symbol.startswith("ex2d::") and symbol not in reachable:
                problems.append(f"ex2d::{name} refers to {symbol}, which it may not link")
            if name == "core" and symbol in fits_functions:
                problems.append(f"ex2d::core calls CFITSIO's {symbol}")
    simulator = {s for s in nm_symbols(nm, sim, "T") if s.startswith("ex2d::")}
    for program in programs:
        held = simulator & nm_symbols(nm, program, "Tt")
        for symbol in sorted(held)[:5]:
            problems.append(f"{os.path.basename(program)} holds the simulator's {symbol}")
    return len(simulator), problems


def main(argv):
    if len(argv) >= 3 and argv[1] == "includes":
        count, problems = check_includes(argv[2])
        summary = f"{count} includes checked"
    elif len(argv) >= 7 and argv[1] == "symbols":
        count, problems = check_symbols(argv[2], argv[3], argv[4], argv[5], argv[6], argv[7:])
        summary = f"{count} simulator functions sought in {len(argv) - 7} programs"
    else:
        print(__doc__, file=sys.stderr)
        return 2
    for p in problems:
        print(p)
    print(f"{summary}; {len(problems)} crossing(s) of the layers")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
