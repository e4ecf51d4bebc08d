"""What a training run does to the machine, over time: a background sampler of process memory
(RSS), page faults, the device allocator of the framework in use, NVML's view of the GPU (used
memory, SM clock, temperature, power), and the GPU energy counter (NVML on NVIDIA, IOReport on
Apple Silicon, read without sudo).

Nothing here is ever reported as zero when it could not be read: a field that is unavailable is
absent from the sample, and `Energy` says why it is unavailable."""
from __future__ import annotations

import os
import resource
import sys
import threading
import time
from typing import Any, Callable

from gapbench.core.names import Backend, DeviceClass

# ---------------------------------------------------------------------------- NVML


class NVML:
    """The NVML handle of this process's CUDA device `cuda_index` (gapbench.core.gpu maps it to the
    physical GPU: NVML numbers GPUs its own way and ignores CUDA_VISIBLE_DEVICES); `identity` names
    the GPU, `reason` says why there is no handle."""

    def __init__(self, cuda_index: int = 0):
        self.handle = None
        self.identity = None
        self.reason = ""
        try:
            import pynvml
        except ImportError:
            self.reason = "nvidia-ml-py is not installed (pip install 'gapbench[nvml]')"
            return
        from gapbench.core import gpu

        self.identity, why = gpu.identify(cuda_index, cuda_bus_id=cuda_bus_id(cuda_index))
        if self.identity is None:
            self.reason = f"NVML unavailable: {why}"
            return
        try:
            pynvml.nvmlInit()
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(self.identity.nvml_index)
        except Exception as e:  # no driver, no GPU
            self.reason = f"NVML unavailable: {e}"
            return
        self.nv = pynvml

    @property
    def ok(self) -> bool:
        return self.handle is not None

    def energy_mj(self) -> int | None:
        """Total energy since the driver loaded, in millijoules (Volta and newer)."""
        try:
            return int(self.nv.nvmlDeviceGetTotalEnergyConsumption(self.handle))
        except Exception:
            return None

    def sample(self) -> dict:
        out: dict[str, Any] = {}
        nv, h = self.nv, self.handle
        for key, fn in (("nvml_used_bytes", lambda: nv.nvmlDeviceGetMemoryInfo(h).used),
                        ("sm_clock_mhz", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
                        ("temp_c", lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
                        ("power_w", lambda: nv.nvmlDeviceGetPowerUsage(h) / 1000.0)):
            try:
                out[key] = fn()
            except Exception:
                pass
        return out

    def sm_clock_mhz(self) -> float | None:
        try:
            return float(self.nv.nvmlDeviceGetClockInfo(self.handle, self.nv.NVML_CLOCK_SM))
        except Exception:
            return None

    def max_sm_clock_mhz(self) -> float | None:
        try:
            return float(self.nv.nvmlDeviceGetMaxClockInfo(self.handle, self.nv.NVML_CLOCK_SM))
        except Exception:
            return None

    def throttle_reasons(self) -> list[str]:
        """Active clock-throttle reasons other than idle, as NVML names them."""
        try:
            mask = self.nv.nvmlDeviceGetCurrentClocksEventReasons(self.handle)
        except Exception:
            try:
                mask = self.nv.nvmlDeviceGetCurrentClocksThrottleReasons(self.handle)
            except Exception:
                return []
        names = {0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
                 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake"}
        return [n for bit, n in names.items() if mask & bit]

    def info(self) -> dict:
        try:
            return {"name": self.nv.nvmlDeviceGetName(self.handle),
                    "driver": self.nv.nvmlSystemGetDriverVersion(),
                    "memory_total_bytes": int(self.nv.nvmlDeviceGetMemoryInfo(self.handle).total),
                    "power_limit_w": self.nv.nvmlDeviceGetPowerManagementLimit(self.handle) / 1000.0}
        except Exception as e:
            return {"error": str(e)}


def cuda_bus_id(cuda_index: int = 0) -> str | None:
    """The PCI bus id CUDA gives its device `cuda_index` in this process (the native part's
    cudaDeviceGetPCIBusId), or None where the native CUDA part is not built or has no device."""
    from gapbench.core.native import load

    try:
        cuda = load().cuda
        return (cuda.status(cuda_index).get("pci_bus_id") or None) if getattr(cuda, "built", False) else None
    except Exception:
        return None


def clock_watch(cuda_index: int = 0):
    """A gapbench.core.measure.ClockWatch over NVML's SM clock of this process's CUDA device
    `cuda_index`, or (None, why not)."""
    from gapbench.core.measure import ClockWatch

    nv = NVML(cuda_index)
    if not nv.ok:
        return None, nv.reason
    top = nv.max_sm_clock_mhz()
    if not top:
        return None, "NVML gives no maximum SM clock"
    return ClockWatch(nv.sm_clock_mhz, top, throttle=nv.throttle_reasons), ""


def event_pair_seconds(adapter, samples: int = 200) -> float | None:
    """The device time of an empty CUDA event pair: two events recorded back to back on the
    framework adapter's stream behind the release gate (the same hold the framework rows are timed
    under), so the host's gap between the two records is not in it; the median over `samples`.
    The floor under every event-timed sample. None where the adapter cannot time on a device."""
    try:
        vals = sorted(adapter.time_device(lambda: None, 1) for _ in range(samples))
        return vals[len(vals) // 2]
    except Exception:
        return None


# ---------------------------------------------------------------------------- IOReport (macOS)


class IOReportEnergy:
    """GPU energy on Apple Silicon from IOReport's "Energy Model" group (the counters powermetrics
    reads), through ctypes on libIOReport and CoreFoundation; no sudo needed.
    Written from Apple's private-but-stable IOReport C API; it has not run on a Mac yet."""

    def __init__(self):
        self.reason = ""
        self._sub = None
        if sys.platform != "darwin":
            self.reason = "IOReport exists on macOS only"
            return
        try:
            self._open()
        except Exception as e:
            self.reason = f"IOReport unavailable: {e}"
            self._sub = None

    def _open(self):
        import ctypes as C
        import ctypes.util

        cf = C.CDLL(ctypes.util.find_library("CoreFoundation"))
        io = C.CDLL("/usr/lib/libIOReport.dylib")
        vp = C.c_void_p
        for name, res, args in (
            ("CFStringCreateWithCString", vp, [vp, C.c_char_p, C.c_uint32]),
            ("CFStringGetCString", C.c_bool, [vp, C.c_char_p, C.c_long, C.c_uint32]),
            ("CFDictionaryGetValue", vp, [vp, vp]),
            ("CFArrayGetCount", C.c_long, [vp]),
            ("CFArrayGetValueAtIndex", vp, [vp, C.c_long]),
            ("CFRelease", None, [vp]),
        ):
            f = getattr(cf, name)
            f.restype, f.argtypes = res, args
        for name, res, args in (
            ("IOReportCopyChannelsInGroup", vp, [vp, vp, C.c_uint64, C.c_uint64, C.c_uint64]),
            ("IOReportCreateSubscription", vp, [vp, vp, C.POINTER(vp), C.c_uint64, vp]),
            ("IOReportCreateSamples", vp, [vp, vp, vp]),
            ("IOReportCreateSamplesDelta", vp, [vp, vp, vp]),
            ("IOReportChannelGetChannelName", vp, [vp]),
            ("IOReportChannelGetUnitLabel", vp, [vp]),
            ("IOReportSimpleGetIntegerValue", C.c_int64, [vp, C.POINTER(C.c_int32)]),
        ):
            f = getattr(io, name)
            f.restype, f.argtypes = res, args
        self.C, self.cf, self.io = C, cf, io
        utf8 = 0x08000100
        self._cfstr = lambda s: cf.CFStringCreateWithCString(None, s.encode(), utf8)
        self._chans = io.IOReportCopyChannelsInGroup(self._cfstr("Energy Model"), None, 0, 0, 0)
        if not self._chans:
            raise RuntimeError("no 'Energy Model' channels")
        subbed = vp()
        self._sub = io.IOReportCreateSubscription(None, self._chans, C.byref(subbed), 0, None)
        if not self._sub:
            raise RuntimeError("IOReportCreateSubscription failed")
        self._subbed = subbed
        self._key = self._cfstr("IOReportChannels")

    def _str(self, ref) -> str:
        if not ref:
            return ""
        buf = self.C.create_string_buffer(256)
        return buf.value.decode() if self.cf.CFStringGetCString(ref, buf, 256, 0x08000100) else ""

    @property
    def ok(self) -> bool:
        return self._sub is not None

    def snapshot(self):
        return self.io.IOReportCreateSamples(self._sub, self._subbed, None)

    def joules_between(self, a, b) -> float | None:
        """GPU energy between two snapshots: the "GPU Energy" channel(s), scaled by their unit."""
        delta = self.io.IOReportCreateSamplesDelta(a, b, None)
        try:
            arr = self.cf.CFDictionaryGetValue(delta, self._key)
            total, seen = 0.0, False
            scale = {"mJ": 1e-3, "uJ": 1e-6, "nJ": 1e-9}
            for i in range(self.cf.CFArrayGetCount(arr)):
                ch = self.cf.CFArrayGetValueAtIndex(arr, i)
                if self._str(self.io.IOReportChannelGetChannelName(ch)).startswith("GPU Energy"):
                    unit = self._str(self.io.IOReportChannelGetUnitLabel(ch)).strip()
                    total += self.io.IOReportSimpleGetIntegerValue(ch, None) * scale.get(unit, 1e-3)
                    seen = True
            return total if seen else None
        finally:
            for ref in (delta, a, b):
                if ref:
                    self.cf.CFRelease(ref)


class Energy:
    """GPU energy over a window: start() and stop() around whole steps. `result(steps)` gives
    joules per step, or the reason it is unavailable (never zero for "unknown")."""

    #: NVML's counter is updated every few tens of ms; windows shorter than this are refused.
    MIN_WINDOW_S = 1.0

    def __init__(self, device_class: DeviceClass, nvml: NVML | None = None):
        self.kind, self.reason = None, ""
        if device_class is DeviceClass.cuda:
            self.nvml = nvml or NVML()
            if self.nvml.ok and self.nvml.energy_mj() is not None:
                self.kind = "nvml"
            else:
                self.reason = self.nvml.reason or "this GPU has no NVML total-energy counter"
        elif device_class is DeviceClass.metal:
            self.ior = IOReportEnergy()
            if self.ior.ok:
                self.kind = "ioreport"
            else:
                self.reason = self.ior.reason
        else:
            self.reason = "no GPU energy counter for CPU backends"
        self._a = self._t0 = None
        self._dt = None
        self._j = None

    def start(self) -> None:
        self._t0 = time.perf_counter()
        self._a = self.nvml.energy_mj() if self.kind == "nvml" else (self.ior.snapshot() if self.kind == "ioreport" else None)

    def stop(self) -> None:
        self._dt = time.perf_counter() - self._t0
        if self.kind == "nvml":
            b = self.nvml.energy_mj()
            self._j = (b - self._a) / 1000.0 if b is not None and self._a is not None else None
        elif self.kind == "ioreport":
            self._j = self.ior.joules_between(self._a, self.ior.snapshot())

    def result(self, steps: int) -> dict:
        if self.kind is None:
            return {"status": "unavailable", "reason": self.reason}
        if self._dt is None:
            return {"status": "unavailable", "reason": "energy window was not measured"}
        if self._dt < self.MIN_WINDOW_S:
            return {"status": "unavailable", "window_s": self._dt,
                    "reason": f"window {self._dt:.3f} s is shorter than {self.MIN_WINDOW_S} s; the counter "
                              "may not have updated (run more steps)"}
        if self._j is None:
            return {"status": "unavailable", "reason": f"{self.kind} counter could not be read"}
        return {"status": "ok", "source": self.kind, "joules": self._j, "window_s": self._dt, "steps": steps,
                "joules_per_step": self._j / steps, "mean_power_w": self._j / self._dt}


# ---------------------------------------------------------------------------- sampler


def allocator_probe(backend: Backend) -> Callable[[], dict]:
    """A function returning the framework allocator's figures for `backend`, in bytes."""
    from gapbench.backends import registry

    return registry.module(backend).allocator_probe(backend)


class Sampler:
    """Samples process and device memory every `interval_s` on a daemon thread, plus named
    marks (step boundaries) from the caller. Page faults are the process's minor and major
    faults from getrusage (cumulative, since process start)."""

    def __init__(self, backend: str, interval_s: float = 0.1, nvml: NVML | None = None):
        import psutil

        self.proc = psutil.Process(os.getpid())
        self.interval_s = interval_s
        self.alloc = allocator_probe(backend)
        self.nvml = nvml if (nvml is not None and nvml.ok) else None
        self.samples: list[dict] = []
        self.marks: list[tuple[float, str]] = []
        self._stop = threading.Event()
        self._paused = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = time.perf_counter()

    def sample(self) -> dict:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        s = {"t": time.perf_counter() - self._t0, "rss_bytes": self.proc.memory_info().rss,
             "minor_faults": ru.ru_minflt, "major_faults": ru.ru_majflt}
        try:
            s.update(self.alloc())
        except Exception:
            pass
        if self.nvml:
            s.update(self.nvml.sample())
        return s

    def mark(self, label: str) -> None:
        self.marks.append((time.perf_counter() - self._t0, label))

    def pause(self) -> None:
        """Stop sampling (the thread sleeps) until resume(): to time steps without the sampler."""
        self._paused.set()
        self.mark("sampler paused")

    def resume(self) -> None:
        self._paused.clear()
        self.mark("sampler resumed")

    def _loop(self):
        while not self._stop.wait(self.interval_s):
            if not self._paused.is_set():
                self.samples.append(self.sample())

    def __enter__(self):
        self.samples.append(self.sample())
        self._thread = threading.Thread(target=self._loop, name="gapbench-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread:
            self._thread.join()
        self.samples.append(self.sample())
        return False

    def timeline(self) -> dict:
        """Columns: every field over time (a field missing in a sample is None there)."""
        keys = list(dict.fromkeys(k for s in self.samples for k in s))
        return {"interval_s": self.interval_s, "columns": {k: [s.get(k) for s in self.samples] for k in keys},
                "marks": [list(m) for m in self.marks]}
