"""pip's build of the native part (CMakeLists.txt, "pip's build"): the project configures and
builds itself in a folder that outlives pip's isolated environments, so each build must get
exactly the options given to it, not what an earlier build left in that folder's cache."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _cache(folder: Path) -> dict[str, str]:
    out = {}
    for line in (folder / "CMakeCache.txt").read_text().splitlines():
        m = re.match(r"^(GAPBENCH_[A-Z_]+):[A-Z]+=(.*)$", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


@pytest.mark.skipif(shutil.which("cmake") is None, reason="no cmake on this machine")
def test_each_pip_build_gets_exactly_the_options_given_to_it(tmp_path):
    """Configured as scikit-build-core does (SKBUILD), twice in the same folders, as `pip install .
    --no-build-isolation` does: -DGAPBENCH_LAB=ON and a CUDA architecture the first time, nothing
    the second; the inner build then has the defaults again (lab off, architectures detected)."""
    pybind11 = pytest.importorskip("pybind11")
    outer = tmp_path / "build"
    base = ["cmake", "-S", str(ROOT), "-B", str(outer), "-DSKBUILD=ON", f"-DPython_EXECUTABLE={sys.executable}",
            f"-Dpybind11_DIR={pybind11.get_cmake_dir()}", "-DGAPBENCH_CUDA=OFF", "-DGAPBENCH_METAL=OFF"]

    def configure(*extra):
        p = subprocess.run(base + list(extra), capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
        return _cache(Path(f"{outer}-native"))

    first = configure("-DGAPBENCH_LAB=ON", "-DGAPBENCH_CUDA_ARCHS=90")
    assert first["GAPBENCH_LAB"] == "ON" and first["GAPBENCH_CUDA_ARCHS"] == "90"
    second = configure()
    assert second["GAPBENCH_LAB"] == "OFF" and second["GAPBENCH_CUDA_ARCHS"] == ""
    assert second["GAPBENCH_CUDA"] == "OFF"  # given again: kept
    assert "GAPBENCH_LAB" not in _cache(outer)  # sent, then dropped from the outer folder's cache
