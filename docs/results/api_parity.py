"""One path (issue 37): torch.mv declared through gapbench.api (examples/gemv_parity.py) against
bench.blas's own gemv torch rows, at the shapes and dtypes both ran. Each side ran in fresh
processes, alternating; per row the per-process medians and the ratio of each side's geometric
mean (API / built-in) with its 95% interval over the processes (compare's process_ratio_ci, as
`gapbench compare` gives --repeat runs: a t interval on the log medians; it covers the processes'
own spread, which for rows under ~10 us is larger than a run's interval).

    python docs/results/api_parity.py BLAS_FILES... -- API_FILES...
"""
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from gapbench.core.ratio_ci import process_ratio_ci  # noqa: E402
from gapbench.core.result import OK, load_run  # noqa: E402

BACKEND = os.environ.get("PARITY_BACKEND", "torch-cuda")
TARGET = 0.02  # issue 37: the API row equals the built-in row within 2%


def medians(paths, op):
    out = {}
    for p in paths:
        for r in load_run(p).records:
            pr = r.params or {}
            if r.status == OK and r.samples_s and r.metric == "time" and pr.get("op") == op and r.backend == BACKEND:
                key = (pr["dtype"], pr["shape"]["m"], pr["shape"]["k"])
                out.setdefault(key, []).append(float(np.median(r.per_op())))
    return out


def main(argv):
    cut = argv.index("--")
    blas, api = medians(argv[:cut], "gemv"), medians(argv[cut + 1:], "mv")
    run = load_run(argv[cut + 1])
    gpu = (run.env.get("nvidia_smi") or [{}])[0]
    print(f"# gapbench.api torch.mv vs bench.blas gemv torch rows: {gpu.get('name')}, driver {gpu.get('driver_version')}, "
          f"code {run.env.get('source_commit', '?')[:7]} (hash {str(run.env.get('source_hash', '?'))[:12]})")
    print(f"# {len(argv[:cut])} bench.blas and {len(argv[cut + 1:])} gapbench bench processes, alternating")
    print("| dtype | m x k | built-in us (per process) | API us (per process) | API / built-in | 95% interval |")
    print("|---|---|---|---|---|---|")
    worst, inside, covers, rows = 0.0, 0, 0, sorted(set(blas) & set(api))
    for key in rows:
        b, a = blas[key], api[key]
        ratio, lo, hi = process_ratio_ci(b, a)
        worst = max(worst, abs(ratio - 1))
        inside += 1 - TARGET <= lo and hi <= 1 + TARGET
        covers += lo <= 1 <= hi
        print(f"| {key[0]} | {key[1]}x{key[2]} | {' '.join(f'{x * 1e6:.2f}' for x in b)} | "
              f"{' '.join(f'{x * 1e6:.2f}' for x in a)} | {ratio:.4f} | {lo:.4f}-{hi:.4f} |")
    print(f"\nlargest difference: {100 * worst:.2f}% over {len(rows)} rows; the 95% interval lies within "
          f"{100 * TARGET:g}% on {inside} of {len(rows)} rows and includes 1 on {covers}")


if __name__ == "__main__":
    main(sys.argv[1:])
