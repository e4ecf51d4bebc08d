"""bench.dist's run bookkeeping on the CPU, without GPUs or processes: where a launch's time went
(merge.stage_times over timestamped rank lines), and the p2p probe's crash handling (one process
for every case; after a crash, the case it was in is an error row and each case it had not
reached runs in a process of its own)."""
from __future__ import annotations

import argparse

from rich.console import Console

import gapbench.benchmarks.collectives.command as bench_mod
import gapbench.core.process as process_mod
from gapbench.benchmarks.collectives.config import DistConfig
from gapbench.core.process import RankOutcome
from gapbench.benchmarks.collectives.merge import stage_times
from gapbench.benchmarks.collectives.p2p import cases
from gapbench.core.result import ERROR, OK


def test_stage_times_splits_start_ops_and_end():
    lines = [
        {"kind": "env", "t": 101.0},
        {"kind": "start", "rung": "nccl", "t": 102.0},
        {"kind": "begin", "op": "all_reduce", "t": 104.0},
        {"kind": "result", "op": "all_reduce", "t": 107.0},
        {"kind": "begin", "op": "broadcast", "t": 108.0},
        {"kind": "na", "op": "broadcast", "t": 108.5},
        {"kind": "result", "op": "broadcast", "t": 110.0},
        {"kind": "done", "rung": "nccl", "t": 111.0},
    ]
    got = stage_times(lines, t_start=100.0, t_end=112.0)
    assert got["wall"] == 12.0
    assert got["start"] == 4.0  # launch -> first measurement line
    assert got["ops"] == {"all_reduce": 3.0, "broadcast": 3.0}  # 107->108 counts as broadcast's check
    assert got["end"] == 2.0
    assert got["start"] + sum(got["ops"].values()) + got["end"] == got["wall"]


def test_stage_times_without_measurements_has_wall_only():
    assert stage_times([{"kind": "unavailable", "t": 5.0}], 1.0, 3.5) == {"wall": 2.5}


def _p2p_lines(src, dst, method, sizes, t0=0.0):
    out = []
    for i, size in enumerate(sizes):
        out.append({"kind": "begin", "rung": "p2p", "op": method, "src": src, "dst": dst, "size": size, "t": t0 + i})
        out.append({"kind": "p2p", "src": src, "dst": dst, "size": size, "method": method, "status": OK,
                    "samples_s": [1e-5, 1.1e-5], "iters": 50, "warmup": 1, "verify_detail": "exact", "t": t0 + i + .5})
    return out


def _run_p2p(monkeypatch, tmp_path, first_outcome):
    """bench._p2p with 2 fake GPUs; the first launch (all cases) returns `first_outcome`, every
    later one (a single case) succeeds. Returns (records, the --p2p-only cases launched)."""
    sizes = [1024, 1 << 20]
    todo = cases(2, sizes)
    single = []

    def fake_launch(nproc, module, args, rank_dir, **kw):
        if "--p2p-only" not in args:
            return [first_outcome(todo, sizes)]
        only = args[args.index("--p2p-only") + 1]
        single.append(only)
        src, dst, method = only.split(",")
        want = next(c for c in todo if c[:3] == (int(src), int(dst), method))
        return [RankOutcome(0, 1, 0, "exited", lines=_p2p_lines(want[0], want[1], want[2], want[3]))]

    monkeypatch.setattr(bench_mod, "gpu_count", lambda: 2)
    monkeypatch.setattr(process_mod, "run_ranks", fake_launch)
    args = argparse.Namespace(timeout=60.0, hang_timeout=60.0, allow_multicast=False)
    cfg = DistConfig(sizes=sizes, device="cuda")
    recs = bench_mod.DistBenchmark()._p2p(args, cfg, tmp_path, Console(file=open("/dev/null", "w")))
    return recs, single, todo


def test_p2p_runs_every_case_in_one_process_when_it_succeeds(monkeypatch, tmp_path):
    def all_ok(todo, sizes):
        lines = [x for c in todo for x in _p2p_lines(*c)]
        return RankOutcome(0, 1, 0, "exited", lines=lines)

    recs, single, todo = _run_p2p(monkeypatch, tmp_path, all_ok)
    assert single == []
    assert len(recs) == sum(len(c[3]) for c in todo)
    assert all(r.status == OK for r in recs)


def test_p2p_crash_loses_only_the_case_it_was_in(monkeypatch, tmp_path):
    def crash_in_second_case(todo, sizes):
        (s0, d0, m0, z0), (s1, d1, m1, _) = todo[0], todo[1]
        lines = _p2p_lines(s0, d0, m0, z0)
        lines.append({"kind": "begin", "rung": "p2p", "op": m1, "src": s1, "dst": d1, "size": sizes[0], "t": 9.0})
        return RankOutcome(0, 1, -11, "exited", stderr_tail="Fatal Python error: Segmentation fault", lines=lines)

    recs, single, todo = _run_p2p(monkeypatch, tmp_path, crash_in_second_case)
    crashed = todo[1]
    errors = [r for r in recs if r.status == ERROR]
    assert len(errors) == 1
    assert errors[0].metric == crashed[2] and errors[0].variant == f"{crashed[0]}->{crashed[1]}"
    assert "signal 11" in errors[0].reason and "1K" in errors[0].reason and "Segmentation" in errors[0].reason
    # the cases the crashed process never reached ran one per process; neither done case re-ran
    assert single == [f"{s},{d},{m}" for s, d, m, _ in todo[2:]]
    ok_cases = {(r.params["src"], r.params["dst"], r.metric) for r in recs if r.status == OK}
    assert ok_cases == {c[:3] for c in todo} - {crashed[:3]}


def test_p2p_unavailable_in_the_single_process_is_one_row(monkeypatch, tmp_path):
    def unavailable(todo, sizes):
        return RankOutcome(0, 1, 0, "exited", lines=[{"kind": "unavailable", "rung": "p2p",
                                                       "reason": "the p2p probe needs two GPUs", "t": 1.0}])

    recs, single, _ = _run_p2p(monkeypatch, tmp_path, unavailable)
    assert single == []
    assert [(r.status, r.reason) for r in recs] == [("unavailable", "the p2p probe needs two GPUs")]
