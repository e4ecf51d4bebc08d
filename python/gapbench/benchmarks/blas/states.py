"""A state each process draws for the frameworks' cuBLAS cases, as gapbench compare reports it.

On the H100 and the H200 a bench.blas process times torch's and CuPy's 16 Mi-element fp16 GEMV
(16384x1024) and VJP dx (1024x16384) at one of a few levels, drawn per process: their state score,
100 x log(GEMV / VJP dx) of one backend's rows, took about +5, -5.5 and +0.5 on the H200 and +2.7,
+6.9 and -1.3 on the H100 over the committed default runs, CuPy's within 0.7 of torch's and the native
cuBLAS rows' near 0 (docs/results/state_factor.py, findings/between-runs.md). Other rows of torch and
CuPy move with it, each its own way. On the H200 it is the parity of the count of kernels launched
on their stream before each call (findings: "The state is the parity..."; the H100's runs show the
same signature), which `--parity balanced` pads to both levels alike. Taking it off the rows afterwards would hide real slowdowns, so compare only says
when two runs' scores lie apart.
"""
from __future__ import annotations

import math

from gapbench.benchmarks.blas.config import PROBE
from gapbench.core.compare import device_of
from gapbench.core.names import Backend, DType, Family
from gapbench.core.result import OK
from gapbench.ops import gemv, vjp_dx

#: the backends whose rows carry the state, and each one's row variant
BACKENDS = {Backend.torch_cuda.value: Family.torch.value, Backend.cupy.value: Family.cupy.value}
#: (op, dtype, shape_text) of the score's numerator and denominator
NUMERATOR = (gemv.SPEC.name, DType.fp16.value, "16384x1024")
DENOMINATOR = (vjp_dx.SPEC.name, DType.fp16.value, "1024x16384")
#: score points (100 x log) two runs' scores must lie apart to be called different states: the levels
#: of the committed runs lie 4.0 to 10.5 apart, and runs of one level within 2.3 of each other
#: (state-2026-11-28/state-factor.md)
GAP = 3.0


def scores(run, backends: dict[str, str] = BACKENDS) -> dict[str, float]:
    """{backend: state score} of a run's timed BLAS rows, for those of `backends` (backend -> its
    row variant) that timed both cases."""
    med: dict[tuple, float] = {}
    for r in run.records:
        if (r.probe == PROBE and r.status == OK and r.samples_s and r.metric == "time"
                and backends.get(r.backend) == r.variant):
            p = r.params or {}
            med[(r.backend, p.get("op"), p.get("dtype"), p.get("shape_text"))] = r.median()
    out = {}
    for be in backends:
        num, den = med.get((be, *NUMERATOR)), med.get((be, *DENOMINATOR))
        if num and den:
            out[be] = 100 * math.log(num / den)
    return out


def state_note(a, b) -> str:
    """One line when the runs' state scores lie GAP or more apart for a backend both runs timed; ""
    otherwise (and for runs of two GPU models, whose levels differ). The scores say what each process
    drew, not whether the code changed those rows."""
    if device_of(a) != device_of(b):
        return ""
    sa, sb = scores(a), scores(b)
    apart = [be for be in BACKENDS if be in sa and be in sb and abs(sb[be] - sa[be]) >= GAP]
    if not apart:
        return ""
    told = "; ".join(f"{be} A {sa[be]:+.1f}, B {sb[be]:+.1f}" for be in apart)
    return (f"torch's and CuPy's cuBLAS cases drew different process states (100 x log GEMV fp16 16384x1024 / "
            f"VJP dx fp16 1024x16384: {told}; levels lie 4-10 apart), which move other rows of theirs too: "
            "the parity of the kernels launched on their stream; bench.blas --parity balanced pads it out, "
            "--processes 3 or gapbench run --repeat 3 pool processes (findings/between-runs.md)")
