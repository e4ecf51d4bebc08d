"""Which of its discrete states a bench.blas process ran its 16 Mi-element fp16 cuBLAS cases in
(issue 35; findings/between-runs.md). Per run: 100 x log(GEMV 16384x1024 / VJP dx 1024x16384) of
torch's rows, CuPy's and the native cuBLAS rows. Over the committed default runs this score took
two or three levels a GPU model (H200 about +5, -5.5 and +0.5; H100 +2.6, +6.9 and -1.3): on the
H100 one level a machine start as a rule, on the H200 a level drawn anew by each process.

    python docs/results/mode_state.py RUN.json.gz ...
"""
from __future__ import annotations

import math
import sys

ROWS = {"torch-cuda": "torch", "cupy": "cupy", "native-cuda": "cublas"}


def scores(run) -> dict[str, float]:
    got = {}
    for r in run.records:
        if r.status != "ok" or not r.samples_s or r.metric != "time" or ROWS.get(r.backend) != r.variant:
            continue
        p = r.params or {}
        got[(r.backend, p.get("op"), p.get("dtype"), p.get("shape_text"))] = r.median()
    out = {}
    for be in ROWS:
        g, v = got.get((be, "gemv", "fp16", "16384x1024")), got.get((be, "vjp_dx", "fp16", "1024x16384"))
        if g and v:
            out[be] = 100 * math.log(g / v)
    return out


def main(paths: list[str]) -> None:
    from gapbench.core.result import load_run

    print("| run | wall s | torch | CuPy | native cuBLAS |\n|---|---|---|---|---|")
    for p in paths:
        run = load_run(p)
        s = scores(run)
        cell = lambda k: f"{s[k]:+.1f}" if k in s else "-"  # noqa: E731
        wall = (run.run.get("wall_s") or {}).get("total", "-")
        print(f"| {p.rsplit('/', 1)[-1]} | {wall} | {cell('torch-cuda')} | {cell('cupy')} | "
              f"{cell('native-cuda')} |")


if __name__ == "__main__":
    main(sys.argv[1:])
