"""Did it get faster or slower, and how sure are we: rows of two or more result files matched and
classified (`gapbench compare`).

Rows match by benchmark, backend, variant, metric and case (op, dtype, shape, or a training
case's label) and must share their compared conditions (gapbench.core.conditions): a row whose
conditions differ is listed as not comparable, with the field. For each matched pair the change is
the ratio of medians, B time / A time (below 1: B is faster), with a 95% percentile-bootstrap
interval from the raw samples of both sides. That interval covers the noise within the two runs
only; between two runs a row also moves with its process (placement, clocks, allocator state), so
a single run a side gets a between-run margin on the log scale, calibrated per benchmark from A/A
runs (compare_margins.json, written by docs/results/calibrate_compare.py; `margin`). Where each side
has several fresh processes (`gapbench run --repeat N`), the interval comes from their spread
instead and needs no margin. Each row is then:

- same: the whole interval within 1 +- min_effect;
- faster / slower: the whole interval below 1 - min_effect / above 1 + min_effect;
- ambiguous: the interval straddles a bound, so the data cannot say.

nvbench_compare and pyperf's compare_to were the models: both classify from each side's noise and
hold a minimum effect; this adds the conditions and the devices.
"""
from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from gapbench.core.conditions import Conditions, mismatch
from gapbench.core.result import OK, Record, Run

SAME, FASTER, SLOWER, AMBIGUOUS, NOT_COMPARABLE = "same", "faster", "slower", "ambiguous", "not comparable"
#: default smallest change called faster or slower (2%: below it, a change is noise or not worth a gate)
MIN_EFFECT = 0.02
BOOTSTRAP = 2000
#: per benchmark, the between-run margin calibrated from A/A runs (docs/results/calibrate_compare.py)
MARGINS_FILE = Path(__file__).with_name("compare_margins.json")


@functools.cache
def calibrated_margins() -> dict:
    """{benchmark: {"margin_log": m, "per_metric": {metric: m}, ...how it was calibrated}}; {} where
    no calibration ships. Read once."""
    try:
        return json.loads(MARGINS_FILE.read_text())
    except (OSError, ValueError):
        return {}


def margin_for(probe: str, choice: str | float = "auto") -> tuple[dict, str]:
    """compare_runs' `margin` for one benchmark and what it is: "auto" its calibrated margin (per
    metric where calibrated so), "none" no margin, a fraction that margin for every row."""
    if choice == "auto":
        cal = calibrated_margins().get(probe)
        if cal is None:
            return {"*": 0.0}, "none: no A/A calibration for this benchmark (within-run noise only)"
        per = {m: float(v) for m, v in (cal.get("per_metric") or {}).items()}
        return {"*": float(cal["margin_log"]), **per}, (
            f"calibrated{' per metric' if per else ''}: {100 * cal['quantile']:g}th percentile of "
            f"{cal['aa_row_pairs']} A/A row shifts on {', '.join(cal['gpus'])} ({cal['generator']})")
    if choice == "none":
        return {"*": 0.0}, "none (--margin none): within-run noise only"
    return {"*": math.log1p(float(choice))}, "given with --margin"


def row_key(r: Record) -> tuple[str, ...]:
    """What a row is, whatever run it is in: benchmark, backend, variant, metric and its case."""
    p = r.params or {}
    case = str(p.get("label") or " ".join(str(p.get(k) or "") for k in ("op", "dtype", "shape_text")).strip())
    return (r.probe, r.backend, r.variant, r.metric, case)


def key_text(k: Sequence[str]) -> str:
    return " ".join(x for x in (k[0], k[4], f"{k[1]}/{k[2]}", k[3]) if x)


