"""Framework adapters: how to create the context, synchronise, and time on the device for each
framework backend. Every timing boundary goes through `sync` (torch.cuda.synchronize,
torch.mps.synchronize, mx.synchronize, cupy stream sync): a timing that only measured enqueue
would be a bug. Probes build their ops on top of these."""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from typing import Any, Callable

import numpy as np

perf_ns = time.perf_counter_ns


class Adapter(ABC):
    backend = ""
    #: the framework's name as results show it (torch, mlx, cupy): the variant of its rows
    family = ""
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

    def supports(self, dtype: str) -> tuple[bool, str]:
        """Whether the framework has this element type here, and why not."""
        return True, ""

    def evaluated(self, fn: Callable[[], Any]) -> Callable[[], Any]:
        """fn wrapped so calling it completes the op's issue (lazy frameworks evaluate here)."""
        return fn

    #: whether time_device can hold the queue behind the release gate (CUDA frameworks)
    can_hold = False

    def time_device(self, fn: Callable[[], None], inner: int, held: bool = True) -> float:
        """Seconds for `inner` calls of fn, by device timers when the framework has them,
        otherwise by the host clock around the calls and a final sync. `held` (where `can_hold`):
        the stream waits behind the release gate until the start event, the calls and the stop
        event are queued, so the events time the device's work alone; held=False times the calls
        as the host issues them (submission gaps included)."""
        self.sync()
        t0 = perf_ns()
        for _ in range(inner):
            fn()
        self.sync()
        return (perf_ns() - t0) * 1e-9

    def set_cpu_threads(self, n: int) -> int | None:
        """Run CPU ops on `n` threads; returns the number now used (None: not settable here)."""
        return None

    def graph(self, fn: Callable[[], None], inner: int) -> Callable[[], float] | None:
        """A callable returning the device seconds of one replay of `inner` captured calls."""
        return None


    # ---- ops the benchmarks run (each returns the result; lazy frameworks leave it unevaluated)
    @abstractmethod
    def array(self, a: np.ndarray, dtype: str) -> Any:
        """A device array of `a`'s values in `dtype` (fp32, fp16, bf16)."""

    @abstractmethod
    def host_values(self, x: Any) -> np.ndarray:
        """The values of `x` on the host, exactly (float32 holds every fp16 and bf16 value), after
        any pending work on it has finished."""

    @abstractmethod
    def copy(self, x: Any) -> Any:
        """A new array with x's values (moves x's bytes once each way)."""

    def mv(self, A: Any, x: Any) -> Any:
        return A @ x

    def bmm(self, A: Any, B: Any) -> Any:
        return A @ B

    @abstractmethod
    def vjp_linear_dx(self, W: Any, v: Any) -> Callable[[], Any]:
        """A callable computing the cotangent of x for y = W x and cotangent v (W^T v), the
        framework's own way (its autodiff where it has one)."""

    @abstractmethod
    def vjp_linear_dw(self, v: Any, x: Any) -> Callable[[], Any]:
        """A callable computing the cotangent of W for y = W x and cotangent v (v x^T)."""

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


