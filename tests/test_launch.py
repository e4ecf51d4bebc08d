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
from gapbench.backends.base import BackendInfo
from gapbench.core.names import Backend
from gapbench.core import plaincheck
from gapbench.backends import registry
from gapbench.benchmarks.launch import command as launch
from gapbench.benchmarks.launch import pairing as launch_pairing
from gapbench.benchmarks.launch import tables as launch_tables
from gapbench.benchmarks.launch.config import WARM_METRICS
from gapbench.core.result import ERROR, NOT_APPLICABLE, OK, UNAVAILABLE, load_run
from gapbench.core.worker import PacedCommand

SMALL = ["--samples", "8", "--inner", "5", "--warmup", "2", "--cold-samples", "2", "--warm-processes", "1",
         "--no-progress"]


#: runs `python -m bench.launch ARGS` in this process, then names the frameworks it imported
PARENT_WRAPPER = r"""
import runpy, sys
sys.argv = ["bench.launch"] + sys.argv[1:]
code = 0
try:
    runpy.run_module("bench.launch", run_name="__main__", alter_sys=True)
except SystemExit as e:
    code = e.code or 0
print("PARENT_IMPORTED=" + ",".join(m for m in ("torch", "mlx.core", "cupy") if m in sys.modules))
sys.exit(code)
"""


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("launch") / "cpu.json"
    p = subprocess.run([sys.executable, "-c", PARENT_WRAPPER, "--backends", "native-cpu,torch-cpu,mlx-cpu",
                        "--out", str(out), *SMALL], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr + p.stdout
    return p, load_run(out), out


def test_parent_imports_no_framework(cpu_run):
    p, run, _ = cpu_run
    if not any(registry.precheck(b) is None for b in ("torch-cpu", "mlx-cpu")):
        pytest.skip("neither torch nor mlx is installed: nothing the parent could have imported")
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("PARENT_IMPORTED=")]
    assert line == ["PARENT_IMPORTED="], line
    # ... while the workers did import them and reported the device they saw
    for backend in ("torch-cpu", "mlx-cpu"):
        if registry.precheck(backend) is None:
            assert _get(run, backend, "add", "roundtrip").device.get("name")


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


@pytest.mark.parametrize("backend", ["torch-cpu", "mlx-cpu"])
def test_xfloor_is_paired_with_the_binding_floor_in_process(cpu_run, backend):
    if not registry.info(backend).available:
        pytest.skip(f"{backend} not available here: {registry.info(backend).reason}")
    p, run, _ = cpu_run
    rt = _get(run, backend, "add", "roundtrip")
    pr = rt.params["paired"]
    assert pr["vs"] == "native-cpu/noop" and pr["processes"] == 1  # SMALL: one warm process
    assert pr["rounds"] >= launch_pairing.PAIR_MIN_ROUNDS
    assert len(pr["per_round"]["framework"]) == len(pr["per_round"]["floor"]) == pr["rounds"]
    assert 0 < pr["lo"] <= pr["x_floor"] <= pr["hi"]
    cell = launch.overhead(run.records, backend, "roundtrip", rt)
    # each arm was timed alone in the same process too; where the pairing moved one (a busy 2-core
    # runner does that), the cell gives the standalone medians' ratio and says so
    assert len(pr["alone"]["framework"]) >= 20 and len(pr["alone"]["floor"]) >= 20
    want = (launch_tables._x(pr["x_standalone"]) + "x alone (paired perturbed)" if pr.get("perturbed")
            else launch_tables._x(pr["x_floor"]) + "x [")
    assert cell.startswith(want) and cell in p.stdout + launch.markdown_table(run.records)
    # the CPU floor has no device queue: mlx-cpu's back-to-back time has no floor to pair with
    if backend == "mlx-cpu":
        b2b = _get(run, backend, "add", "stream_b2b")
        assert "paired" not in b2b.params and launch.overhead(run.records, backend, "stream_b2b", b2b) == ""


