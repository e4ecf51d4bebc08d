"""The collective rungs of bench.dist, one adapter per engine; each knows its own library."""
from __future__ import annotations

from gapbench.core.names import Rung


def make(name: str):
    """The rung object of `name` (imports its library lazily)."""
    if name == Rung.nccl:
        from gapbench.benchmarks.collectives.rungs.nccl import NcclRung
        return NcclRung()
    if name == Rung.torch:
        from gapbench.benchmarks.collectives.rungs.torch_rung import TorchRung
        return TorchRung()
    if name == Rung.cupy:
        from gapbench.benchmarks.collectives.rungs.cupy_rung import CupyRung
        return CupyRung()
    if name == Rung.mlx:
        from gapbench.benchmarks.collectives.rungs.mlx_rung import MlxRung
        return MlxRung()
    raise ValueError(f"unknown collective rung {name!r}")