class TorchAdapter(Adapter):
    def __init__(self, device: str):
        import torch

        self.torch = torch
        self.device = device
        self.backend = f"torch-{device}"
        self.family = "torch"
        if device == "cuda":
            self.device_clock = "device_events"
            self.graph_reason = ""
            self.can_hold = True
        elif device == "mps":
            self.device_clock = "device_events" if hasattr(torch.mps, "event") else "host_wall"
            self.graph_reason = "torch has no graph capture on MPS"
        else:
            self.graph_reason = "CPU ops run synchronously; no graph capture"

    def setup_context(self) -> None:
        t = self.torch
        if self.device == "cuda":
            t.cuda.init()
        t.empty(1, device=self.device)
        self.sync()

    def sync(self) -> None:
        if self.device == "cuda":
            self.torch.cuda.synchronize()
        elif self.device == "mps":
            self.torch.mps.synchronize()

    def set_cpu_threads(self, n: int) -> int | None:
        if self.device != "cpu":
            return None
        self.torch.set_num_threads(max(1, int(n)))
        return self.torch.get_num_threads()

    def from_numpy(self, a):
        return self.torch.from_numpy(np.ascontiguousarray(a)).to(self.device)

    def to_numpy(self, x):
        self.sync()
        return x.detach().to("cpu").numpy()

    def dtype_of(self, dtype: str):
        t = self.torch
        return {"fp32": t.float32, "fp16": t.float16, "bf16": t.bfloat16}[dtype]

    def array(self, a: np.ndarray, dtype: str):
        return self.from_numpy(np.asarray(a, dtype=np.float32)).to(self.dtype_of(dtype))

    def host_values(self, x) -> np.ndarray:
        self.sync()
        return x.detach().float().cpu().numpy()

    def _event_pair(self):
        t = self.torch
        if self.device == "cuda":
            return t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
        return t.mps.event.Event(enable_timing=True), t.mps.event.Event(enable_timing=True)

    def time_device(self, fn, inner, held=True):
        if self.device_clock != "device_events":
            return super().time_device(fn, inner)
        if self.device != "cuda":
            start, stop = self._event_pair()
            start.record()
            for _ in range(inner):
                fn()
            stop.record()
            stop.synchronize()
            return start.elapsed_time(stop) * 1e-3
        # The stream is held until the host has queued the events and the op (hold.py), so the
        # events time the op, not the host's submission gap. One event pair and the stream are
        # looked up once: each sample waits for its stop event, so the pair is free again.
        if getattr(self, "hold", None) is None:
            from gapbench.backends.hold import StreamHold

            self.hold = StreamHold(self.torch.cuda.current_device(), self.torch.cuda._sleep)
            self._timing = self._event_pair()
        stream = self.torch.cuda.current_stream()
        return self.hold.time_events(stream.cuda_stream, stream, *self._timing, fn, inner,
                                     lambda a, b: a.elapsed_time(b), held=held)

    def graph(self, fn, inner):
        if self.device != "cuda":
            return None
        t = self.torch
        side = t.cuda.Stream()
        side.wait_stream(t.cuda.current_stream())
        with t.cuda.stream(side):  # warm up on a side stream, as capture requires
            for _ in range(3):
                fn()
        t.cuda.current_stream().wait_stream(side)
        g = t.cuda.CUDAGraph()
        with t.cuda.graph(g):
            for _ in range(inner):
                fn()
        start, stop = self._event_pair()

        def replay() -> float:
            start.record()
            g.replay()
            stop.record()
            stop.synchronize()
            return start.elapsed_time(stop) * 1e-3

        return replay


    op_text = {"add": "torch.add(a, b, out=c), {n} fp32 element(s) on {device}"}

    def describe(self, op, **kw):
        return super().describe(op, device=self.device, **kw)

    def copy(self, x):
        return x.clone()

    def mv(self, A, x):
        return self.torch.mv(A, x)

    def bmm(self, A, B):
        return self.torch.bmm(A, B)

    def vjp_linear_dx(self, W, v):
        x = self.torch.ones(W.shape[1], dtype=W.dtype, device=W.device)
        _, fn = self.torch.func.vjp(lambda x_: W @ x_, x)
        return lambda: fn(v)[0]

    def vjp_linear_dw(self, v, x):
        W = self.torch.ones(v.shape[0], x.shape[0], dtype=x.dtype, device=x.device)
        _, fn = self.torch.func.vjp(lambda W_: W_ @ x, W)
        return lambda: fn(v)[0]

    def empty_like(self, x):
        return self.torch.empty_like(x)

    def add_into(self, a, b, out):
        return self.torch.add(a, b, out=out)

    def poison(self, x):
        return x.fill_(float("nan"))


class MLXAdapter(Adapter):
    graph_reason = "MLX has no user-visible graph replay (mx.compile fuses, it does not replay launches)"

    def __init__(self, device: str):
        import mlx.core as mx

        self.mx = mx
        self.device = device
        self.backend = f"mlx-{device}"
        self.family = "mlx"

    def setup_context(self) -> None:
        mx = self.mx
        mx.set_default_device(mx.cpu if self.device == "cpu" else mx.gpu)
        mx.eval(mx.array([1.0], dtype=mx.float32))
        mx.synchronize()

    def sync(self) -> None:
        self.mx.synchronize()

    def from_numpy(self, a):
        x = self.mx.array(a)
        self.mx.eval(x)
        return x

    def to_numpy(self, x):
        self.mx.eval(x)
        return np.array(x)

    def dtype_of(self, dtype: str):
        mx = self.mx
        return {"fp32": mx.float32, "fp16": mx.float16, "bf16": mx.bfloat16}[dtype]

    def array(self, a: np.ndarray, dtype: str):
        x = self.mx.array(np.asarray(a, dtype=np.float32)).astype(self.dtype_of(dtype))
        self.mx.eval(x)
        return x

    def host_values(self, x) -> np.ndarray:
        return np.array(x.astype(self.mx.float32))

    def evaluated(self, fn):
        """MLX is lazy: an op is done only when evaluated."""
        mx = self.mx
        return lambda: mx.eval(fn())


    op_text = {"add": "mx.add(a, b) evaluated, {n} fp32 element(s) on {device}"}

    def describe(self, op, **kw):
        return super().describe(op, device=self.device, **kw)

    def copy(self, x):
        return x * 1  # MLX has no explicit copy op: an elementwise op moving the same bytes

    def vjp_linear_dx(self, W, v):
        mx = self.mx
        x = mx.ones((W.shape[1],), dtype=W.dtype)
        return lambda: mx.vjp(lambda x_: W @ x_, [x], [v])[1][0]

    def vjp_linear_dw(self, v, x):
        mx = self.mx
        W = mx.ones((v.shape[0], x.shape[0]), dtype=x.dtype)
        return lambda: mx.vjp(lambda W_: W_ @ x, [W], [v])[1][0]

    def empty_like(self, x):
        return self.mx.zeros_like(x)

    def add_into(self, a, b, out):
        # MLX arrays are immutable: each op makes a fresh array, evaluated asynchronously here.
        c = self.mx.add(a, b)
        self.mx.async_eval(c)
        return c

    def poison(self, x):
        return self.mx.full(x.shape, float("nan"), dtype=x.dtype)


