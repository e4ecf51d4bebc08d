"""What every backend adapter provides, and what is known about a backend on this machine.

A backend's adapter (backends/torch.py, mlx.py, cupy.py; the native probes in native.py) owns how
its framework is found (availability with the reason when not), allocates, synchronises and times
on the device. Every timing boundary goes through `sync` (torch.cuda.synchronize,
torch.mps.synchronize, mx.synchronize, cupy stream sync): a timing that only measured enqueue
would be a bug. Ops (gapbench.ops) and benchmarks build on these."""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from gapbench.core.names import Backend, DeviceClass, DType, Family

perf_ns = time.perf_counter_ns


@dataclass(frozen=True)
class BackendInfo:
    """Whether `backend` can run here, why not when it cannot, and its device (name, driver, ...)."""
    backend: Backend
    available: bool
    reason: str = ""  # why not, when unavailable
    device: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.backend.value

    @property
    def kind(self) -> str:
        return "native" if self.backend.is_native else "framework"

    @property
    def device_class(self) -> DeviceClass:
        return self.backend.device_class

    @property
    def floor(self) -> Backend:
        """The native backend whose numbers are this backend's raw floor."""
        return self.backend.device_class.floor


def installed(top: str) -> bool:
    """Whether the package `top` is installed, without importing it. A broken or half-removed
    install answers True: only its import can tell what is wrong."""
    import importlib.util

    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return True


def unavailable(backend: Backend, reason: str, device: dict | None = None) -> BackendInfo:
    return BackendInfo(backend, False, reason, dict(device or {}))


def gpu_record(cuda_index: int = 0, cuda_bus_id: str | None = None) -> dict:
    """Which physical GPU a CUDA backend's device `cuda_index` is (gapbench.core.gpu): CUDA index,
    NVML index, PCI bus id, UUID, name and how it was mapped; {"unidentified": why} where it cannot
    be told. `cuda_bus_id`: the framework's own answer for the device, which decides."""
    from gapbench.core.gpu import identify

    ident, why = identify(cuda_index, cuda_bus_id=cuda_bus_id)
    return ident.record() if ident is not None else {"cuda_index": cuda_index, "unidentified": why}


