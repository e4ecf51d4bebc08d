"""The collective rungs of bench.dist, one adapter per engine; each knows its own library."""
from __future__ import annotations


def make(name: str):
    """The rung object of `name` (imports its library lazily)."""
    if name == "nccl":
        from gapbench.benchmarks.collectives.rungs.nccl import NcclRung
        return NcclRung()
    if name == "torch":
        from gapbench.benchmarks.collectives.rungs.torch_rung import TorchRung
        return TorchRung()
    if name == "cupy":
        from gapbench.benchmarks.collectives.rungs.cupy_rung import CupyRung
        return CupyRung()
    if name == "mlx":
        from gapbench.benchmarks.collectives.rungs.mlx_rung import MlxRung
        return MlxRung()
    raise ValueError(f"unknown collective rung {name!r}")
