"""Framework kernels compiled before the first case, on threads (bench.blas; --no-compile-ahead
leaves it out).

Some frameworks compile a kernel the first time a process meets an op in a dtype, and keep it on
disk for later processes (CuPy: NVRTC, about 0.4 s a kernel; Adapter.compiles_on_first_use). On a
machine whose cache is empty, a default run compiled 14 of them one after another inside its cases'
first runs: "frameworks: inputs to the device, first runs read back" took 10.6-10.8 s in the first
process of a fresh H200 against 4.1-5.4 s in the next ones (docs/findings/run-cost.md). Here each
such framework runs every way it has of running each op of the run (its FrameworkImpls) once, at
the op's smallest shape in the run, in each dtype it supports, one (impl, dtype) a thread, before
anything is timed: what was compiled one kernel at a time is compiled side by side, and the cases
find it cached.

Nothing here is a result: no output is checked and nothing is timed. Every case still runs each
row on a poisoned output and checks it against float64 before timing it, as before. A job that
fails is left to its case, which reports the failure as its row.
"""
from __future__ import annotations

import functools
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from gapbench.backends.base import Adapter
from gapbench.core.dtypes import round_to
from gapbench.core.names import Backend, Data, DType
from gapbench.ops.spec import FrameworkImpl, OpSpec, Shape, Source

#: at most this many threads (each job is a few small launches around one compile)
MAX_THREADS = 16


@dataclass(frozen=True)
class Job:
    """One call that makes a framework compile what a case will run: `call()` on any thread."""
    name: str
    adapter: Adapter
    call: Callable[[], None]


@dataclass
class Outcome:
    """What compiling ahead did: jobs run, on how many threads, and those that failed (each with
    its error; their cases report them as rows)."""
    jobs: int = 0
    threads: int = 0
    failed: tuple[str, ...] = ()


def plan(cases: Sequence[tuple[OpSpec, Shape, DType]], adapters: dict[Backend, Any], seed: int = 0) -> list[Job]:
    """The jobs for a run's cases: for each framework adapter that compiles on first use, the
    kernels it launches itself (Adapter.own_kernels), and each of its ways of running each op of
    the run at the op's smallest shape there, in each dtype of the run the framework supports
    (their inputs drawn here, on this thread)."""
    smallest: dict[OpSpec, Shape] = {}
    dtypes: dict[OpSpec, list[DType]] = {}
    for spec, shape, dtype in cases:
        if spec not in smallest or sum(spec.elements(shape)) < sum(spec.elements(smallest[spec])):
            smallest[spec] = shape
        if dtype not in dtypes.setdefault(spec, []):
            dtypes[spec].append(dtype)
    rng = np.random.default_rng(seed)
    drawn: dict[OpSpec, list[np.ndarray]] = {}  # each op's inputs, drawn once
    jobs = []
    for b, ad in adapters.items():
        if not getattr(ad, "compiles_on_first_use", False):
            continue
        jobs += [Job(f"{b.value} {what}", ad, call) for what, call in ad.own_kernels()]
        for spec, shape in smallest.items():
            impls = [i for i in spec.impls(ad.family) if i.devices is None or b.device_class in i.devices]
            for dtype in dtypes[spec]:
                if not impls or not ad.supports(dtype)[0]:
                    continue
                if spec not in drawn:
                    drawn[spec] = spec.inputs(shape, Source(Data.randn, rng))
                ins = [round_to(a, dtype) for a in drawn[spec]]
                jobs += [Job(f"{b.value} {impl.row} {spec.name} {dtype.value}", ad,
                             functools.partial(_run_impl, ad, impl, ins, dtype)) for impl in impls]
    return jobs


def run(jobs: list[Job], threads: int | None = None) -> Outcome:
    """Runs the jobs, each once, on up to `threads` threads (default: the cores this process may
    use, at most MAX_THREADS); each job waits for its own work on the device, and once all are
    done each adapter lets go of what its threads left (Adapter.threads_done)."""
    if not jobs:
        return Outcome()
    if threads is None:
        try:
            threads = len(os.sched_getaffinity(0))
        except AttributeError:
            threads = os.cpu_count() or 1
    threads = max(1, min(threads, MAX_THREADS, len(jobs)))
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="gapbench-compile") as pool:
        errors = list(pool.map(_one, jobs))
    for ad in {id(j.adapter): j.adapter for j in jobs}.values():
        ad.threads_done()
    return Outcome(len(jobs), threads, tuple(f"{j.name}: {e}" for j, e in zip(jobs, errors) if e))


def _one(job: Job) -> str:
    """One job on this thread, on the adapter's device: "" when it ran, else the error."""
    try:
        job.adapter.on_thread()
        job.call()
        job.adapter.sync()
        return ""
    except Exception as e:  # noqa: BLE001 - any failure is the case's to report, as its row
        return f"{type(e).__name__}: {e}"[:200]


def _run_impl(ad: Adapter, impl: FrameworkImpl, ins: list[np.ndarray], dtype: DType) -> None:
    """The framework's arrays made on this thread (Adapter.thread_array), the op built and run, its
    output poisoned (as a case poisons it) and the op run again, each input copied on the device (as
    a case makes its input sets)."""
    arrays = [ad.thread_array(a, dtype) for a in ins]
    op = ad.evaluated(impl.build(ad, arrays))
    first = op()
    if first is not None and not isinstance(first, (tuple, list)) and all(first is not a for a in arrays):
        ad.poison(first)
    op()
    for x, a in zip(arrays, ins):
        ad.copy_array(x, a, dtype)
