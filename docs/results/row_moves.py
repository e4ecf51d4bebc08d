"""How far rows move between two runs of one machine start, by kind of row: native-cuda rows under
10 us, framework (torch-cuda, CuPy) rows under 10 us, and every row from 10 us up (plain loops
left out). For each pair of runs: the rows' mean log shift (the move common to the pair), their sd
around it (each row's own), and the rms. Used for the streams finding (docs/findings/between-runs.md).

    python docs/results/row_moves.py LABEL=RUN1,RUN2[,RUN3...] [LABEL=...]
"""
from __future__ import annotations

import sys

import numpy as np

from gapbench.core import compare as cmp
from gapbench.core.result import OK, load_run

KINDS = (("native < 10 us", lambda k, v: k[1] == "native-cuda" and v < 1e-5),
         ("framework < 10 us", lambda k, v: k[1] in ("torch-cuda", "cupy") and v < 1e-5),
         ("all >= 10 us", lambda k, v: k[1] != "plain-cuda" and v >= 1e-5))


def medians(path: str) -> dict:
    return {cmp.row_key(r): float(np.median(r.per_op())) for r in load_run(path).records if r.status == OK and r.samples_s}


def main(args: list[str]) -> None:
    print("| runs | pair | rows | n | mean shift | sd | rms |\n|---|---|---|---|---|---|---|")
    for arg in args:
        label, files = arg.split("=", 1)
        runs = [medians(f) for f in files.split(",")]
        for i in range(len(runs)):
            for j in range(i + 1, len(runs)):
                for name, keep in KINDS:
                    d = np.array([np.log(runs[j][k] / v) for k, v in runs[i].items() if k in runs[j] and keep(k, v)])
                    print(f"| {label} | {i + 1}-{j + 1} | {name} | {len(d)} | {100 * d.mean():+.2f}% | "
                          f"{100 * d.std(ddof=1):.2f}% | {100 * np.sqrt(np.mean(d * d)):.2f}% |")


if __name__ == "__main__":
    main(sys.argv[1:])
