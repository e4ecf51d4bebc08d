"""Launch benchmark, pairing: every ratio in its tables comes from interleaved rounds of both arms,
in a seeded random order, as the median of per-round ratios with a
distribution-free interval at the stopping rule's confidence (gapbench.core.stats.ratio_median_ci,
97%: it covers 95% after optional stopping).

- framework vs floor (`xfloor`): in each warm framework process, after the framework's own
  metrics, the native floor of its device class (cuda/metal: the native add of the same size;
  cpu: the empty binding call) is set up in the same process and the two are timed in
  gapbench.core.measure.paired rounds, per metric (launch + wait; back to back where the framework has
  a device queue). The record keeps the per-round values, so the parent pools the rounds of
  several processes (each round stays paired inside its process) and recomputes the interval.
- harness vs plain C++ loop: `rounds` rounds, each a fresh harness process (native-cuda, the same
  null kernel through LaunchProbe) and a fresh run of the paced plain loop (cuda/plain/launch.cu,
  gapbench.core.worker.PacedCommand), in a random order. Fresh processes each round, because a
  process's own state moves its numbers: on an H100 the device-side kernel rate of one process
  differed from another's by up to 12%, which rounds inside one process pair never see. Six
  rounds are the fewest whose per-round ratios give a 95% interval for their median (their min
  and max cover it with probability 1 - 2/2^6 = 97%; see probes/blas_plain.py).
"""
from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from gapbench.core.measure import INTERVAL_CONFIDENCE, Arm, MeasureError, paired, perturbation
from gapbench.core import stats
from gapbench.benchmarks.launch.params import LaunchParams, Pairing
from gapbench.core.conditions import Conditions, Process, clock_of
from gapbench.core.names import Backend
from gapbench.core.result import ERROR, OK, UNAVAILABLE, Record
from gapbench.core.plaincheck import interleave
from gapbench.core.stats import ratio_median_ci
from gapbench.benchmarks.launch.config import INPUT_DATA, PROBE, Config, check_add, random_inputs

perf_ns = time.perf_counter_ns
#: rounds every framework-vs-floor pairing runs at least, whatever its budget
PAIR_MIN_ROUNDS = 10
#: (metric, key in the plain loop's JSON, per `inner` launches)
PLAIN_METRICS = (("submit", "submit", True), ("roundtrip", "roundtrip", False), ("stream_b2b", "stream_b2b", True),
                 ("device_kernel", "device_kernel", True), ("graph_node", "graph_replay", True))
PLAIN_OP = "empty kernel, 1 thread (plain C++ loop, no harness)"


def new_seed(cfg: Config, salt: int = 0) -> int:
    """The run's seed (cfg.seed) shifted by `salt`, or a fresh random one; recorded with the result."""
    return (cfg.seed + salt) if cfg.seed is not None else int.from_bytes(os.urandom(4), "little")


# ============================================================== framework vs floor
def summarize_paired(p: Pairing) -> Pairing:
    """`p` with x_floor (median over rounds of framework/floor time), lo, hi (its 97% order-statistic
    interval, INTERVAL_CONFIDENCE: 95% coverage after the stopping rule's optional stopping;
    None where unbounded) and rounds, recomputed from its per-round values; rounds where either arm
    had no valid value are left out."""
    pr = p.per_round or {}
    fw, fl = pr.get("framework") or [], pr.get("floor") or []
    both = [(a, b) for a, b in zip(fw, fl) if a is not None and b is not None and math.isfinite(a)
            and math.isfinite(b) and b > 0]
    out = p.replace(x_floor=None, lo=None, hi=None, rounds=None)
    if not both:
        return out.replace(reason=out.reason or "no round in which both arms had a valid value")
    med, lo, hi = ratio_median_ci([a for a, _ in both], [b for _, b in both], INTERVAL_CONFIDENCE)
    return out.replace(x_floor=med, lo=lo if math.isfinite(lo) else None, hi=hi if math.isfinite(hi) else None,
                       rounds=len(both))


