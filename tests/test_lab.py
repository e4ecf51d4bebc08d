"""The kernel lab (cuda/lab): its variants that never shipped are kernels and launchers only
(cuda/lab/<op>.cuh), named in the contract (csrc/lab.def, _native.Kernel) and run by the library's
one path (a CUDA BlasCase by name; bench.blas --variants all), compiled in with GAPBENCH_LAB=ON.
There is no second harness: no lab binaries, no JSON of their own. The GPU side (each lab kernel
verified first and last timed run) is tests/test_native.py's every-kernel tests under -m cuda."""
from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from gapbench.core import opdecl
from gapbench.core.names import Backend, DType
from gapbench.core.result import NOT_APPLICABLE, OK, Record

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "cuda" / "lab"
LAB_KERNELS = opdecl.lab_kernels(ROOT / "csrc" / "lab.def")
LIBRARY = {d.name: d.kernels for d in opdecl.load(ROOT / "csrc" / "ops.def")}


def test_the_lab_is_kernels_and_launchers_only():
    """cuda/lab holds a header per op with unshipped variants and the two notes: no .cu with a
    main(), no harness of its own (gate, event timing, cuBLAS loader, JSON); CMake builds no lab
    binaries, and gapbench has no lab runner."""
    files = sorted(p.name for p in LAB.iterdir())
    assert files == sorted(["LINEAGE.md", "README.md"] + [f"{op}.cuh" for op in LAB_KERNELS]), files
    for op in LAB_KERNELS:
        text = (LAB / f"{op}.cuh").read_text()
        for harness in ("int main(", "cudaEventRecord", "cudaEventElapsedTime", "dlopen", "--json", "cublas"):
            assert harness not in text, f"cuda/lab/{op}.cuh: {harness}"
    cmake = (ROOT / "CMakeLists.txt").read_text()
    assert "gapbench_lab_" not in cmake and "cuda/lab_kernels.cu" in cmake
    assert importlib.util.find_spec("gapbench.benchmarks.blas.lab") is None


