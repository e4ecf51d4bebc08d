"""BLAS benchmark: the plain C++ cuBLAS loop (cuda/plain/blas.cu) that checks the harness adds
nothing to the vendor library's time, interleaved with the harness in rounds."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from gapbench import ops
from gapbench.benchmarks.blas.arms import native_case
from gapbench.benchmarks.blas.config import PROBE, Config
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
    exe = plain_binary()
    vendor = [row for row in rows(records) if row.backend is Backend.native_cuda and row.rec.variant == "cublas"]
    if exe is None or not vendor:
        return []
    chosen = []
    for spec in (ops.get(n) for n in PLAIN_OPS):
        op_rows = [row for row in vendor if row.spec is spec]
        if not op_rows:
            continue
        biggest = max(row.rec.work["flops"] for row in op_rows)
        op_rows = [row for row in op_rows if row.rec.work["flops"] == biggest]
        if not every_dtype:
            first = min(cfg.dtypes.index(row.p.dtype) for row in op_rows)
            op_rows = [row for row in op_rows if cfg.dtypes.index(row.p.dtype) == first]
        chosen += [(spec, row) for row in op_rows]
    # Every row's loop starts at once (a CUDA context and cuBLAS each, about 2 s, idle once up),
    # while this process makes the harness's side of each; the first round waits for all of them.
    out, loops = [], []
    try:
        for spec, row in chosen:
            loops.append(_start_loop(exe, spec, row, cfg, rounds))
        for (spec, row), loop in zip(chosen, loops):
            if isinstance(loop, Record):
                continue
            try:
                rng = np.random.default_rng(cfg.seed)
                sh, dtype = row.p.shape, row.p.dtype
                loop.case = native_case(native.load().cuda, spec, dtype, sh,
                                        [round_to(a, dtype) for a in spec.inputs(sh, rng)], 0)
            except (RuntimeError, ValueError, MemoryError) as e:
                loop.failed = f"the harness's case failed: {e}"
        for (spec, row), loop in zip(chosen, loops):
            out.append(loop if isinstance(loop, Record) else _rounds(loop, row, cfg, rounds))
    finally:
        for loop in loops:
            if not isinstance(loop, Record):
                loop.stop()
    return out


class _Loop:
    """One row's plain loop (a PacedCommand), the harness's Case beside it, the samples per round."""

    def __init__(self, command, per: int):
        self.command, self.per, self.case, self.failed, self.stopped = command, per, None, "", False

    def stop(self) -> None:
        """Frees the harness case's device buffers and ends the loop (killed if it failed)."""
        self.case = None
        if self.stopped:
            return
        self.stopped = True
        if self.failed:
            self.command.kill()
        else:
            self.command.close()


def _error(row, why: str) -> Record:
    return Record(probe=PROBE, backend=Backend.plain_cuda.value, variant="cublas", metric="time", status=ERROR,
                  reason=f"plain loop failed: {why}", params=row.p.to_dict(), device=row.rec.device)


def _start_loop(exe, spec, row, cfg: Config, rounds: int):
    from gapbench.core.worker import PacedCommand

    p, sh = row.p, row.p.shape
    per = max(5, len(row.rec.samples_s) // rounds)
    args = [str(exe), p.library or "", spec.name, p.dtype.value, str(sh.get("batch", 1)),
            str(sh["m"]), str(sh.get("n", 1)), str(sh["k"]), str(per), str(cfg.warmup), str(rounds)]
    try:
        return _Loop(PacedCommand(args, timeout=600), per)
    except (RuntimeError, OSError, ValueError) as e:
        return _error(row, str(e))


def _rounds(loop: _Loop, row, cfg: Config, rounds: int) -> Record:
    """The interleaved rounds of one row, and the record of the plain loop's side."""
    from gapbench.core.plaincheck import interleave

    if loop.failed:
        return _error(row, loop.failed)
    r, p, per = row.rec, row.p, loop.per
    try:
        loop.command.ready()
        got, _ = interleave({"plain": lambda: loop.command.round()["samples"],
                             "harness": lambda: loop.case.time(native.impl("vendor"), per, cfg.warmup,
                                                               native.cache(CacheMode.hot))},
                            rounds, seed=cfg.seed or 0)
    except (RuntimeError, ValueError, KeyError) as e:
        loop.failed = str(e)
        return _error(row, str(e))
    loop.stop()  # this row's loop and buffers go before the next row's rounds
    plain = [x for pl in got["plain"] for x in pl]
    harness = [x for hs in got["harness"] for x in hs]
    per_round = [[float(np.median(hs)), float(np.median(pl))] for hs, pl in zip(got["harness"], got["plain"])]
    return Record(probe=PROBE, backend=Backend.plain_cuda.value, variant="cublas", metric="time",
                  op="cuBLAS from a plain C++ loop (no harness)", clock="device_events",
                  samples_s=plain, warmup=cfg.warmup, work=r.work, device=r.device,
                  params=p.replace(cache="hot, one set", rounds=rounds, harness_interleaved_s=harness,
                                   round_medians_s=per_round).to_dict())