class CupyAdapter(Adapter):
    backend = "cupy"
    family = "cupy"
    device_clock = "device_events"
    graph_reason = ""
    can_hold = True

    def __init__(self):
        import cupy

        self.cp = cupy

    def setup_context(self) -> None:
        self.cp.cuda.Device(0).use()
        self.cp.empty(1, dtype=self.cp.float32)
        self.sync()

    def sync(self) -> None:
        self.cp.cuda.get_current_stream().synchronize()

    def from_numpy(self, a):
        return self.cp.asarray(a)

    def to_numpy(self, x):
        return self.cp.asnumpy(x)

    def supports(self, dtype: str) -> tuple[bool, str]:
        return (dtype != "bf16", "cupy has no bfloat16 dtype")

    def _spin(self, cycles: int) -> None:  # the fallback of hold.py when the native gate is absent
        if not hasattr(self, "_spin_kernel"):
            self._spin_kernel = self.cp.RawKernel(
                r'extern "C" __global__ void gb_spin(long long c) {'
                r' long long t = clock64(); while (clock64() - t < c) {} }', "gb_spin")
        self._spin_kernel((1,), (1,), (self.cp.int64(cycles),))

    def array(self, a: np.ndarray, dtype: str):
        return self.cp.asarray(np.asarray(a, dtype=np.float32)).astype({"fp32": "float32", "fp16": "float16"}[dtype])

    def host_values(self, x) -> np.ndarray:
        return self.cp.asnumpy(x)

    def time_device(self, fn, inner, held=True):
        cp = self.cp
        if getattr(self, "hold", None) is None:  # held as for torch (hold.py), one event pair
            from gapbench.backends.hold import StreamHold

            self.hold = StreamHold(cp.cuda.Device().id, self._spin)
            self._timing = cp.cuda.Event(), cp.cuda.Event()
        stream = cp.cuda.get_current_stream()
        return self.hold.time_events(stream.ptr, stream, *self._timing, fn, inner, cp.cuda.get_elapsed_time,
                                     held=held)

    def graph(self, fn, inner):
        cp = self.cp
        stream = cp.cuda.Stream(non_blocking=True)
        with stream:
            fn()  # warm up on the capture stream
            stream.synchronize()
            stream.begin_capture()
            for _ in range(inner):
                fn()
            g = stream.end_capture()
        start, stop = cp.cuda.Event(), cp.cuda.Event()

        def replay() -> float:
            start.record(stream)
            g.launch(stream)
            stop.record(stream)
            stop.synchronize()
            return cp.cuda.get_elapsed_time(start, stop) * 1e-3

        return replay


    op_text = {"add": "cupy.add(a, b, out=c), {n} fp32 element(s)"}

    def copy(self, x):
        return x.copy()

    def vjp_linear_dx(self, W, v):
        return lambda: W.T @ v  # no autodiff in CuPy: the cotangent computed directly

    def vjp_linear_dw(self, v, x):
        return lambda: self.cp.outer(v, x)

    def empty_like(self, x):
        return self.cp.empty_like(x)

    def add_into(self, a, b, out):
        return self.cp.add(a, b, out=out)

    def poison(self, x):
        x.fill(np.nan)
        return x


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


def make_adapter(backend: str) -> Adapter:
    from gapbench.backends.registry import parse

    b = parse(backend)
    if b.family == "torch":
        return TorchAdapter(b.device)
    if b.family == "mlx":
        return MLXAdapter(b.device)
    if b.family == "cupy":
        return CupyAdapter()
    raise ValueError(f"{backend!r} is not a framework backend")