def test_xfloor_cell_is_empty_without_a_pairing():
    # medians from different processes are never divided: no paired rounds, no ratio
    from gapbench.core.result import Record

    def row(b, v, params=None):
        return Record(probe="launch", backend=b, variant=v, metric="roundtrip", samples_s=[1e-6, 2e-6],
                      params=params or {})

    rows = [row("native-cpu", "noop"), row("torch-cpu", "add"),
            row("mlx-cpu", "add", {"paired": {"vs": "native-cpu/noop", "reason": "floor could not run"}})]
    assert launch.overhead(rows, "torch-cpu", "roundtrip", rows[1]) == ""
    assert launch.overhead(rows, "mlx-cpu", "roundtrip", rows[2]) == ""
    assert "x [" not in launch.markdown_table(rows)


def _paired_doc(ratios, floors, reason=None):
    from gapbench.benchmarks.launch.params import Pairing

    if reason:
        return Pairing(vs="native-cuda/add1", reason=reason)
    return Pairing(vs="native-cuda/add1", processes=1, k=3, seed=1, stop="budget",
                   per_round={"framework": [None if r is None else r * f for r, f in zip(ratios, floors)],
                              "floor": list(floors)})


def test_paired_rounds_pool_across_processes():
    # process A's per-round ratios are 1..6, process B's 7..12 (one round of B lost: None), on
    # floors of different sizes. Pooled: 12 ratios 1..12 -> median 6.5, and the 97% interval of a
    # median of 12 is [2nd, 11th] smallest (binomial(12, 1/2): P(B <= 1) = 13/4096 <= 1.5%, while
    # P(B <= 2) = 79/4096 is not).
    a = _paired_doc([1, 2, 3, 4, 5, 6], [1e-6, 2e-6, 5e-6, 1e-6, 3e-6, 2e-6])
    b = _paired_doc([7, 8, 9, None, 10, 11, 12], [4e-6, 1e-6, 2e-6, 1e-6, 1e-6, 3e-6, 1e-6])
    pooled = launch_pairing.pool_paired([a, b, _paired_doc(None, None, reason="no driver")])
    assert pooled.rounds == 12 and pooled.processes == 2
    assert pooled.x_floor == pytest.approx(6.5)
    assert (pooled.lo, pooled.hi) == (pytest.approx(2.0), pytest.approx(11.0))
    assert pooled.unpaired_processes == ["no driver"]
    # the ratio of pooled medians would differ: pairs are kept inside their rounds
    fw = [x for x in a.per_round["framework"] + b.per_round["framework"] if x is not None]
    assert float(np.median(fw)) / float(np.median(a.per_round["floor"] + b.per_round["floor"])) != 6.5
    # the same through launch.pool, which the parent runs over its warm processes
    from gapbench.core.result import Record

    def rec(doc):
        return [Record(probe="launch", backend="cupy", variant="add", metric="roundtrip", samples_s=[1e-5],
                       params={"paired": doc.to_dict()})]

    merged = launch.pool([rec(a), rec(b)])[0]
    assert merged.params["processes"] == 2 and merged.params["paired"]["x_floor"] == pytest.approx(6.5)
    assert launch.overhead([merged], "cupy", "roundtrip", merged) == "6.50x [2.00-11.0]"
    # a process whose floor could not run contributes no rounds and says why
    only_failed = launch_pairing.pool_paired([_paired_doc(None, None, reason="no driver")])
    assert only_failed.x_floor is None and only_failed.reason == "no driver"


def test_quick_run_of_every_backend(tmp_path):
    out = tmp_path / "all.json"
    p = run_module("bench.launch", "--quick", "--no-progress", "--out", str(out))
    assert p.returncode == 0, p.stderr
    run = load_run(out)
    names = {r.backend for r in run.records}
    assert {b.value for b in Backend.selectable()} <= names  # every backend is a row, measured or saying why not
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
    assert "unknown backend 'tpu'" in p.stderr and "native-cpu" in p.stderr and "--list shows which run" in p.stderr
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize("args,msg", [(["--samples", "0"], "--samples"), (["--cold-samples", "0"], "--cold-samples")])
def test_bad_options_are_clear_errors(tmp_path, args, msg):
    p = run_module("bench.launch", *args, "--out", str(tmp_path / "x.json"))
    assert p.returncode == 2 and msg in p.stderr


