"""How one BLAS case is timed: every verified row of one device class is an arm of one paired run.

A case (op, dtype, shape) gives arms from several backends: on CUDA the library's dispatcher
(`gapbench`), the vendor (`cublas`, `memcpy` for copy, `cublas-tf32`) and each framework on the
GPU (torch-cuda, cupy, mlx-gpu); on Metal the dispatcher, MPS and torch-mps / mlx-gpu; on the CPU
the frameworks. The arms of one device class run in interleaved rounds in randomised order
(gapbench.core.measure.paired), so every ratio against the vendor arm is a median of per-round
ratios with a distribution-free 95% interval, and drift shared by a round cancels. Cold-cache
modes pair the native arms with the CUDA frameworks whose stream takes the native gate's L2 scrub
(torch-cuda, CuPy: the same scrub, queued on their stream before each held sample); MLX's queue
cannot take it, so its rows have no cold mode.

Before timing each arm was verified on a poisoned output (arms.py); after timing each arm runs
once more in the same cache mode and that last timed output is verified again (`verify_last`)."""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager, Sequence

import numpy as np

from gapbench.benchmarks.blas.config import Mode
from gapbench.benchmarks.blas.params import BlasParams, LaunchFloor, Paired, Stop
from gapbench.core.conditions import Clock, Conditions, mismatch, not_comparable
from gapbench.core.measure import Arm, ClockWatch, MeasureError, paired, perturbation
from gapbench.core.names import Backend, CacheMode, DeviceClass
from gapbench.core.result import ERROR, FAILED, OK, Record


@dataclass
class CaseArm:
    """One verified row of a case, ready to time."""

    backend: Backend
    variant: str  # the row's name: gapbench, cublas, memcpy, cublas-tf32, torch, cupy, mlx, ...
    device_class: DeviceClass
    clock: str
    #: cache mode -> sample(n): n per-run seconds
    samplers: dict[CacheMode, Callable[[int], Sequence[float]]]
    #: cache mode -> (ok, detail): run once more in that mode and check the output
    verify_last: Callable[[CacheMode], tuple[bool, str]]
    verify_detail: str
    op: str = ""
    params: BlasParams = field(default_factory=BlasParams)
    #: cache mode -> the conditions of that mode's records (L2 state, data, clock, process)
    conditions: Callable[[CacheMode], Conditions] = lambda mode: Conditions()
    device: dict = field(default_factory=dict)
    vendor: bool = False  # the arm every other arm of its class is compared with
    #: cache mode -> samples the release gate found invalid (timed out) and dropped, if it gates
    invalid: Callable[[CacheMode], int] | None = None
    #: a native arm's selector: the _native.Impl or _native.Kernel its case runs
    impl: Any = None
    #: on_round(i): puts the arm on round i's stream (its case's use_stream(i mod streams)); None
    #: for arms timed on one stream throughout
    on_round: Callable[[int], None] | None = None
    streams: int = 1
    #: bench.blas --launch-floor: the empty kernel timed beside this arm, on its streams (hot mode)
    floor: "FloorArm | None" = None

    @property
    def key(self) -> str:
        return f"{self.backend.value}/{self.variant}"


@dataclass
class FloorArm:
    """An empty kernel timed as one more arm of a case's paired rounds (hot mode), on the stream
    the rows it serves take in each round (`on_round`, theirs): not a row of the run, and it rides
    along (the rows alone decide when the rounds stop); each row it serves records its median
    (params.launch_floor)."""

    key: str
    sample: Callable[[int], Sequence[float]]
    what: str
    on_round: Callable[[int], None] | None = None


#: bench.blas --parity balanced: every four consecutive held samples of one op take each launch parity
#: of their stream twice (cuda/gate.h parity pads), so an arm's runs in a round are a multiple of four
PARITY_RUNS = 4
#: the variant name of the library's dispatcher row
DISPATCHER = "gapbench"
#: runs of each arm timed alone after the paired rounds (at least), to check the pairing moved none
ALONE_RUNS = 20
#: ... and at least this many rounds' worth of its runs (k each): a pairing is flagged where the
#: two medians differ by over 5% (measure.PERTURB_MIN) with intervals apart, and the median of 2k
#: runs (k is about 100 for a 5 us kernel) is known to well under 1% there; ten rounds' worth (until
#: 2026-11-26) cost as much wall time as the paired rounds themselves
ALONE_ROUNDS = 2


