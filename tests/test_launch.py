"""The launch probe: CPU backends for real, the CLI's errors, crash isolation, interrupted runs,
the Metal kernels run on the CPU against numpy, and the CUDA probe on a GPU where one exists."""
import json
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import ROOT, run_module
from gapbench import registry
from gapbench.probes import launch
from gapbench.result import ERROR, NOT_APPLICABLE, OK, UNAVAILABLE, load_run

SMALL = ["--samples", "8", "--inner", "5", "--warmup", "2", "--cold-samples", "2", "--warm-processes", "1",
         "--no-progress"]


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("launch") / "cpu.json"
    p = run_module("bench.launch", "--backends", "native-cpu,torch-cpu,mlx-cpu", "--out", str(out), *SMALL)
    assert p.returncode == 0, p.stderr + p.stdout
    return p, load_run(out), out


def _get(run, backend, variant, metric):
    hits = [r for r in run.records if (r.backend, r.variant, r.metric) == (backend, variant, metric)]
    assert len(hits) == 1, f"{backend}/{variant}/{metric}: {len(hits)} records"
    return hits[0]


@pytest.mark.parametrize("backend,variant", [("native-cpu", "noop"), ("torch-cpu", "add"), ("mlx-cpu", "add")])
def test_cpu_backends_measured(cpu_run, backend, variant):
    if not registry.info(backend).available:
        pytest.skip(f"{backend} not available here: {registry.info(backend).reason}")
    _, run, _ = cpu_run
    cold = _get(run, backend, variant, "cold")
    assert cold.status == OK and len(cold.samples_s) == 2  # one per fresh process
    assert cold.params["fresh_processes"] == 2
    rt = _get(run, backend, variant, "roundtrip")
    assert rt.status == OK and len(rt.samples_s) == 8 and rt.warmup == 2
    assert rt.clock == "host_wall"
    assert all(0 < x < 1.0 for x in rt.per_op())
    assert rt.device  # device metadata travels with each record


def test_framework_ops_verified_against_float64(cpu_run):
    _, run, _ = cpu_run
    for backend in ("torch-cpu", "mlx-cpu"):
        if not registry.info(backend).available:
            continue
        rt = _get(run, backend, "add", "roundtrip")
        assert rt.verified is True, rt.verify_detail
        assert "vs float64" in rt.verify_detail
    # nothing to verify in an empty call: recorded as None with the reason, not as a pass
    noop = _get(run, "native-cpu", "noop", "roundtrip")
    assert noop.verified is None and "no output" in noop.verify_detail


def test_metrics_a_backend_lacks_say_why(cpu_run):
    _, run, _ = cpu_run
    sub = _get(run, "torch-cpu", "add", "submit")
    assert sub.status == NOT_APPLICABLE and "synchronous" in sub.reason
    graph = _get(run, "mlx-cpu", "add", "graph_node")
    assert graph.status == NOT_APPLICABLE and graph.reason
    # mlx is asynchronous even on the CPU: its submit cost is a real measurement
    assert _get(run, "mlx-cpu", "add", "submit").status == OK


def test_table_csv_and_environment(cpu_run):
    p, run, out = cpu_run
    for name in ("native-cpu", "torch-cpu", "mlx-cpu", "launch+sync", "xfloor"):
        assert name in p.stdout
    assert out.with_suffix(".csv").read_text().count("\n") == len(run.records) + 1
    assert run.env["python"] and run.env["cpu"] and "numpy" in run.env["libraries"]
    assert "cpu" in run.env["build"]["parts"]
    assert run.run["config"]["samples"] == 8 and run.run["finished"]


def test_overhead_ratio_over_the_binding_floor(cpu_run):
    _, run, _ = cpu_run
    torch_rt = _get(run, "torch-cpu", "add", "roundtrip")
    floor = launch.floor_record(run.records, "torch-cpu", "roundtrip")
    assert floor.backend == "native-cpu" and floor.variant == "noop"
    assert launch.overhead(run.records, "torch-cpu", "roundtrip", torch_rt).endswith("x")
    # hand-made rows: torch's median 5 us over the binding floor's median 2 us is 2.5x, and inner
    # (operations per sample) divides each sample first: 8 us for 2 ops is 4 us a run, 2.0x
    from gapbench.result import Record

    def row(b, v, s, inner=1):
        return Record(probe="launch", backend=b, variant=v, metric="roundtrip", samples_s=s, inner=inner)

    rows = [row("native-cpu", "noop", [1e-6, 2e-6, 3e-6]), row("torch-cpu", "add", [4e-6, 5e-6, 9e-6])]
    assert launch.overhead(rows, "torch-cpu", "roundtrip", rows[1]) == "2.5x"
    assert launch.overhead(rows, "torch-cpu", "roundtrip", row("torch-cpu", "add", [8e-6] * 3, inner=2)) == "2.0x"


