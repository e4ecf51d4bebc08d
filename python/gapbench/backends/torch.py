"""PyTorch (torch-cpu, torch-cuda, torch-mps): whether it can run here, and its adapter."""
from __future__ import annotations

import numpy as np

from gapbench.backends.base import Adapter, BackendInfo, gpu_record, installed, unavailable
from gapbench.core.dtypes import to_bytes
from gapbench.core.env import cpu_model
from gapbench.core.native import staging
from gapbench.core.names import Backend, DType, Family

INSTALL = "pip install 'gapbench[torch]'"


#: what a fresh process imports to use this framework (its import is timed as the import phase)
MODULE = "torch"


def precheck(backend: Backend) -> BackendInfo | None:
    """What is certain without importing torch (seconds, and a CUDA context): not installed, or
    MPS off macOS; None where only the import can tell."""
    import sys

    if not installed("torch"):
        return unavailable(backend, f"torch not installed (No module named 'torch'); {INSTALL}")
    if backend is Backend.torch_mps and sys.platform != "darwin":
        from importlib import metadata

        try:
            dev = {"torch": metadata.version("torch")}
        except metadata.PackageNotFoundError:
            dev = {}
        return unavailable(backend, "this torch is built without MPS (MPS needs macOS)", dev)
    return None


def info(backend: Backend) -> BackendInfo:
    try:
        import torch
    except ImportError as e:
        return unavailable(backend, f"torch not installed ({e}); {INSTALL}")
    dev: dict = {"torch": torch.__version__}
    if backend is Backend.torch_cpu:
        dev.update(name=cpu_model(), threads=torch.get_num_threads())
        return BackendInfo(backend, True, device=dev)
    if backend is Backend.torch_cuda:
        if torch.version.cuda is None:
            return unavailable(backend, f"this torch ({torch.__version__}) is built without CUDA", dev)
        try:
            ok = torch.cuda.is_available()
        except Exception as e:  # driver problems surface as exceptions on some versions
            return unavailable(backend, f"torch.cuda failed: {e}", dev)
        if not ok:
            return unavailable(backend, "torch sees no CUDA device (no GPU or no driver)", dev)
        props = torch.cuda.get_device_properties(0)
        bus = (f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
               if hasattr(props, "pci_bus_id") else None)
        dev.update(name=torch.cuda.get_device_name(0), cuda=torch.version.cuda, gpu=gpu_record(0, bus))
        return BackendInfo(backend, True, device=dev)
    if not torch.backends.mps.is_built():
        return unavailable(backend, "this torch is built without MPS (MPS needs macOS)", dev)
    if not torch.backends.mps.is_available():
        return unavailable(backend, "MPS not available (needs macOS 12.3+ on Apple Silicon)", dev)
    dev["name"] = "Apple GPU (MPS)"
    return BackendInfo(backend, True, device=dev)


def free_memory(backend: Backend) -> tuple[int | None, str]:
    """Bytes the device can still take now, and where the figure came from."""
    import torch

    if backend is Backend.torch_cuda:
        return int(torch.cuda.mem_get_info()[0]), "free device memory (torch.cuda.mem_get_info)"
    return capacity(backend)


def capacity(backend: Backend) -> tuple[int | None, str]:
    """Bytes the device can hold, and where that figure came from."""
    import torch

    if backend is Backend.torch_cuda:
        return int(torch.cuda.mem_get_info()[1]), "torch.cuda.mem_get_info total"
    if backend is Backend.torch_mps and hasattr(torch.mps, "recommended_max_memory"):
        # unified memory: the recommended working set of the GPU
        return int(torch.mps.recommended_max_memory()), "torch.mps.recommended_max_memory"
    return None, "unknown"


def allocator_probe(backend: Backend):
    """A function returning the caching allocator's figures, in bytes."""
    import torch

    if backend is Backend.torch_cuda:
        return lambda: {"torch_cuda_allocated_bytes": torch.cuda.memory_allocated(),
                        "torch_cuda_reserved_bytes": torch.cuda.memory_reserved()}
    if backend is Backend.torch_mps:
        return lambda: {"torch_mps_current_bytes": torch.mps.current_allocated_memory(),
                        "torch_mps_driver_bytes": torch.mps.driver_allocated_memory()}
    return lambda: {}


