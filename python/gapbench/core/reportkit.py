"""What the report and every benchmark's report tables share: the Table model (title, columns,
rows of text) and the formatting of measured values with their spread, machine and date."""
from __future__ import annotations

from dataclasses import dataclass

from gapbench.core.result import OK, Record, Run


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[str]]
    note: str = ""


def machine_of(run: Run) -> str:
    """The device (first GPU and driver, else the CPU), and the host label of a run that came in
    a `gapbench run` bundle, so two machines of one model stay apart."""
    gpus = run.env.get("nvidia_smi") or []
    if gpus:
        name = f"{gpus[0].get('name', '?')} (driver {gpus[0].get('driver_version', '?')})"
    else:
        name = str(run.env.get("cpu") or run.env.get("machine") or "unknown machine")
    return f"{name} @ {run.env['host']}" if run.env.get("host") else name


def date(run: Run) -> str:
    return str(run.run.get("started", run.env.get("time", "")))[:16].replace("T", " ")


def started(run: Run) -> str:
    return str(run.run.get("started", run.env.get("time", "")))


def num(x: float) -> str:
    """Four significant digits, without exponents for large values (32370, not 3.237e+04)."""
    return f"{x:.0f}" if abs(x) >= 1e4 else f"{x:.4g}"


def spread(r: Record, scale: float = 1.0) -> str:
    s = r.summary()
    return f"{num(s.median * scale)} [{num(s.p10 * scale)}-{num(s.p90 * scale)}]" + ("~" if s.noisy else "")


def us(r: Record) -> str:
    return spread(r, 1e6)


def ok(r: Record) -> bool:
    return r.status == OK and bool(r.samples_s)


#: a roofline entry (bench.blas's measured ceilings) set by an op shorter than this is bound by launch
#: and call overhead (a few us a call), not by the device's throughput, and is no ceiling: the
#: --quick shapes' took 5-14 us on an H200, a default run's 129-441 us (a GPU twice as fast still
#: sets them over 50 us)
CEILING_MIN_S = 50e-6


def is_ceiling(entry: dict) -> bool:
    """Whether a roofline entry is a throughput ceiling: set by an op of at least CEILING_MIN_S
    (entries of files before 7dafb57 carry no time and count as ceilings)."""
    t = entry.get("time_s")
    return t is None or t >= CEILING_MIN_S


def ceilings(run: Run) -> dict[str, dict[str, dict]]:
    """A run's measured roofline (per device class, per key), its entries that are ceilings only."""
    return {cls: {k: v for k, v in entries.items() if is_ceiling(v)}
            for cls, entries in (run.run.get("roofline") or {}).items()}


def peaks_by_machine(runs: list[Run]) -> dict[str, dict[str, float]]:
    """The best measured roofline value per machine and key (bytes_per_s, fp32, tf32, ...), of the
    entries that are ceilings (is_ceiling)."""
    out: dict[str, dict[str, float]] = {}
    for run in runs:
        for entries in ceilings(run).values():
            for k, v in entries.items():
                cur = out.setdefault(machine_of(run), {})
                cur[k] = max(cur.get(k, 0.0), v["value"])
    return out