def test_worker_failure_is_an_error_row_and_others_go_on(monkeypatch):
    calls = []

    def flaky(backend, cfg, warm, plain_round=False):
        calls.append(warm)
        if warm:
            raise launch.WorkerError("crash", "segfault in the first process")
        return {"phases": {"noop": {"import": 1e-3, "cold": 2e-6, "first_warm": 1e-7}}, "records": [], "ops": {},
                "verify": {}}

    monkeypatch.setattr(launch, "spawn_worker", flaky)
    cfg = launch.Config(samples=3, inner=2, warmup=0, cold_samples=3, warm_processes=1)
    recs = launch.measure_backend(Backend.native_cpu, cfg)
    assert calls == [True, False, False]
    lost = [r for r in recs if r.metric == "warm"]
    assert lost and lost[0].status == ERROR and "segfault" in lost[0].reason
    cold = [r for r in recs if r.metric == "cold" and r.status == OK][0]
    assert len(cold.samples_s) == 2  # the two processes that lived still count
    summary = [r for r in recs if r.variant == "(errors)"][0]
    assert "1 of 3" in summary.reason


@pytest.mark.skipif(registry.info(Backend.native_metal).available, reason="needs a machine without Metal")
def test_real_worker_exception_comes_back_as_its_reason():
    with pytest.raises(launch.WorkerError, match="macOS"):
        launch.spawn_worker(Backend.native_metal, launch.Config(samples=1, inner=1, warmup=0, cold_samples=1), True)


def _rec(vals, status=OK, metric="roundtrip"):
    from gapbench.core.result import Record

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


def test_warm_samples_pooled_over_processes(monkeypatch):
    order = []

    def worker(backend, cfg, warm, plain_round=False):
        order.append("H" if warm else "c")
        recs = [_rec([float(len(order))]).to_dict()] if warm else []
        return {"phases": {"null": {"cold": 1e-4}}, "records": recs, "ops": {}, "verify": {}}

    monkeypatch.setattr(launch, "spawn_worker", worker)
    cfg = launch.Config(samples=1, inner=1, warmup=0, cold_samples=4, warm_processes=3)
    recs = launch.measure_backend(Backend.native_cpu, cfg)
    assert "".join(order) == "HHHc"  # 4 processes in all, the first 3 warm
    rt = [r for r in recs if r.metric == "roundtrip"][0]
    assert sorted(rt.samples_s) == [1.0, 2.0, 3.0] and rt.params["processes"] == 3
    cold = [r for r in recs if r.metric == "cold"][0]
    assert len(cold.samples_s) == 4