def test_quick_run_of_every_backend(tmp_path):
    out = tmp_path / "all.json"
    p = run_module("bench.launch", "--quick", "--no-progress", "--out", str(out))
    assert p.returncode == 0, p.stderr
    run = load_run(out)
    names = {r.backend for r in run.records}
    assert set(registry.ALL) <= names  # every backend is a row, measured or saying why not
    for b in registry.all_backends():
        if not b.available:
            row = _get(run, b.name, "", "all")
            assert row.status == UNAVAILABLE and row.reason == b.reason
            assert b.name in p.stdout


def test_installed_entry_point_runs_the_same_suite(tmp_path):
    out = tmp_path / "e.json"
    p = subprocess.run([sys.executable, "-m", "gapbench", "launch", "--backends", "native-cpu", "--out", str(out),
                        *SMALL], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert p.returncode == 0, p.stderr
    assert _get(load_run(out), "native-cpu", "noop", "roundtrip").status == OK


def test_unknown_backend_is_a_clear_error(tmp_path):
    p = run_module("bench.launch", "--backends", "native-cpu,tpu", "--out", str(tmp_path / "x.json"))
    assert p.returncode == 2
    assert "unknown backend 'tpu'" in p.stdout and "native-cpu" in p.stdout and "Available" in p.stdout
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize("args,msg", [(["--samples", "0"], "--samples"), (["--cold-samples", "0"], "--cold-samples")])
def test_bad_options_are_clear_errors(tmp_path, args, msg):
    p = run_module("bench.launch", *args, "--out", str(tmp_path / "x.json"))
    assert p.returncode == 2 and msg in p.stdout


def test_worker_failure_is_an_error_row_and_others_go_on(monkeypatch):
    calls = []

    def flaky(backend, cfg, warm):
        calls.append(warm)
        if warm:
            raise launch.WorkerError("crash", "segfault in the first process")
        return {"phases": {"noop": {"import": 1e-3, "cold": 2e-6, "first_warm": 1e-7}}, "records": [], "ops": {},
                "verify": {}}

    monkeypatch.setattr(launch, "spawn_worker", flaky)
    cfg = launch.Config(samples=3, inner=2, warmup=0, cold_samples=3, warm_processes=1)
    recs = launch.measure_backend("native-cpu", cfg)
    assert calls == [True, False, False]
    lost = [r for r in recs if r.metric == "warm"]
    assert lost and lost[0].status == ERROR and "segfault" in lost[0].reason
    cold = [r for r in recs if r.metric == "cold" and r.status == OK][0]
    assert len(cold.samples_s) == 2  # the two processes that lived still count
    summary = [r for r in recs if r.variant == "(errors)"][0]
    assert "1 of 3" in summary.reason


@pytest.mark.skipif(registry.info("native-metal").available, reason="needs a machine without Metal")
def test_real_worker_exception_comes_back_as_its_reason():
    with pytest.raises(launch.WorkerError, match="macOS"):
        launch.spawn_worker("native-metal", launch.Config(samples=1, inner=1, warmup=0, cold_samples=1), True)


def _rec(vals, status=OK, metric="roundtrip"):
    from gapbench.result import Record

    return Record(probe="launch", backend="plain-cuda", variant="null", metric=metric, status=status,
                  clock="host_wall" if status == OK else None, samples_s=vals if status == OK else [],
                  reason="" if status == OK else "broke")


def test_pool_joins_samples_and_never_hides_a_failure():
    merged = launch.pool([[_rec([1.0, 2.0]), _rec([5.0], metric="submit")], [_rec([3.0])]])
    by_metric = {r.metric: r for r in merged}
    assert by_metric["roundtrip"].samples_s == [1.0, 2.0, 3.0] and by_metric["roundtrip"].params["processes"] == 2
    assert by_metric["submit"].samples_s == [5.0] and by_metric["submit"].params["processes"] == 1
    failed = launch.pool([[_rec([1.0])], [_rec(None, status=ERROR)], [_rec([2.0])]])
    assert len(failed) == 1 and failed[0].status == ERROR


def test_warm_samples_pooled_over_processes_with_plain_interleaved(monkeypatch):
    order = []

    def worker(backend, cfg, warm):
        order.append("H" if warm else "c")
        recs = [_rec([float(len(order))]).to_dict()] if warm else []
        return {"phases": {"null": {"cold": 1e-4}}, "records": recs, "ops": {}, "verify": {}}

    monkeypatch.setattr(launch, "spawn_worker", worker)
    cfg = launch.Config(samples=1, inner=1, warmup=0, cold_samples=4, warm_processes=3)
    recs = launch.measure_backend("native-cpu", cfg, before_warm=lambda k: order.append("P"))
    assert "".join(order) == "PHPHPHc"  # plain before each warm process; 4 processes in all
    rt = [r for r in recs if r.metric == "roundtrip"][0]
    assert sorted(rt.samples_s) == [2.0, 4.0, 6.0] and rt.params["processes"] == 3
    cold = [r for r in recs if r.metric == "cold"][0]
    assert len(cold.samples_s) == 4


def test_killed_run_keeps_completed_rows(tmp_path):
    out = tmp_path / "killed.json"
    proc = subprocess.Popen([sys.executable, "-m", "bench.launch", "--backends", "native-cpu,torch-cpu,mlx-cpu",
                             "--cold-samples", "6", "--samples", "20", "--inner", "5", "--no-progress",
                             "--out", str(out)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:  # wait until the first backend's rows are on disk
            if out.exists() and json.loads(out.read_text())["records"]:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    run = load_run(out)  # a complete, valid file: never half-written
    assert run.records and "finished" not in run.run
    assert {r.backend for r in run.records} <= {"native-cpu", "torch-cpu", "mlx-cpu"}


# ---------------------------------------------------------------- Metal kernels on the CPU
METAL_DRIVER = r"""
#include GB_METAL_FILE
extern "C" unsigned run_null(unsigned launches, unsigned flag_value) {
  metal::atomic_uint counter{0u};
  uint flag = flag_value;
  for (unsigned l = 0; l < launches; ++l) launch_null(&counter, flag, 0u);
  return counter.load();
}
extern "C" void run_add(const float* a, const float* b, float* out, unsigned n, unsigned grid) {
  uint nn = n;
  for (uint gid = 0; gid < grid; ++gid) launch_add1_float(a, b, out, nn, gid);
}
"""


@pytest.fixture(scope="module")
def metal_launch_lib(tmp_path_factory):
    from gapbench import metal_cpu

    return metal_cpu.build(ROOT / "metal" / "launch.metal", METAL_DRIVER, tmp_path_factory.mktemp("mcpu"))


def test_metal_null_kernel_counts_on_cpu(metal_launch_lib):
    assert metal_launch_lib.run_null(7, 1) == 7
    assert metal_launch_lib.run_null(7, 0) == 0  # timing mode: no side effect


@pytest.mark.parametrize("n,grid", [(1, 1), (1, 32), (1000, 1024), (4097, 4352)])
def test_metal_add_kernel_matches_float64_on_cpu(metal_launch_lib, n, grid):
    import ctypes

    rng = np.random.default_rng()
    a = rng.uniform(-2, 2, n).astype(np.float32)
    b = rng.uniform(-2, 2, n).astype(np.float32)
    out = np.full(grid, np.nan, dtype=np.float32)  # poisoned, and longer than n: the guard must hold
    f = ctypes.POINTER(ctypes.c_float)
    metal_launch_lib.run_add(a.ctypes.data_as(f), b.ctypes.data_as(f), out.ctypes.data_as(f), n, grid)
    ok, detail = launch._check_add(out[:n], a, b)
    assert ok, detail
    assert np.all(np.isnan(out[n:]))  # threads past n wrote nothing


def test_check_add_catches_unwritten_and_wrong_outputs():
    a = np.ones(4, np.float32)
    b = np.ones(4, np.float32)
    assert launch._check_add(np.array([2, 2, np.nan, 2], np.float32), a, b)[0] is False
    assert launch._check_add(np.array([2, 2, 2.1, 2], np.float32), a, b)[0] is False
    assert launch._check_add(np.array([2, 2, 2, 2], np.float32), a, b)[0] is True


# ---------------------------------------------------------------- the CUDA probe on a real GPU
@pytest.mark.cuda
@pytest.mark.skipif(not registry.info("native-cuda").available,
                    reason="needs an NVIDIA GPU and driver: " + registry.info("native-cuda").reason)
def test_cuda_probe_on_gpu():
    from gapbench import _native

    p = _native.cuda.LaunchProbe(_native.LaunchKernel.null, 1, 0)
    assert p.count_launches(500) == 500
    for fn in (p.submit, p.stream_b2b, p.device_kernel, p.graph_replay):
        s = fn(10, 20, 2)
        assert len(s) == 10 and all(x > 0 for x in s)
    q = _native.cuda.LaunchProbe(_native.LaunchKernel.add1, 3000, 0)
    a, b = launch._random_inputs(launch.Config(n=3000))
    ok, detail = launch._check_add(np.asarray(q.run_add(a.tolist(), b.tolist()), np.float32), a, b)
    assert ok, detail