class Adapter(ABC):
    backend: Backend
    #: the framework's name as results show it (torch, mlx, cupy): the variant of its rows
    family: Family
    #: clock of `time_device`: "device_events" where the framework has device timers
    device_clock = "host_wall"
    #: why there is no graph replay, when `graph` returns None
    graph_reason = "this framework has no graph capture"

    @abstractmethod
    def setup_context(self) -> None:
        """Create the device context / allocator state (timed as the context phase)."""

    @abstractmethod
    def sync(self) -> None:
        """Wait until every op issued so far has finished on the device."""

    @abstractmethod
    def from_numpy(self, a: np.ndarray) -> Any:
        """A device array holding a copy of `a`."""

    @abstractmethod
    def to_numpy(self, x: Any) -> np.ndarray:
        """The values of `x`, after any pending work on it has finished."""

    def supports(self, dtype: DType) -> tuple[bool, str]:
        """Whether the framework has this element type here, and why not."""
        return True, ""

    def evaluated(self, fn: Callable[[], Any]) -> Callable[[], Any]:
        """fn wrapped so calling it completes the op's issue (lazy frameworks evaluate here)."""
        return fn

    #: whether time_device can hold the queue behind the release gate (CUDA frameworks)
    can_hold = False

    def device_delay(self, us: float, sm_mhz: float | None = None) -> tuple[Callable[[], None], str] | None:
        """TEST ONLY (bench.blas --inject-delay-us): a call that queues about `us` microseconds of
        device-side busy work on the framework's stream (`sm_mhz`: the maximum SM clock, where the
        work is counted in cycles), and what it queues; None where the framework has no such kernel."""
        return None

    @property
    def can_scrub(self) -> bool:
        """Whether time_device can scrub the L2 on the framework's own stream before a held sample
        (the native gate's scrub: CUDA frameworks with gapbench's CUDA part)."""
        return False

    def time_device(self, fn: Callable[[], None], inner: int, held: bool = True, scrub=None) -> float:
        """Seconds for `inner` calls of fn, by device timers when the framework has them,
        otherwise by the host clock around the calls and a final sync. `held` (where `can_hold`):
        the stream waits behind the release gate until the start event, the calls and the stop
        event are queued, so the events time the device's work alone; held=False times the calls
        as the host issues them (submission gaps included). `scrub` (a cold CacheMode, where
        `can_scrub`): the L2 is scrubbed on the stream before each sample, outside its events."""
        if scrub is not None:
            raise ValueError(f"{type(self).__name__} cannot scrub the L2 on its queue (can_scrub is False)")
        self.sync()
        t0 = perf_ns()
        for _ in range(inner):
            fn()
        self.sync()
        return (perf_ns() - t0) * 1e-9

    def time_device_each(self, fn: Callable[[], None], n: int, scrub=None) -> list[float]:
        """n samples of one call of fn each, as n calls of time_device(fn, 1, scrub=scrub) take them
        (each held on its own where the framework holds); adapters that hold override it to look up
        their stream and events once."""
        return [self.time_device(fn, 1, scrub=scrub) for _ in range(n)]

    def set_parity_pads(self, on: bool) -> bool:
        """Pad each held sample to both launch parities of its stream (bench.blas --parity balanced;
        cuda/gate.h); returns whether this adapter's samples are now padded: no, but where they are
        held behind the native release gate (torch on CUDA, CuPy)."""
        return False

    @property
    def parity_pads(self) -> bool:
        """Are this adapter's held samples padded to both launch parities (set_parity_pads)?"""
        return False

    def set_cpu_threads(self, n: int) -> int | None:
        """Run CPU ops on `n` threads; returns the number now used (None: not settable here)."""
        return None

    def empty_kernel(self) -> Callable[[], None] | None:
        """A call that queues an empty kernel (no work) on the framework's current stream, for
        bench.blas --launch-floor; None where the framework has none."""
        return None

    def stream_handle(self) -> int | None:
        """The framework's current stream as an int (a cudaStream_t; 0: the legacy default stream),
        or None where there is none: rows on one handle share its launch floor."""
        return None

    def timing_streams(self, n: int) -> int:
        """Sets up n streams for the rows to time on, one a paired round in turn (use_stream), and
        returns how many there are: n where the framework can run on the native CUDA part's blocking
        streams (torch on CUDA, CuPy: backends/hold.py), else 1 (its current stream throughout)."""
        return 1

    def use_stream(self, i: int) -> None:
        """Everything queued after this runs on stream i of those timing_streams set up."""
        if i != 0:
            raise ValueError(f"{type(self).__name__} times on one stream; stream {i} asked for")

    def graph(self, fn: Callable[[], None], inner: int) -> Callable[[], float] | None:
        """A callable returning the device seconds of one replay of `inner` captured calls."""
        return None

    def capture(self, fn: Callable[[], Any]) -> Callable[[], Any]:
        """`fn` (one run of an op, returning its output) captured into a graph after warm-up: a
        callable that replays it on the current stream and returns the captured output. Adapters
        whose `graph_reason` is "" override it (torch on CUDA, CuPy); callers ask `graph_reason`
        first, and elsewhere this refuses with it."""
        raise NotImplementedError(f"no graph capture here: {self.graph_reason}")


    # ---- arrays (an op itself is built by its OpSpec from the framework's module: gapbench.ops)
    @abstractmethod
    def array(self, a: np.ndarray, dtype: DType) -> Any:
        """A device array of `a`'s values in `dtype` (fp32, fp16, bf16)."""

    def copy_array(self, x: Any, a: np.ndarray, dtype: DType) -> Any:
        """Another device array with x's values (`a` in `dtype`, as `array` made x): a copy made on
        the device where the framework can, so a hot mode's input sets hold the same bytes without
        each going through the host. By default made from `a` again."""
        return self.array(a, dtype)

    @abstractmethod
    def host_values(self, x: Any) -> np.ndarray:
        """The values of `x` on the host, exactly (float32 holds every fp16 and bf16 value), after
        any pending work on it has finished."""

    def host_view(self, x: Any) -> np.ndarray:
        """x's values on the host as host_values gives them, possibly in a buffer the adapter
        reuses (page-locked, so the read-back is one DMA): valid until the adapter's next
        host_view, for a caller that checks them at once. By default a new array."""
        return self.host_values(x)

    @abstractmethod
    def empty_like(self, x: Any) -> Any:
        """An output buffer shaped and typed like x (contents undefined)."""

    @abstractmethod
    def add_into(self, a: Any, b: Any, out: Any) -> Any:
        """Issue out = a + b without waiting; returns the array that holds the result."""

    @abstractmethod
    def poison(self, x: Any) -> Any:
        """x filled with NaN (an output a correct op overwrites); returns the poisoned array."""

    #: how each op reads in this framework's own words (row descriptions)
    op_text: dict[str, str] = {}

    def describe(self, op: str, **kw) -> str:
        return self.op_text.get(op, op).format(**kw)


def free_cpu_cores(interval_s: float = 0.3) -> tuple[int, int, float]:
    """(cores free, cores this process may use, cores kept busy by others), from the CPU use of
    the whole machine over `interval_s` while this process waits. Why it matters: torch's CPU ops
    run as an OpenMP team of one thread per core, and every op waits at its barrier for the
    slowest thread; with another process busy on one of those cores, that thread waits a whole
    scheduler slice and a 6 us copy takes 8-16 ms. A team no larger than the free cores avoids it."""
    import os

    import psutil

    try:
        total = len(os.sched_getaffinity(0))
    except AttributeError:
        total = os.cpu_count() or 1
    busy = psutil.cpu_percent(interval=interval_s) / 100.0 * (psutil.cpu_count() or total)
    return max(1, min(total, int(total - busy + 0.5))), total, busy
