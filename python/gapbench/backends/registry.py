"""The backends gapbench measures, and whether each is usable on this machine (and why not).

Native backends are gapbench's own probes (gapbench._native); framework backends are the
libraries users train with. Each backend has a device class (cpu, cuda, metal) that says
which native backend is its raw floor in comparisons."""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Callable

from gapbench.core.native import load as load_native

NATIVE = ("native-cpu", "native-cuda", "native-metal")
FRAMEWORKS = ("torch-cpu", "torch-cuda", "torch-mps", "mlx-cpu", "mlx-gpu", "cupy")
ALL = NATIVE + FRAMEWORKS

FLOOR_OF_CLASS = {"cpu": "native-cpu", "cuda": "native-cuda", "metal": "native-metal"}


@dataclass(frozen=True)
class Backend:
    """A backend name taken apart, in this one place: `family` (native, torch, mlx, cupy, plain,
    or "" for a name this version does not know), `device` (cpu, cuda, mps, metal, gpu) and the
    import that the family needs (`module`)."""
    name: str
    family: str
    device: str

    @property
    def is_native(self) -> bool:
        return self.family == "native"

    @property
    def is_framework(self) -> bool:
        return self.family in ("torch", "mlx", "cupy")

    @property
    def module(self) -> str:
        """The Python module a fresh process imports to use this backend ("" for native)."""
        return {"torch": "torch", "mlx": "mlx.core", "cupy": "cupy", "native": "gapbench._native"}.get(self.family, "")

    @property
    def classes(self) -> tuple[str, ...]:
        """The device classes this backend can run on (mlx-gpu: cuda on Linux, metal on a Mac);
        for reading result files of other machines, where this machine's availability says nothing."""
        if self.family == "cupy":
            return ("cuda",)
        return {"cpu": ("cpu",), "cuda": ("cuda",), "mps": ("metal",), "metal": ("metal",),
                "gpu": ("cuda", "metal")}.get(self.device, ())

    @property
    def synchronous(self) -> bool:
        """Whether an op returns only once it is done (no device queue: CPU frameworks that run eagerly)."""
        return self.family == "torch" and self.device == "cpu"


def parse(name: str) -> Backend:
    """The only place backend names are split: "torch-cuda" -> Backend(torch, cuda), "cupy" ->
    Backend(cupy, cuda). Unknown names parse to family "" (result files from other versions)."""
    if name == "cupy":
        return Backend(name, "cupy", "cuda")
    fam, _, dev = name.partition("-")
    if fam in ("native", "torch", "mlx", "plain") and dev:
        return Backend(name, fam, dev)
    return Backend(name, "", "")


@dataclass(frozen=True)
class BackendInfo:
    name: str
    kind: str  # "native" or "framework"
    device_class: str  # "cpu", "cuda" or "metal"
    available: bool
    reason: str = ""  # why not, when unavailable
    device: dict[str, Any] = field(default_factory=dict)

    @property
    def parsed(self) -> Backend:
        return parse(self.name)

    @property
    def floor(self) -> str:
        """The native backend whose numbers are this backend's raw floor."""
        return FLOOR_OF_CLASS[self.device_class]


def _mlx_gpu_class() -> str:
    return "metal" if sys.platform == "darwin" else "cuda"


def _native_cpu() -> BackendInfo:
    try:
        n = load_native()
    except RuntimeError as e:
        return BackendInfo("native-cpu", "native", "cpu", False, str(e))
    from gapbench.core.env import cpu_model

    return BackendInfo("native-cpu", "native", "cpu", True, device={"name": cpu_model(), "build": dict(n.build_info)})


def _native_cuda() -> BackendInfo:
    try:
        st = dict(load_native().cuda.status(0))
    except RuntimeError as e:
        return BackendInfo("native-cuda", "native", "cuda", False, str(e))
    if not st.get("available"):
        return BackendInfo("native-cuda", "native", "cuda", False, st.get("reason", "unavailable"), device=st)
    dv = st.get("driver_version", 0)
    st["driver"] = f"CUDA {dv // 1000}.{(dv % 1000) // 10}"
    return BackendInfo("native-cuda", "native", "cuda", True, device=st)


