"""Where a training step's time goes on the device, from a profile of a few steps (issue 36: the
FSDP2 GPT-2-large step on 4 GPUs gained 40 ms that neither its collectives' bandwidth nor their
sizes explain).

The device's activity (kernels, copies, memsets) is read from torch.profiler's CUPTI trace and
reduced to time per step, with overlapping intervals counted once:
- busy: the union of every device interval;
- compute: the union of the non-communication intervals;
- communication: the union of NCCL's kernels; exposed: busy minus compute (communication nothing
  else overlapped);
- idle: the host's wall time of the steps minus busy (the device waited: for the host, a launch,
  or another rank).
The kernels that take the most time are listed with their count per step, so a step that grew can
be read kernel by kernel against its 1-rank run."""
from __future__ import annotations

import time
from typing import Callable, Iterable

#: a device interval as (name, start_ns, end_ns)
Interval = tuple[str, int, int]


def is_comm(name: str) -> bool:
    """NCCL's kernels (ncclDevKernel_*, ncclKernel_*): the collectives' device work."""
    return name.lower().startswith("nccl")


def union_ns(spans: Iterable[tuple[int, int]]) -> int:
    """Total length of the union of [start, end) spans."""
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(spans):
        if e <= s:
            continue
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def breakdown(intervals: list[Interval], steps: int, wall_s: float, top: int = 6) -> dict:
    """Seconds per step of the device's busy, compute, communication (exposed and in all) and idle
    time over `steps` steps that took `wall_s` on the host, and the top kernels of each kind."""
    if steps < 1:
        raise ValueError("a profile needs at least one step")
    busy = union_ns((s, e) for _, s, e in intervals)
    compute = union_ns((s, e) for n, s, e in intervals if not is_comm(n))
    comm = union_ns((s, e) for n, s, e in intervals if is_comm(n))
    per: dict[str, list[float]] = {}
    for n, s, e in intervals:
        v = per.setdefault(n, [0.0, 0])
        v[0] += (e - s) * 1e-9
        v[1] += 1

    def tops(pred: Callable[[str], bool]) -> list[dict]:
        rows = sorted(((t, c, n) for n, (t, c) in per.items() if pred(n)), reverse=True)[:top]
        return [{"kernel": n[:120], "s_per_step": t / steps, "per_step": c / steps} for t, c, n in rows]

    return {"steps": steps, "wall_s": wall_s / steps, "busy_s": busy * 1e-9 / steps,
            "compute_s": compute * 1e-9 / steps, "comm_s": comm * 1e-9 / steps,
            "exposed_comm_s": (busy - compute) * 1e-9 / steps,
            "idle_s": max(0.0, wall_s - busy * 1e-9) / steps,
            "kernels_per_step": len(intervals) / steps,
            "top_compute": tops(lambda n: not is_comm(n)), "top_comm": tops(is_comm)}


def profile_steps(step: Callable[[int], object], sync: Callable[[], None], steps: int) -> dict:
    """Run `steps` steps under torch.profiler and reduce the device's intervals (breakdown). Only
    CUDA activity is traced (CUPTI), not the host's operators, so the host runs as it does untraced.
    Without CUDA activity (a CPU run) the answer says so."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    if not torch.cuda.is_available():
        return {"reason": "no CUDA device: the profile reads the device's kernels"}
    sync()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        for i in range(steps):
            step(i)
        sync()
        wall = time.perf_counter() - t0
    events = prof.profiler.kineto_results.events()
    dev = [(e.name(), int(e.start_ns()), int(e.end_ns())) for e in events
           if str(e.device_type()).endswith("CUDA")]
    if not dev:
        return {"reason": "the profiler saw no CUDA activity"}
    return breakdown(dev, steps, wall)
