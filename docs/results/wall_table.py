"""Where bench.blas runs spent their wall time (issue 38): one row per run file, its own phases
(run.wall_s), whether the next case was made beside the device work (a wall_s part carrying
run.BESIDE) and the host's speed on its fixed loop (env.host_id.speed_ns_per_op), in the order
given. Files are paths or `git:REV:PATH` (calibrate_compare.source: runs kept in git history).

    python docs/results/wall_table.py [--first-runs] LABEL=RUN [LABEL=RUN ...]

--first-runs adds what a machine's first process pays: any other phase of the run (a phase an A/B
arm added), the frameworks' first runs (the wall_s part FIRST_RUNS) and the kernels CuPy had cached
when the run started (env.host_id.caches).
"""
from __future__ import annotations

import sys

from calibrate_compare import source

from gapbench.benchmarks.blas.run import BESIDE
from gapbench.core.result import load_run

PHASES = ("inputs and float64 references", "inputs to devices, verified before timing",
          "paired timing, last runs verified", "plain cuBLAS loop check", "setup and other")


#: the wall_s part a machine's first process spends its extra seconds in (findings/run-cost.md)
FIRST_RUNS = "frameworks: inputs to the device, first runs read back"


def main(args: list[str]) -> None:
    first = "--first-runs" in args
    args = [a for a in args if a != "--first-runs"]
    extra = ["other phases", "frameworks' first runs", "CuPy kernels cached at start"] if first else []
    print("| run | started (UTC) | next case beside | host loop ns/op | total s | "
          + " | ".join(PHASES + tuple(extra)) + " |\n|" + "---|" * (5 + len(PHASES) + len(extra)))
    for arg in args:
        label, path = arg.split("=", 1)
        run = load_run(source(path))
        wall = run.run.get("wall_s") or {}
        beside = any(k.endswith(BESIDE) for k in wall.get("parts", {}))
        speed = (run.env.get("host_id") or {}).get("speed_ns_per_op")
        print(f"| {label} | {run.run.get('started', '')[:19].replace('T', ' ')} | {'yes' if beside else 'no'} | "
              f"{'' if speed is None else f'{speed:.1f}'} | {wall.get('total', float('nan')):.1f} | "
              + " | ".join(f"{wall.get(p, 0.0):.1f}" for p in PHASES) + " |"
              + (_first_runs(run, wall) if first else ""))


def _first_runs(run, wall: dict) -> str:
    other = "; ".join(f"{k} {v:.1f}" for k, v in wall.items()
                      if k not in PHASES and k not in ("total", "parts") and isinstance(v, (int, float)))
    cached = ((run.env.get("host_id") or {}).get("caches") or {}).get("cupy_kernel_cache")
    return (f" {other or '-'} | {wall.get('parts', {}).get(FIRST_RUNS, float('nan')):.1f} | "
            f"{'-' if cached is None else cached} |")


if __name__ == "__main__":
    main(sys.argv[1:])
