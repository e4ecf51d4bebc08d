"""BLAS benchmark: the plain C++ cuBLAS loop (cuda/plain/blas.cu) that checks the harness adds
nothing to the vendor library's time, interleaved with the harness in rounds."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from gapbench.core import native
from gapbench.core.dtypes import round_to
from gapbench.core.result import ERROR, OK, Record
from gapbench.benchmarks.blas.run import OPS, PROBE, Config, _native_case


def plain_binary() -> Path | None:
    from importlib import resources

    path = Path(str(resources.files("gapbench").joinpath("bin/gapbench_blas_plain")))
    return path if path.is_file() and os.access(path, os.X_OK) else None


def plain_check(records: list[Record], cfg: Config, rounds: int = 6, every_dtype: bool = False) -> list[Record]:
    """cuBLAS from the plain C++ loop (cuda/plain/blas.cu) for the vendor GEMM and GEMV rows at
    their largest shapes (one dtype per op, the run's first; every dtype with `every_dtype`): the
    harness must add nothing. Clocks drift over a long run (power and temperature), so the two are
    interleaved: the plain loop starts once (its CUDA context and cuBLAS, about 2 s) and runs
    `rounds` paced rounds (gapbench.core.worker.PacedCommand), each beside the harness's own Case in
    this process (which goes first is drawn per round), with the same share of samples and the same gated event timing. The plain
    row carries the interleaved harness samples and each round's medians, so the harness/plain
    ratio is a median of per-round ratios with its 95% interval. Six rounds are the fewest whose
    per-round ratios give one (their min and max cover the median with probability
    1 - 2/2^6 = 97%)."""
    from gapbench import _native
    from gapbench.core.plaincheck import interleave
    from gapbench.core.worker import PacedCommand

    exe = plain_binary()
    vendor = [r for r in records if r.backend == "native-cuda" and r.variant == "cublas" and r.status == OK
              and r.metric == "time" and r.params.get("op") in ("gemm", "gemv")]
    if exe is None or not vendor:
        return []
    specs = {sp.name: sp for sps in OPS.values() for sp in sps}
    out = []
    for op in ("gemm", "gemv"):
        rows = [r for r in vendor if r.params["op"] == op]
        if not rows:
            continue
        biggest = max(r.work["flops"] for r in rows)
        rows = [r for r in rows if r.work["flops"] == biggest]
        if not every_dtype:
            first = min(cfg.dtypes.index(r.params["dtype"]) for r in rows)
            rows = [r for r in rows if cfg.dtypes.index(r.params["dtype"]) == first]
        for r in rows:
            sh, dtype, spec = r.params["shape"], r.params["dtype"], specs[op]
            per = max(5, len(r.samples_s) // rounds)
            args = [str(exe), r.params["library"], op, dtype, str(sh.get("batch", 1)),
                    str(sh["m"]), str(sh.get("n", 1)), str(sh["k"]), str(per), str(cfg.warmup), str(rounds)]
            try:
                rng = np.random.default_rng(cfg.seed)
                case = _native_case(_native.cuda, spec, dtype, sh,
                                    [round_to(a, dtype) for a in spec.inputs(sh, rng)], 0)
                with PacedCommand(args, timeout=600) as loop:
                    got, _ = interleave({"plain": lambda: loop.round()["samples"],
                                         "harness": lambda: case.time(native.impl("vendor"), per, cfg.warmup,
                                                                      native.cache("hot"))},
                                        rounds, seed=cfg.seed or 0)
                plain = [x for pl in got["plain"] for x in pl]
                harness = [x for hs in got["harness"] for x in hs]
                per_round = [[float(np.median(hs)), float(np.median(pl))] for hs, pl in zip(got["harness"], got["plain"])]
                case = None  # free the device buffers before the next row
                out.append(Record(probe=PROBE, backend="plain-cuda", variant="cublas", metric="time",
                                  op="cuBLAS from a plain C++ loop (no harness)", clock="device_events",
                                  samples_s=plain, warmup=cfg.warmup, work=r.work, device=r.device,
                                  params=dict(r.params, cache="hot, one set", rounds=rounds,
                                              harness_interleaved_s=harness,
                                              round_medians_s=per_round)))
            except (RuntimeError, ValueError, KeyError) as e:
                out.append(Record(probe=PROBE, backend="plain-cuda", variant="cublas", metric="time", status=ERROR,
                                  reason=f"plain loop failed: {e}", params=dict(r.params), device=r.device))
    return out
