"""Did it get faster or slower, and how sure are we: rows of two or more result files matched and
classified (`gapbench compare`).

Rows match by benchmark, backend, variant, metric and case (op, dtype, shape, or a training
case's label) and must share their compared conditions (gapbench.core.conditions): a row whose
conditions differ is listed as not comparable, with the field. For each matched pair the change is
the ratio of medians, B time / A time (below 1: B is faster), with a 95% interval:

- one run a side (the default): the percentile bootstrap of the two runs' samples covers the noise
  within the runs; between two runs a row also moves with its process and its machine start
  (placement, clocks, allocator state), by an amount that depends on what the row is. The noise
  model (gapbench.core.noise, fitted on committed A/A runs of each GPU model) gives each row class
  its between-run scale s, and the interval's half-width on the log scale is
  sqrt(bootstrap half-width^2 + (1.96 s)^2). On a device the model was not fitted on, a row gets
  no verdict ("can't tell": uncalibrated here, use --repeat). `--margin N%` replaces the model by
  one fixed margin, `--margin none` keeps the noise within the runs only (a row of one sample a
  side then gets no verdict: it has no interval).
- several fresh processes a side (`gapbench run --repeat N`, or the short cases of a `bench.blas
  --processes K` run, whose rows carry their processes' medians): a t interval on the log medians of
  the processes (process_ratio_ci), which covers the spread between processes; where the noise
  model has the row's class, its scale enters as prior information worth K0 degrees of freedom, so
  three runs a side do not rest on a variance estimated from two. What every process of a side
  shares is not in their spread: across machine starts the model's start term is added (another
  host or GPU unit), and a heavy-tailed class (host-bound, single-sample) keeps at least one run a
  side's half-width (processes started one after another share what ran before them).

Each row is then:

- faster / slower: the whole 95% interval below 1 - min_effect / above 1 + min_effect;
- same: the whole 90% interval within 1 +- min_effect: two one-sided tests at 5% each (TOST), so a
  change of min_effect is called same at most 5% of the time (the 90% interval is built as the 95%
  one, each term at its level: the bootstrap's 5-95% quantiles, the noise model's 90% prediction
  scale, t95 between processes; heavy-tailed classes keep the 95% interval);
- can't tell: the interval straddles a bound (or there is none), so the data cannot say.

What moved (floor_moves): each run measures its own floors (the empty event pair behind the gate,
the plain C++ launch loops, a fixed host loop). Where a floor moved between A and B, compare says
so; across machine starts host-timed launch rows are then compared as gaps to their host floor
(the absolute change shown beside), within one start they get no verdict (there they do not keep
their gap), nor do host rows without a plain loop of their metric where the host's CPU floor moved;
device-timed rows short enough to move with the event-pair floor get no verdict (host_bound_rule).
Rows of two bench.blas runs with the launch floor (the default since 473ff8b) on one GPU model carry
the empty kernel timed beside them (noise.floor_s): one run a side, compare takes the model's share
b of that floor's move off B's samples (B - b (floor B - floor A)) and judges the rest by the
model's floor classes (the absolute B/A shown beside); without a floor fit for the GPU model, or
with the floor in one run only (said in the notes), the rows are judged as they are.
Host differences (another CPU, kernel, machine or boot; a first run after a machine start) are
listed, and single-sample rows get no verdict across a first run or across compile caches (CuPy's
kernels, torch's bytecode) empty for one run and filled for the other.

nvbench_compare and pyperf's compare_to were the models: both classify from each side's noise and
hold a minimum effect; this adds the conditions, the machines' floors and the noise model. The
verdicts, a row's change and the --fail-if gate are gapbench.core.verdicts (re-exported here).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gapbench.core.conditions import Conditions, mismatch
from gapbench.core.floors import (EVENT_ROWS, HOST_BOUND, HOST_CPU, FloorMove, cold_start_differs, floor_moves,
                                  host_differences, is_floor, plain_floors, same_start)
from gapbench.core.noise import (FLOORED, Z90, Z95, NoiseModel, base_clock, device_class, floor_group,  # noqa: F401
                                 floor_s, is_heavy, row_class, row_key, shipped, z_of)
from gapbench.core.ratio_ci import (K0, beyond_processes, median_ratio_ci, median_ratio_cis,  # noqa: F401 (API)
                                    own_processes,
                                    process_ratio_ci, process_spread, run_term, within_run)
from gapbench.core.reportkit import ceilings
from gapbench.core.result import OK, Record, Run
from gapbench.core.run_setup import (SEQUENCE_EFFECT, case_sequence, sequence_note, streams_note,  # noqa: F401 (API)
                                     timing_streams)
from gapbench.core.verdicts import (CANT_TELL, FASTER, MIN_EFFECT, NOT_COMPARABLE, SAME, SLOWER,  # noqa: F401 (API)
                                    RowChange, classify, counts, fmt_ratio, gate, key_text, parse_fail_if,
                                    summary_line)

@dataclass(frozen=True)
class Noise:
    """How one run a side is widened for the noise between runs: by the per-row noise model
    (`model`), by one fixed margin on the log scale (`margin`: a float, or per metric with "*" for
    the rest), or not at all (the noise within the runs only)."""
    model: NoiseModel | None = None
    margin: object = 0.0
    note: str = ""


def noise_for(choice: str | float = "auto", model: NoiseModel | None = None) -> Noise:
    """--margin: "auto" the shipped noise model (or `model`), "none" within-run noise only, a
    fraction that fixed margin for every row."""
    if choice == "auto":
        m = model or shipped()
        return Noise(model=m, note=m.describe())
    if choice == "none":
        return Noise(note="none (--margin none): the noise within the runs only")
    return Noise(margin=math.log1p(float(choice)), note=f"+-{100 * float(choice):.3g}% for every row (--margin)")


def _ceiling_fraction(run: Run, r: Record) -> float | None:
    """The row's rate as a fraction of its machine's roofline measured in the same run: the
    attainable rate min(FLOP ceiling of its precision, arithmetic intensity x copy bandwidth) where
    both are known, else the one that is (BLAS: the copy bandwidth for bytes, the GEMM of its
    precision for FLOPs)."""
    rates = r.rates()
    p = r.params or {}
    for entries in ceilings(run).values():  # --quick's overhead-bound rates are none
        peak = entries.get(p.get("precision")) or entries.get(p.get("dtype"))
        bw = entries.get("bytes_per_s")
        flops, nbytes = rates.get("flops_per_s"), rates.get("bytes_per_s")
        if flops and nbytes and peak and bw:
            return flops / min(peak["value"], flops / nbytes * bw["value"])
        if flops and peak:
            return flops / peak["value"]
        if nbytes and bw:
            return nbytes / bw["value"]
    return None


# ============================================================== rows
def compare_runs(a: Run, b: Run, min_effect: float = MIN_EFFECT, widen: float = 1.0, seed: int = 0,
                 between: tuple[dict, dict] | None = None, margin: float | dict = 0.0,
                 model: NoiseModel | None = None, one_start: bool | None = None,
                 intervals: bool = True, processes: bool = True) -> list[RowChange]:
    """Every row present and measured in both runs, classified (module docstring). `between`: per
    row key, the medians of several fresh processes of each side (compare_groups); a row with at
    least two a side takes its interval from their spread instead of from the two runs' samples.
    Rows that carry the medians of several processes of their own run (bench.blas --processes,
    own_processes) are judged so too where both sides do and `between` is not given.
    One run a side: `model` gives each row its between-run scale (the interval's half-width is
    sqrt(bootstrap^2 + (1.96 s)^2) on the log scale); without a model, `margin` (log scale; a dict
    per metric, "*" for the others) widens the bootstrap interval on each side. `one_start`: whether
    the runs share a machine start (default: from their recorded boot and machine ids).
    `intervals=False`: the ratios and what judges them, without the bootstrap (the calibration).
    `processes=False`: rows judged on their run's first process even where they carry more (the
    calibration: the model is of one process a side)."""
    one_start = same_start(a, b) if one_start is None else one_start
    margins = margin if isinstance(margin, dict) else {"*": margin}
    if any(not v >= 0 for v in margins.values()):
        raise ValueError(f"margin must be >= 0 (a log-scale shift), got {margin}")
    if widen < 1:
        raise ValueError(f"widen must be >= 1 (a factor on the interval's half-widths), got {widen}")
    moves = {m.name: m for m in floor_moves(a, b)}
    plains = plain_floors(a, b)
    cold_why = cold_start_differs(a, b)
    units = next((h for h in host_differences(a, b) if h.startswith("another GPU")), "")
    dev_a, dev_b = device_class(a), device_class(b)
    ia = {row_key(r): r for r in a.records if r.status == OK and r.samples_s}
    spread = process_spread(a, b) if between is None and processes else {}
    out = []
    for r in b.records:
        k = row_key(r)
        if k not in ia or r.status != OK or not r.samples_s:
            continue
        ra = ia[k]
        why = mismatch(Conditions.of(ra), Conditions.of(r))
        qa, qb = ra.per_op(), r.per_op()
        quant = {"A": ra.quantiles((0.5, 0.9, 0.99)), "B": r.quantiles((0.5, 0.9, 0.99))}
        if why:
            out.append(RowChange(k, ra, r, NOT_COMPARABLE, why=why, quantiles=quant))
            continue
        ma, mb = ((between[0].get(k, []), between[1].get(k, [])) if between else
                  (own_processes(ra), own_processes(r)) if processes else ([], []))
        share = None
        if model is not None and dev_a == dev_b and not (len(ma) >= 2 and len(mb) >= 2):
            fa, fb = floor_s(ra), floor_s(r)
            b_share = model.floor_share(dev_a, floor_group(r)) if fa and fb else None
            if b_share is not None and float(qb.min()) > b_share * (fb - fa):
                share = (b_share, fa, fb, r.median() / ra.median())
                qb = qb - b_share * (fb - fa)  # B less its floor's move, sample by sample
        cls = row_class(ra, quant["A"][0], floored=share is not None)
        scale = _scale(model, dev_a, dev_b, cls, one_start)
        scale90 = _scale(model, dev_a, dev_b, cls, one_start, 0.90)[0]  # None exactly where scale's is
        note, reason = "", ""
        # two intervals: the 95% one (shown; faster and slower) and the 90% one "same" is judged by
        # (two one-sided tests at 5%, classify), each of its level throughout
        if len(ma) >= 2 and len(mb) >= 2:
            # the prior is of the spread between processes (of one start: within); what another start
            # adds is its own term (ratio_ci.beyond_processes)
            prior = model.prior(dev_a, cls, True) if model is not None and dev_a == dev_b else None
            ivs = []
            for conf in (0.95, 0.90):
                ratio, lo, hi = process_ratio_ci(ma, mb, prior_scale=prior[0] if prior else None,
                                                 k0=min(K0, prior[1]) if prior else K0, confidence=conf)
                covers = f"between processes ({len(ma)} + {len(mb)})"
                z = z_of(conf)
                if between is None and model is not None and dev_a == dev_b:  # one run's processes a side
                    lo, hi, covers = within_run(run_term(model, dev_a, cls, spread.get(cls[:6])), ratio, lo, hi,
                                                covers, z=z)
                if model is not None and dev_a == dev_b:
                    lo, hi, covers = beyond_processes(model, dev_a, cls, one_start,
                                                      scale[0] if conf == 0.95 else scale90, ratio, lo, hi, covers, z=z)
                ivs.append((lo, hi, covers))
            (lo, hi, covers), (slo, shi, _) = ivs
        else:
            if intervals:
                ratio, ((lo, hi), (slo, shi)) = median_ratio_cis(qa, qb, seed=seed)
            else:
                # the medians kept on the records (the calibration asks for millions), B's own where its
                # floor's move was taken off
                ratio = lo = hi = slo = shi = (float(np.median(qb)) if share else r.median()) / ra.median()
            if widen != 1:  # on the log scale, so the interval stays positive and symmetric in ratio terms
                lo, hi, slo, shi = (ratio * (x / ratio) ** widen for x in (lo, hi, slo, shi))
            covers = "within-run"
            single = min(len(qa), len(qb)) <= 1
            if model is not None:
                s, where = scale
                if s is None:
                    reason = where
                else:
                    lo, hi = _with_term(ratio, lo, hi, Z95 * s)
                    slo, shi = _with_term(ratio, slo, shi, Z90 * scale90)
                    covers = f"within-run + noise model +-{100 * math.expm1(min(Z95 * s, 10.0)):.2g}%"
                    note = where
            else:
                m = float(margins.get(k[3], margins.get("*", 0.0)))
                if m:  # a fixed margin has no level: both intervals take it whole
                    lo, hi = lo * math.exp(-m), hi * math.exp(m)
                    slo, shi = slo * math.exp(-m), shi * math.exp(m)
                    covers = f"within-run + between-run margin +-{100 * math.expm1(m):.3g}%"
                elif single:
                    reason = "one sample a side: no interval without the noise model or --repeat"
            if single and cold_why:  # even a calibrated class would not hold across a cold start
                reason = f"single sample across {cold_why}"
        if is_heavy(cls):  # heavy tails (host-bound, single-sample): "same" keeps the 95% interval
            slo, shi = lo, hi
        absolute = None
        if share is not None:
            b_share, fa, fb, absolute = share
            note = "; ".join(x for x in (f"less {b_share:.2f} of its launch floor's move ({1e6 * fa:.2f} -> "
                                         f"{1e6 * fb:.2f} us); absolute B/A {absolute:.3f}", note) if x)
        clock = base_clock(cls[3])
        if not reason and clock in ("gated", "graph", "issued") and "event pair" in moves:
            ev = moves["event pair"]
            if quant["A"][0] < EVENT_ROWS * max(ev.a, ev.b):
                reason = f"the {ev.text()} moved, and rows this short move with it"
        if r.probe == "launch" and clock in HOST_BOUND and (not reason or is_floor(r)):
            why, floor = host_bound_rule(r, moves, plains, one_start)
            reason = why or reason
            if floor is not None:
                absolute = ratio
                ratio, lo, hi, slo, shi = (x / floor.ratio for x in (ratio, lo, hi, slo, shi))
                note = f"gap to the host floor ({floor.text()}); absolute B/A {absolute:.3f}"
        frac = {}
        if dev_a != dev_b:
            fa, fb = _ceiling_fraction(a, ra), _ceiling_fraction(b, r)
            if fa is not None and fb is not None:
                frac = {"A": fa, "B": fb}
        verdict = CANT_TELL if reason else classify(lo, hi, min_effect, same=(slo, shi))
        if verdict in (FASTER, SLOWER) and units:  # qualified: the unit may be the change (floors.host_differences)
            note = "; ".join(x for x in (note, f"on {units}: units of one model differ too (16384^2 GEMVs of two "
                                               "H200s 4.7% apart)") if x)
        out.append(RowChange(k, ra, r, verdict, ratio, lo, hi, why=reason, quantiles=quant, of_ceiling=frac,
                             covers=covers, absolute=absolute, note=note, same_lo=slo, same_hi=shi, noise_class=cls))
    return out


def _with_term(ratio: float, lo: float, hi: float, term: float) -> tuple[float, float]:
    """An interval around `ratio` whose log half-width is the larger of the bootstrap's two sides and
    `term` (the noise model's, of the same level) added in quadrature (at most e^10: no verdict
    either way)."""
    inner = max(math.log(hi / ratio), math.log(ratio / lo))
    half = min(math.sqrt(inner ** 2 + term ** 2), 10.0)
    return ratio * math.exp(-half), ratio * math.exp(half)


def host_bound_rule(r: Record, moves: dict[str, FloorMove], plains: dict[str, FloorMove],
                    one_start: bool) -> tuple[str, FloorMove | None]:
    """How a host-bound launch row of two runs is judged, given the floors that moved (floor_moves
    by name) and the plain loops both ran (plain_floors, by metric): (why it gets no verdict, "" if
    it gets one; the plain loop whose gap it is judged as, or None for its absolute time)."""
    f = moves.get(f"plain {r.metric}") if one_start else plains.get(r.metric)
    cpu = moves.get(HOST_CPU) if one_start else None
    if is_floor(r):
        if f is not None or cpu is not None or not one_start:
            return ("a floor of the host, which moved (see the floors)" if one_start else
                    "a floor of the host, on another machine start"), None
        return "", None
    if not one_start:  # across starts: the gap to the plain loop of its metric, where there is one
        if f is not None:
            return "", f
        return ("another machine start: a host-bound row with no plain loop of its metric to judge it against "
                "(context, cold, import, first warm) moves with the host"), None
    if f is not None:
        # within one start a host-bound row does not keep its gap to a plain loop that moved: judged
        # so, the committed starts' 282 such rows were none same and 11 faster or slower (native
        # back-to-back 0.73x where the plain loop ran 1.13x slower)
        return (f"the host's issue rate moved within this start ({f.text()}): host-bound rows move with it by "
                "amounts of their own here"), None
    if cpu is not None and r.metric not in plains:
        # the host itself ran at another speed (its CPU's no-op 2.09x between two processes of one
        # H100 start, 2026-11-27): a row with no plain loop of its metric moves with it, by an
        # amount no floor measures
        return (f"the host's CPU moved ({cpu.text()}): a host-bound row with no plain loop of its metric "
                "(context, cold, import, first warm, CPU calls) moves with it"), None
    return "", None


def _scale(model: NoiseModel | None, dev_a: str, dev_b: str, cls, one_start: bool,
           confidence: float = 0.95) -> tuple[float | None, str]:
    """The row's between-run scale at `confidence` (NoiseModel.scale): from the model of its device
    (the larger of the two where the runs are of different devices, none where either is
    uncalibrated)."""
    if model is None:
        return None, "no noise model"
    sa = model.scale(dev_a, cls, one_start, confidence)
    if dev_a == dev_b or sa[0] is None:
        return sa
    sb = model.scale(dev_b, cls, False, confidence)
    if sb[0] is None:
        return sb
    return (sa, sb)[sb[0] > sa[0]]


def compare_groups(a_runs: list[Run], b_runs: list[Run], min_effect: float = MIN_EFFECT, widen: float = 1.0,
                   seed: int = 0, margin: float | dict = 0.0, model: NoiseModel | None = None,
                   one_start: bool | None = None) -> list[RowChange]:
    """Rows of several runs per side (`gapbench run --repeat N`: each a fresh process), matched and
    classified on the first run of each side; with at least two runs on each side, each row's
    interval comes from the spread between the runs' medians (process_ratio_ci) and says so.
    `one_start` as in compare_runs (default: from the first runs' recorded boot and machine ids)."""
    between = None
    if len(a_runs) >= 2 and len(b_runs) >= 2:
        between = (_process_medians(a_runs), _process_medians(b_runs))
    return compare_runs(a_runs[0], b_runs[0], min_effect, widen, seed, between, margin, model, one_start)


def _process_medians(runs: list[Run]) -> dict:
    out: dict = {}
    for run in runs:
        for r in run.records:
            if r.status == OK and r.samples_s:
                out.setdefault(row_key(r), []).append(r.median())
    return out


def device_of(run: Run) -> str:
    gpus = run.env.get("nvidia_smi") or []
    return str(gpus[0].get("name")) if gpus else str(run.env.get("cpu") or run.env.get("machine") or "unknown")


def different_devices(a: Run, b: Run) -> bool:
    return device_of(a) != device_of(b)


def _floored(c: RowChange) -> bool:
    """Judged less its launch floor's move (its absolute B/A is the row's own, not a host gap)."""
    return bool(c.noise_class) and c.noise_class[3].endswith(FLOORED)


def notes(a: Run, b: Run, changes: list[RowChange]) -> list[str]:
    """What moved between the runs and why rows got no verdict, in a few lines."""
    out = []
    seq = sequence_note(a, b)
    if seq:
        out.append(seq)
    streams = streams_note(a, b)
    if streams:
        out.append(streams)
    moves = floor_moves(a, b)
    if moves:
        out.append("floors that moved: " + "; ".join(m.text() for m in moves))
    floored = [c for c in changes if _floored(c)]
    gaps = sum(1 for c in changes if c.absolute is not None and not _floored(c))  # host rows' gaps
    if gaps:
        out.append(f"{gaps} host-timed rows judged as gaps to their host floor (absolute B/A in --json/--markdown)")
    if floored:
        moved = sorted(c.absolute / c.ratio for c in floored)
        out.append(f"{len(floored)} short rows judged less the noise model's share of their launch floor's move "
                   f"(runs with the launch floor; B/A is net of it, the absolute B/A in --json/--markdown; the floor moved "
                   f"the rows by {100 * (moved[0] - 1):+.1f}% to {100 * (moved[-1] - 1):+.1f}%)")
    one_side = ["A" if floor_s(c.a) else "B" for c in changes
                if c.ratio is not None and bool(floor_s(c.a)) != bool(floor_s(c.b))]
    for side in sorted(set(one_side)):
        out.append(f"short rows with their launch floor timed in {side} only: {one_side.count(side)} (the other run: "
                   "before 473ff8b, --quick or --no-launch-floor), judged with it left in; runs that both time it "
                   "decide more of them")
    hosts = host_differences(a, b)
    if hosts:
        out.append("hosts: " + "; ".join(hosts))
    more = processes_note(a, b, changes)
    if more:
        out.append(more)
    unequal: dict[str, int] = {}
    for c in changes:
        if c.verdict == NOT_COMPARABLE and c.why:
            unequal[c.why] = unequal.get(c.why, 0) + 1
    for text, k in sorted(unequal.items(), key=lambda x: -x[1]):
        out.append(f"{k} row(s) not comparable, their conditions differ: {text}" + UNEQUAL_HINTS.get(
            text.split(":")[0], "; time both sides under the same settings"))
    why: dict[str, int] = {}
    for c in changes:
        if c.verdict == CANT_TELL and c.why:
            why[c.why] = why.get(c.why, 0) + 1
    for text, k in sorted(why.items(), key=lambda x: -x[1]):
        out.append(f"* {k} row(s) can't tell: {text}")
    return out


#: what to do where a compared condition differs between A and B (conditions.COMPARED), by field
UNEQUAL_HINTS = {
    "parity": " (bench.blas --parity: the CUDA rows' samples padded to both launch parities or not); run both sides "
              "with the same --parity",
    "data": " (bench.blas --data); run both sides with the same --data",
}


#: rows under this per-op time are the ones one process a side leaves `can't tell` most (their
#: process-to-process spread, findings/between-runs.md)
SHORT_ROW_S = 10e-6


def processes_note(a: Run, b: Run, changes: list[RowChange]) -> str:
    """Where the benchmark can time its short cases in more processes of one run (its recorded
    configuration has `processes`: bench.blas) and neither run did, how many `can't tell` rows
    under 10 us that would give an interval between processes; "" otherwise."""
    cfgs = [r.run.get("config") or {} for r in (a, b)]
    if not all(isinstance(c, dict) and c.get("processes") == 1 for c in cfgs):
        return ""
    short = sum(1 for c in changes if c.verdict == CANT_TELL and not c.why and c.covers.startswith("within-run")
                and (c.quantiles.get("A") or [1.0])[0] < SHORT_ROW_S)
    if not short:
        return ""
    return (f"{short} of the can't-tell rows run under 10 us, each timed in one process a side: runs with "
            f"--processes 3 time the short cases in 3 processes, and compare judges those rows between them")
