"""The Metal host code, which no machine here can run, compiled for aarch64-macos on Linux.

zig (the `ziglang` package) is the cross compiler; Apple's metal-cpp headers come from the macOS
wheel of mlx-metal, downloaded at test time (never committed). zig has no macOS frameworks, so
the few CoreFoundation/CoreGraphics/IOSurface declarations metal-cpp needs come from gapbench's
own shim in metal/compat/sdk_shim (type-check only; a Mac build uses the SDK). This proves the
host code is valid C++ against the real metal-cpp API; it does not run it."""
import importlib.util
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from conftest import IN_CI, ROOT
from test_includes import native_include_dirs

MLX_METAL_VERSION = "0.32.4"
CACHE = Path(os.environ.get("GAPBENCH_CACHE", Path.home() / ".cache" / "gapbench"))


def _unavailable(why: str):
    if IN_CI:  # in CI a missing tool is a broken setup, not a reason to pass quietly
        pytest.fail(why)
    pytest.skip(why)


@pytest.fixture(scope="module")
def zig():
    if importlib.util.find_spec("ziglang") is None:
        _unavailable("ziglang not installed (pip install '.[test]')")
    return [sys.executable, "-m", "ziglang", "c++"]


@pytest.fixture(scope="module")
def metal_cpp():
    dest = CACHE / f"mlx-metal-{MLX_METAL_VERSION}"
    inc = dest / "mlx" / "include" / "metal_cpp"
    if (inc / "Metal" / "Metal.hpp").is_file():
        return inc
    wheels = CACHE / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    p = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                        "--platform", "macosx_14_0_arm64", "--python-version", "3.12", "-d", str(wheels),
                        f"mlx-metal=={MLX_METAL_VERSION}"], capture_output=True, text=True, timeout=600)
    whl = sorted(wheels.glob(f"mlx_metal-{MLX_METAL_VERSION}-*.whl"))
    if p.returncode != 0 or not whl:
        _unavailable(f"could not download mlx-metal (for metal-cpp headers): {p.stderr.strip()[-300:]}")
    with zipfile.ZipFile(whl[0]) as z:
        for name in z.namelist():
            if name.startswith("mlx/include/metal_cpp/"):
                z.extract(name, dest)
    return inc


def _compile(zig, metal_cpp, source: Path, tmp_path, extra=()):
    cmd = [*zig, "-target", "aarch64-macos", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-c",
           "-o", str(tmp_path / (source.stem + ".o")),
           "-isystem", str(ROOT / "metal" / "compat" / "sdk_shim"), "-isystem", str(metal_cpp),
           *[f"-I{d}" for d in native_include_dirs()], *extra, str(source)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("name", ["metal/metal_context.cpp", "metal/launch.cpp", "metal/blas.cpp", "metal/mps.cpp"])
def test_metal_host_code_compiles_for_macos(zig, metal_cpp, tmp_path, name):
    p = _compile(zig, metal_cpp, ROOT / name, tmp_path)
    assert p.returncode == 0, p.stderr
    obj = (tmp_path / (Path(name).stem + ".o")).read_bytes()
    assert obj[:4] == bytes.fromhex("cffaedfe")  # a 64-bit Mach-O object


def test_metal_binding_compiles_for_macos(zig, metal_cpp, tmp_path):
    import pybind11

    extra = ["-DGAPBENCH_WITH_METAL=1", "-isystem", pybind11.get_include(),
             "-isystem", sysconfig.get_paths()["include"]]
    p = _compile(zig, metal_cpp, ROOT / "python" / "_native" / "bind_metal.cpp", tmp_path, extra)
    assert p.returncode == 0, p.stderr


def test_type_check_catches_a_wrong_metal_call(zig, metal_cpp, tmp_path):
    bad = tmp_path / "bad.cpp"
    bad.write_text('#include <Metal/Metal.hpp>\n'
                   'void f(MTL::CommandBuffer* cb) { cb->waitUntilFinished(); }\n')  # real name: waitUntilCompleted
    p = _compile(zig, metal_cpp, bad, tmp_path)
    assert p.returncode != 0 and "waitUntilFinished" in p.stderr


@pytest.mark.apple
@pytest.mark.skipif(sys.platform != "darwin", reason="needs real Apple hardware with Metal (none reachable here)")
def test_metal_probe_on_apple_gpu():
    import numpy as np

    from gapbench import _native
    from gapbench.benchmarks.launch import command as launch

    src = (ROOT / "metal" / "launch.metal").read_text()
    p = _native.metal.LaunchProbe(1, 1, src)
    assert p.library_compile_seconds > 0 and p.pipeline_create_seconds > 0
    assert p.count_launches(200) == 200
    for fn in (p.submit, p.stream_b2b, p.device_kernel):
        assert len(fn(5, 10, 1)) == 5
    q = _native.metal.LaunchProbe(2, 3000, src)
    a, b = launch._random_inputs(launch.Config(n=3000))
    ok, detail = launch._check_add(np.asarray(q.run_add(a.tolist(), b.tolist()), np.float32), a, b)
    assert ok, detail
