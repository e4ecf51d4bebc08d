"""gapbench's public API: your own op, timed by gapbench's method (verified on poisoned outputs,
held by the release gate, inputs rotated past the L2, paired interleaved rounds, the last timed
run checked, the records of bench.blas). See docs/your-own-op.md and examples/.

    import gapbench.api as gb
    case = gb.Case("myop", axes={...}, inputs=..., reference=..., reduction=..., elements=...)

    @case.impl("torch", baseline=True)
    def mine(x): ...

    print(case.run(quick=True))       # or: gapbench bench FILE.py
"""
from gapbench.benchmarks.blas.usercase import Case, CaseError, Result, load_file, measure

__all__ = ["Case", "CaseError", "Result", "load_file", "measure"]