def median_ratio_ci(a: np.ndarray, b: np.ndarray, n: int = BOOTSTRAP, seed: int = 0,
                    confidence: float = 0.95) -> tuple[float, float, float]:
    """(median(b) / median(a), lo, hi): the ratio of medians and its percentile-bootstrap interval,
    each side resampled with replacement on its own (the two runs are independent)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    rng = np.random.default_rng(seed)
    ma = np.median(a[rng.integers(0, a.size, (n, a.size))], axis=1)
    mb = np.median(b[rng.integers(0, b.size, (n, b.size))], axis=1)
    r = mb / ma
    tail = (1 - confidence) / 2
    return float(np.median(b) / np.median(a)), float(np.quantile(r, tail)), float(np.quantile(r, 1 - tail))


def classify(lo: float, hi: float, min_effect: float = MIN_EFFECT) -> str:
    """same / faster / slower / ambiguous from the interval of B time / A time."""
    if hi < 1 - min_effect:
        return FASTER
    if lo > 1 + min_effect:
        return SLOWER
    if lo >= 1 - min_effect and hi <= 1 + min_effect:
        return SAME
    return AMBIGUOUS


@dataclass
class RowChange:
    key: tuple
    a: Record
    b: Record
    verdict: str
    ratio: float | None = None  # B time / A time
    lo: float | None = None
    hi: float | None = None
    why: str = ""  # not comparable: the field that differs
    quantiles: dict = field(default_factory=dict)  # {"A": [p50, p90, p99], "B": [...]} seconds per op
    of_ceiling: dict = field(default_factory=dict)  # {"A": fraction, "B": fraction} of each machine's ceiling
    #: what the interval covers: the noise within the two runs, or the spread between fresh processes
    covers: str = "within-run"

    def to_dict(self) -> dict:
        return {"row": key_text(self.key), "verdict": self.verdict, "ratio_b_over_a": self.ratio, "lo": self.lo,
                "hi": self.hi, "why": self.why or None, "quantiles_s": self.quantiles,
                "of_ceiling": self.of_ceiling or None, "interval_covers": self.covers}


def _ceiling_fraction(run: Run, r: Record) -> float | None:
    """The row's rate as a fraction of its machine's roofline measured in the same run: the
    attainable rate min(FLOP ceiling of its precision, arithmetic intensity x copy bandwidth) where
    both are known, else the one that is (BLAS: the copy bandwidth for bytes, the GEMM of its
    precision for FLOPs)."""
    roof = run.run.get("roofline") or {}
    rates = r.rates()
    p = r.params or {}
    for entries in roof.values():
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


def compare_runs(a: Run, b: Run, min_effect: float = MIN_EFFECT, widen: float = 1.0, seed: int = 0,
                 between: tuple[dict, dict] | None = None, margin: float | dict = 0.0) -> list[RowChange]:
    """Every row present and measured in both runs, classified (module docstring). `between`: per
    row key, the medians of several fresh processes of each side (compare_groups); a row with at
    least two a side takes its interval from their spread instead of from the two runs' samples.
    `margin`: the between-run shift (log scale) a single run's interval is widened by on each side;
    a dict gives it per metric, "*" for the others."""
    margins = margin if isinstance(margin, dict) else {"*": margin}
    if any(not v >= 0 for v in margins.values()):
        raise ValueError(f"margin must be >= 0 (a log-scale shift), got {margin}")
    if widen < 1:
        raise ValueError(f"widen must be >= 1 (a factor on the interval's half-widths), got {widen}")
    ia = {row_key(r): r for r in a.records if r.status == OK and r.samples_s}
    out = []
    for r in b.records:
        k = row_key(r)
        if k not in ia or r.status != OK or not r.samples_s:
            continue
        ra = ia[k]
        why = mismatch(Conditions.of(ra), Conditions.of(r))
        qa, qb = ra.per_op(), r.per_op()
        quant = {"A": [float(np.quantile(qa, q)) for q in (0.5, 0.9, 0.99)],
                 "B": [float(np.quantile(qb, q)) for q in (0.5, 0.9, 0.99)]}
        if why:
            out.append(RowChange(k, ra, r, NOT_COMPARABLE, why=why, quantiles=quant))
            continue
        ma, mb = (between[0].get(k, []), between[1].get(k, [])) if between else ([], [])
        covers = "within-run"
        if len(ma) >= 2 and len(mb) >= 2:
            ratio, lo, hi = process_ratio_ci(ma, mb, seed=seed)
            covers = f"between processes ({len(ma)} + {len(mb)})"
        else:
            ratio, lo, hi = median_ratio_ci(qa, qb, seed=seed)
        if widen != 1:  # on the log scale, so the interval stays positive and symmetric in ratio terms
            lo, hi = ratio * (lo / ratio) ** widen, ratio * (hi / ratio) ** widen
        m = float(margins.get(k[3], margins.get("*", 0.0)))
        if m and covers == "within-run":
            lo, hi = lo * math.exp(-m), hi * math.exp(m)
            covers = f"within-run + between-run margin +-{100 * math.expm1(m):.3g}%"
        frac = {}
        if different_devices(a, b):
            fa, fb = _ceiling_fraction(a, ra), _ceiling_fraction(b, r)
            if fa is not None and fb is not None:
                frac = {"A": fa, "B": fb}
        out.append(RowChange(k, ra, r, classify(lo, hi, min_effect), ratio, lo, hi, quantiles=quant,
                             of_ceiling=frac, covers=covers))
    return out


def process_ratio_ci(a_meds: Sequence[float], b_meds: Sequence[float], n: int = BOOTSTRAP, seed: int = 0,
                     confidence: float = 0.95) -> tuple[float, float, float]:
    """(median(b) / median(a), lo, hi) over the medians of several fresh processes per side, the
    interval a bootstrap that resamples processes: it covers the spread between processes (their
    placement, clocks, allocator state), which one run's samples never see."""
    return median_ratio_ci(np.asarray(a_meds), np.asarray(b_meds), n, seed, confidence)


