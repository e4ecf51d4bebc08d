"""Run gapbench's .metal kernels on the CPU: compile them as C++ through the project's
compatibility header (metal/compat/metal_cpu.h) together with a small C++ driver, and load the
result with ctypes. This is how Linux CI checks the Metal kernels against numpy; it checks
arithmetic and indexing, not Metal's compiler, scheduling or performance."""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import tempfile
from importlib import resources
from pathlib import Path

from gapbench.core import process

#: seconds one compile of a .metal file as C++ may take
COMPILE_TIMEOUT_S = 600.0


def metal_dir() -> Path:
    """The shipped kernel sources (gapbench/metal/ in the installed package)."""
    return Path(str(resources.files("gapbench").joinpath("metal")))


def metal_source(path: str | os.PathLike) -> str:
    """The text of a .metal file with its local `#include "x.h"` lines replaced by the files'
    text: Metal compiles source strings at run time (newLibraryWithSource) and resolves no
    include paths, so the host hands it one self-contained source."""
    path = Path(path)
    out = []
    for line in path.read_text().splitlines():
        s = line.strip()
        if s.startswith('#include "') and s.endswith('"'):
            out.append(metal_source(path.parent / s[len('#include "'):-1]))
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def compiler() -> str:
    for c in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if c and shutil.which(c):
            return c
    raise RuntimeError("no C++ compiler found (set CXX)")


def build(metal_file: str | os.PathLike, driver_source: str, cache_dir: str | os.PathLike | None = None,
          std: str = "c++20") -> ctypes.CDLL:
    """Compile `metal_file` + `driver_source` (C++ that #includes the kernel file by the macro
    GB_METAL_FILE and exports extern "C" entry points) into a shared library and load it."""
    metal_file = Path(metal_file).resolve()
    # The header beside the kernel (a checkout) wins over the installed copy.
    compat = metal_file.parent / "compat"
    if not (compat / "metal_cpu.h").is_file():
        compat = metal_dir() / "compat"
    key_text = metal_source(metal_file) + driver_source + (compat / "metal_cpu.h").read_text() + std
    key = hashlib.sha256(key_text.encode()).hexdigest()[:16]
    out_dir = Path(cache_dir) if cache_dir else Path(tempfile.gettempdir()) / "gapbench-metal-cpu"
    out_dir.mkdir(parents=True, exist_ok=True)
    lib = out_dir / f"{metal_file.stem}-{key}.so"
    if not lib.exists():
        src = out_dir / f"{metal_file.stem}-{key}.cpp"
        src.write_text(f'#define GB_METAL_FILE "{metal_file}"\n' + driver_source)
        cxx = compiler()
        version = process.query([cxx, "--version"], timeout=60)
        is_clang = version is not None and "clang" in version.stdout
        cmd = [cxx, f"-std={std}", "-O1", "-shared", "-fPIC", "-pthread", "-Wall", "-Werror", "-Wno-attributes",
               *(["-Wno-unknown-attributes"] if is_clang else []), f"-I{compat}",
               "-include", str(compat / "metal_cpu.h"), str(src), "-o", str(lib) + ".tmp"]
        p = process.run(cmd, timeout=COMPILE_TIMEOUT_S, name=f"the C++ compile of {metal_file.name}")
        if p.returncode != 0:
            raise RuntimeError(f"compiling {metal_file.name} as C++ failed:\n{p.stderr}")
        os.replace(str(lib) + ".tmp", lib)
    return ctypes.CDLL(str(lib))