def test_killed_run_keeps_completed_rows(tmp_path):
    out = tmp_path / "killed.json"
    # 30 cold samples: torch-cpu's and mlx-cpu's fresh processes keep the run going for tens of seconds
    # after native-cpu's rows land (with 6, a fresh CI venv once finished in the second before the kill)
    proc = subprocess.Popen([sys.executable, "-m", "bench.launch", "--backends", "native-cpu,torch-cpu,mlx-cpu",
                             "--cold-samples", "30", "--samples", "20", "--inner", "5", "--no-progress",
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
    from gapbench.core import metal_cpu

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
@pytest.mark.skipif(not registry.info(Backend.native_cuda).available,
                    reason="needs an NVIDIA GPU and driver: " + registry.info(Backend.native_cuda).reason)
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


# ---------------------------------------------------------------- harness vs plain loop, paired
FAKE_PACED_LOOP = r"""
import json, os, sys, time
samples, inner, warmup, variant, rounds = (int(x) for x in sys.argv[1:6])
fail_at = int(sys.argv[6]) if len(sys.argv) > 6 else -1
count = os.path.join(os.path.dirname(os.path.abspath(__file__)), "count")  # rounds so far, over processes
print(json.dumps({"ready": True}), flush=True)  # set up (plain_check.h next_round)
for _ in range(rounds):
    if not sys.stdin.readline():
        break
    k = int(open(count).read()) if os.path.exists(count) else 0
    open(count, "w").write(str(k + 1))
    if k == fail_at:
        print("the fake loop broke on purpose", file=sys.stderr)
        sys.exit(3)
    v = [2e-6 * (k + 1)] * samples  # the k-th plain round: 2 us * (k + 1)
    doc = {"samples": samples, "inner": inner, "warmup": warmup, "variant": variant, "round": k,
           "invalid_samples": 0, "t": time.monotonic(), "pid": os.getpid(), "submit": v, "roundtrip": v,
           "stream_b2b": v, "device_kernel": v, "graph_replay": v}
    print(json.dumps(doc), flush=True)
"""
#: harness / plain per round; rounds 0..5. Median 1.1, and with 6 rounds the interval is [min, max]
HARNESS_OVER_PLAIN = [1.0, 1.3, 0.9, 1.2, 1.15, 1.05]


def _fake_loop(tmp_path, fail_at=None):
    exe = tmp_path / "gapbench_launch_plain"
    extra = f' "$@" {fail_at}' if fail_at is not None else ' "$@"'
    (tmp_path / "loop.py").write_text(FAKE_PACED_LOOP)
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{tmp_path / "loop.py"}"{extra}\n')
    exe.chmod(0o755)
    return exe


class _FakeHarness:
    def __init__(self):
        self.t: list[float] = []

    def __call__(self) -> dict:
        r = len(self.t)
        self.t.append(time.monotonic())
        time.sleep(0.02)  # a floor under the round's recorded wall time
        v = [2e-6 * (r + 1) * HARNESS_OVER_PLAIN[r % len(HARNESS_OVER_PLAIN)]] * 5
        return {m: v for m in WARM_METRICS}


def test_plain_pairing_runs_each_round_in_a_fresh_loop(tmp_path, monkeypatch):
    monkeypatch.setattr(launch, "plain_binary", lambda: _fake_loop(tmp_path))
    cfg = launch.Config(samples=30, inner=4, warmup=1, plain_rounds=6)
    harness = _FakeHarness()
    pids = []
    real_round = PacedCommand.round

    def spy(self):  # every round is the first and only round of its own loop process
        doc = real_round(self)
        pids.append((doc["pid"], self.cmd[-1]))
        return doc

    monkeypatch.setattr(PacedCommand, "round", spy)
    recs = launch_pairing.plain_check(launch.plain_binary(), cfg, harness, seed=3)
    assert len({pid for pid, _ in pids}) == 6 and {rounds for _, rounds in pids} == {"1"}
    by_metric = {r.metric: r for r in recs}
    assert set(by_metric) == set(WARM_METRICS) and all(r.status == OK for r in recs)
    rt = by_metric["roundtrip"]
    assert rt.params["rounds"] == 6 and rt.params["samples_per_round"] == 5 and rt.inner == 1
    assert "fresh" in rt.params["processes"]
    assert by_metric["submit"].inner == 4
    # the plain loop's rows carry the conditions of the harness rows they are paired with
    from gapbench.core.conditions import Clock, Conditions, mismatch

    harness_rt = Conditions(clock=Clock.HOST, process="standalone", data="uniform[0.5, 2)", cpu="not bound")
    assert mismatch(Conditions.of(rt), harness_rt) is None and rt.conditions["seed"] == 3
    assert by_metric["device_kernel"].conditions["clock"] == Clock.GATED
    assert len(rt.samples_s) == 30 and len(rt.params["harness_interleaved_s"]) == 30
    assert set(rt.params["order"]) <= {"hp", "ph"} and len(rt.params["order"]) == 6
    ratio, lo, hi = plaincheck.plain_ratio(rt)
    assert ratio == pytest.approx(1.1) and (lo, hi) == (pytest.approx(0.9), pytest.approx(1.3))
    # what each round cost, [harness process, plain process]: the fake harness takes at least 20 ms
    walls = rt.params["round_walls_s"]
    assert len(walls) == 6 and all(h >= 0.02 and p > 0 for h, p in walls)
    rows = launch.plain_comparison(recs)
    assert [m for m, *_ in rows] == list(WARM_METRICS)
    assert all(r == pytest.approx(1.1) and lo == pytest.approx(0.9) for _, r, lo, _ in rows)


def test_plain_and_harness_rounds_alternate_in_time(tmp_path):
    harness = _FakeHarness()
    with PacedCommand([str(_fake_loop(tmp_path)), "5", "4", "1", "1", "8"], timeout=60) as loop:
        got, order = plaincheck.interleave({"plain": loop.round, "harness": harness}, 8, seed=3)
    assert len(got["plain"]) == len(harness.t) == 8
    prev_end = -1.0
    for r in range(8):  # each plain answer carries the time it was made ("t")
        tp, th = got["plain"][r]["t"], harness.t[r]
        assert (tp < th) == (order[r] == ["plain", "harness"])  # the recorded order is the real one
        assert min(tp, th) > prev_end  # round r starts after round r - 1 ended
        prev_end = max(tp, th)
    assert {tuple(o) for o in order} == {("plain", "harness"), ("harness", "plain")}  # randomised


def test_plain_loop_failure_is_an_error_row(tmp_path):
    cfg = launch.Config(samples=30, inner=4, warmup=1, plain_rounds=6, timeout=60)
    recs = launch_pairing.plain_check(_fake_loop(tmp_path, fail_at=2), cfg, _FakeHarness(), seed=0)
    assert len(recs) == 1 and recs[0].backend == "plain-cuda" and recs[0].status == ERROR
    assert "broke on purpose" in recs[0].reason


def test_parent_pairs_fresh_harness_processes_with_fresh_loops(tmp_path, monkeypatch):
    # the parent's part, with the worker faked here: the warm processes first, then one fresh
    # harness process per round (also a cold sample); a missing loop is a row that says why
    seen = []
    harness = _FakeHarness()

    def worker(backend, cfg, warm, plain_round=False):
        seen.append((warm, plain_round))
        doc = {"phases": {"null": {"cold": 1e-4}}, "records": [], "ops": {}, "verify": {}}
        if plain_round:
            doc["plain_round"] = harness()
        return doc

    ok_info = BackendInfo(Backend.native_cuda, True, device={"name": "fake GPU"})
    monkeypatch.setattr(launch, "precheck", lambda name: ok_info)
    monkeypatch.setattr(launch, "spawn_worker", worker)
    monkeypatch.setattr(launch, "plain_binary", lambda: _fake_loop(tmp_path))
    cfg = launch.Config(samples=30, inner=4, warmup=1, cold_samples=3, warm_processes=2, plain_rounds=6)
    steps = []
    recs = launch.measure_backend(Backend.native_cuda, cfg, on_step=lambda: steps.append(1))
    assert seen == [(True, False), (True, False)] + [(False, True)] * 6 and len(steps) == 8
    assert launch.process_plan(Backend.native_cuda, cfg, "loop") == (2, 6)
    cold = [r for r in recs if r.backend == "native-cuda" and r.metric == "cold"][0]
    assert len(cold.samples_s) == 8  # the harness rounds' fresh processes are cold samples too
    plain = [r for r in recs if r.backend == "plain-cuda"]
    assert len(plain) == len(WARM_METRICS) and all(r.status == OK for r in plain)
    assert launch.plain_comparison(recs)[0][1] == pytest.approx(1.1)
    seen.clear()
    monkeypatch.setattr(launch, "plain_binary", lambda: None)
    recs = launch.measure_backend(Backend.native_cuda, cfg)
    assert seen == [(True, False), (True, False), (False, False)]
    row = [r for r in recs if r.backend == "plain-cuda"]
    assert len(row) == 1 and row[0].status == UNAVAILABLE and "not built" in row[0].reason
    seen.clear()
    launch.measure_backend(Backend.native_cuda, launch.Config(samples=30, cold_samples=1, warm_processes=1,
                                                       plain_rounds=0))  # --no-plain
    assert seen == [(True, False)]


def test_a_lost_harness_round_is_an_error_row_and_the_rest_stays(tmp_path, monkeypatch):
    calls = []

    def worker(backend, cfg, warm, plain_round=False):
        calls.append(plain_round)
        if plain_round and sum(calls) == 3:
            raise launch.WorkerError("crash", "the third harness process died")
        doc = {"phases": {"null": {"cold": 1e-4}}, "records": [], "ops": {}, "verify": {}}
        if plain_round:
            doc["plain_round"] = _FakeHarness()()
        return doc

    ok_info = BackendInfo(Backend.native_cuda, True, device={"name": "fake GPU"})
    monkeypatch.setattr(launch, "precheck", lambda name: ok_info)
    monkeypatch.setattr(launch, "spawn_worker", worker)
    monkeypatch.setattr(launch, "plain_binary", lambda: _fake_loop(tmp_path))
    steps = []
    cfg = launch.Config(samples=30, inner=4, warmup=1, cold_samples=2, warm_processes=1, plain_rounds=6)
    recs = launch.measure_backend(Backend.native_cuda, cfg, on_step=lambda: steps.append(1))
    plain = [r for r in recs if r.backend == "plain-cuda"]
    assert len(plain) == 1 and plain[0].status == ERROR and "third harness process died" in plain[0].reason
    cold = [r for r in recs if r.backend == "native-cuda" and r.metric == "cold"][0]
    assert len(cold.samples_s) == 3  # the warm process and the two harness rounds before the loss
    assert len(steps) == 7  # the progress still completes


def test_plain_comparison_takes_the_interval_from_per_round_medians():
    from gapbench.core.result import Record

    # pooled samples whose medians alone would say 2.0; the per-round medians say 1.1 [0.9-1.3]
    h_over_p = HARNESS_OVER_PLAIN
    plain = Record(probe="launch", backend="plain-cuda", variant="null", metric="submit", samples_s=[1.0] * 6,
                   params={"round_medians_s": [[r * (k + 1), float(k + 1)] for k, r in enumerate(h_over_p)],
                           "harness_interleaved_s": [2.0] * 6})
    native = Record(probe="launch", backend="native-cuda", variant="null", metric="submit", samples_s=[2.0] * 6)
    [(m, r, lo, hi)] = launch.plain_comparison([plain, native])
    assert m == "submit" and r == pytest.approx(1.1) and (lo, hi) == (pytest.approx(0.9), pytest.approx(1.3))
    # an older file (no round medians): the ratio of medians, with no interval
    old = Record(probe="launch", backend="plain-cuda", variant="null", metric="submit", samples_s=[1.0] * 6)
    [(m, r, lo, hi)] = launch.plain_comparison([old, native])
    assert r == pytest.approx(2.0) and np.isnan(lo) and np.isnan(hi)


# ---------------------------------------------------------------- availability without importing
@pytest.mark.parametrize("backend,hint", [("torch-cpu", "pip install 'gapbench[torch]'"),
                                          ("torch-cuda", "pip install 'gapbench[torch]'"),
                                          ("cupy", "pip install 'gapbench[cupy]'"),
                                          ("mlx-gpu", "mlx[cpu]" if sys.platform != "darwin" else "pip install mlx")])
def test_precheck_says_not_installed_without_importing(monkeypatch, backend, hint):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    got = registry.precheck(backend)
    assert got is not None and got.available is False and hint in got.reason
    assert "not installed" in got.reason and "(No module named '" in got.reason  # info()'s wording


def test_precheck_leaves_the_real_check_to_the_worker():
    import importlib.util

    for backend in ("torch-cpu", "torch-cuda", "mlx-cpu", "cupy"):
        module = registry.module(Backend(backend)).MODULE.partition(".")[0]
        if importlib.util.find_spec(module) is not None:
            assert registry.precheck(backend) is None  # installed: only its import can tell
    assert registry.precheck(Backend.native_cpu) == registry.info(Backend.native_cpu)  # cheap: the real check
    if sys.platform != "darwin":
        mps = registry.precheck(Backend.torch_mps)
        assert mps is not None and not mps.available and "macOS" in mps.reason
    with pytest.raises(ValueError):
        registry.precheck("tpu")


def test_framework_that_cannot_run_is_one_unavailable_row_from_its_worker(monkeypatch):
    # mlx-gpu here: installed (the parent cannot rule it out) but without a GPU backend; cupy: missing
    candidates = [b for b in ("mlx-gpu", "cupy", "torch-cuda") if not registry.info(b).available]
    if not candidates:
        pytest.skip("every framework backend is available here")
    backend = candidates[0]
    monkeypatch.setattr(registry, "precheck", lambda name: None)  # as if only the worker could tell
    calls = []
    real = launch.spawn_worker

    def counting(*a, **kw):
        calls.append(a[0])
        return real(*a, **kw)

    monkeypatch.setattr(launch, "spawn_worker", counting)
    steps = []
    recs = launch.measure_backend(backend, launch.Config(samples=5, cold_samples=3), on_step=lambda: steps.append(1))
    assert calls == [backend] and len(steps) == 3  # no more processes; the progress still completes
    assert len(recs) == 1 and recs[0].status == UNAVAILABLE and recs[0].metric == "all"
    assert recs[0].reason == registry.info(backend).reason


# ---------------------------------------------------------------- paired ratios on a real GPU
@pytest.mark.cuda
@pytest.mark.skipif(not registry.info(Backend.native_cuda).available or launch.plain_binary() is None,
                    reason="needs an NVIDIA GPU, a driver and the plain loop built: "
                           + registry.info(Backend.native_cuda).reason)
def test_cuda_plain_check_paired_on_gpu():
    cfg = launch.Config(samples=60, inner=20, warmup=3, cold_samples=1, warm_processes=1, plain_rounds=6)
    recs = launch.measure_backend(Backend.native_cuda, cfg)
    cold = [r for r in recs if r.backend == "native-cuda" and r.metric == "cold"]
    assert cold and all(r.status == OK and len(r.samples_s) == 7 for r in cold)  # 1 warm + 6 harness rounds
    plain = {r.metric: r for r in recs if r.backend == "plain-cuda"}
    assert set(plain) == set(WARM_METRICS), [r.reason for r in plain.values()]
    for r in plain.values():
        assert r.status == OK and len(r.params["round_medians_s"]) == 6 and r.params["invalid_samples"] == 0
    for m, ratio, lo, hi in launch.plain_comparison(recs):
        assert 0 < lo <= ratio <= hi < np.inf, m


@pytest.mark.cuda
@pytest.mark.parametrize("backend", ["torch-cuda", "cupy", "mlx-gpu"])
def test_cuda_framework_xfloor_paired_on_gpu(backend):
    if not registry.info(Backend.native_cuda).available:
        pytest.skip("needs an NVIDIA GPU and driver: " + registry.info(Backend.native_cuda).reason)
    cfg = launch.Config(samples=30, inner=20, warmup=3, cold_samples=1, warm_processes=1, pair_budget_s=0.2)
    doc = launch.spawn_worker(backend, cfg, True)
    if "unavailable" in doc:
        pytest.skip(f"{backend}: {doc['unavailable']}")
    assert doc["device"].get("name")
    recs = {r["metric"]: r for r in doc["records"] if r["status"] == OK}
    held = backend in ("torch-cuda", "cupy")  # frameworks the release gate can hold
    for metric in ("roundtrip", "stream_b2b") + (("device_kernel",) if held else ()):
        pr = recs[metric]["params"]["paired"]
        assert pr["vs"] == "native-cuda/add1", pr
        assert pr["rounds"] >= launch_pairing.PAIR_MIN_ROUNDS and 0 < pr["lo"] <= pr["x_floor"] <= pr["hi"]
    assert "as the host issues them" in recs["stream_b2b"]["params"]["method"]
    if held:  # like for like: the gated framework row against the gated native one
        k = recs["device_kernel"]["params"]
        assert "release gate" in k["method"] and k["invalid_samples"] == 0


def test_pairing_takes_whole_runs_and_reports_per_op():
    """The arms return seconds per whole run (what measure.paired sizes its rounds by); a run of
    the framework is 100 ops of 2 us, one of the floor 1 op of 5 us: per op the framework takes
    0.4x the floor's time, and the record holds per-op values."""
    from gapbench.benchmarks.launch.config import Config

    cfg = Config(pair_budget_s=0.5)
    doc = launch_pairing.pair_with_floor(lambda n: [200e-6] * n, lambda n: [5e-6] * n, "native-x/add1", cfg, 0,
                                         ops_per_run={"framework": 100, "floor": 1})
    assert doc.x_floor == pytest.approx(0.4) and doc.lo == pytest.approx(0.4) == doc.hi
    assert doc.rounds >= 10
    assert doc.per_round["framework"] == pytest.approx([2e-6] * doc.rounds)
    assert doc.per_round["floor"] == pytest.approx([5e-6] * doc.rounds)


def test_a_pairing_that_moves_an_arm_is_marked_and_the_ratio_comes_from_standalone_medians():
    """Synthetic pairings: torch alone 13 us (timed in its process after the rounds), 19 us in the
    rounds; the floor 10 us both ways. The pairing is marked perturbed, naming the framework arm,
    and the row's ratio is 13/10 from the standalone medians, not the paired 1.9. A pairing whose
    arms did not move keeps its paired ratio."""
    from gapbench.benchmarks.launch.pairing import check_perturbation, pool_paired, summarize_paired
    from gapbench.benchmarks.launch.params import LaunchParams, Pairing
    from gapbench.benchmarks.launch.tables import paired_text
    from gapbench.core.result import OK, Record

    rng = np.random.default_rng(0)

    def noisy(us, n=60):
        return list(us * 1e-6 * rng.lognormal(0, 0.01, n))

    def fw(backend, alone_us, paired_us):
        p = summarize_paired(Pairing(vs="native-cuda/add1", per_round={"framework": noisy(paired_us), "floor": noisy(10)},
                                     alone={"framework": noisy(alone_us), "floor": noisy(10)}))
        p = pool_paired([p, p])  # as the parent pools processes: the standalone samples pool too
        return Record(probe="launch", backend=backend, variant="add", metric="roundtrip", status=OK,
                      samples_s=noisy(alone_us), inner=1, params=LaunchParams(paired=p).to_dict())

    moved, steady = fw("torch-cuda", 13, 19), fw("cupy", 13, 13)
    assert check_perturbation([moved, steady]) == 1
    p = LaunchParams.of(moved).paired
    assert p.perturbed.startswith("framework 19") and "+4" in p.perturbed and len(p.alone["framework"]) == 120
    assert p.x_standalone == pytest.approx(1.3, rel=0.02)
    assert paired_text(p) == f"{p.x_standalone:.2f}x alone (paired perturbed)"
    q = LaunchParams.of(steady).paired
    assert q.perturbed is None and paired_text(q).startswith(f"{q.x_floor:.2f}x [")
    # each arm moves under the 5% an arm needs, in opposite directions: the ratio alone (1.3 x
    # 1.04 / 0.97) lies outside the paired interval, as the H200's CuPy launch + sync did
    def split(alone_fw, paired_fw, alone_fl, paired_fl):
        p = summarize_paired(Pairing(vs="native-cuda/add1", per_round={"framework": noisy(paired_fw), "floor": noisy(paired_fl)},
                                     alone={"framework": noisy(alone_fw), "floor": noisy(alone_fl)}))
        return Record(probe="launch", backend="cupy", variant="add", metric="roundtrip", status=OK,
                      samples_s=noisy(alone_fw), inner=1, params=LaunchParams(paired=p).to_dict())

    drifted = split(13.5, 13.0, 9.7, 10.0)
    assert check_perturbation([drifted]) == 1
    d = LaunchParams.of(drifted).paired
    assert d.perturbed.startswith("ratio alone 1.39") and "vs paired [1.2" in d.perturbed
    assert d.x_standalone == pytest.approx(13.5 / 9.7, rel=0.02)


def test_launch_pairing_intervals_are_the_stopping_rules_97pct_ones():
    """The framework/floor interval is the order-statistic one at INTERVAL_CONFIDENCE (97%: 95%
    coverage after optional stopping), as every other ratio of the harness, not the plain 95% one."""
    from gapbench.benchmarks.launch.params import Pairing
    from gapbench.benchmarks.launch.pairing import summarize_paired
    from gapbench.core import stats
    from gapbench.core.measure import INTERVAL_CONFIDENCE

    rng = np.random.default_rng(21)
    fw, fl = list(2 + rng.normal(0, 0.1, 500)), list(1 + rng.normal(0, 0.05, 500))
    p = summarize_paired(Pairing(per_round={"framework": fw, "floor": fl}))
    want = stats.ratio_median_ci(fw, fl, INTERVAL_CONFIDENCE)
    assert INTERVAL_CONFIDENCE == 0.97 and (p.x_floor, p.lo, p.hi) == pytest.approx(want)
    assert (p.lo, p.hi) != pytest.approx(stats.ratio_median_ci(fw, fl, 0.95)[1:])