def pool_paired(pairings: list[Pairing]) -> Pairing:
    """The pairings of several processes as one: their rounds together (each round stays paired
    inside its process), the median and interval recomputed over all of them. Processes whose
    pairing failed are counted and their reasons kept; if none paired, the first reason stands."""
    done = [p for p in pairings if p.per_round]
    if not done:
        return pairings[0] if pairings else Pairing(reason="not paired")
    fw: list = []
    fl: list = []
    for p in done:
        n = min(len(p.per_round["framework"]), len(p.per_round["floor"]))
        fw += p.per_round["framework"][:n]
        fl += p.per_round["floor"][:n]
    failed = [p.reason or "not paired" for p in pairings if not p.per_round]
    alone = {arm: [x for p in done for x in (p.alone or {}).get(arm, [])] for arm in ("framework", "floor")}
    out = done[0].replace(per_round={"framework": fw, "floor": fl}, processes=sum(p.processes or 1 for p in done),
                          alone=alone if any(alone.values()) else None,
                          stop=[p.stop for p in done], seed=[p.seed for p in done], k=[p.k for p in done],
                          wall_s=None, unpaired_processes=failed or None)
    return summarize_paired(out)


def _median(values) -> float:
    return float(np.median([v for v in values if v is not None and math.isfinite(v)]))


def _moved(alone, in_pairing, what: str) -> str:
    """'' when the arm runs at the same speed alone and in the pairing (gapbench.core.measure.
    perturbation); else what moved, e.g. "framework 19.4 us paired vs 13.1 us alone (+48%)"."""
    d = perturbation(list(alone), list(in_pairing))
    if d is None:
        return ""
    return f"{what} {_median(in_pairing) * 1e6:.3g} us paired vs {_median(alone) * 1e6:.3g} us alone ({100 * d:+.0f}%)"


def _ratio_moved(p) -> str:
    """'' unless the ratio of the arms timed alone disagrees with the paired ratio: its interval
    (from the two standalone medians' 97% intervals) and the paired interval do not overlap. Each
    arm may move less than PERTURB_MIN and the ratio still move beyond its interval (the H200's
    CuPy launch + sync: the floor moved 4.4%, the standalone ratio 1.454 outside [1.410-1.429])."""
    fa = [x for x in (p.alone.get("framework") or []) if x is not None and math.isfinite(x)]
    fl = [x for x in (p.alone.get("floor") or []) if x is not None and math.isfinite(x)]
    if len(fa) < 6 or len(fl) < 6 or p.lo is None or p.hi is None:
        return ""
    fm, flo, fhi = stats.median_ci(fa, INTERVAL_CONFIDENCE)
    gm, glo, ghi = stats.median_ci(fl, INTERVAL_CONFIDENCE)
    x, xlo, xhi = fm / gm, flo / ghi, fhi / glo
    if xlo <= p.hi and p.lo <= xhi:
        return ""
    return f"ratio alone {x:.3f} [{xlo:.3f}-{xhi:.3f}] vs paired [{p.lo:.3f}-{p.hi:.3f}]"


def check_perturbation(records: list[Record]) -> int:
    """Pairing must not change what it measures. Each pairing also timed both arms alone, in the
    same process, right after its rounds (Pairing.alone: a process's own state moves launch figures
    by several percent, so only the same process is a fair standalone). Where an arm's median in
    the rounds and alone disagree (gapbench.core.measure.perturbation), the pairing is marked
    perturbed, with what moved, and the row's ratio becomes the standalone medians' (x_standalone;
    unpaired, so no interval). Returns how many pairings were perturbed."""
    n = 0
    for r in records:
        lp = LaunchParams.of(r) if r.status == OK else None
        p = lp.paired if lp is not None else None
        if p is None or p.x_floor is None or not p.per_round or not p.alone:
            continue
        moved = [_moved(p.alone.get(arm) or [], p.per_round.get(arm) or [], arm) for arm in ("framework", "floor")]
        moved.append(_ratio_moved(p))
        why = "; ".join(m for m in moved if m)
        if not why:
            continue
        x = _median(p.alone["framework"]) / _median(p.alone["floor"]) if p.alone.get("floor") else None
        r.params = lp.replace(paired=p.replace(perturbed=why, x_standalone=x)).to_dict()
        n += 1
    return n


