"""Which GPU architectures each shared library carries code for, as SASS (runs as it is) or PTX (the
driver compiles it on first load, into its JIT cache, ~/.nv/ComputeCache), read from the fatbin
headers in the file: no GPU and no CUDA tools needed. Issue 38: a fresh machine's first bench.blas
process filled the driver's JIT cache with 30 entries (findings/run-cost.md); a library listed here
with PTX but no SASS for the GPU's architecture is what the driver compiles.

    python docs/results/fatbin_archs.py [--arch 90] PATH_OR_PACKAGE ...

A PATH is a file or a folder (searched for ELF files: libraries and executables); a PACKAGE is an importable top-level name (torch,
cupy, nvidia, gapbench), searched without importing it. Prints one Markdown row per library that
carries device code: its SASS and PTX architectures, and with --arch whether that GPU needs the JIT
(no SASS of that major.minor; "90a" SASS counts for 90).
"""
from __future__ import annotations

import collections
import importlib.util
import os
import struct
import sys
from pathlib import Path

#: a fatbin's header: magic, version, header size, size of the entries after it
MAGIC = 0xBA55ED50
HEADER = struct.Struct("<IHHQ")
#: an entry's first fields: kind (1 PTX, 2 ELF/SASS), flags, header size, payload size
ENTRY = struct.Struct("<HHIQ")
#: where an entry keeps its architecture (e.g. 90), from the entry's start
ARCH_AT = 28
KINDS = {1: "PTX", 2: "SASS"}


def entries(data: bytes) -> collections.Counter:
    """(kind, arch) -> how many entries of every fatbin in `data`."""
    found: collections.Counter = collections.Counter()
    magic = struct.pack("<I", MAGIC)
    i = data.find(magic)
    while i >= 0:
        if i + HEADER.size > len(data):
            break
        _, _, hsize, fsize = HEADER.unpack_from(data, i)
        j, end = i + hsize, min(i + hsize + fsize, len(data))
        while j + ARCH_AT + 4 <= end:
            kind, _, ehs, size = ENTRY.unpack_from(data, j)
            if kind not in KINDS or ehs < ARCH_AT + 4:
                break
            found[(KINDS[kind], struct.unpack_from("<I", data, j + ARCH_AT)[0])] += 1
            j += ehs + size
        i = data.find(magic, max(end, i + 4))
    return found


def libraries(args: list[str]) -> list[Path]:
    out = []
    for a in args:
        p = Path(a)
        if not p.exists():
            spec = importlib.util.find_spec(a)
            if spec is None:
                raise SystemExit(f"{a}: neither a path nor an importable package")
            p = Path(spec.origin).parent if spec.origin else Path(list(spec.submodule_search_locations)[0])
        if p.is_file():
            out.append(p)
            continue
        for root, _, files in os.walk(p):
            out += [f for f in (Path(root) / n for n in sorted(files)) if _is_elf(f)]
    return out


def _is_elf(path: Path) -> bool:
    """A shared library or an executable (the plain C++ loops under gapbench/bin)."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def main(argv: list[str]) -> None:
    arch = None
    if argv[:1] == ["--arch"]:
        arch, argv = int(argv[1]), argv[2:]
    print("| library | SASS | PTX |" + (f" sm_{arch} needs the JIT |" if arch else "")
          + "\n|---|---|---|" + ("---|" if arch else ""))
    for lib in libraries(argv):
        got = entries(lib.read_bytes())
        if not got:
            continue
        sass = sorted({a for k, a in got if k == "SASS"})
        ptx = sorted({a for k, a in got if k == "PTX"})
        cell = f" {'no' if arch in sass else 'yes' if ptx else 'no code for it'} |" if arch else ""
        print(f"| {lib} | {', '.join(map(str, sass)) or '-'} | {', '.join(map(str, ptx)) or '-'} |{cell}")


if __name__ == "__main__":
    main(sys.argv[1:])
