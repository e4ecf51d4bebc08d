"""Every GPU of one host side by side: is one of my GPUs the problem? (`gapbench run --gpus all`,
and the report's "GPUs of one host" table.)

Runs of one benchmark (and mode: default or --quick) made on one machine start, each on another
GPU (`--gpu INDEX`, one process each), are matched row by row. For every row measured on all of
them, each GPU's median per op is taken as a fraction of the node's best (the fastest GPU's
median / this GPU's: 1.0 is the best GPU, 0.9 takes 11% longer). Rows are grouped in families
(copy, GEMM, GEMV, the VJPs and RMSNorm of bench.blas; each launch metric; a training step), and
a family's score is the geometric mean of its rows' fractions.

A GPU is marked when its score lies outside the other GPUs' range of scores by more than the
tolerance: 1.96 times the median between-run scale of the family's rows (gapbench.core.noise, one
machine start: how far a row moves between two processes on one GPU), at least MIN_TOL. A family
score averages many rows, so this is conservative: a mark is a GPU that differs by more than
one row's between-run noise from every other GPU. Where the GPU model is not calibrated, the
tolerance is FALLBACK_TOL and says so. With two GPUs "the others' range" is one value, so a mark
says which side is slower, not which GPU is at fault; three or more GPUs tell it.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

import numpy as np

from gapbench.core.compare import key_text, row_key
from gapbench.core.conditions import Conditions, mismatch
from gapbench.core.floors import host_env
from gapbench.core.noise import Z95, NoiseModel, device_class, is_quick, row_class, shipped
from gapbench.core.result import OK, Record, Run

#: the smallest tolerance a family's mark needs (1%: below it, GPUs of one model are alike)
MIN_TOL = 0.01
#: the tolerance on a GPU model the noise model has not calibrated
FALLBACK_TOL = 0.05

def family(r: Record) -> str:
    """The family a row is judged in: `blas <its op>`, `launch submit`, `train step`, ..."""
    p = r.params or {}
    if r.probe == "blas":
        return f"blas {p.get('op') or '?'}"
    if r.probe == "launch":
        return f"launch {r.metric}"
    return f"{r.probe} {r.metric}"


def gpu_of(run: Run) -> dict:
    """The GPU a run measured on (env["gpu"], else its first CUDA record's device record): cuda and
    NVML index, UUID, bus id; {} when the run names none (a CPU run, or a file before 2026-11-26)."""
    g = run.env.get("gpu")
    if isinstance(g, dict) and g.get("uuid"):
        return g
    for r in run.records:
        g = (r.device or {}).get("gpu") if isinstance(r.device, dict) else None
        if isinstance(g, dict) and g.get("uuid"):
            return g
    return {}


def gpu_label(g: dict) -> str:
    """'GPU 1 (0000:00:07.0)': the NVML index (the host's numbering, as nvidia-smi shows it) and bus id."""
    idx = g.get("nvml_index", g.get("cuda_index", "?"))
    return f"GPU {idx} ({g.get('pci_bus_id') or g.get('uuid', '?')[:12]})"


def _start_of(run: Run) -> tuple:
    h = host_env(run)
    return (h.get("machine_id"), h.get("boot_id")) if h.get("boot_id") else (str(run.env.get("host") or ""), str(run.env.get("hostname") or ""))


def groups(runs: list[Run]) -> list[dict[str, list[Run]]]:
    """Runs of one benchmark and mode on one machine start, by GPU (label -> its runs), for every
    such set with at least two GPUs."""
    sets: dict[tuple, dict[str, list[Run]]] = {}
    for run in runs:
        g = gpu_of(run)
        if not g:
            continue
        k = (_start_of(run), str(run.run.get("probe")), is_quick(run), device_class(run))
        sets.setdefault(k, {}).setdefault(gpu_label(g), []).append(run)
    return [by for _, by in sorted(sets.items(), key=lambda kv: str(kv[0])) if len(by) >= 2]


@dataclass
class Family:
    name: str
    rows: int
    scores: dict[str, float]  # GPU label -> geometric mean of the rows' fractions of the node's best
    tol: float
    tol_note: str
    marked: dict[str, str] = field(default_factory=dict)  # GPU label -> why


@dataclass
class Comparison:
    probe: str
    quick: bool
    gpus: list[str]
    families: list[Family]
    device: str
    left_out: dict[str, str] = field(default_factory=dict)  # row -> the condition that differs between GPUs

    def marks(self) -> list[str]:
        """One line per marked GPU and family."""
        return [f"{g}: {f.name} {why}" for f in self.families for g, why in f.marked.items()]


def _medians(runs: list[Run]) -> dict[tuple, tuple[float, Record]]:
    """Per row key, the median over this GPU's runs of each run's median per op (--repeat: several)."""

    per: dict[tuple, list[float]] = {}
    recs: dict[tuple, Record] = {}
    for run in runs:
        for r in run.records:
            if r.status == OK and r.samples_s:
                k = row_key(r)
                per.setdefault(k, []).append(float(np.median(r.per_op())))
                recs.setdefault(k, r)
    return {k: (statistics.median(v), recs[k]) for k, v in per.items()}


def compare_gpus(by_gpu: dict[str, list[Run]], model: NoiseModel | None = None) -> Comparison:
    """The families of rows measured on every GPU of `by_gpu` under the same compared conditions,
    scored and marked (module docstring); a row whose conditions differ between GPUs is left out
    and counted (Comparison.left_out), as compare leaves it without a ratio."""
    model = shipped() if model is None else model
    labels = sorted(by_gpu, key=lambda s: (len(s), s))
    meds = {g: _medians(by_gpu[g]) for g in labels}
    first = by_gpu[labels[0]][0]
    dev = device_class(first)
    fams: dict[str, list[tuple[dict[str, float], Record]]] = {}
    left_out: dict[str, str] = {}
    for k in sorted(set.intersection(*(set(m) for m in meds.values()))):
        rec = meds[labels[0]][k][1]
        why = next((w for g in labels[1:] if (w := mismatch(Conditions.of(rec), Conditions.of(meds[g][k][1])))), "")
        t = {g: meds[g][k][0] for g in labels}
        if why:
            left_out[key_text(k)] = why
        elif min(t.values()) > 0:
            fams.setdefault(family(rec), []).append((t, rec))
    out = []
    for name, rows in sorted(fams.items()):
        logs = {g: [math.log(min(t.values()) / t[g]) for t, _ in rows] for g in labels}
        scales = [s for t, rec in rows
                  if (s := model.scale(dev, row_class(rec, t[labels[0]]), same_start=True)[0]) is not None]
        scores = {g: math.exp(sum(v) / len(v)) for g, v in logs.items()}
        if scales:
            tol = max(MIN_TOL, math.expm1(Z95 * statistics.median(scales)))
            note = f"1.96 x the median between-run scale of its rows ({dev}, one machine start)"
        else:
            tol, note = FALLBACK_TOL, f"uncalibrated on {dev}: a fixed {100 * FALLBACK_TOL:g}%"
        fam = Family(name, len(rows), scores, tol, note)
        for g in labels:
            others = [scores[o] for o in labels if o != g]
            lo, hi = min(others), max(others)
            if scores[g] < lo * (1 - tol):
                fam.marked[g] = (f"{scores[g]:.3f} of the node's best, below the other GPUs' "
                                 f"{lo:.3f}-{hi:.3f} by more than {100 * tol:.2g}%")
            elif scores[g] > hi * (1 + tol):
                fam.marked[g] = (f"{scores[g]:.3f} of the node's best, above the other GPUs' "
                                 f"{lo:.3f}-{hi:.3f} by more than {100 * tol:.2g}% (they are the slow ones)")
        out.append(fam)
    return Comparison(str(first.run.get("probe")), is_quick(first), labels, out, dev, left_out)


def comparisons(runs: list[Run], model: NoiseModel | None = None) -> list[Comparison]:
    """compare_gpus for every set of runs of one host start, benchmark and mode on two or more GPUs."""
    return [compare_gpus(by, model) for by in groups(runs)]


def rows_of(c: Comparison) -> list[list[str]]:
    """Table rows: family, rows, then each GPU's score ('!' where marked), then the tolerance."""
    return [[f.name, str(f.rows), *[f"{f.scores[g]:.3f}" + (" !" if g in f.marked else "") for g in c.gpus],
             f"{100 * f.tol:.2g}%"] for f in c.families]


def text(c: Comparison) -> str:
    """The side-by-side table as plain text, then the marks (the console of `gapbench run --gpus`)."""
    head = ["family", "rows", *c.gpus, "tolerance"]
    body = rows_of(c)
    width = [max(len(str(x)) for x in col) for col in zip(head, *body)]
    fmt = "  ".join("{:<%d}" % w for w in width)
    lines = [f"{c.probe}{' --quick' if c.quick else ''} on {len(c.gpus)} GPUs of one host ({c.device}): "
             "each GPU's fraction of the node's best (1.000 = the fastest GPU on every row; ! = outside the others)",
             fmt.format(*head), *[fmt.format(*r) for r in body]]
    marks = c.marks()
    lines.append("marked: " + "; ".join(marks) if marks else "no GPU outside the others' spread")
    if c.left_out:
        row, why = next(iter(c.left_out.items()))
        lines.append(f"{len(c.left_out)} row(s) left out: their conditions differ between GPUs (e.g. {row}: {why})")
    return "\n".join(lines)
