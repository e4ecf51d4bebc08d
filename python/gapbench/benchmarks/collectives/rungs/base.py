"""What every collective rung provides, and what it is given (the rank's context)."""
from __future__ import annotations

import abc
import socket
from dataclasses import dataclass, field

from gapbench.benchmarks.collectives.config import DistConfig


class Unavailable(RuntimeError):
    """The rung cannot run here (library absent, no GPU, ...): one row saying why."""


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