def pair_with_floor(fw_sample: Callable[[int], list[float]], floor_sample: Callable[[int], list[float]], vs: str,
                    cfg: Config, seed: int, ops_per_run: dict[str, int] | None = None) -> Pairing:
    """Interleaved rounds of the framework and its floor in this process (gapbench.core.measure.paired:
    about cfg.pair_budget_s, at least PAIR_MIN_ROUNDS rounds). Both sample functions return the
    seconds of whole runs, of ops_per_run["framework"] and ops_per_run["floor"] ops (default 1):
    measure.paired sizes its rounds by them (a per-op value of a 100-op run would make it run 100
    times longer than its budget). The pairing holds per-op values."""
    try:
        res = paired([Arm("framework", fw_sample), Arm("floor", floor_sample)], rel_hw=cfg.rel_hw,
                     min_rounds=PAIR_MIN_ROUNDS, budget_s=cfg.pair_budget_s, seed=seed,
                     warmup=min(cfg.warmup, 5))
    except MeasureError as e:
        return Pairing(vs=vs, reason=f"pairing failed: {e}")
    ops = {"framework": 1, "floor": 1, **(ops_per_run or {})}
    per_round = {n: [None if math.isnan(x) else float(x) / ops[n] for x in v] for n, v in res.per_round.items()}
    # Each arm alone right after, as many runs as ten rounds hold: the check that pairing moved neither.
    alone = {}
    for name, sample in (("framework", fw_sample), ("floor", floor_sample)):
        try:
            alone[name] = [float(x) / ops[name] for x in sample(max(20, 10 * res.k))]
        except (RuntimeError, ValueError):  # no standalone check for this arm; its rounds stand
            alone[name] = []
    return summarize_paired(Pairing(vs=vs, per_round=per_round, k=res.k, seed=seed, stop=res.reason.value,
                                    wall_s=res.wall_s, processes=1, alone=alone))


class Floor:
    """The native floor of a device class, set up inside a framework's process: `vs` names it
    ("native-cuda/add1"), `sample[metric]` is (sample(n) in seconds per run, ops per run) for the
    metrics it has, `reason` says why there is none (then `sample` is empty)."""

    def __init__(self, floor: Backend, cfg: Config):
        self.vs, self.sample, self.reason = floor.value, {}, ""
        self._probe: Any = None
        try:
            self._setup(floor, cfg)
        except Exception as e:  # the floor is optional in a framework's process: say why, go on
            self.sample, self.reason = {}, f"floor {floor} could not run in this process: {type(e).__name__}: {e}"

    def _setup(self, floor: Backend, cfg: Config) -> None:
        from gapbench.core.native import load

        nat = load()
        i = cfg.inner
        if floor is Backend.native_cpu:
            f = nat.cpu.noop
            self.vs = f"{Backend.native_cpu.value}/noop"

            def per_run(n):
                out = []
                for _ in range(n):
                    t0 = perf_ns()
                    for _ in range(i):
                        f()
                    out.append((perf_ns() - t0) * 1e-9)
                return out

            self.sample = {"roundtrip": (per_run, i)}
            return
        kind = floor.device  # cuda, metal: the part of gapbench._native
        part = getattr(nat, kind)
        st = dict(part.status(0) if kind == "cuda" else part.status())
        if not st.get("available"):
            raise RuntimeError(st.get("reason", f"{kind} unavailable"))
        if kind == "cuda":
            p = part.LaunchProbe(nat.LaunchKernel.add1, cfg.n, 0)
        else:
            from importlib import resources

            source = resources.files("gapbench").joinpath("metal/launch.metal").read_text()
            p = part.LaunchProbe(nat.LaunchKernel.add1, cfg.n, source)
        a, b = random_inputs(cfg)
        ok, detail = check_add(np.asarray(p.run_add(a.tolist(), b.tolist()), dtype=np.float32), a, b)
        if not ok:
            raise RuntimeError(f"the floor's add failed its check: {detail}")
        self._probe, self.vs = p, f"{floor}/add1"
        self.sample = {"roundtrip": (lambda n: list(p.roundtrip(n, 0)), 1),
                       "stream_b2b": (lambda n: list(p.stream_b2b(n, i, 0)), i),
                       "device_kernel": (lambda n: list(p.device_kernel(n, i, 0)), i)}


