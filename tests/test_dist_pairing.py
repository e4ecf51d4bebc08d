"""bench.dist's paired rounds, on the CPU without processes: the worker's interleaved rounds (fake
engines), the merge's per-round medians, the gap tables' pairing with the same launch's direct-NCCL
reference, the plain-loop check's rounds (a fake launcher), and the topology / grouping helpers."""
from __future__ import annotations

import json
import math
import sys

import pytest

import gapbench.benchmarks.collectives.rungs as rungs_pkg
from gapbench.benchmarks.collectives.config import DistConfig
from gapbench.benchmarks.collectives.rungs.base import RankContext, Rung
from gapbench.core.ranks import RankLog
from gapbench.benchmarks.collectives.worker import run_group
from gapbench.core.result import ERROR, FAILED, OK, Record

A, B = "nccl", "torch"


# ---------------------------------------------------------------- worker: interleaved rounds
class FakeRung(Rung):
    """An engine that times nothing: it records when it was checked and timed, and returns
    fixed samples; `check_fn` / `verify_fn` (op, count) -> (ok, detail) or raise."""

    def __init__(self, name, timeline, check_fn=None, verify_fn=None):
        self.name, self.timeline, self.check_fn, self.verify_fn = name, timeline, check_fn, verify_fn
        self.checks: list[tuple[str, int]] = []
        self.closed = False

    def setup(self, ctx):
        self.ctx = ctx

    def info(self):
        return {"version": f"{self.name}-fake"}

    def check(self, op, dtype, count, inplace, root):
        self.checks.append((op, count))
        if self.check_fn:
            return self.check_fn(op, count)
        return True, f"{count} elements exact"

    def time(self, op, dtype, count, inplace, root, iters, samples, warmup):
        self.timeline.append({"op": op, "count": count, "rung": self.name, "warmup": warmup, "samples": samples})
        return [2e-3 if self.name == A else 3e-3] * samples

    def verify_last(self, op, dtype, count, inplace, root):
        if self.verify_fn:
            return self.verify_fn(op, count)
        return True, f"{count} elements exact"

    def close(self):
        self.closed = True


def _run(tmp_path, monkeypatch, fakes: dict[str, FakeRung], **cfg_kw):
    cfg = DistConfig(ops=["all_reduce", "sendrecv"], sizes=[1024, 4096], rounds=6, samples=2, device="cpu",
                     **cfg_kw)
    monkeypatch.setattr(rungs_pkg, "make", lambda name: fakes[name])
    log = RankLog(tmp_path / "rank0.jsonl", 0)
    ctx = RankContext(rank=0, world=1, local_rank=0, cfg=cfg, control=None)
    run_group(list(fakes), ctx, log)
    log.f.close()
    on_disk = [json.loads(ln) for ln in (tmp_path / "rank0.jsonl").read_text().splitlines()]
    assert on_disk == log.lines  # every line is appended to the rank's file as it is written
    return log.lines


def _results(lines, rung=None, op=None):
    return [d for d in lines if d["kind"] == "result" and (rung is None or d["rung"] == rung)
            and (op is None or d["op"] == op)]


def test_rounds_interleave_every_engine_once_per_round_in_seeded_orders(tmp_path, monkeypatch):
    timeline: list[dict] = []
    fakes = {A: FakeRung(A, timeline), B: FakeRung(B, timeline)}
    lines = _run(tmp_path, monkeypatch, fakes)
    res = _results(lines)
    assert len(res) == 2 * 2 * 2  # 2 engines x 2 ops x 2 sizes
    for d in res:
        assert d["status"] == OK and d["verified"] is True
        assert d["rounds"] == 6 and len(d["samples_s"]) == 12
        assert d["group"] == "nccl+torch"
        assert set(d["samples_s"]) == {2e-3 if d["rung"] == A else 3e-3}
    orders = set()
    for op in ("all_reduce", "sendrecv"):
        for count in (512, 2048):  # bf16 elements of 1 KiB and 4 KiB
            case = [t for t in timeline if t["op"] == op and t["count"] == count]
            assert len(case) == 12
            for rnd in range(6):
                pair = case[2 * rnd:2 * rnd + 2]
                assert sorted(t["rung"] for t in pair) == [A, B]  # each engine exactly once per round
                assert all(t["samples"] == 2 for t in pair)
                assert all(t["warmup"] == (5 if rnd == 0 else 1) for t in pair)  # full warmup in round 0 only
                orders.add(tuple(t["rung"] for t in pair))
    assert orders == {(A, B), (B, A)}  # the seeded permutation gives both orders
    assert all(f.closed for f in fakes.values())
    assert sorted(d["rung"] for d in lines if d["kind"] == "done") == [A, B]


