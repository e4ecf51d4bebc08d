"""docs/results/first_process_probe.py (issue 38): which cache each process of its plan starts with,
what its table says, and a step that fails (here: no GPU) becomes the row's error, the rest skipped."""
import importlib.util
import json
import subprocess

import pytest

from conftest import ROOT


def _module():
    spec = importlib.util.spec_from_file_location("first_process_probe",
                                                  ROOT / "docs" / "results" / "first_process_probe.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_plan_gives_each_process_the_caches_it_names(monkeypatch, tmp_path):
    mod = _module()
    seen = []

    def fake_run(cmd, env, **kw):
        seen.append((cmd[-1], {k: env.get(k) for k in ("CUDA_CACHE_PATH", "CUPY_CACHE_DIR", "CUDA_CACHE_DISABLE",
                                                        "CUDA_DISABLE_PTX_JIT")}))
        return subprocess.CompletedProcess(cmd, 0, json.dumps({"import": {"s": 1.0, "jit": 0, "cupy": 0}}), "")
    monkeypatch.setattr(mod.subprocess, "run", fake_run)
    monkeypatch.setenv("CUDA_CACHE_PATH", "/elsewhere")  # the caller's own cache is never used
    rows = mod.run_plan(("cupy:cold", "torch:cold", "cupy:ptx", "cupy:warm", "cupy:nocache", "cupy:nojit",
                         "torch:warm"), str(tmp_path))
    j, c = (lambda i: str(tmp_path / f"{i}-jit")), (lambda i: str(tmp_path / f"{i}-cupy"))
    assert seen == [
        ("cupy", {"CUDA_CACHE_PATH": j(0), "CUPY_CACHE_DIR": c(0), "CUDA_CACHE_DISABLE": None, "CUDA_DISABLE_PTX_JIT": None}),
        ("torch", {"CUDA_CACHE_PATH": j(1), "CUPY_CACHE_DIR": c(1), "CUDA_CACHE_DISABLE": None, "CUDA_DISABLE_PTX_JIT": None}),
        # ptx: the driver's cache the previous CuPy process left, CuPy's own new
        ("cupy", {"CUDA_CACHE_PATH": j(0), "CUPY_CACHE_DIR": c(2), "CUDA_CACHE_DISABLE": None, "CUDA_DISABLE_PTX_JIT": None}),
        ("cupy", {"CUDA_CACHE_PATH": j(0), "CUPY_CACHE_DIR": c(2), "CUDA_CACHE_DISABLE": None, "CUDA_DISABLE_PTX_JIT": None}),
        ("cupy", {"CUDA_CACHE_PATH": None, "CUPY_CACHE_DIR": c(4), "CUDA_CACHE_DISABLE": "1", "CUDA_DISABLE_PTX_JIT": None}),
        ("cupy", {"CUDA_CACHE_PATH": None, "CUPY_CACHE_DIR": c(5), "CUDA_CACHE_DISABLE": "1", "CUDA_DISABLE_PTX_JIT": "1"}),
        ("torch", {"CUDA_CACHE_PATH": j(1), "CUPY_CACHE_DIR": c(1), "CUDA_CACHE_DISABLE": None, "CUDA_DISABLE_PTX_JIT": None}),
    ]
    assert [r["caches"] for r in rows] == ["cold", "cold", "ptx", "warm", "nocache", "nojit", "warm"]
    with pytest.raises(SystemExit, match="bad plan entry 'cupy:hot'"):
        mod.run_plan(("cupy:hot",), str(tmp_path))


def test_table_gives_each_step_its_seconds_and_the_entries_it_wrote():
    mod = _module()
    run = {"started": "2026-11-28T23:00:00Z", "device": "GPU X", "driver": "1.0", "rows": [
        {"framework": "cupy", "caches": "cold", "wall": 9.25, "steps": {
            "import": {"s": 0.5, "jit": 0, "cupy": 0}, "elementwise": {"s": 2.125, "jit": 12, "cupy": 6}}},
        {"framework": "cupy", "caches": "nojit", "wall": 1.0, "steps": {
            "import": {"s": 0.25, "jit": 0, "cupy": 0}, "context": {"error": "CUDARuntimeError: no | kernel"}}},
        {"framework": "torch", "caches": "cold", "wall": 3.0, "steps": {"process": {"error": "exit 1: boom"}}}]}
    lines = mod.table(run).splitlines()
    assert lines[4] == "| 1 | cupy | cold | 9.2 | 0.50 |  |  |  |  |  | 2.12 +12 jit +6 cupy |"
    assert lines[5] == "| 2 | cupy | nojit | 1.0 | 0.25 | failed: CUDARuntimeError: no / kernel |  |  |  |  |  |"
    assert lines[6] == "| 3 | torch | cold | 3.0 | failed: exit 1: boom |  |  |  |  |  |  |"


def test_child_without_a_gpu_times_the_import_and_stops_at_the_context():
    pytest.importorskip("torch")
    mod = _module()
    import torch
    if torch.cuda.is_available():
        pytest.skip("this checks the row a failing step gives; here torch has a GPU")
    steps = mod.child("torch")
    assert steps["import"]["s"] >= 0 and set(steps["import"]) == {"s", "jit", "cupy"}
    assert list(steps) == ["import", "context"] and "error" in steps["context"]
