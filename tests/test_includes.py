"""Each platform's binding includes that platform's headers: with the include directories CMake
gives the _native target (cmake/native_includes.cmake, the one function CMakeLists.txt uses too),
the host compiler's dependency list (g++ -M) for python/_native/bind_metal.cpp holds metal/ headers
and no cuda/ header, and python/_native/bind_cuda.cpp the converse. And the C++ layers include one
way: csrc/ (the contract: ops.def, contract.h) includes nothing of the others, cuda/ and metal/
include the contract and never each other or the bindings, and only the bindings
(python/_native/) include a platform. (With cuda/ and metal/ themselves on the path,
bind_metal.cpp's "blas.h" was cuda/blas.h on a Mac.) Missing toolkit headers (Metal, CUDA) are fine
here: -MG lists them as they are named."""
from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import ROOT

PLATFORMS = ("cuda", "metal")
BINDINGS = ROOT / "python" / "_native"


def cmake() -> str:
    exe = shutil.which("cmake") or str(Path(sys.executable).parent / "cmake")
    if not Path(exe).exists():
        pytest.skip("cmake not found")
    return exe


def native_include_dirs() -> list[str]:
    """The include directories of the _native target, from the function CMakeLists.txt calls."""
    p = subprocess.run([cmake(), f"-DGAPBENCH_ROOT={ROOT}", "-P", str(ROOT / "cmake" / "native_includes.cmake")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    dirs = [line.strip() for line in p.stderr.splitlines() if line.strip()]  # message() writes to stderr
    assert dirs and all(Path(d).is_dir() for d in dirs), dirs
    return dirs


def dependencies(source: Path, dirs: list[str]) -> list[Path]:
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    import pybind11

    cmd = [cxx, "-std=c++17", "-M", "-MG", "-DGAPBENCH_WITH_METAL=1", "-DGAPBENCH_WITH_CUDA=1",
           *[f"-I{d}" for d in dirs], "-isystem", pybind11.get_include(),
           "-isystem", sysconfig.get_paths()["include"], str(source)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    deps = p.stdout.replace("\\\n", " ").split(":", 1)[1].split()
    return [Path(d).resolve() for d in deps]


def platform_of(path: Path) -> str | None:
    try:
        rel = path.relative_to(ROOT)
    except ValueError:
        return None
    return rel.parts[0] if rel.parts[0] in PLATFORMS else None


@pytest.mark.parametrize("platform", PLATFORMS)
def test_binding_includes_its_own_platform_headers(platform):
    source = BINDINGS / f"bind_{platform}.cpp"
    deps = dependencies(source, native_include_dirs())
    seen = {platform_of(d) for d in deps if d.exists()} - {None}
    assert seen == {platform}, (source.name, sorted(str(d.relative_to(ROOT)) for d in deps
                                                    if d.exists() and platform_of(d)))
    # the headers that exist on both sides resolve to this platform's copy
    for name in ("blas.h", "launch.h"):
        assert ROOT / platform / name in deps, (source.name, name)


def test_native_include_dirs_hold_no_platform_folder():
    assert not any(Path(d).resolve().name in PLATFORMS for d in native_include_dirs())


#: which top-level C++ folder may include which (by the folder an included file resolves to)
MAY_INCLUDE = {"csrc": set(), "cuda": {"csrc"}, "metal": {"csrc"}, "bindings": {"csrc", "cuda", "metal"}}


def _layer(path: Path) -> str | None:
    if path.is_relative_to(BINDINGS):
        return "bindings"
    try:
        top = path.relative_to(ROOT).parts[0]
    except ValueError:
        return None
    return top if top in MAY_INCLUDE else None


def test_cpp_layers_include_one_way():
    """Every quoted #include of csrc/, cuda/, metal/ and python/_native/, resolved as the compiler
    would (the including file's folder, then the _native include dirs, then cuda/ for cuda/'s own
    files), lands in its own layer or one below it: contract < cuda | metal < bindings."""
    import re

    dirs = [Path(d) for d in native_include_dirs()]
    bad = []
    files = [p for top in ("csrc", "cuda", "metal") for p in (ROOT / top).rglob("*")
             if p.suffix in (".h", ".hpp", ".cuh", ".cu", ".cpp", ".mm", ".def")] + list(BINDINGS.glob("*"))
    assert any(p.parent == BINDINGS for p in files) and any(p.parts[-2] == "csrc" for p in files)
    for f in files:
        own = _layer(f)
        for name in re.findall(r'^\s*#\s*include\s+"([^"]+)"', f.read_text(errors="replace"), re.M):
            search = [f.parent, *dirs] + ([ROOT / "cuda"] if own == "cuda" else []) + ([ROOT / "metal"] if own == "metal" else [])
            hit = next((d / name for d in search if (d / name).is_file()), None)
            if hit is None:
                continue  # a generated or toolkit header
            to = _layer(hit.resolve())
            if to is not None and to != own and to not in MAY_INCLUDE[own]:
                bad.append(f"{f.relative_to(ROOT)} includes {name} ({to})")
    assert not bad, bad
