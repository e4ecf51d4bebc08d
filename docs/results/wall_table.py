"""Where bench.blas runs spent their wall time (issue 38): one row per run file, its own phases
(run.wall_s), whether the next case was made beside the device work (a wall_s part carrying
run.BESIDE) and the host's speed on its fixed loop (env.host_id.speed_ns_per_op), in the order
given. Files are paths or `git:REV:PATH` (calibrate_compare.source: runs kept in git history).

    python docs/results/wall_table.py LABEL=RUN [LABEL=RUN ...]
"""
from __future__ import annotations

import sys

from calibrate_compare import source

from gapbench.benchmarks.blas.run import BESIDE
from gapbench.core.result import load_run

PHASES = ("inputs and float64 references", "inputs to devices, verified before timing",
          "paired timing, last runs verified", "plain cuBLAS loop check", "setup and other")


def main(args: list[str]) -> None:
    print("| run | started (UTC) | next case beside | host loop ns/op | total s | "
          + " | ".join(PHASES) + " |\n|" + "---|" * (5 + len(PHASES)))
    for arg in args:
        label, path = arg.split("=", 1)
        run = load_run(source(path))
        wall = run.run.get("wall_s") or {}
        beside = any(k.endswith(BESIDE) for k in wall.get("parts", {}))
        speed = (run.env.get("host_id") or {}).get("speed_ns_per_op")
        print(f"| {label} | {run.run.get('started', '')[:19].replace('T', ' ')} | {'yes' if beside else 'no'} | "
              f"{'' if speed is None else f'{speed:.1f}'} | {wall.get('total', float('nan')):.1f} | "
              + " | ".join(f"{wall.get(p, 0.0):.1f}" for p in PHASES) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
