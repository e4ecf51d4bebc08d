"""BLAS benchmark: the plain C++ cuBLAS loop (cuda/plain/blas.cu) that checks the harness adds
nothing to the vendor library's time, interleaved with the harness in rounds."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from gapbench import ops
from gapbench.benchmarks.blas.arms import native_case
from gapbench.benchmarks.blas.config import PROBE, Config
from gapbench.benchmarks.blas.params import BlasParams
from gapbench.benchmarks.blas.tables import rows
from gapbench.core import native
from gapbench.core.dtypes import round_to
from gapbench.core.names import CacheMode, Backend
from gapbench.core.result import ERROR, Record

#: the ops cuda/plain/blas.cu calls cuBLAS for
PLAIN_OPS = ("gemm", "gemv")


def plain_binary() -> Path | None:
    from gapbench.core.native import tool

    return tool("gapbench_blas_plain")


def plain_check(records: list[Record], cfg: Config, rounds: int = 6, every_dtype: bool = False) -> list[Record]:
    """cuBLAS from the plain C++ loop (cuda/plain/blas.cu) for the vendor GEMM and GEMV rows at
    their largest shapes (one dtype per op, the run's first; every dtype with `every_dtype`): the
    harness must add nothing. Clocks drift over a long run (power and temperature), so the two are
    interleaved: the plain loop starts once (its CUDA context and cuBLAS, about 2 s) and runs
    `rounds` paced rounds (gapbench.core.worker.PacedCommand), each beside the harness's own Case in
    this process (which goes first is drawn per round), with the same share of samples and the
    same gated event timing. The plain row carries the interleaved harness samples and each round's
    medians, so the harness/plain ratio is a median of per-round ratios with its 95% interval. Six
    rounds are the fewest whose per-round ratios give one (their min and max cover the median with
    probability 1 - 2/2^6 = 97%)."""
    from gapbench.core.plaincheck import interleave
    from gapbench.core.worker import PacedCommand

    exe = plain_binary()
    vendor = [row for row in rows(records) if row.backend is Backend.native_cuda and row.rec.variant == "cublas"]
    if exe is None or not vendor:
        return []
    out = []
    for spec in (ops.get(n) for n in PLAIN_OPS):
        op_rows = [row for row in vendor if row.spec is spec]
        if not op_rows:
            continue
        biggest = max(row.rec.work["flops"] for row in op_rows)
        op_rows = [row for row in op_rows if row.rec.work["flops"] == biggest]
        if not every_dtype:
            first = min(cfg.dtypes.index(row.p.dtype) for row in op_rows)
            op_rows = [row for row in op_rows if cfg.dtypes.index(row.p.dtype) == first]
        for row in op_rows:
            r, p = row.rec, row.p
            sh, dtype = p.shape, p.dtype
            per = max(5, len(r.samples_s) // rounds)
            args = [str(exe), p.library or "", spec.name, dtype.value, str(sh.get("batch", 1)),
                    str(sh["m"]), str(sh.get("n", 1)), str(sh["k"]), str(per), str(cfg.warmup), str(rounds)]
            try:
                rng = np.random.default_rng(cfg.seed)
                case = native_case(native.load().cuda, spec, dtype, sh,
                                   [round_to(a, dtype) for a in spec.inputs(sh, rng)], 0)
                with PacedCommand(args, timeout=600) as loop:
                    got, _ = interleave({"plain": lambda: loop.round()["samples"],
                                         "harness": lambda: case.time(native.impl("vendor"), per, cfg.warmup,
                                                                      native.cache(CacheMode.hot))},
                                        rounds, seed=cfg.seed or 0)
                plain = [x for pl in got["plain"] for x in pl]
                harness = [x for hs in got["harness"] for x in hs]
                per_round = [[float(np.median(hs)), float(np.median(pl))] for hs, pl in zip(got["harness"], got["plain"])]
                case = None  # free the device buffers before the next row
                out.append(Record(probe=PROBE, backend=Backend.plain_cuda.value, variant="cublas", metric="time",
                                  op="cuBLAS from a plain C++ loop (no harness)", clock="device_events",
                                  samples_s=plain, warmup=cfg.warmup, work=r.work, device=r.device,
                                  params=p.replace(cache="hot, one set", rounds=rounds, harness_interleaved_s=harness,
                                                   round_medians_s=per_round).to_dict()))
            except (RuntimeError, ValueError, KeyError) as e:
                out.append(Record(probe=PROBE, backend=Backend.plain_cuda.value, variant="cublas", metric="time",
                                  status=ERROR, reason=f"plain loop failed: {e}", params=p.to_dict(), device=r.device))
    return out
