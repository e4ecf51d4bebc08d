"""The kernel lab (cuda/lab): the CMake option builds one binary per op; their argument errors
come before any CUDA call; without a driver they say so and exit 3; gapbench.lab reads their
JSON into records. The GPU test verifies and sweeps every lab file briefly."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gapbench.benchmarks.blas import lab
from gapbench.core.result import ERROR, FAILED, NOT_APPLICABLE, OK

ROOT = Path(__file__).resolve().parents[1]
SMALL = {"vjp_dx": "96x136", "gemm": "2x64x64x64"}


def _gpu_driver_present() -> bool:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        return subprocess.run([smi, "-L"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope="module")
def lab_dir(tmp_path_factory) -> Path:
    """The lab built through the project's CMake option (sm_90a only, lab targets only), or the
    build $GAPBENCH_LAB_DIR already holds."""
    given = os.environ.get("GAPBENCH_LAB_DIR")
    if given and all((Path(given) / f"gapbench_lab_{op}").is_file() for op in lab.OPS):
        return Path(given)
    if shutil.which("nvcc") is None:
        pytest.skip("no nvcc on this machine: the lab is not built")
    import pybind11

    build = tmp_path_factory.mktemp("build-lab")
    conf = subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                           "-DGAPBENCH_CUDA=OFF", "-DGAPBENCH_METAL=OFF", "-DGAPBENCH_LAB=ON",
                           "-DGAPBENCH_LAB_ARCHS=90a", f"-Dpybind11_DIR={pybind11.get_cmake_dir()}",
                           f"-DPython_EXECUTABLE={sys.executable}"],
                          capture_output=True, text=True, timeout=600)
    assert conf.returncode == 0, conf.stdout[-2000:] + conf.stderr[-3000:]
    targets = [f"gapbench_lab_{op}" for op in lab.OPS]
    b = subprocess.run(["cmake", "--build", str(build), "-j", "2", "--target", *targets],
                       capture_output=True, text=True, timeout=1800)
    assert b.returncode == 0, b.stdout[-4000:] + b.stderr[-3000:]
    return build


@pytest.mark.parametrize("op", lab.OPS)
def test_lab_binary_rejects_bad_arguments_before_cuda(lab_dir, op):
    exe = lab_dir / f"gapbench_lab_{op}"
    bad = {"vjp_dx": "0x64", "gemm": "2x64x64"}[op]
    cases = [(["--shapes", bad], f"bad shape '{bad}' for {op}"),
             (["--variants", "99"], f"bad variant '99' for {op}"),
             (["--dtypes", "fp8"], "bad dtype 'fp8'"),
             (["--cold", "cold"], "bad --cold 'cold'"),
             (["--rounds", "0"], "bad --rounds '0'"),
             (["--budget", "-1"], "bad --budget '-1'"),
             (["--json"], "--json needs a value"),
             (["--frobnicate"], "unknown argument '--frobnicate'")]
    if op == "vjp_dx":
        cases.append((["--configs", "strip"], "bad config family 'strip' for vjp_dx"))
    else:
        cases.append((["--configs", "all"], "unknown argument '--configs'"))
    for args, msg in cases:
        p = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=60)
        assert p.returncode == 2, (args, p.returncode, p.stderr)
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and msg in lines[0], (args, p.stderr)


@pytest.mark.parametrize("op", lab.OPS)
def test_lab_binary_lists_its_variants_without_a_gpu(lab_dir, op):
    p = subprocess.run([str(lab_dir / f"gapbench_lab_{op}"), "--list"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    ids = [int(line.split()[0]) for line in p.stdout.splitlines()[1:]]
    want = {"vjp_dx": 14, "gemm": 8}[op]
    assert ids == list(range(1, want + 1))


@pytest.mark.skipif(_gpu_driver_present(), reason="a GPU driver is present: this checks the no-driver path")
@pytest.mark.parametrize("op", lab.OPS)
def test_lab_binary_without_driver_says_so(lab_dir, op, monkeypatch):
    exe = lab_dir / f"gapbench_lab_{op}"
    p = subprocess.run([str(exe), "--shapes", SMALL[op]], capture_output=True, text=True, timeout=120)
    assert p.returncode == 3, (p.returncode, p.stderr)
    assert "no CUDA device/driver" in p.stderr and "Segmentation" not in p.stderr
    monkeypatch.setenv("GAPBENCH_LAB_DIR", str(lab_dir))
    with pytest.raises(lab.LabError) as e:
        lab.run(op, ["--shapes", SMALL[op]], timeout_s=120)
    assert e.value.kind == "no_device" and "no CUDA device/driver" in e.value.detail


def _doc(**over) -> dict:
    rec = {"op": "vjp_dx", "dtype": "bf16", "shape": "4096x16384", "bytes": 134250496.0, "flops": 134217728.0,
           "ci_coverage": 0.96, "reason": "", "config": ""}
    doc = {"schema": "gapbench.lab", "schema_version": 1, "op": "vjp_dx",
           "device": {"name": "NVIDIA H200", "cc": 90, "sms": 132, "l2_bytes": 52428800, "driver": 13000,
                      "runtime": 13000},
           "vendor": "cublas", "cublas": "/x/libcublas.so.13", "cublas_version": 130000, "cold": "write",
           "rounds": 7, "warmup": 2, "seed": 0, "records": [
               dict(rec, variant=0, name="cublas", status="ok", verified=True, rel_err=1e-3, median_s=3.0e-5,
                    ratio_vs_vendor=None, ci_lo=None, ci_hi=None, samples_s=[3.1e-5, 3.0e-5, 2.9e-5]),
               dict(rec, variant=13, name="dx_strips_one_wave", status="ok", verified=True, rel_err=2e-3,
                    median_s=2.8e-5, ratio_vs_vendor=1.04, ci_lo=1.01, ci_hi=1.06, samples_s=[2.8e-5, 2.7e-5]),
               dict(rec, variant=9, name="dx_tma_ring", status="n/a", reason="needs sm_90 or newer",
                    verified=False, rel_err=None, median_s=None, ratio_vs_vendor=None, ci_lo=None, ci_hi=None,
                    samples_s=[]),
               dict(rec, variant=5, name="dx_fused_last_block", status="failed",
                    reason="verification failed: rel. error 1.000e+00", verified=False, rel_err=1.0,
                    median_s=None, ratio_vs_vendor=None, ci_lo=None, ci_hi=None, samples_s=[]),
               dict(rec, variant=11, name="strips L8 R8 W16 bps2", config="strips", status="ok", verified=True,
                    rel_err=2e-3, median_s=2.9e-5, ratio_vs_vendor=1.0, ci_lo=0.99, ci_hi=1.02,
                    samples_s=[2.9e-5]),
               dict(rec, variant=-1, name="ws C8 TR64 S12", config="ws", status="ok", verified=True,
                    rel_err=2e-3, median_s=None, ratio_vs_vendor=None, ci_lo=None, ci_hi=None, samples_s=[]),
           ]}
    doc.update(over)
    return doc


def test_parse_maps_every_arm_to_a_record():
    recs = lab.parse(json.dumps(_doc()))
    by = {r.variant: r for r in recs}
    assert list(by) == ["lab-cublas", "lab-v13", "lab-v9", "lab-v5", "lab-v11:strips L8 R8 W16 bps2",
                        "lab-ws C8 TR64 S12"]
    assert all(r.probe == "blas" and r.backend == "native-cuda" and r.metric == "time_cold_dirty" for r in recs)
    v13 = by["lab-v13"]
    assert v13.status == OK and v13.verified is True and v13.samples_s == [2.8e-5, 2.7e-5]
    assert v13.clock == "device_events" and v13.warmup == 2
    assert v13.params["shape"] == {"m": 4096, "k": 16384} and v13.params["dtype"] == "bf16"
    assert v13.params["lab"]["ratio_vs_vendor"] == 1.04 and v13.params["lab"]["ci_lo"] == 1.01
    assert v13.work == {"bytes": 134250496.0, "flops": 134217728.0}
    assert v13.device["name"] == "NVIDIA H200" and v13.device["cublas"] == "/x/libcublas.so.13"
    assert by["lab-v9"].status == NOT_APPLICABLE and by["lab-v9"].reason == "needs sm_90 or newer"
    assert by["lab-v9"].verified is None and not by["lab-v9"].samples_s
    assert by["lab-v5"].status == FAILED and by["lab-v5"].verified is False and "rel. error" in by["lab-v5"].reason
    assert by["lab-v11:strips L8 R8 W16 bps2"].params["lab"]["config"] == "strips"
    # an ok arm without a valid sample cannot be an ok record
    assert by["lab-ws C8 TR64 S12"].status == ERROR and "no valid samples" in by["lab-ws C8 TR64 S12"].reason


def test_parse_reads_shapes_and_cold_modes_per_op():
    doc = _doc(op="gemm", cold="none")
    doc["records"] = [dict(doc["records"][1], op="gemm", shape="8x2000x2000x2000")]
    (r,) = lab.parse(json.dumps(doc))
    assert r.metric == "time" and "hot" in r.params["cache"]
    assert r.params["shape"] == {"batch": 8, "m": 2000, "n": 2000, "k": 2000}
    doc["cold"] = "read"
    assert lab.parse(json.dumps(doc))[0].metric == "time_cold"


@pytest.mark.parametrize("doc,word", [
    ("not json", "not JSON"),
    (json.dumps({"schema": "gapbench.run"}), "not a gapbench.lab document"),
    (json.dumps(_doc(schema_version=2)), "schema version 2"),
    (json.dumps(_doc(cold="lukewarm")), "unknown cold mode"),
])
def test_parse_rejects_what_it_cannot_read(doc, word):
    with pytest.raises(lab.LabError) as e:
        lab.parse(doc)
    assert e.value.kind == "bad_output" and word in str(e.value)


def test_parse_rejects_a_shape_that_does_not_fit_the_op():
    doc = _doc()
    doc["records"] = [dict(doc["records"][1], shape="4096")]
    with pytest.raises(lab.LabError, match="does not fit vjp_dx"):
        lab.parse(json.dumps(doc))


def test_missing_lab_says_how_to_build_it(tmp_path, monkeypatch):
    monkeypatch.setenv("GAPBENCH_LAB_DIR", str(tmp_path))
    monkeypatch.setattr(lab, "__file__", str(tmp_path / "gapbench" / "lab.py"))
    with pytest.raises(lab.LabError) as e:
        lab.find_binary("vjp_dx")
    assert e.value.kind == "not_built" and "-Ccmake.define.GAPBENCH_LAB=ON" in str(e.value)
    with pytest.raises(ValueError, match="unknown lab op"):
        lab.find_binary("syrk")


def test_run_turns_a_usage_error_into_a_lab_error(tmp_path):
    fake = tmp_path / "gapbench_lab_gemv"
    fake.write_text("#!/bin/sh\necho \"bad shape 'x' for gemv: want MxK\" >&2\nexit 2\n")
    fake.chmod(0o755)
    with pytest.raises(lab.LabError) as e:
        lab.run("gemv", ["--shapes", "x"], binary=fake, timeout_s=30)
    assert e.value.kind == "usage" and "bad shape 'x'" in e.value.detail


def test_run_kills_a_hung_lab_on_timeout(tmp_path):
    fake = tmp_path / "gapbench_lab_gemv"
    fake.write_text("#!/bin/sh\nsleep 60\n")
    fake.chmod(0o755)
    with pytest.raises(lab.LabError) as e:
        lab.run("gemv", binary=fake, timeout_s=1)
    assert e.value.kind == "timeout"


@pytest.mark.cuda
@pytest.mark.skipif(not _gpu_driver_present(), reason="needs an NVIDIA GPU and driver")
@pytest.mark.parametrize("op", lab.OPS)
def test_every_lab_variant_verifies_and_sweeps_on_gpu(lab_dir, op, monkeypatch):
    monkeypatch.setenv("GAPBENCH_LAB_DIR", str(lab_dir))
    # small and ragged shapes (last tiles, strips and slices partly past the edge)
    shapes = {"vjp_dx": "1001x16904,2050x8456,77x4104", "gemm": "2x128x128x128,3x200x136x72"}[op]
    args = ["--variants", "all", "--shapes", shapes, "--rounds", "7", "--warmup", "1"]
    if op == "vjp_dx":
        args += ["--configs", "all"]
    res = lab.run(op, args, timeout_s=900)
    assert res.returncode == 0, res.stdout[-3000:]
    recs = res.records
    assert recs and not [r for r in recs if r.status in (FAILED, ERROR)], [(r.variant, r.reason) for r in recs
                                                                          if r.status in (FAILED, ERROR)]
    ok = [r for r in recs if r.status == OK]
    assert ok and all(r.verified and len(r.samples_s) >= 5 and min(r.samples_s) > 0 for r in ok)
    # on the lent Hopper GPUs every numbered variant applies to some case
    if res.document["device"]["cc"] == 90:
        ran = {r.params["lab"]["id"] for r in ok if not r.params["lab"]["config"]}
        assert ran == set(range(0, {"vjp_dx": 14, "gemm": 8}[op] + 1))


def test_blas_variants_all_needs_the_lab(tmp_path, monkeypatch):
    """bench.blas --variants all without a built lab: exit 2 naming how to build it, no result file."""
    from conftest import run_module

    monkeypatch.setenv("GAPBENCH_LAB_DIR", str(tmp_path / "none"))
    out = tmp_path / "r.json"
    p = run_module("bench.blas", "--quick", "--variants", "all", "--backends", "torch-cpu", "--out", str(out))
    assert p.returncode == 2 and "GAPBENCH_LAB=ON" in p.stderr + p.stdout
    assert not out.exists()


def test_blas_variants_all_adds_the_lab_rows(tmp_path, monkeypatch):
    """The lab binary is run with the run's dtypes and shapes, and its variants become rows of the
    blas result file (a stand-in binary that writes the documented JSON)."""
    from conftest import run_module

    from gapbench.core.result import load_run

    doc = _doc(op="gemm", cold="read")
    for r in doc["records"]:
        r.update(op="gemm", shape="2x64x64x64")
    fake = tmp_path / "gapbench_lab_gemm"
    args_seen = tmp_path / "args.txt"
    fake.write_text("#!/usr/bin/env python3\nimport sys, json\n"
                    f"open({str(args_seen)!r}, 'w').write(' '.join(sys.argv[1:]))\n"
                    "out = sys.argv[sys.argv.index('--json') + 1]\n"
                    f"open(out, 'w').write({json.dumps(json.dumps(doc))})\n")
    fake.chmod(0o755)
    monkeypatch.setenv("GAPBENCH_LAB_DIR", str(tmp_path))
    out = tmp_path / "r.json"
    p = run_module("bench.blas", "--quick", "--variants", "all", "--ops", "gemm", "--dtypes", "fp32",
                   "--shapes", "2x64x64x64", "--backends", "torch-cpu", "--no-plots", "--out", str(out))
    assert p.returncode == 0, p.stderr
    seen = args_seen.read_text()
    assert "--variants all" in seen and "--dtypes fp32" in seen and "--shapes 2x64x64x64" in seen
    variants = {r.variant for r in load_run(out).records if r.backend == "native-cuda"}
    assert {"lab-cublas", "lab-v13", "lab-v9", "lab-v5"} <= variants


def test_the_lab_ops_are_the_lab_files():
    """lab.OPS names exactly the ops with a lab file (CMake builds one binary per cuda/lab/*.cu);
    an op whose variants all ship has none and is timed by name (bench.blas --variants all)."""
    from gapbench.core import opdecl

    files = sorted(p.stem for p in (ROOT / "cuda" / "lab").glob("*.cu"))
    assert sorted(lab.OPS) == files
    assert set(files) <= {d.name for d in opdecl.load(ROOT / "csrc" / "ops.def")}
    # an op's lab kernels that run by name (csrc/lab.def) are declared kernels of no op's library
    labk = opdecl.lab_kernels(ROOT / "csrc" / "lab.def")
    library = {k for d in opdecl.load(ROOT / "csrc" / "ops.def") for k in d.kernels}
    assert labk and not library & {k for ks in labk.values() for k in ks}
    assert set(labk) <= {d.name for d in opdecl.load(ROOT / "csrc" / "ops.def")}


def test_variants_all_of_an_op_without_a_lab_file_needs_no_lab(tmp_path, monkeypatch):
    """gemv's variants all ship: --variants all --ops gemv times its library kernels by name and
    runs without the lab built (where no GPU is present its native rows say why)."""
    from conftest import run_module

    from gapbench.core.result import load_run

    monkeypatch.setenv("GAPBENCH_LAB_DIR", str(tmp_path / "none"))
    out = tmp_path / "r.json"
    p = run_module("bench.blas", "--quick", "--variants", "all", "--ops", "gemv", "--dtypes", "fp32",
                   "--backends", "torch-cpu", "--no-plots", "--no-plain", "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert load_run(out).run["config"]["kernels"] is True