def _native_metal() -> BackendInfo:
    try:
        st = dict(load_native().metal.status())
    except RuntimeError as e:
        return BackendInfo("native-metal", "native", "metal", False, str(e))
    if not st.get("available"):
        return BackendInfo("native-metal", "native", "metal", False, st.get("reason", "unavailable"), device=st)
    return BackendInfo("native-metal", "native", "metal", True, device=st)


def _torch(device: str) -> BackendInfo:
    name = f"torch-{device}"
    cls = {"cpu": "cpu", "cuda": "cuda", "mps": "metal"}[device]
    try:
        import torch
    except ImportError as e:
        return BackendInfo(name, "framework", cls, False, f"torch not installed ({e}); pip install 'gapbench[torch]'")
    info: dict[str, Any] = {"torch": torch.__version__}
    if device == "cpu":
        from gapbench.core.env import cpu_model

        info.update(name=cpu_model(), threads=torch.get_num_threads())
        return BackendInfo(name, "framework", cls, True, device=info)
    if device == "cuda":
        if torch.version.cuda is None:
            return BackendInfo(name, "framework", cls, False, f"this torch ({torch.__version__}) is built without CUDA", info)
        try:
            ok = torch.cuda.is_available()
        except Exception as e:  # driver problems surface as exceptions on some versions
            return BackendInfo(name, "framework", cls, False, f"torch.cuda failed: {e}", info)
        if not ok:
            return BackendInfo(name, "framework", cls, False, "torch sees no CUDA device (no GPU or no driver)", info)
        info.update(name=torch.cuda.get_device_name(0), cuda=torch.version.cuda)
        return BackendInfo(name, "framework", cls, True, device=info)
    # mps
    if not torch.backends.mps.is_built():
        return BackendInfo(name, "framework", cls, False, "this torch is built without MPS (MPS needs macOS)", info)
    if not torch.backends.mps.is_available():
        return BackendInfo(name, "framework", cls, False, "MPS not available (needs macOS 12.3+ on Apple Silicon)", info)
    info["name"] = "Apple GPU (MPS)"
    return BackendInfo(name, "framework", cls, True, device=info)


def _mlx(device: str) -> BackendInfo:
    name = f"mlx-{device}"
    cls = "cpu" if device == "cpu" else _mlx_gpu_class()
    try:
        import mlx.core as mx
    except ImportError as e:
        hint = "pip install mlx" if sys.platform == "darwin" else "pip install 'mlx[cpu]' (or 'mlx[cuda13]' on NVIDIA)"
        return BackendInfo(name, "framework", cls, False, f"mlx not installed or has no backend ({e}); {hint}")
    info: dict[str, Any] = {"mlx": getattr(mx, "__version__", "?")}
    dev = mx.cpu if device == "cpu" else mx.gpu
    try:
        ok = mx.is_available(dev)
    except Exception as e:
        return BackendInfo(name, "framework", cls, False, f"mlx device query failed: {e}", info)
    if not ok:
        why = ("mlx has no GPU backend here: install 'mlx[cuda13]' on NVIDIA Linux, plain mlx on macOS"
               if device == "gpu" else "mlx CPU backend missing: install 'mlx[cpu]'")
        return BackendInfo(name, "framework", cls, False, why, info)
    try:
        di = mx.device_info() if device == "gpu" and hasattr(mx, "device_info") else {}
        info["name"] = str(di.get("device_name", "")) or ("cpu" if device == "cpu" else cls)
    except Exception:
        info["name"] = cls
    return BackendInfo(name, "framework", cls, True, device=info)


def _cupy() -> BackendInfo:
    try:
        import cupy
    except ImportError as e:
        return BackendInfo("cupy", "framework", "cuda", False, f"cupy not installed ({e}); pip install 'gapbench[cupy]'")
    info: dict[str, Any] = {"cupy": cupy.__version__}
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:
        return BackendInfo("cupy", "framework", "cuda", False, f"cupy sees no CUDA device ({e})", info)
    if n < 1:
        return BackendInfo("cupy", "framework", "cuda", False, "cupy sees no CUDA device", info)
    props = cupy.cuda.runtime.getDeviceProperties(0)
    info["name"] = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return BackendInfo("cupy", "framework", "cuda", True, device=info)


