"""What an op declares on the Python side (its native side is csrc/ops.def and its kernels): the
shapes it is timed at, its inputs, its float64 reference and error model, its work, and how each
framework runs it. One module per op in this folder holds one `SPEC`; gapbench.ops finds it by the
op's name, so a new op needs no other Python edit. Benchmarks and tests read only these fields:
nothing outside an op's module knows what the op computes."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Sequence

import numpy as np

from gapbench.core import dtypes, hostpar, opdecl
from gapbench.core.names import Data, DType, Family, Precision

Shape = dict  # dims of the op's form (n; m, k; batch, m, n, k) -> int
Arrays = Sequence[np.ndarray]


class Bound(str, Enum):
    """The ceiling a rate is held against: the measured copy bandwidth, or the vendor GEMM's rate."""
    memory = "memory"
    compute = "compute"


@dataclass(frozen=True)
class FrameworkImpl:
    """One way a framework runs the op: `build(adapter, arrays)` returns the op as a callable (its
    result left unevaluated on lazy frameworks); `text` is how it reads in the framework's words;
    `variant` names its rows (default: the family, e.g. "torch"; e.g. "torch-unfused" for a
    composite of several framework ops)."""
    family: Family
    text: str
    build: Callable[[Any, list], Callable[[], Any]]
    variant: str = ""
    #: the arm the case's other rows are paired against where no vendor row runs (a user's case)
    baseline: bool = False
    #: the device classes it runs on (None: every one of its framework; a Triton kernel: cuda)
    devices: tuple | None = None

    @property
    def row(self) -> str:
        return self.variant or self.family.value


@dataclass(frozen=True, eq=False)  # one object per op: compared and hashed by identity
class OpSpec:
    name: str
    #: the dims of a shape, in order: ("n",), ("m", "k") or ("batch", "m", "n", "k")
    form: tuple[str, ...]
    #: quick -> the shapes of the default sweep
    shapes: Callable[[bool], list[Shape]]
    #: (shape, source) -> float32 inputs, unrounded, in the native buffers' order (ops.spec.draw)
    inputs: Callable[[Shape, Source], list[np.ndarray]]
    #: float64 inputs -> float64 output
    reference: Callable[[Arrays], np.ndarray]
    #: terms summed per output (0: a copy, which must be exact); sets the check's error bound
    reduction: Callable[[Shape], int]
    flops: Callable[[Shape], float]
    #: (elements read, elements written) per op
    elements: Callable[[Shape], tuple[int, int]]
    frameworks: tuple[FrameworkImpl, ...]
    #: the ceiling its rate is held against
    bound: Bound = Bound.memory
    #: this op's best rate in a run IS that run's ceiling of this kind (copy: memory; gemm: compute)
    ceiling: Bound | None = None
    #: a name (--ops) that selects this op together with others of its group (vjp: dx and dW)
    group: str | None = None
    #: fp32: the vendor library's TF32 path is a row too (GEMM)
    tf32_row: bool = False
    #: ragged shapes every kernel is checked on (tests), small enough for a CPU reference
    test_shapes: tuple[Shape, ...] = ()
    #: the shape of the injected-fault test: large enough that each fault shows in every dtype
    fault_shape: Shape = field(default_factory=dict)
    #: (float64 inputs, j) -> the j-th term of every output (a multilinear op's reduction)
    term: Callable[[Arrays, int], np.ndarray] | None = None
    #: (float64 inputs, j) -> the output with term j of the reduction left out (a kernel bug); by
    #: default reference - term
    dropped: Callable[[Arrays, int], np.ndarray] | None = None
    #: (inputs, float64 values, k) -> the magnitude each output's error is proportional to (inputs:
    #: float64 copies, or the float32 inputs themselves where the op has values64);
    #: by default the op on |inputs| (dtypes.magnitude): right for multilinear ops
    scale: Callable[[Arrays, np.ndarray, int], np.ndarray] | None = None
    #: a stated error model instead of the reduction's: dtype -> (rtol, atol), |out - ref| <= atol +
    #: rtol |ref| per output (a user's case whose rounding is not a sum of products)
    tolerance: dict | None = None
    #: the dtypes the op runs in (None: every one the run asks for)
    dtypes: tuple | None = None
    #: (float32 inputs) -> `reference` of them in float64, computed block by block on the host's
    #: cores without a float64 copy of each input (gapbench.core.hostpar: matvec64, outer64, by_rows);
    #: the same values up to the order of float64 sums. None: `reference` on float64 copies
    values64: Callable[[Arrays], np.ndarray] | None = None
    #: an fp32 framework row that fails the fp32 bound but meets TF32's is timed as `<row>@tf32` (a
    #: framework's matmul on TF32 tensor cores); a user's case states its contract: off
    tf32_fallback: bool = True

    # ---- derived: the same for every op
    def work(self, shape: Shape, dtype: DType) -> dict:
        r, w = self.elements(shape)
        return {"flops": float(self.flops(shape)), "bytes": float((r + w) * DType(dtype).itemsize)}

    def shape_text(self, shape: Shape) -> str:
        return shape_text(shape)

    def fits(self, shape: Shape) -> bool:
        return tuple(shape) == self.form

    def shared_scale(self, inputs: Arrays, shape: Shape, dts: Sequence[DType]) -> dtypes.SharedScale | None:
        """The magnitude that bounds the error model of every dtype in `dts`, computed once per shape
        from the unrounded inputs (dtypes.SharedScale), where the op's generic model applies (a
        reduction of k > 1 terms, no stated tolerance or own scale); else None."""
        if self.tolerance is not None or self.scale is not None:
            return None
        return dtypes.shared_scale(self.reference, list(inputs), int(self.reduction(shape)), dts)

    def expected(self, rounded: Arrays, shape: Shape, scale: tuple | None = None) -> dtypes.Expected:
        """The float64 result of the op on the inputs as rounded to the dtype, with its error model.
        `scale`: shared_scale(...).for_dtype(dtype), instead of this dtype's own magnitude."""
        if self.tolerance is not None:
            values = np.asarray(self.reference([np.asarray(a, dtype=np.float64) for a in rounded]), dtype=np.float64)
            return dtypes.Stated(values, None, 1, tolerance=self.tolerance)
        k = int(self.reduction(shape))
        if self.scale is None or k <= 0:
            return dtypes.expected(self.reference, list(rounded), k, scale=scale, values64=self.values64)
        if self.values64 is not None:  # the inputs as they are (float32 holds the rounded values exactly)
            ins = list(rounded)
            values = np.asarray(self.values64(ins), dtype=np.float64)
        else:
            ins = [np.asarray(a, dtype=np.float64) for a in rounded]
            values = np.asarray(self.reference(ins), dtype=np.float64)
        return dtypes.Expected(values, np.asarray(self.scale(ins, values, k), dtype=np.float64), k)

    def check(self, out, expected: dtypes.Expected, precision: Precision | DType) -> tuple[bool, str]:
        """The op's output against its float64 reference (gapbench.core.dtypes.check)."""
        return dtypes.check(out, expected, Precision(precision).value)

    def drop(self, ins: Arrays, j: int) -> np.ndarray:
        """The output of a kernel that skipped term j of the reduction."""
        if self.dropped is not None:
            return self.dropped(ins, j)
        if self.term is None:
            raise ValueError(f"{self.name} declares neither term nor dropped")
        return self.reference(ins) - self.term(ins, j)

    def impls(self, family: Family) -> list[FrameworkImpl]:
        return [f for f in self.frameworks if f.family is family]