# ============================================================== harness vs plain C++ loop
def plain_samples_per_round(cfg: Config) -> int:
    """Samples per metric in each plain and harness round: the plain loop's former share
    (min(samples, 200)) split over the rounds, at least 5."""
    return max(5, min(cfg.samples, 200) // max(cfg.plain_rounds, 1))


#: the reason on the plain-cuda row when the loop was not built
PLAIN_MISSING = "plain loop not built (no CUDA toolkit at install)"


def plain_row(status: str, reason: str) -> Record:
    """The one plain-cuda row that stands for the whole check when it did not run."""
    return Record(probe=PROBE, backend=Backend.plain_cuda, variant="null", metric="roundtrip", status=status, reason=reason)


def plain_check(exe: str | Path | None, cfg: Config, harness_round: Callable[[], dict], seed: int) -> list[Record]:
    """The harness against the plain C++ loop, paired over fresh process pairs: each of
    cfg.plain_rounds rounds runs the paced loop `exe` for one round in a new process and
    `harness_round()` (the caller starts a new harness process; it returns {metric: per-sample
    seconds} for PLAIN_METRICS, same samples, inner and warm-up), in a random order. Each process
    brings its own placement and device state (kernel rate per process varies by about 7% on an
    H100), so the rounds are independent units and the interval covers that variation too. The
    plain-cuda records carry the pooled plain samples, the interleaved harness samples and each
    round's two medians. A missing loop is an unavailable row, a failure an error row."""
    if exe is None:
        return [plain_row(UNAVAILABLE, PLAIN_MISSING)]
    from gapbench.core.worker import PacedCommand

    rounds, per = cfg.plain_rounds, plain_samples_per_round(cfg)
    cmd = [str(exe), str(per), str(cfg.inner), str(cfg.warmup), "1", "1"]

    def plain_round() -> dict:
        with PacedCommand(cmd, timeout=cfg.timeout, cpus=None if cfg.cpu is None else [cfg.cpu]) as loop:
            return loop.round()

    walls: dict[str, list[float]] = {"plain": [], "harness": []}

    def timed(name: str, f: Callable[[], dict]) -> Callable[[], dict]:
        def call() -> dict:
            t0 = perf_ns()
            try:
                return f()
            finally:
                walls[name].append((perf_ns() - t0) * 1e-9)
        return call

    try:
        got, order = interleave({"plain": timed("plain", plain_round), "harness": timed("harness", harness_round)},
                                rounds, seed)
        return plain_records(got["plain"], got["harness"], cfg, per, order, seed, Path(exe).name,
                             [[round(h, 3), round(p, 3)] for h, p in zip(walls["harness"], walls["plain"])])
    except (RuntimeError, KeyError, TypeError, ValueError) as e:
        return [plain_row(ERROR, f"plain check failed: {type(e).__name__}: {e}")]


def plain_records(plain: list[dict], harness: list[dict], cfg: Config, per: int, order: list[list[str]], seed: int,
                  binary: str, walls: list[list[float]] | None = None) -> list[Record]:
    recs = []
    for metric, key, batched in PLAIN_METRICS:
        p_rounds = [[float(x) for x in doc[key]] for doc in plain]
        h_rounds = [[float(x) for x in doc[metric]] for doc in harness]
        if not any(p_rounds):
            raise ValueError(f"the plain loop returned no {key} samples")
        medians = [[float(np.median(h)) if h else math.nan, float(np.median(p)) if p else math.nan]
                   for h, p in zip(h_rounds, p_rounds)]
        clock = "host_wall" if metric in ("submit", "roundtrip") else "device_events"
        # the conditions of the harness rows it is paired with (launch/worker.py): each in its own
        # fresh process, the kernel rate held behind the same release gate, bound to the same CPU
        cond = Conditions(clock=clock_of(clock, gated=metric == "device_kernel", graph=metric == "graph_node"),
                          process=Process.STANDALONE,
                          data=INPUT_DATA, seed=seed,
                          cpu="not bound" if cfg.cpu is None else f"bound to CPU {cfg.cpu}").to_dict()
        recs.append(Record(
            probe=PROBE, backend=Backend.plain_cuda, variant="null", metric=metric, op=PLAIN_OP, clock=clock,
            conditions=cond,
            samples_s=[x for r in p_rounds for x in r], inner=cfg.inner if batched else 1, warmup=cfg.warmup,
            work={"flops": 0.0, "bytes": 0.0},
            params=LaunchParams(
                binary=binary, rounds=len(plain), samples_per_round=per, seed=seed,
                order=["".join(n[0] for n in o) for o in order],  # e.g. "ph": plain first
                processes="a fresh plain loop and a fresh harness process each round",
                invalid_samples=sum(int(d.get("invalid_samples", 0)) for d in plain),
                round_medians_s=[[None if math.isnan(v) else v for v in m] for m in medians],
                harness_interleaved_s=[x for r in h_rounds for x in r], round_walls_s=walls).to_dict()))
    return recs