_PROBES: dict[str, Callable[[], BackendInfo]] = {
    "native-cpu": _native_cpu,
    "native-cuda": _native_cuda,
    "native-metal": _native_metal,
    "torch-cpu": lambda: _torch("cpu"),
    "torch-cuda": lambda: _torch("cuda"),
    "torch-mps": lambda: _torch("mps"),
    "mlx-cpu": lambda: _mlx("cpu"),
    "mlx-gpu": lambda: _mlx("gpu"),
    "cupy": _cupy,
}
_cache: dict[str, BackendInfo] = {}


def info(name: str, refresh: bool = False) -> BackendInfo:
    if name not in _PROBES:
        raise UnknownBackendError(name)
    if refresh or name not in _cache:
        try:
            _cache[name] = _PROBES[name]()
        except Exception as e:  # a broken install must be a row with a reason, not a crash
            b = parse(name)
            cls = {"cpu": "cpu", "mps": "metal", "metal": "metal"}.get(b.device, "cuda")
            _cache[name] = BackendInfo(name, "native" if b.is_native else "framework",
                                       cls, False, f"availability check raised {type(e).__name__}: {e}")
    return _cache[name]


def _not_installed(name: str, module: str) -> BackendInfo | None:
    """An unavailable BackendInfo with info()'s text when `module`'s top package is not installed."""
    import importlib.util

    top = module.partition(".")[0]
    try:
        if importlib.util.find_spec(top) is not None:
            return None
    except (ImportError, ValueError):  # a broken or half-removed install: only the real check can tell
        return None
    b = parse(name)
    err = f"No module named '{top}'"
    if b.family == "torch":
        cls = {"cpu": "cpu", "cuda": "cuda", "mps": "metal"}[b.device]
        return BackendInfo(name, "framework", cls, False, f"torch not installed ({err}); pip install 'gapbench[torch]'")
    if b.family == "mlx":
        cls = "cpu" if b.device == "cpu" else _mlx_gpu_class()
        hint = "pip install mlx" if sys.platform == "darwin" else "pip install 'mlx[cpu]' (or 'mlx[cuda13]' on NVIDIA)"
        return BackendInfo(name, "framework", cls, False, f"mlx not installed or has no backend ({err}); {hint}")
    return BackendInfo(name, "framework", "cuda", False, f"cupy not installed ({err}); pip install 'gapbench[cupy]'")


def precheck(name: str) -> BackendInfo | None:
    """What can be known about `name`'s availability without importing its framework (which costs
    seconds and, for CUDA frameworks, a device context): an unavailable BackendInfo with info()'s
    reason where that is certain (the module is not installed; MPS and Metal off macOS), None where
    only the real check (info(), in the process that imports the framework) can tell. Native
    backends are cheap to check and get info() itself."""
    if name not in _PROBES:
        raise UnknownBackendError(name)
    b = parse(name)
    if b.is_native:
        return info(name)
    missing = _not_installed(name, b.module)
    if missing is not None:
        return missing
    if name == "torch-mps" and sys.platform != "darwin":
        from importlib import metadata

        try:
            dev = {"torch": metadata.version("torch")}
        except metadata.PackageNotFoundError:
            dev = {}
        return BackendInfo(name, "framework", "metal", False, "this torch is built without MPS (MPS needs macOS)", dev)
    return None


def device_class_of(name: str) -> str:
    """Device class of any backend name in a result file, including the plain-loop checks
    (plain-cuda) and names this version does not know (\"unknown\")."""
    if name in _PROBES:
        return info(name).device_class
    b = parse(name)
    if b.family == "plain":
        return b.device
    return "unknown"


def all_backends(refresh: bool = False) -> list[BackendInfo]:
    return [info(n, refresh) for n in ALL]


class UnknownBackendError(ValueError):
    def __init__(self, name: str):
        avail = [b.name for b in all_backends() if b.available]
        super().__init__(
            f"unknown backend {name!r}. Known backends: {', '.join(ALL)}. "
            f"Available on this machine: {', '.join(avail) or 'none'}.")


def resolve(spec: str | None) -> list[str]:
    """Backends named by a comma list ("all" or None: every known backend). Unknown names raise
    UnknownBackendError listing the known and available ones; unavailable names are kept, so
    the caller reports them as rows that say why."""
    if spec is None or spec.strip() in ("", "all"):
        return list(ALL)
    names = [s.strip() for s in spec.split(",") if s.strip()]
    for n in names:
        if n not in _PROBES:
            raise UnknownBackendError(n)
    return list(dict.fromkeys(names))