def test_default_samples_per_round_follow_the_message_size(tmp_path, monkeypatch):
    """samples=0 (the default): 3 samples per engine per round up to 64 MiB, 2 beyond, passed to
    each engine's time() and kept whole in its record."""
    timeline: list[dict] = []
    monkeypatch.setattr(rungs_pkg, "make", lambda name: FakeRung(name, timeline))
    cfg = DistConfig(ops=["all_reduce"], sizes=[64 << 20, 256 << 20], device="cpu")
    assert cfg.samples == 0 and cfg.rounds == 9
    log = RankLog(tmp_path / "rank0.jsonl", 0)
    run_group([A], RankContext(rank=0, world=1, local_rank=0, cfg=cfg, control=None), log)
    want = {(64 << 20) // 2: 3, (256 << 20) // 2: 2}  # bf16 elements -> samples per call
    assert {t["count"]: t["samples"] for t in timeline} == want
    assert sorted(len(d["samples_s"]) for d in _results(log.lines)) == [9 * 2, 9 * 3]


def test_same_seed_same_order_different_seed_other_order(tmp_path, monkeypatch):
    def order(seed, sub):
        timeline: list[dict] = []
        (tmp_path / sub).mkdir()
        _run(tmp_path / sub, monkeypatch, {A: FakeRung(A, timeline), B: FakeRung(B, timeline)}, seed=seed)
        return [t["rung"] for t in timeline]

    first, again, other = order(7, "a"), order(7, "b"), order(8, "c")
    assert first == again  # every rank draws the same order
    assert first != other


def test_engine_lacking_an_op_gives_one_na_row_and_still_measures_its_other_op(tmp_path, monkeypatch):
    def no_send(op, count):
        if op == "sendrecv":
            raise RuntimeError("Send has no CUDA implementation.")
        return True, "exact"

    timeline: list[dict] = []
    fakes = {A: FakeRung(A, timeline), B: FakeRung(B, timeline, check_fn=no_send)}
    lines = _run(tmp_path, monkeypatch, fakes)
    na = [d for d in lines if d["kind"] == "na"]
    assert len(na) == 1  # one row for the op, not one per size
    assert na[0]["rung"] == B and na[0]["op"] == "sendrecv"
    assert "Send has no CUDA implementation" in na[0]["reason"]
    assert fakes[B].checks.count(("sendrecv", 512)) == 1 and ("sendrecv", 2048) not in fakes[B].checks
    assert not _results(lines, B, "sendrecv")
    assert [d["status"] for d in _results(lines, B, "all_reduce")] == [OK, OK]
    assert [d["status"] for d in _results(lines, A, "sendrecv")] == [OK, OK]
    # the remaining engine is timed alone for sendrecv: one call per round
    assert [t["rung"] for t in timeline if t["op"] == "sendrecv" and t["count"] == 2048] == [A] * 6


def test_wrong_result_before_timing_fails_that_engine_only(tmp_path, monkeypatch):
    def wrong_small(op, count):
        return (False, "3 of 512 elements wrong") if (op, count) == ("all_reduce", 512) else (True, "exact")

    timeline: list[dict] = []
    fakes = {A: FakeRung(A, timeline), B: FakeRung(B, timeline, check_fn=wrong_small)}
    lines = _run(tmp_path, monkeypatch, fakes)
    bad = [d for d in _results(lines, B, "all_reduce") if d["size"] == 1024]
    assert len(bad) == 1 and bad[0]["status"] == FAILED and bad[0]["verified"] is False
    assert "3 of 512 elements wrong" in bad[0]["reason"] and "before timing" in bad[0]["reason"]
    assert "samples_s" not in bad[0]
    good = [d for d in _results(lines, A, "all_reduce") if d["size"] == 1024]
    assert good[0]["status"] == OK and len(good[0]["samples_s"]) == 12
    assert not [t for t in timeline if t["rung"] == B and t["op"] == "all_reduce" and t["count"] == 512]
    # the engine stays for the next size
    assert [d["status"] for d in _results(lines, B, "all_reduce") if d["size"] == 4096] == [OK]


def test_wrong_result_after_timing_fails_the_case(tmp_path, monkeypatch):
    def wrong_after(op, count):
        return (False, "7 of 2048 elements wrong") if (op, count) == ("sendrecv", 2048) else (True, "exact")

    timeline: list[dict] = []
    fakes = {A: FakeRung(A, timeline, verify_fn=wrong_after), B: FakeRung(B, timeline)}
    lines = _run(tmp_path, monkeypatch, fakes)
    bad = [d for d in _results(lines, A, "sendrecv") if d["size"] == 4096]
    assert len(bad) == 1 and bad[0]["status"] == FAILED and bad[0]["verified"] is False
    assert "after timing" in bad[0]["reason"] and "7 of 2048 elements wrong" in bad[0]["reason"]
    others = [d for d in _results(lines) if d is not bad[0]]
    assert len(others) == 7 and all(d["status"] == OK for d in others)


def test_timing_error_is_an_error_row_and_the_other_engine_measures(tmp_path, monkeypatch):
    timeline: list[dict] = []

    class Flaky(FakeRung):
        def time(self, op, dtype, count, inplace, root, iters, samples, warmup):
            if op == "all_reduce" and count == 2048:
                raise RuntimeError("cudaErrorLaunchFailure: unspecified launch failure")
            return super().time(op, dtype, count, inplace, root, iters, samples, warmup)

    fakes = {A: FakeRung(A, timeline), B: Flaky(B, timeline)}
    lines = _run(tmp_path, monkeypatch, fakes)
    bad = [d for d in _results(lines, B, "all_reduce") if d["size"] == 4096]
    assert len(bad) == 1 and bad[0]["status"] == ERROR and "unspecified launch failure" in bad[0]["reason"]
    good = [d for d in _results(lines, A, "all_reduce") if d["size"] == 4096]
    assert good[0]["status"] == OK and len(good[0]["samples_s"]) == 12
    assert [d["status"] for d in _results(lines, B, "sendrecv")] == [OK, OK]


# ---------------------------------------------------------------- merge: per-round medians
def _rank_lines(rank, samples, rounds, status=OK):
    key = dict(rung="torch", op="all_reduce", dtype="bf16", placement="out", size=4096, group="nccl+torch+cupy")
    lines = [{"kind": "start", "rung": "torch", "rank": rank},
             {"kind": "info", "rung": "torch", "info": {"version": "2.x"}, "rank": rank},
             {"kind": "begin", **key, "rank": rank},
             {"kind": "result", **key, "count": 2048, "status": status, "samples_s": samples, "rounds": rounds,
              "iters": 10, "warmup": 5, "verified": True, "verify_detail": "exact", "rank": rank},
             {"kind": "done", "rung": "torch", "rank": rank}]
    return lines


def test_merge_round_medians_of_rank_averaged_samples():
    from gapbench.benchmarks.collectives.merge import merge_lines

    # 3 rounds x 2 samples; rank average: [2, 4, 3, 5, 6, 8] ms -> round medians 3, 4, 7 ms
    r0 = [1e-3, 3e-3, 2e-3, 4e-3, 5e-3, 9e-3]
    r1 = [3e-3, 5e-3, 4e-3, 6e-3, 7e-3, 7e-3]
    recs = merge_lines({0: _rank_lines(0, r0, 3), 1: _rank_lines(1, r1, 3)}, 2)
    assert len(recs) == 1
    rec = recs[0]
    assert rec.status == OK and rec.backend == "torch" and rec.inner == 10
    assert rec.samples_s == pytest.approx([2e-3, 4e-3, 3e-3, 5e-3, 6e-3, 8e-3])
    assert rec.params["round_medians_s"] == pytest.approx([3e-3, 4e-3, 7e-3])
    assert rec.params["rounds"] == 3
    assert rec.params["group"] == "nccl+torch+cupy"
    assert rec.params["rank_median_s"] == pytest.approx([3.5e-4, 5.5e-4])  # per rank, per op (10 iters)
    assert rec.params["torch_version"] == "2.x"


@pytest.mark.parametrize("rounds", [1, 4])
def test_merge_no_round_medians_without_whole_rounds(rounds):
    from gapbench.benchmarks.collectives.merge import merge_lines

    s = [1e-3, 2e-3, 3e-3, 4e-3, 5e-3, 6e-3]  # 6 samples: not 4 whole rounds; 1 round pairs nothing
    rec = merge_lines({0: _rank_lines(0, s, rounds), 1: _rank_lines(1, s, rounds)}, 2)[0]
    assert rec.status == OK and "round_medians_s" not in rec.params


def test_merge_failed_rank_fails_the_record():
    from gapbench.benchmarks.collectives.merge import merge_lines

    s = [1e-3] * 6
    bad = _rank_lines(1, s, 3, status=FAILED)
    bad[3]["reason"] = "wrong result after timing: 1 of 2048 elements wrong"
    rec = merge_lines({0: _rank_lines(0, s, 3), 1: bad}, 2)[0]
    assert rec.status == FAILED and "rank 1" in rec.reason and "1 of 2048" in rec.reason
    assert not rec.samples_s


# ---------------------------------------------------------------- tables: paired gaps
MAIN, MLXG = "nccl+torch+cupy", "nccl+mlx"


def _rec(backend, group, round_us, *, reference_only=False, samples_us=None, size=1 << 20, placement="out"):
    params = {"size": size, "dtype": "bf16", "placement": placement, "group": group, "bus_factor": 1.0, "rounds": 6}
    if round_us is not None:
        params["round_medians_s"] = [x * 1e-6 for x in round_us]
    if reference_only:
        params["reference_only"] = True
    samples = samples_us if samples_us is not None else round_us
    return Record(probe="dist", backend=backend, metric="all_reduce",
                  variant=f"bf16/{placement}/{size}" + (f"@{group}" if reference_only else ""), status=OK,
                  clock="host_wall", samples_s=[x * 1e-6 for x in samples], params=params)


def _gap_records():
    return [
        _rec("nccl", MAIN, [10, 20, 10, 20, 10, 20]),
        _rec("torch", MAIN, [12, 22, 11, 26, 13, 24]),  # ratios 1.2 1.1 1.1 1.3 1.3 1.2
        _rec("cupy", MAIN, None, samples_us=[30] * 6),  # no rounds: unpaired
        _rec("nccl", MLXG, [20, 40, 20, 40, 20, 40], reference_only=True),  # twice the main reference
        _rec("mlx", MLXG, [30, 44, 24, 60, 26, 48]),  # ratios 1.5 1.1 1.2 1.5 1.3 1.2 to its own reference
    ]


def test_gap_rows_pair_each_framework_with_its_own_launch_reference():
    from gapbench.benchmarks.collectives.tables import gap_rows

    rows = gap_rows(_gap_records())
    assert len(rows) == 1
    row = rows[0]
    assert row["nccl_us"] == pytest.approx(15.0)  # the main reference, not the MLX launch's
    assert row["nccl_busbw"] == pytest.approx((1 << 20) / 15e-6 / 1e9)
    est, lo, hi, how = row["torch_gap"]
    assert how == "paired"
    assert (est, lo, hi) == pytest.approx((1.2, 1.1, 1.3))
    assert math.isfinite(lo) and math.isfinite(hi)
    est, lo, hi, how = row["mlx_gap"]
    assert how == "paired"
    assert (est, lo, hi) == pytest.approx((1.25, 1.1, 1.5))  # against the main reference it would be 2.5
    assert row["mlx_ref_us"] == pytest.approx(30.0)  # ... so the row shows the reference it was taken against
    assert "torch_ref_us" not in row  # torch's reference is the NCCL column itself
    est, lo, hi, how = row["cupy_gap"]
    assert how == "unpaired" and est == pytest.approx(2.0)  # 30 us / 15 us, ratio of medians
    assert math.isnan(lo) and math.isnan(hi)


def test_a_gap_is_taken_against_the_nccl_placement_shown_beside_it():
    """torch measures all_reduce in place; direct NCCL ran both ways, in place twice as slow. Each
    row's gap must be the framework over the NCCL time in that row (same placement), never over
    the other placement's run; a framework with no NCCL run of its placement in its launch gets
    no gap and a reason."""
    from gapbench.benchmarks.collectives.tables import gap_rows, markdown

    recs = [_rec("nccl", MAIN, [10] * 6), _rec("nccl", MAIN, [20] * 6, placement="in"),
            _rec("torch", MAIN, [24] * 6, placement="in"),
            _rec("cupy", MAIN, [30] * 6, placement="in", size=4 << 20)]  # no NCCL in place at 4M
    rows = {(r["placement"], r["size"]): r for r in gap_rows(recs)}
    checked = 0
    for row in rows.values():
        for fw in ("torch", "cupy", "mlx"):
            if f"{fw}_gap" in row:
                shown = row.get(f"{fw}_ref_us", row.get("nccl_us"))
                assert shown is not None
                assert row[f"{fw}_gap"][0] == pytest.approx(row[f"{fw}_us"] / shown)
                checked += 1
    assert checked == 1
    assert rows[("in", 1 << 20)]["nccl_us"] == pytest.approx(20.0)
    assert rows[("in", 1 << 20)]["torch_gap"][0] == pytest.approx(1.2)  # 24 / 20, not 24 / 10
    assert "torch_gap" not in rows[("out", 1 << 20)]
    cupy = rows[("in", 4 << 20)]
    assert "cupy_gap" not in cupy and "no direct NCCL in place" in cupy["cupy_why"]
    assert "not comparable: no direct NCCL in place" in markdown(recs)


def test_gap_with_fewer_than_six_rounds_has_an_open_interval():
    from gapbench.benchmarks.collectives.tables import gap_rows

    recs = [_rec("nccl", MAIN, [10, 20, 10, 20, 10]), _rec("torch", MAIN, [12, 22, 11, 26, 13])]
    est, lo, hi, how = gap_rows(recs)[0]["torch_gap"]
    assert how == "paired" and est == pytest.approx(1.2)
    assert lo == -math.inf and hi == math.inf  # 5 pairs cannot bound a median at 95%


def test_markdown_shows_intervals_and_unpaired():
    from gapbench.benchmarks.collectives.tables import markdown

    md = markdown(_gap_records())
    assert "1.20x [1.10-1.30]" in md
    assert "1.25x [1.10-1.50]" in md
    assert "2.00x (unpaired)" in md


def test_rung_table_leaves_out_reference_only_records():
    from gapbench.benchmarks.collectives.tables import rung_table

    recs = _gap_records() + [_rec("nccl", MAIN, [40, 40, 40, 40, 40, 40], size=4 << 20)]
    assert rung_table(recs, "nccl").row_count == 2  # two main sizes; the MLX launch's reference is not a row
    assert rung_table(recs, "mlx").row_count == 1


# ---------------------------------------------------------------- plain loop: rounds of fresh processes
# per round, rank 0 / rank 1 samples (us) of each size; the rank average is 200 us for the plain loop
# and 220 240 220 200 220 260 us for the harness: per-round ratios 1.1 1.2 1.1 1.0 1.1 1.3
PLAIN_US = {0: 100.0, 1: 300.0}
HARNESS_US = {0: [110, 120, 110, 100, 110, 130], 1: [330, 360, 330, 300, 330, 390]}


def _doc(rank, us, wrong_after=0):
    rows = [{"bytes": size, "count": size // 2, "iters": 50, "wrong_before": 0,
             "wrong_after": wrong_after if size == 4096 else 0, "samples_s": [us * 1e-6 * k] * 2}
            for size, k in ((1024, 1), (4096, 4))]
    return {"nccl_version": 22703, "rank": rank, "world": 2, "rows": rows}


@pytest.fixture
def plain_env(tmp_path, monkeypatch):
    import gapbench.benchmarks.collectives.plain as plain
    import gapbench.benchmarks.collectives.rungs.nccl as nccl_mod

    binary = tmp_path / "gapbench_nccl_plain"
    binary.write_text("")
    monkeypatch.setattr(plain, "plain_bin", lambda: binary)
    monkeypatch.setattr(nccl_mod, "nccl_candidates", lambda: ["libnccl.so.2"])
    calls = {"plain": 0, "harness": 0}

    def install(fake):
        def launch(cmds, timeout_s, cpus=None):
            assert len(cmds) == 2 and all("libnccl.so.2" in c for c in cmds)
            assert cpus == calls.get("cpus")  # both arms bound as the collective ranks are
            if cmds[0][0] == str(binary):
                kind = "plain"
            else:
                assert cmds[0][:3] == [sys.executable, "-m", "gapbench.benchmarks.collectives.plain"]
                kind = "harness"
            k = calls[kind]
            calls[kind] += 1
            return fake(kind, k)

        monkeypatch.setattr(plain, "_launch", launch)
        return plain

    return install, calls


def _fake_ok(kind, k, wrong_round=None):
    if kind == "plain":
        return [_doc(r, PLAIN_US[r]) for r in (0, 1)]
    return [_doc(r, HARNESS_US[r][k], wrong_after=3 if (k, r) == (wrong_round, 1) else 0) for r in (0, 1)]


def test_plain_records_pair_harness_and_plain_rounds(plain_env):
    from gapbench.core.plaincheck import plain_ratio

    install, calls = plain_env
    plain = install(_fake_ok)
    cfg = DistConfig(ops=["all_reduce"], sizes=[1024, 4096], dtypes=["bf16"], device="cuda")
    calls["cpus"] = [[0, 1], [2, 3]]
    recs = plain.plain_records(cfg, 2, rounds=6, cpus=[[0, 1], [2, 3]])
    assert calls == {"plain": 6, "harness": 6, "cpus": [[0, 1], [2, 3]]}
    assert [r.params["size"] for r in recs] == [1024, 4096]
    for rec, k in zip(recs, (1, 4)):
        assert rec.status == OK and rec.backend == "nccl-plain" and rec.verified is True
        rm = rec.params["round_medians_s"]
        assert len(rm) == 6
        assert [x for pair in rm for x in pair] == pytest.approx(
            [x for h in (220, 240, 220, 200, 220, 260) for x in (h * 1e-6 * k, 200e-6 * k)])  # (harness, plain)
        assert rec.samples_s == pytest.approx([200e-6 * k] * 12)
        assert len(rec.params["round_order"]) == 6 and rec.params["cpu_binding"] == [[0, 1], [2, 3]]
        assert all(sorted(o) == ["harness", "plain"] for o in rec.params["round_order"])
        est, lo, hi = plain_ratio(rec)
        assert (est, lo, hi) == pytest.approx((1.1, 1.0, 1.3))
        assert math.isfinite(lo) and math.isfinite(hi)


def test_plain_records_wrong_after_timing_fails_that_size(plain_env):
    install, _ = plain_env
    plain = install(lambda kind, k: _fake_ok(kind, k, wrong_round=2))
    cfg = DistConfig(ops=["all_reduce"], sizes=[1024, 4096], dtypes=["bf16"], device="cuda")
    by_size = {r.params["size"]: r for r in plain.plain_records(cfg, 2, rounds=6)}
    assert by_size[1024].status == OK
    assert by_size[4096].status == FAILED and by_size[4096].verified is False
    assert "3 elements wrong" in by_size[4096].reason


def test_plain_records_launch_error_is_one_error_row(plain_env):
    install, _ = plain_env
    why = "rank 1 exited with 1: ncclCommInitRank failed: unhandled system error"

    def fake(kind, k):
        return why if (kind, k) == ("harness", 2) else _fake_ok(kind, k)

    plain = install(fake)
    cfg = DistConfig(ops=["all_reduce"], sizes=[1024, 4096], dtypes=["bf16"], device="cuda")
    recs = plain.plain_records(cfg, 2, rounds=6)
    assert len(recs) == 1
    assert recs[0].status == ERROR and recs[0].reason == why and recs[0].variant == "bf16"


def test_plain_records_without_binary_or_library_is_unavailable(plain_env, tmp_path, monkeypatch):
    import gapbench.benchmarks.collectives.plain as plain
    import gapbench.benchmarks.collectives.rungs.nccl as nccl_mod

    install, calls = plain_env
    install(_fake_ok)
    cfg = DistConfig(sizes=[1024], device="cuda")
    monkeypatch.setattr(nccl_mod, "nccl_candidates", lambda: [])
    (rec,) = plain.plain_records(cfg, 2)
    assert rec.status == "unavailable" and "libnccl" in rec.reason
    monkeypatch.setattr(plain, "plain_bin", lambda: None)
    (rec,) = plain.plain_records(cfg, 2)
    assert rec.status == "unavailable" and "not built" in rec.reason
    assert calls == {"plain": 0, "harness": 0}


# ---------------------------------------------------------------- topology, p2p cases, launch groups
SMI_NVLINK = ("\t\x1b[4mGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
              "GPU0\t X \tNV18\t0-31\t0\t\tN/A\n"
              "GPU1\tNV18\t X \t0-31\t0\t\tN/A\n"
              "\nLegend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n")
SMI_PCIE = ("\t\x1b[4mGPU0\tGPU1\tGPU2\tCPU Affinity\tNUMA Affinity\x1b[0m\n"
            "GPU0\t X \tPIX\tSYS\t0-15\t0\n"
            "GPU1\tPIX\t X \tSYS\t0-15\t0\n"
            "GPU2\tSYS\tSYS\t X \t16-31\t1\n")


def test_smi_nvlink_pairs():
    from gapbench.benchmarks.collectives.ncclinfo import NVLINK_GBPS, smi_nvlink_pairs

    assert smi_nvlink_pairs(SMI_NVLINK) == {"0-1": 18, "1-0": 18}
    assert smi_nvlink_pairs(SMI_PCIE) == {}
    assert smi_nvlink_pairs(None) == {}
    assert smi_nvlink_pairs("") == {}
    assert NVLINK_GBPS[6] * 18 == 450  # NVLink 4.0 (H100/H200): 18 links, 450 GB/s per direction


def test_p2p_cases_full_sweep_for_first_pair_only():
    from gapbench.benchmarks.collectives.p2p import cases

    got = cases(2, [1024, 4096, 16384])
    methods = ("memcpy_peer", "kernel_pull", "kernel_push")
    assert sorted((s, d, m) for s, d, m, _ in got) == sorted([(0, 1, m) for m in methods] + [(1, 0, m) for m in methods])
    for src, dst, _, sizes in got:
        assert list(sizes) == ([1024, 4096, 16384] if (src, dst) == (0, 1) else [1024, 16384])
    assert cases(1, [1024, 4096]) == []


def test_launch_groups():
    from gapbench.benchmarks.collectives.command import launch_groups

    assert launch_groups(["p2p", "nccl", "torch", "cupy", "mlx"], "cuda") == [["nccl", "torch", "cupy"], ["nccl", "mlx"]]
    assert launch_groups(["p2p", "torch", "cupy", "mlx"], "cuda") == [["torch", "cupy"], ["mlx"]]
    assert launch_groups(["mlx"], "cuda") == [["mlx"]]
    assert launch_groups(["p2p", "torch", "mlx"], "cpu") == [["torch", "mlx"]]
    assert launch_groups(["p2p"], "cpu") == []


def test_a_rung_whose_package_is_absent_is_a_row_and_starts_no_ranks():
    from gapbench.benchmarks.collectives.command import plan_groups
    from gapbench.benchmarks.collectives.rungs.base import absent, not_installed

    rungs = ["p2p", "nccl", "torch", "cupy", "mlx"]
    groups, rows = plan_groups(rungs, "cuda", why_absent=lambda r: "gone" if r == "mlx" else None)
    assert groups == [["nccl", "torch", "cupy"]]  # MLX's group, its NCCL reference alone, is not started
    assert [(r.backend, r.metric, r.status, r.reason) for r in rows] == [("mlx", "rung", "unavailable", "gone")]
    groups, rows = plan_groups(rungs, "cuda", why_absent=lambda r: "gone" if r == "cupy" else None)
    assert groups == [["nccl", "torch"], ["nccl", "mlx"]] and [r.backend for r in rows] == ["cupy"]
    groups, rows = plan_groups(["torch", "cupy", "mlx"], "cuda", why_absent=lambda r: "gone" if r != "mlx" else None)
    assert groups == [["mlx"]] and [r.backend for r in rows] == ["torch", "cupy"]
    groups, rows = plan_groups(rungs, "cuda", why_absent=lambda r: None)
    assert groups == [["nccl", "torch", "cupy"], ["nccl", "mlx"]] and rows == []
    # the default asks the package index of this interpreter, without importing
    assert absent("nccl") is None and absent("p2p") is None
    assert absent("torch") is None  # installed here (the suite runs it)
    assert not_installed("mlx", "No module named 'mlx'").startswith("mlx is not installed (No module named 'mlx'); pip install")


# ---------------------------------------------------------------- bench.report's communication section
def test_report_has_the_gap_table_and_the_scaling_table_beside_its_prediction(tmp_path):
    from gapbench.benchmarks.collectives.command import BENCHMARK
    from gapbench.core.result import RunWriter, load_run

    w = RunWriter(tmp_path / "dist.json", env={}, run={"probe": "dist", "nproc": 2}, overhead=None)
    w.extend(_gap_records())
    w.finish()
    step = dict(tokens_per_s_per_device=1000.0, tokens_per_s_total=2000.0, exposed_comm_s=0.004,
                peak_bytes_per_rank=[2**30, 3 * 2**30], efficiency=0.96, predicted_efficiency=0.92, world=2)
    t = RunWriter(tmp_path / "dp.json", env={}, run={"probe": "train-dp", "config": {"nproc": 2}}, overhead=None)
    t.extend([Record(probe="train-dp", backend="torch-cuda", metric="step", variant="ddp/tiny/n2", status=OK,
                     clock="host_wall", samples_s=[0.1, 0.1, 0.1], params=step),
              Record(probe="train-dp", backend="mlx-cuda", metric="step", variant="mlx/tiny/n2", status=ERROR,
                     reason="rank 1 was killed by signal 9")])
    t.finish()
    gap, scale = BENCHMARK.report_tables([load_run(tmp_path / "dist.json"), load_run(tmp_path / "dp.json")])
    assert "collectives" in gap.title and "prediction" in scale.title
    (row,) = gap.rows  # one op, one size
    cols = dict(zip(gap.columns, row))
    assert cols["torch / NCCL"] == "1.20x [1.10-1.30]"  # paired with its own launch's NCCL
    assert cols["MLX / its NCCL"] == "1.25x [1.10-1.50]"  # paired with the MLX launch's NCCL, not the main one
    assert cols["MLX's NCCL us"] == "30.0" and cols["pl"] == "out"  # ... which the row shows beside it
    assert cols["CuPy / NCCL"] == "2.00x (unpaired)" and cols["machine"].endswith("x2")
    ok_row, err_row = (dict(zip(scale.columns, r)) for r in scale.rows)
    assert (ok_row["weak scaling"], ok_row["predicted"], ok_row["peak GiB/rank"]) == ("96%", "92%", "3.0")
    assert err_row["step ms [p10-p90]"].startswith("error: rank 1 was killed")


def test_launch_spread_counts_each_fresh_communicator_once():
    """Largest size only; the main launch, the MLX launch's reference and every plain-check harness
    round are one communicator each; plain-loop rounds, other placements and engines are not."""
    from gapbench.benchmarks.collectives.tables import launch_spread, spread_text

    size = 1_000_000_000  # bytes; bus factor 1: a 5000 us sample is 200 GB/s
    recs = [_rec("nccl", MAIN, [5000] * 6, size=size),                     # 200 GB/s
            _rec("nccl", MLXG, [4000] * 6, reference_only=True, size=size),  # 250 GB/s
            _rec("nccl", MAIN, [1] * 6, size=size // 4),                     # not the largest size
            _rec("torch", MAIN, [2500] * 6, size=size)]                       # a framework, not NCCL
    plain = _rec("nccl-plain", "", None, samples_us=[1] * 6, size=size)
    plain.inner = 10  # harness round medians are 10 calls: 50000 us -> 200 GB/s, 25000 -> 400, 40000 -> 250
    plain.params["round_medians_s"] = [[0.05, 0.001], [0.025, 0.001], [0.04, 0.001]]
    recs.append(plain)
    got = launch_spread(recs)
    assert len(got) == 1
    s = got[0]
    assert (s["dtype"], s["size"], s["launches"]) == ("bf16", size, 5)
    assert s["lo"] == pytest.approx(200.0) and s["hi"] == pytest.approx(400.0)
    assert s["median"] == pytest.approx(250.0)  # of 200, 250, 200, 400, 250
    assert "over 5 fresh communicators" in spread_text(s) and "median 250.0 GB/s, range 200.0-400.0" in spread_text(s)
