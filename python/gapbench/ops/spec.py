"""What a BLAS probe declares: its shapes, inputs, float64 reference, work (flops, bytes), the
native op (a gapbench._native.Op member name), and how each framework runs it. probes/copy.py,
probes/gemv.py, probes/vjp.py and probes/gemm.py are instances; probes/blas.py runs them."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from gapbench.core import hostpar
from gapbench.core.dtypes import ITEMSIZE, check

Shape = dict  # keys among batch, m, n, k


@dataclass(frozen=True)
class OpSpec:
    name: str
    native_op: str  # the gapbench._native.Op member that runs it natively (gapbench.core.native.op)
    shapes: Callable[[bool], list[Shape]]  # quick -> shapes
    inputs: Callable[[Shape, np.random.Generator], list[np.ndarray]]  # float32, unrounded
    reference: Callable[[list[np.ndarray]], np.ndarray]  # float64 inputs -> float64 output
    elements: Callable[[Shape], tuple[int, int]]  # (elements read, elements written)
    flops: Callable[[Shape], float]
    framework: Callable[[Any, list], Callable[[], Any]]  # (adapter, arrays) -> op
    framework_text: dict[str, str]  # adapter family -> how the op reads in that framework
    memory_bound: bool = True
    #: terms summed per output (0: a copy, which must be exact); sets the check's error bound
    reduction: Callable[[Shape], int] = lambda s: 0

    def check(self, out, ref, dtype: str) -> tuple[bool, str]:
        """The op's output against its float64 reference (gapbench.core.dtypes.check)."""
        return check(out, ref, dtype)

    def work(self, shape: Shape, dtype: str) -> dict:
        r, w = self.elements(shape)
        return {"flops": float(self.flops(shape)), "bytes": float((r + w) * ITEMSIZE[dtype])}


def shape_text(shape: Shape) -> str:
    if "batch" in shape:
        return f"{shape['batch']}x{shape['m']}x{shape['n']}x{shape['k']}"
    if "n" in shape and "m" not in shape:
        return f"n={shape['n']}"
    return f"{shape['m']}x{shape['k']}"


def native_dims(shape: Shape) -> tuple[int, int, int, int]:
    return (shape.get("batch", 1), shape.get("m", 1), shape.get("n", 1), shape.get("k", 1))


def uniform(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """float32 inputs uniform in [-1, 1): symmetric around zero, never all zeros (a result on zeros
    proves nothing); drawn on the host's cores (gapbench.core.hostpar.uniform)."""
    return hostpar.uniform(rng, tuple(shape))
