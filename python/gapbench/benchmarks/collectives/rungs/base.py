"""What every collective rung provides, and what it is given (the rank's context)."""
from __future__ import annotations

import abc
import importlib
import socket
from dataclasses import dataclass, field

from gapbench.benchmarks.collectives.config import DistConfig
from gapbench.core.names import Rung as Engine


class Unavailable(RuntimeError):
    """The rung cannot run here (library absent, no GPU, ...): one row saying why."""


def _adapter(rung: str):
    """The backend adapter module of a framework rung (gapbench.backends.torch, .cupy, .mlx: each
    knows its package and how to install it), or None for the rungs gapbench brings itself (p2p,
    nccl). Importing it does not import the framework."""
    if rung not in (Engine.torch, Engine.cupy, Engine.mlx):
        return None
    return importlib.import_module(f"gapbench.backends.{Engine(rung).value}")


def package(rung: str) -> str | None:
    """The package a framework rung imports (its adapter's MODULE, top level), or None."""
    adapter = _adapter(rung)
    return adapter.MODULE.split(".")[0] if adapter is not None else None


def install_hint(rung: str) -> str:
    """How to install `rung`'s package: its backend adapter's own words."""
    adapter = _adapter(rung)
    return adapter.install_hint() if callable(getattr(adapter, "install_hint", None)) else adapter.INSTALL


def not_installed(rung: str, error: object) -> str:
    """The row's reason when `rung`'s package cannot be imported (`error`: the ImportError, or the
    message it would give)."""
    return f"{Engine(rung).value} is not installed ({error}); {install_hint(rung)}"


def absent(rung: str) -> str | None:
    """Why `rung` cannot run here because its package is not installed (not_installed's reason), or
    None: found without importing it, so a run can say so before starting its ranks (MLX's own group
    of rank processes took 3.3 s on an H200 to say it). A broken install passes: only its import in
    the rank can tell what is wrong."""
    from gapbench.backends.base import installed

    pkg = package(rung)
    if pkg is None or installed(pkg):
        return None
    return not_installed(rung, f"No module named '{pkg}'")


@dataclass
class RankContext:
    rank: int
    world: int
    local_rank: int
    cfg: DistConfig
    host: str = field(default_factory=socket.gethostname)
    control: object = None  # a torch.distributed gloo group for metadata (None under MLX)

    @property
    def cuda(self) -> bool:
        return self.cfg.device == "cuda"


class Rung(abc.ABC):
    """A collective engine. Methods raise on failure; `check` returns (ok, detail)."""

    name = ""
    #: placements the engine's API has per op ("auto" picks the first)
    natural: dict[str, tuple[str, ...]] = {}

    @abc.abstractmethod
    def setup(self, ctx: RankContext) -> None:
        """Join the ranks (raise Unavailable when the engine cannot run here)."""

    def info(self) -> dict:
        return {}

    def not_applicable(self, op: str, placement: str, world: int) -> str | None:
        return None

    def placements(self, op: str, requested: list[str]) -> list[str]:
        nat = self.natural.get(op, ("out", "in"))
        out = []
        for p in requested:
            for q in (nat if p == "auto" else (p,)):
                if q not in out:
                    out.append(q)
        return out

    @abc.abstractmethod
    def check(self, op, dtype, count, inplace, root) -> tuple[bool, str]:
        """Poison, fill, run once, compare with the expected values."""

    @abc.abstractmethod
    def time(self, op, dtype, count, inplace, root, iters, samples, warmup) -> list[float]:
        """Host-timed samples of `iters` ops, a barrier before each."""

    @abc.abstractmethod
    def verify_last(self, op, dtype, count, inplace, root) -> tuple[bool, str]:
        """Check the output of the last timed run (or rerun the check where the op is not idempotent)."""

    def close(self) -> None:
        pass


def idempotent(op: str, inplace: bool) -> bool:
    """Whether the output after repeated runs is still the expected one (in-place reductions
    keep summing their own output)."""
    return not (inplace and op in ("all_reduce", "reduce_scatter"))