class TorchAdapter(Adapter):
    family = Family.torch

    def __init__(self, backend: Backend):
        import torch

        self.torch = torch
        self.backend = backend
        self.device = backend.device
        self.cuda, self.mps = backend is Backend.torch_cuda, backend is Backend.torch_mps
        if self.cuda:
            self.device_clock = "device_events"
            self.graph_reason = ""
            self.can_hold = True
        elif self.mps:
            self.device_clock = "device_events" if hasattr(torch.mps, "event") else "host_wall"
            self.graph_reason = "torch has no graph capture on MPS"
        else:
            self.graph_reason = "CPU ops run synchronously; no graph capture"

    def setup_context(self) -> None:
        t = self.torch
        if self.cuda:
            t.cuda.init()
        t.empty(1, device=self.device)
        self.sync()

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()
        elif self.mps:
            self.torch.mps.synchronize()

    def set_cpu_threads(self, n: int) -> int | None:
        if self.backend is not Backend.torch_cpu:
            return None
        self.torch.set_num_threads(max(1, int(n)))
        return self.torch.get_num_threads()

    def from_numpy(self, a):
        return self.torch.from_numpy(np.ascontiguousarray(a)).to(self.device)

    def to_numpy(self, x):
        self.sync()
        return x.detach().to("cpu").numpy()

    def dtype_of(self, dtype: DType):
        t = self.torch
        return {DType.fp32: t.float32, DType.fp16: t.float16, DType.bf16: t.bfloat16}[DType(dtype)]

    def array(self, a: np.ndarray, dtype: DType):
        dtype = DType(dtype)
        buf = staging().out(a.size * dtype.itemsize) if self.cuda else None
        if buf is None:
            return self.from_numpy(np.asarray(a, dtype=np.float32)).to(self.dtype_of(dtype))
        # In the dtype's own bytes, through the page-locked staging buffer (one DMA)
        host = to_bytes(a, dtype, buf)
        t = self.torch.from_numpy(host.view(np.int16) if dtype is DType.bf16 else host)
        out = (t.view(self.torch.bfloat16) if dtype is DType.bf16 else t).to(self.device)
        self.sync()  # the buffer is free for the next copy only once this one is done
        return out

    def copy_array(self, x, a: np.ndarray, dtype: DType):
        return x.detach().clone()

    def host_values(self, x) -> np.ndarray:
        self.sync()
        return x.detach().float().cpu().numpy()

    def host_view(self, x) -> np.ndarray:
        """On CUDA: copied as float32 into the page-locked staging buffer (core.native.staging)."""
        buf = staging().out(x.numel() * 4) if self.cuda else None
        if buf is None:
            return self.host_values(x)
        self.sync()
        dst = self.torch.from_numpy(buf[:x.numel() * 4]).view(self.torch.float32).view(x.shape)
        dst.copy_(x.detach())
        self.sync()
        return dst.numpy()

    def _event_pair(self):
        t = self.torch
        if self.cuda:
            return t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
        return t.mps.event.Event(enable_timing=True), t.mps.event.Event(enable_timing=True)

    def set_parity_pads(self, on: bool) -> bool:
        return self._stream_hold().set_parity_pads(on) if self.cuda else False

    @property
    def parity_pads(self) -> bool:
        return getattr(self, "hold", None) is not None and self.hold.parity_pads

    def _stream_hold(self):
        if getattr(self, "hold", None) is None:
            from gapbench.backends.hold import StreamHold

            self.hold = StreamHold(self.torch.cuda.current_device(), self.torch.cuda._sleep)
            self._timing = self._event_pair()
        return self.hold

    def empty_kernel(self):
        """torch.cuda._sleep(0): torch's spin kernel told to spin for no cycles (one thread)."""
        if not self.cuda:
            return None
        sleep = self.torch.cuda._sleep
        return lambda: sleep(0)

    def stream_handle(self):
        return int(self.torch.cuda.current_stream().cuda_stream) if self.cuda else None

    def timing_streams(self, n: int) -> int:
        handles = self._stream_hold().timing_streams(n) if self.cuda else []
        if not handles:
            return 1
        t = self.torch
        have = getattr(self, "_streams", [])
        if len(have) < len(handles):  # the same streams every time: torch's allocator keeps blocks per stream
            self._streams = [t.cuda.ExternalStream(h, device=t.cuda.current_device()) for h in handles]
        return len(handles)

    def use_stream(self, i: int) -> None:
        if i == 0 and not getattr(self, "_streams", None):
            return
        self.torch.cuda.set_stream(self._streams[i])

    def device_delay(self, us: float, sm_mhz: float | None = None):
        """torch.cuda._sleep(cycles), a spin kernel of that many SM clock cycles, sized by the
        maximum SM clock `sm_mhz` (at a lower clock the delay is that much longer)."""
        if not self.cuda:
            return None
        mhz = sm_mhz
        if not mhz:
            return None  # the clock that turns microseconds into cycles is unknown
        cycles = max(1, round(us * mhz))
        sleep = self.torch.cuda._sleep
        return (lambda: sleep(cycles)), f"torch.cuda._sleep({cycles}): {us:g} us at the {mhz:g} MHz maximum SM clock"

    @property
    def can_scrub(self) -> bool:
        return bool(self.cuda) and self._stream_hold().can_scrub

    def time_device(self, fn, inner, held=True, scrub=None):
        if self.device_clock != "device_events" or (not self.cuda and scrub is not None):
            return super().time_device(fn, inner, scrub=scrub)
        if not self.cuda:
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
        hold = self._stream_hold()
        stream = self.torch.cuda.current_stream()
        return hold.time_events(stream.cuda_stream, stream, *self._timing, fn, inner,
                                lambda a, b: a.elapsed_time(b), held=held, scrub=scrub)

    def time_device_each(self, fn, n, scrub=None):
        if not self.cuda or self.device_clock != "device_events":
            return super().time_device_each(fn, n, scrub=scrub)
        hold = self._stream_hold()
        stream = self.torch.cuda.current_stream()
        return hold.time_events_each(stream.cuda_stream, stream, *self._timing, fn, n,
                                     lambda a, b: a.elapsed_time(b), scrub=scrub)

    def _captured(self, fn, inner: int):
        """(a CUDA graph of `inner` calls of fn, the last call's output), warmed up first on a
        side stream, as capture requires."""
        t = self.torch
        side = t.cuda.Stream()
        side.wait_stream(t.cuda.current_stream())
        with t.cuda.stream(side):
            for _ in range(3):
                fn()
        t.cuda.current_stream().wait_stream(side)
        g = t.cuda.CUDAGraph()
        with t.cuda.graph(g):
            for _ in range(inner):
                out = fn()
        return g, out

    def graph(self, fn, inner):
        if not self.cuda:
            return None
        g, _ = self._captured(fn, inner)
        start, stop = self._event_pair()

        def replay() -> float:
            start.record()
            g.replay()
            stop.record()
            stop.synchronize()
            return start.elapsed_time(stop) * 1e-3

        return replay

    def capture(self, fn):
        g, out = self._captured(fn, 1)

        def replay():
            g.replay()  # on the current stream: held and timed as the eager op is
            return out
        return replay

    op_text = {"add": "torch.add(a, b, out=c), {n} fp32 element(s) on {device}"}

    def describe(self, op, **kw):
        return super().describe(op, device=self.device, **kw)

    def empty_like(self, x):
        return self.torch.empty_like(x)

    def add_into(self, a, b, out):
        return self.torch.add(a, b, out=out)

    def poison(self, x):
        return x.fill_(float("nan"))


def gpu_count() -> int:
    """CUDA devices torch can see (0 without torch or a GPU): one rank per GPU in multi-process runs."""
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0