def _gated(arm: CaseArm, mode: CacheMode) -> bool:
    """Is the arm timed by device events behind the release gate (its warm-up can be shared)?"""
    return arm.conditions(mode).clock == Clock.GATED


def _time_alone(live: list[CaseArm], res, mode: CacheMode) -> dict[str, list[float]]:
    """Each arm of a pairing timed alone, briefly (ALONE_RUNS runs or ALONE_ROUNDS rounds' worth),
    right after the paired rounds: what it does without the other arms between its runs."""
    out = {}
    if len(live) < 2:
        return out
    for a in live:
        n = max(ALONE_RUNS, ALONE_ROUNDS * res.k)
        try:
            if a.on_round is None:
                out[a.key] = [float(x) for x in a.samplers[mode](n)]
                continue
            # over its streams, as its paired rounds were (an equal share on each)
            share, vals = -(-n // a.streams), []
            for i in range(a.streams):
                a.on_round(i)
                vals += [float(x) for x in a.samplers[mode](share)]
            out[a.key] = vals
        except (MeasureError, RuntimeError, ValueError, MemoryError):
            pass  # no standalone check for this arm; its paired numbers stand as they are
    return out


def _moved(res, arm: CaseArm, alone: dict) -> str:
    if arm.key not in alone:
        return ""
    d = perturbation(alone[arm.key], res.arms[arm.key].samples)
    if d is None:
        return ""
    return (f"{arm.key} {res.arms[arm.key].median * 1e6:.4g} us paired vs "
            f"{float(np.median(alone[arm.key])) * 1e6:.4g} us alone ({100 * d:+.1f}%)")


def _pair_params(res, arm: CaseArm, ref: CaseArm | None, mode: CacheMode, alone: dict | None = None) -> dict:
    m = res.arms[arm.key]
    out: dict = {"stop": Stop(reason=m.reason.value, converged=bool(m.converged), rel_hw=m.rel_hw, drift=m.drift,
                              median_ci_s=[m.lo, m.hi], rounds=res.n_rounds, runs_per_round=res.k, seed=res.seed)}
    if ref is not None and ref is not arm:
        why = mismatch(arm.conditions(mode), ref.conditions(mode))
        if why:  # timed in the same rounds, but not under the same conditions: no ratio
            out["paired"] = Paired(vs=ref.key, not_comparable=why)
            return out
        r = res.ratio(arm.key, ref.key)
        out["paired"] = Paired(vs=ref.key, speed_ratio=r.median, lo=r.lo, hi=r.hi, verdict=r.verdict.value,
                               rounds=r.n_rounds, converged=bool(r.rel_hw <= res.rel_hw),
                               meaning=f"{ref.variant} time / {arm.variant} time, median of per-round ratios")
        alone = alone or {}
        moved = "; ".join(m for m in (_moved(res, arm, alone), _moved(res, ref, alone)) if m)
        if moved:
            out["paired"] = out["paired"].replace(
                perturbed=moved, speed_ratio_alone=float(np.median(alone[ref.key]) / np.median(alone[arm.key])))
    return out


def measure_case(make_record: Callable[..., Record], arms: list[CaseArm], modes: list[Mode], *, budget_s: float,
                 rel_hw: float, max_rounds: int, min_rounds: int, warmup: int, seed: int,
                 watch: ClockWatch | None = None, event_pair_s: float | None = None,
                 part: Callable[[str], ContextManager] | None = None, k_multiple: int = 1) -> list[Record]:
    """Records of every arm in every cache mode it supports. `make_record(backend, variant, params,
    **fields)` builds a record of this case. On CUDA, `watch` reads the SM clock after every round
    (rounds at a low clock are dropped and counted) and `event_pair_s`, the run's empty event pair,
    is recorded with the conditions. `part(name)` adds the wall time of what it holds to the run's part
    `name` (run.Phases.part). `k_multiple`: each arm's runs in a round a multiple of it (bench.blas
    --parity balanced: PARITY_RUNS, so a round's median holds both launch parities alike)."""
    part = part or (lambda name: nullcontext())
    recs: list[Record] = []
    classes = list(dict.fromkeys(a.device_class for a in arms))
    for cls in classes:
        group = [a for a in arms if a.device_class is cls]
        for mode in modes:
            live = [a for a in group if mode.cache in a.samplers]
            if not live:
                continue
            # every ratio is against the vendor arm; an op no vendor library has (rmsnorm) is
            # held against the library's dispatcher instead
            ref = next((a for a in live if a.vendor), None) or next(
                (a for a in live if a.backend.is_native and a.variant == DISPATCHER), None)
            pairs = [(a.key, ref.key) for a in live if ref is not None and a is not ref]
            w = watch if cls is DeviceClass.cuda else None
            floors = list({id(a.floor): a.floor for a in live if a.floor is not None}.values()) \
                if mode.cache is CacheMode.hot else []
            hooks = list({id(h): h for h in [a.on_round for a in live] + [f.on_round for f in floors]
                          if h is not None}.values())
            try:
                with part("paired rounds (warm-up included)"):
                    res = paired([Arm(a.key, a.samplers[mode.cache], device_timed=_gated(a, mode.cache)) for a in live]
                                 + [Arm(f.key, f.sample, device_timed=True, settles=False) for f in floors],
                                 rel_hw=rel_hw, budget_s=budget_s, max_rounds=max_rounds,
                                 min_rounds=min(min_rounds, max_rounds), warmup=warmup, seed=seed, pairs=pairs, watch=w,
                                 on_round=(lambda i: [h(i) for h in hooks]) if hooks else None,
                                 k_multiple=k_multiple)
            except (MeasureError, RuntimeError, ValueError, MemoryError) as e:
                for a in live:
                    recs.append(make_record(a.backend, a.variant, a.params.replace(cache=mode.text), metric=mode.metric,
                                            status=ERROR, op=a.op, device=a.device,
                                            reason=f"timing failed: {type(e).__name__}: {e}"[:500]))
                continue
            with part("each arm timed alone (the pairing's check)"):
                alone = _time_alone(live, res, mode.cache)
            seen = {}
            if w is not None:
                seen = {"sm_clock_mhz": res.clock_mhz, "max_sm_clock_mhz": int(w.max_mhz),
                        "low_clock_dropped": res.low_clock_dropped,
                        "throttle": (w.throttle() if w.throttle else None) or None}
            if cls is DeviceClass.cuda and event_pair_s is not None:
                seen["event_pair_s"] = event_pair_s
            for a in live:
                params = a.params.replace(cache=mode.text, **_pair_params(res, a, ref, mode.cache, alone))
                if a.floor is not None and floors:  # floors holds every live arm's floor (hot mode)
                    params.launch_floor = LaunchFloor(median_s=res.arms[a.floor.key].median, what=a.floor.what,
                                                      rounds=res.n_rounds)
                cond = a.conditions(mode.cache).replace(**seen).to_dict()
                if a.invalid is not None:
                    params.invalid_samples = int(a.invalid(mode.cache))
                try:
                    ok, last = a.verify_last(mode.cache)
                except (RuntimeError, ValueError, MemoryError) as e:
                    ok, last = False, f"{type(e).__name__}: {e}"
                if not ok:
                    recs.append(make_record(a.backend, a.variant, params, metric=mode.metric, status=FAILED, op=a.op,
                                            reason="the last timed run's output failed verification: " + last,
                                            verified=False, verify_detail=last, device=a.device, conditions=cond))
                    continue
                recs.append(make_record(a.backend, a.variant, params, metric=mode.metric, status=OK, op=a.op,
                                        clock=a.clock, samples_s=list(res.arms[a.key].samples), warmup=warmup,
                                        verified=True, verify_detail=f"{a.verify_detail}; last timed run: {last}",
                                        device=a.device, conditions=cond))
    return recs


def ratio_text(r: Record) -> str:
    """The row's paired speed against its class's vendor arm, e.g. "1.02x [1.01-1.03] faster"; ""
    for the vendor arm itself and rows timed without pairing."""
    p = BlasParams.of(r).paired
    if p is not None and p.not_comparable:
        return not_comparable(p.not_comparable)
    if p is None or p.speed_ratio is None:
        return ""
    if p.perturbed:
        return f"{p.speed_ratio_alone:.3g}x alone (paired perturbed)"
    mark = "*" if p.converged is False else ""
    return f"{p.speed_ratio:.3g}x [{p.lo:.3g}-{p.hi:.3g}]{mark} {p.verdict}"


def converged_mark(r: Record) -> str:
    """"*" when the row's timing stopped at its budget before its interval reached the target."""
    stop = BlasParams.of(r).stop
    return "*" if stop is not None and stop.converged is False else ""
