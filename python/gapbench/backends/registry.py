"""Every backend gapbench measures, whether it can run on this machine (and why not), and its
adapter. What each backend is (family, device, device class) is in gapbench.core.names.Backend;
how each is found and driven is in its family's module (native, torch, mlx, cupy)."""
from __future__ import annotations

from types import ModuleType

from gapbench.backends import cupy, mlx, native, torch
from gapbench.backends.base import Adapter, BackendInfo, unavailable
from gapbench.core.names import Backend, Family, UnknownName

_MODULES: dict[Family, ModuleType] = {Family.native: native, Family.torch: torch, Family.mlx: mlx, Family.cupy: cupy}
_cache: dict[Backend, BackendInfo] = {}


def module(backend: Backend) -> ModuleType:
    """The module of `backend`'s family: availability, memory, allocator and adapter."""
    backend = Backend(backend)
    if backend.is_plain:
        raise ValueError(f"{backend} is the plain-loop check, not a backend")
    return _MODULES[backend.family]


def info(backend: Backend, refresh: bool = False) -> BackendInfo:
    """Whether `backend` can run here (imports its framework: seconds, and a device context)."""
    backend = Backend(backend)  # a name from a file or a payload: the enum's own lookup
    if refresh or backend not in _cache:
        try:
            _cache[backend] = module(backend).info(backend)
        except Exception as e:  # a broken install must be a row with a reason, not a crash
            _cache[backend] = unavailable(backend, f"availability check raised {type(e).__name__}: {e}")
    return _cache[backend]


def precheck(backend: Backend) -> BackendInfo | None:
    """What can be known about `backend` without importing its framework (which costs seconds and,
    for CUDA frameworks, a device context): an unavailable BackendInfo where that is certain (not
    installed; MPS off macOS), None where only the real check can tell. Native backends are cheap
    and get info() itself."""
    backend = Backend(backend)
    if backend.is_native:
        return info(backend)
    return module(backend).precheck(backend)


def all_backends(refresh: bool = False) -> list[BackendInfo]:
    return [info(b, refresh) for b in Backend.selectable()]


def make_adapter(backend: Backend) -> Adapter:
    """The adapter of a framework backend (torch, mlx, cupy)."""
    if not backend.is_framework:
        raise ValueError(f"{backend} is not a framework backend")
    family = module(backend)
    cls = {Family.torch: "TorchAdapter", Family.mlx: "MLXAdapter", Family.cupy: "CupyAdapter"}[backend.family]
    return getattr(family, cls)(backend)


def parse_backend(text: str) -> Backend:
    """Backend.parse; the message points at --list for what runs here (finding that out imports the
    frameworks, seconds that a typo should not cost)."""
    try:
        return Backend.parse(text)
    except UnknownName as e:
        raise UnknownName("backend", e.name, e.choices, "--list shows which run on this machine") from None


def backend_list(text: str) -> list[Backend]:
    """argparse type of --backends: a comma list of backends, or `all` (every backend)."""
    from gapbench.core.names import parse_list

    if text.strip() in ("", "all"):
        return Backend.selectable()
    return parse_list(parse_backend)(text)


def list_backends(console) -> None:
    from rich.markup import escape
    from rich.table import Table

    t = Table(title="gapbench backends on this machine")
    for c in ("backend", "kind", "device class", "available", "device / reason"):
        t.add_column(c)
    for b in all_backends():
        t.add_row(b.name, b.kind, b.device_class.value, "yes" if b.available else "no",
                  escape(str(b.device.get("name", "")) if b.available else b.reason))
    console.print(t)