def compare_groups(a_runs: list[Run], b_runs: list[Run], min_effect: float = MIN_EFFECT, widen: float = 1.0,
                   seed: int = 0, margin: float | dict = 0.0) -> list[RowChange]:
    """Rows of several runs per side (`gapbench run --repeat N`: each a fresh process), matched and
    classified on the first run of each side; with at least two runs on each side, each row's
    interval comes from the spread between the runs' medians (process_ratio_ci) and says so."""
    between = None
    if len(a_runs) >= 2 and len(b_runs) >= 2:
        between = (_process_medians(a_runs), _process_medians(b_runs))
    return compare_runs(a_runs[0], b_runs[0], min_effect, widen, seed, between, margin)


def _process_medians(runs: list[Run]) -> dict:
    out: dict = {}
    for run in runs:
        for r in run.records:
            if r.status == OK and r.samples_s:
                out.setdefault(row_key(r), []).append(float(np.median(r.per_op())))
    return out


def device_of(run: Run) -> str:
    gpus = run.env.get("nvidia_smi") or []
    return str(gpus[0].get("name")) if gpus else str(run.env.get("cpu") or run.env.get("machine") or "unknown")


def different_devices(a: Run, b: Run) -> bool:
    return device_of(a) != device_of(b)


_FAIL_IF = re.compile(r"^\s*(slower|faster)\s*>\s*([0-9.]+)\s*%\s*$")


def parse_fail_if(text: str) -> tuple[str, float]:
    """'slower>5%' -> ("slower", 0.05): the gate --fail-if sets. ValueError with what to write."""
    m = _FAIL_IF.match(text)
    if not m:
        raise ValueError(f"--fail-if {text!r}: write it as slower>N% (or faster>N%), e.g. slower>5%")
    return m.group(1), float(m.group(2)) / 100


def gate(changes: list[RowChange], rule: tuple[str, float]) -> list[RowChange]:
    """The rows the gate fails on: classified in the rule's direction with a change beyond its size."""
    direction, size = rule
    if direction == SLOWER:
        return [c for c in changes if c.verdict == SLOWER and c.ratio is not None and c.ratio - 1 > size]
    return [c for c in changes if c.verdict == FASTER and c.ratio is not None and 1 - c.ratio > size]


def counts(changes: list[RowChange]) -> dict[str, int]:
    out = {v: 0 for v in (SAME, FASTER, SLOWER, AMBIGUOUS, NOT_COMPARABLE)}
    for c in changes:
        out[c.verdict] += 1
    return out


def fmt_ratio(c: RowChange) -> str:
    if c.ratio is None or not math.isfinite(c.ratio):
        return "-"
    return f"{c.ratio:.3f} [{c.lo:.3f}-{c.hi:.3f}]"
