"""Where bench.launch's time goes on a GPU machine (issue 38): the fresh-process costs that its
native-cuda check repeats 13 times, timed one by one, then each given launch run's own clock.

    python docs/results/launch_cost_probe.py [RUN.json.gz ...]

Prints wall seconds of four fresh processes per step (interpreter, numpy, the launch worker's
imports, gapbench._native with the CUDA driver's status, the same with a context, the plain C++
loop for one round at the check's sample count and at 5), then, per run file, its own start and finish,
per-backend wall times and the plain check's [harness, plain] wall seconds per round."""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
import time


def timed(label: str, cmd: list[str], stdin: str | None = None, n: int = 4) -> None:
    walls = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(cmd, input=stdin, capture_output=True, text=True, check=False)
        walls.append(time.perf_counter() - t0)
    print(f"{label:34s}", " ".join(f"{x:.3f}" for x in walls))


def main(files: list[str]) -> None:
    from gapbench.core.native import tool

    py = sys.executable
    timed("python -c pass", [py, "-c", "pass"])
    timed("import numpy", [py, "-c", "import numpy"])
    timed("import the launch worker", [py, "-c", "import gapbench.benchmarks.launch.worker"])
    timed("_native, cuda.status(0)", [py, "-c", "from gapbench import _native as n; n.cuda.status(0)"])
    timed("_native, status, context", [py, "-c", "from gapbench import _native as n; n.cuda.status(0); "
                                                   "n.cuda.context_create_seconds()"])
    exe = tool("gapbench_launch_plain")
    if exe is not None:
        timed("plain loop, 1 round of 33 samples", [str(exe), "33", "100", "20", "1", "1"], "\n")
        timed("plain loop, 1 round of 5 samples", [str(exe), "5", "100", "20", "1", "1"], "\n")
    for f in files:
        doc = json.load(gzip.open(f))
        run = doc["run"]
        print(f, run.get("started"), "to", run.get("finished"), "backend_wall_s", run.get("backend_wall_s"))
        for r in doc["records"]:
            if r["backend"] == "plain-cuda" and r["metric"] == "roundtrip":
                print("  plain check [harness, plain] s per round:", (r.get("params") or {}).get("round_walls_s"))


if __name__ == "__main__":
    main(sys.argv[1:])