def from_ops_def(name: str) -> dict:
    """The OpSpec fields csrc/ops.def already fixes for a built-in op (its name, the dims of its
    form, the elements it reads and writes): `OpSpec(**from_ops_def("gemv"), ...)` restates none."""
    decl = opdecl.get(name)
    return {"name": decl.name, "form": decl.form, "elements": decl.elements}


def shape_text(shape: Shape) -> str:
    if set(shape) not in ({"batch", "m", "n", "k"}, {"n"}, {"m", "k"}):  # a user's axes: each named
        return ",".join(f"{k}={v}" for k, v in shape.items())
    if "batch" in shape:
        return f"{shape['batch']}x{shape['m']}x{shape['n']}x{shape['k']}"
    if "n" in shape and "m" not in shape:
        return f"n={shape['n']}"
    return f"{shape['m']}x{shape['k']}"


def native_dims(shape: Shape) -> tuple[int, int, int, int]:
    return (shape.get("batch", 1), shape.get("m", 1), shape.get("n", 1), shape.get("k", 1))


@dataclass(frozen=True)
class Source:
    """Where an op's inputs come from: a distribution (--data) and a seeded generator."""
    data: Data
    rng: np.random.Generator


def draw(src: Source | np.random.Generator, *shape: int) -> np.ndarray:
    """float32 inputs of `shape` from the source's distribution (a bare Generator: randn), drawn on
    the host's cores (gapbench.core.hostpar). Random inputs are symmetric around zero and never all
    zeros, so a check on them shows every output computed; zeros show only that each was written."""
    if isinstance(src, np.random.Generator):
        src = Source(Data.randn, src)
    if src.data is Data.zeros:
        return np.zeros(shape, dtype=np.float32)
    if src.data is Data.uniform:
        return hostpar.uniform(src.rng, tuple(shape))
    return hostpar.normal(src.rng, tuple(shape))


T, C, M = Family.torch, Family.cupy, Family.mlx
