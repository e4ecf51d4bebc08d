"""The extension itself: which parts were built, and how each reports (un)availability."""
import shutil
import subprocess

import pytest

from gapbench import _native, registry


def test_cpu_part_always_built():
    assert "cpu" in _native.build_info["parts"].split(",")
    assert _native.cpu.noop() is None
    t0 = _native.cpu.now_ns()
    t1 = _native.cpu.now_ns()
    assert 0 <= t1 - t0 < 10**9


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on this machine: the CUDA part is not built")
def test_cuda_part_built_where_nvcc_exists():
    assert _native.cuda.built
    assert "cuda" in _native.build_info["parts"].split(",")
    assert _native.build_info["cuda_archs"]


def test_cuda_status_explains_itself():
    st = _native.cuda.status(0)
    if st["available"]:
        assert st["name"] and st["driver_version"] > 0
    else:
        assert st["reason"]
        b = registry.info("native-cuda")
        assert not b.available and b.reason == st["reason"]


@pytest.mark.skipif(registry.info("native-cuda").available or not _native.cuda.built,
                    reason="checks the no-driver path: needs the CUDA part built and no usable GPU")
def test_cuda_calls_without_driver_raise_with_the_runtime_error():
    assert "driver" in _native.cuda.status(0)["reason"].lower()
    with pytest.raises(RuntimeError, match="cudaError"):
        _native.cuda.LaunchProbe(1, 1, 0)


@pytest.mark.skipif(not _native.cuda.built, reason="CUDA part not built")
def test_plain_loop_binary_installed_and_fails_cleanly_without_gpu():
    from gapbench.probes.launch import plain_binary

    exe = plain_binary()
    assert exe is not None
    if not registry.info("native-cuda").available:
        p = subprocess.run([str(exe), "2", "2", "0"], capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and "failed" in p.stderr


def test_metal_part_reports_why_not_here():
    st = _native.metal.status()
    if not _native.metal.built:
        assert not st["available"] and st["reason"]
