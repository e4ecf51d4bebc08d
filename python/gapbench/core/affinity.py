"""Binding each rank to physical cores of its own, as nccl-tests is run under `mpirun --bind-to
core`. A small message's time is host time (enqueueing NCCL's kernel), so it depends on where the
rank's threads land: unbound, the same 1 KiB all-reduce took either about 6 or about 10 us per
call depending on the process (2 x H200, 2026-11-23), which no number of samples inside a process
can average away. Each rank gets an equal, disjoint share of the physical cores local to its GPU
(`nvidia-smi topo -m`'s CPU Affinity; all allowed CPUs where that is unknown), one hardware thread
per core, so that the rank's threads never share a core with another rank's spinning threads.
The ranks are bound as they start (gapbench.core.process.start(cpus=...))."""
from __future__ import annotations

import os
import re
from pathlib import Path


def parse_cpu_list(text: str) -> set[int]:
    """'0-31' / '0-47,96-143' / '0,2,4' -> the CPU numbers; empty for 'N/A' and the like."""
    out: set[int] = set()
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+))?\s*", part)
        if m:
            lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
            out.update(range(lo, hi + 1))
    return out


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def topo_rows(text: str | None) -> list[list[str]]:
    """`nvidia-smi topo -m`'s table as rows of stripped cells (ANSI underlining removed)."""
    return [[c.strip() for c in _ANSI.sub("", ln).split("\t")] for ln in (text or "").splitlines()]


def gpu_local_cpus(text: str | None) -> dict[int, set[int]]:
    """{GPU index (nvidia-smi's): CPUs local to it} from the CPU Affinity column of `nvidia-smi topo -m`."""
    rows = topo_rows(text)
    head = next((r for r in rows if "CPU Affinity" in r), None)
    if head is None:
        return {}
    col = head.index("CPU Affinity")
    out = {}
    for r in rows:
        if r and re.fullmatch(r"GPU\d+", r[0]) and len(r) > col:
            cpus = parse_cpu_list(r[col])
            if cpus:
                out[int(r[0][3:])] = cpus
    return out


def _core_of(cpu: int) -> tuple:
    base = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
    try:
        return int((base / "physical_package_id").read_text()), int((base / "core_id").read_text())
    except (OSError, ValueError):
        return ("cpu", cpu)  # unknown topology: every CPU its own core


def physical_cores(cpus: set[int], core_of=_core_of) -> list[list[int]]:
    """The CPUs grouped by physical core, each group sorted, groups in order of their first CPU."""
    by: dict[tuple, list[int]] = {}
    for c in sorted(cpus):
        by.setdefault(core_of(c), []).append(c)
    return sorted(by.values(), key=lambda g: g[0])


def rank_cpus(nproc: int, gpu_local: dict[int, set[int]] | None = None, allowed: set[int] | None = None,
              core_of=_core_of) -> tuple[list[list[int]] | None, str]:
    """(per rank the CPUs to bind it to, how) or (None, why not). Rank r uses GPU r."""
    allowed = set(os.sched_getaffinity(0)) if allowed is None else set(allowed)
    pools = []
    for r in range(nproc):
        local = (gpu_local or {}).get(r, set()) & allowed
        pools.append(frozenset(local or allowed))
    out: list[list[int] | None] = [None] * nproc
    for pool in dict.fromkeys(pools):  # ranks sharing a pool split its cores evenly
        ranks = [r for r in range(nproc) if pools[r] == pool]
        cores = physical_cores(set(pool), core_of)
        k = len(cores) // len(ranks)
        if k == 0:
            return None, (f"not bound: {len(ranks)} ranks share {len(cores)} physical cores "
                          f"(CPUs {_fmt(pool)})")
        for i, r in enumerate(ranks):
            out[r] = [g[0] for g in cores[i * k:(i + 1) * k]]
    how = "; ".join(f"rank {r}: CPUs {_fmt(c)}" for r, c in enumerate(out))
    return out, f"one hardware thread on each of {len(out[0])} physical cores per rank ({how})"


def launch_cpu(gpu_local: set[int] | None = None, allowed: set[int] | None = None, core_of=_core_of) -> int | None:
    """The one CPU a latency probe is bound to: on the GPU's NUMA node where known, the first
    hardware thread of the second physical core (the first takes most interrupts), or of the only
    one. Unbound, a framework's launch + sync moved between about 12.6 and 21.6 us within one
    process on an H100; bound, the spread narrowed (docs/results/launch-h100-2026-11-25-pinning-probe.txt)."""
    allowed = set(os.sched_getaffinity(0)) if allowed is None else set(allowed)
    pool = (set(gpu_local or ()) & allowed) or allowed
    cores = physical_cores(pool, core_of)
    if not cores:
        return None
    return cores[1][0] if len(cores) > 1 else cores[0][0]


def _fmt(cpus) -> str:
    s = sorted(cpus)
    runs, start = [], None
    for i, c in enumerate(s):
        if start is None:
            start = c
        if i + 1 == len(s) or s[i + 1] != c + 1:
            runs.append(f"{start}" if start == c else f"{start}-{c}")
            start = None
    return ",".join(runs)
