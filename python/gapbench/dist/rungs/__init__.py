"""The collective rungs of bench.dist, one adapter per engine; each knows its own library."""
from __future__ import annotations


def make(name: str):
    """The rung object of `name` (imports its library lazily)."""
    if name == "nccl":
        from .nccl import NcclRung
        return NcclRung()
    if name == "torch":
        from .torch_rung import TorchRung
        return TorchRung()
    if name == "cupy":
        from .cupy_rung import CupyRung
        return CupyRung()
    if name == "mlx":
        from .mlx_rung import MlxRung
        return MlxRung()
    raise ValueError(f"unknown collective rung {name!r}")