def test_every_lab_kernel_is_named_launched_and_traced():
    """Each kernel of csrc/lab.def belongs to a declared op and to no op's library, has its case in
    cuda/lab_kernels.cu (the launcher the BlasCase calls by name), and is in LINEAGE.md."""
    assert LAB_KERNELS and set(LAB_KERNELS) <= set(LIBRARY)
    names = [k for ks in LAB_KERNELS.values() for k in ks]
    assert len(set(names)) == len(names)
    assert not set(names) & {k for ks in LIBRARY.values() for k in ks}
    launcher = (ROOT / "cuda" / "lab_kernels.cu").read_text()
    lineage = (LAB / "LINEAGE.md").read_text()
    for op, ks in LAB_KERNELS.items():
        for k in ks:
            assert k.startswith(op + "_"), k  # named by op and strategy
            assert re.search(rf"Kernel::{k}\b", launcher), f"{k}: no case in cuda/lab_kernels.cu"
            assert f"`{k}`" in lineage, f"{k}: not in cuda/lab/LINEAGE.md"
    # the contract's enum and its stub hold them after the library's kernels, in lab.def's order
    from gapbench import _native

    members = list(_native.Kernel.__members__)
    assert members[-len(names):] == names


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on this machine")
def test_the_lab_kernels_compile_for_hopper(tmp_path):
    """cuda/lab_kernels.cu (every lab kernel's launcher, as GAPBENCH_LAB=ON builds it) compiles for
    sm_90a with the library's headers, with no GPU present."""
    p = subprocess.run(["nvcc", "-std=c++20", "-O1", "-arch=sm_90a", "-I", str(ROOT / "cuda"), "-I", str(ROOT / "csrc"),
                        "-DGAPBENCH_WITH_LAB=1", "-c", str(ROOT / "cuda" / "lab_kernels.cu"),
                        "-o", str(tmp_path / "lab.o")], capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert (tmp_path / "lab.o").stat().st_size > 0


def test_a_lab_kernel_without_the_lab_built_is_a_row_saying_how(monkeypatch):
    """bench.blas --variants all on an extension built without the lab: each lab kernel of the op is
    an n/a row named by strategy whose reason gives the build flag; the library's kernels beside it
    run as usual."""
    from test_native import _fake_native_session, fake_kernel_case

    from gapbench import _native, ops
    from gapbench.benchmarks.blas import arms, run as blas
    from gapbench.benchmarks.blas.config import Config
    from gapbench.core import dtypes

    spec, fp16 = ops.get("vjp_dx"), DType.fp16
    shape = {"m": 64, "k": 48}
    rounded = [dtypes.round_to(a, fp16) for a in spec.inputs(shape, np.random.default_rng(1))]
    ref = spec.expected(rounded, shape)
    good = dtypes.to_bytes(np.asarray(ref.values, dtype=np.float32), "fp16").tobytes()
    lab = set(LAB_KERNELS["vjp_dx"])
    why = ("is a kernel of the lab (csrc/lab.def): build with pip install . "
           "-Ccmake.define.GAPBENCH_LAB=ON to run it")

    def run_once(impl, data):
        if isinstance(impl, _native.Kernel) and impl.name in lab:
            raise _native.NotApplicable(f"{impl.name} {why}")
        return data

    FakeCase = fake_kernel_case(good, {"dispatch": "vjp_dx_strips256", "vendor": "cublas"}, "vjp_dx", run_once)
    session = _fake_native_session(monkeypatch, FakeCase)
    case = arms.Case(spec, fp16, shape, rounded, ref,
                     lambda b, v, p=None, **kw: blas.record(spec, fp16, shape, b, v, p, **kw))
    rows = {r.variant: r for r in blas.run_case(case, Config(samples=5, warmup=1, kernels=True), session,
                                                   [Backend.native_cuda]) if r.metric == "time"}
    assert lab <= set(rows)
    for k in lab:
        assert rows[k].status == NOT_APPLICABLE and "GAPBENCH_LAB=ON" in rows[k].reason, rows[k]
    assert rows["gapbench"].status == OK and rows["vjp_dx_row_slices"].status == OK


def test_kernel_rows_are_hand_written_in_the_report():
    """In `gapbench report`'s per-case table a kernel timed by name (--variants all: source
    "kernel", the lab's and the library's) counts as hand-written, never as the vendor library."""
    from gapbench.benchmarks.blas.tables import native_kind

    def rec(variant, source=None):
        return Record(probe="blas", backend="native-cuda", variant=variant, metric="time", status=NOT_APPLICABLE,
                      reason="-", params={"op": "gemm", "source": source} if source else {"op": "gemm"})

    assert native_kind(rec("gemm_wmma", "kernel")) == "hand-written"
    assert native_kind(rec("lab-v3", "lab")) == "hand-written"  # the lab's own sweep rows of older files
    assert native_kind(rec("gapbench")) == "gapbench (dispatcher)"
    assert native_kind(rec("cublas")) == "vendor"


def test_variants_all_runs_without_the_lab_built(tmp_path):
    """bench.blas --variants all needs nothing built beyond the extension: where the lab is not
    compiled in (or no GPU is present) its rows say why, and the run completes."""
    from conftest import run_module

    from gapbench.core.result import load_run

    out = tmp_path / "r.json"
    p = run_module("bench.blas", "--quick", "--variants", "all", "--ops", "vjp_dx,gemm", "--dtypes", "fp32",
                   "--shapes", "64x48,2x32x32x32", "--backends", "torch-cpu,native-cuda", "--no-plots",
                   "--no-plain", "--out", str(out))
    assert p.returncode == 0, p.stderr
    run = load_run(out)
    assert run.run["config"]["kernels"] is True
    native_rows = [r for r in run.records if r.backend == Backend.native_cuda.value]
    assert native_rows and all(r.reason for r in native_rows if r.status != OK)
