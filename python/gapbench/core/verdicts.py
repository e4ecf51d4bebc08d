"""What gapbench compare answers, row by row: the verdicts (same, faster, slower, can't tell, not
comparable), how an interval is classified (TOST for "same"), a row's change (RowChange), the
summary line that leads the output and the --fail-if gate. gapbench.core.compare matches and
judges the runs and re-exports these."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Sequence

from gapbench.core.result import Record

SAME, FASTER, SLOWER, CANT_TELL, NOT_COMPARABLE = "same", "faster", "slower", "can't tell", "not comparable"

#: default smallest change called faster or slower, and the band "same" must lie within (3%: rows
#: of 3-10 us move by 1-2% between two processes on one machine, so a narrower band could not
#: call most of them "same" from one run a side; docs/results/compare-calibration-*.md)
MIN_EFFECT = 0.03


def key_text(k: Sequence[str]) -> str:
    return " ".join(x for x in (k[0], k[4], f"{k[1]}/{k[2]}", k[3]) if x)


def classify(lo: float, hi: float, min_effect: float = MIN_EFFECT,
             same: tuple[float, float] | None = None) -> str:
    """same / faster / slower / can't tell from the 95% interval (lo, hi) of B time / A time, and for
    "same" the 90% one (`same`; default the 95% one): "same" is two one-sided tests at 5% each
    (TOST, Schuirmann 1987), that B/A is above 1 - min_effect and that it is below 1 + min_effect,
    so a change of min_effect is called same at most 5% of the time; faster and slower keep 2.5%
    a side."""
    if hi < 1 - min_effect:
        return FASTER
    if lo > 1 + min_effect:
        return SLOWER
    slo, shi = same if same is not None else (lo, hi)
    if slo >= 1 - min_effect and shi <= 1 + min_effect:
        return SAME
    return CANT_TELL


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
    #: B/A of the absolute times where the verdict is on the gap to a floor that moved (else None)
    absolute: float | None = None
    #: how the row was judged where that is not the default (a floor it was divided by, the noise class)
    note: str = ""
    #: the 90% interval "same" is judged by (classify; the 95% one for heavy-tailed classes)
    same_lo: float | None = None
    same_hi: float | None = None
    #: the noise class the row was judged by (noise.row_class; floored rows: "gated-floor")
    noise_class: tuple = ()

    def to_dict(self) -> dict:
        return {"row": key_text(self.key), "verdict": self.verdict, "ratio_b_over_a": self.ratio, "lo": self.lo,
                "hi": self.hi, "why": self.why or None, "quantiles_s": self.quantiles,
                "of_ceiling": self.of_ceiling or None, "interval_covers": self.covers,
                "absolute_ratio": self.absolute, "note": self.note or None,
                "same_interval_90": [self.same_lo, self.same_hi] if self.same_lo is not None else None}


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
    out = {v: 0 for v in (SAME, FASTER, SLOWER, CANT_TELL, NOT_COMPARABLE)}
    for c in changes:
        out[c.verdict] += 1
    return out


def summary_line(changes: list[RowChange], n: dict[str, int] | None = None) -> str:
    """"302 rows: 251 same, 0 faster, 0 slower, 51 can't tell (needs --repeat)": the answer first."""
    n = n or counts(changes)
    total = sum(n.values())
    tell = f"{n[CANT_TELL]} can't tell" + (" (needs --repeat)" if n[CANT_TELL] else "")
    tail = f", {n[NOT_COMPARABLE]} not comparable" if n[NOT_COMPARABLE] else ""
    return f"{total} rows: {n[SAME]} same, {n[FASTER]} faster, {n[SLOWER]} slower, {tell}{tail}"


def fmt_ratio(c: RowChange) -> str:
    if c.ratio is None or not math.isfinite(c.ratio):
        return "-"
    return f"{c.ratio:.3f} [{c.lo:.3f}-{c.hi:.3f}]"
