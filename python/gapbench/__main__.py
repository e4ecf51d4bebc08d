"""`gapbench <suite> ...` / `python -m gapbench <suite> ...`: the suites of the installed package.
From a checkout, `python -m bench.<suite>` runs the same code."""
from __future__ import annotations

import sys

SUITES = {
    "launch": "gapbench.probes.launch",
    "blas": "gapbench.probes.blas",
    "train": "gapbench.probes.train",
    "suite": "gapbench.probes.suite",
    "report": "gapbench.probes.report",
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: gapbench {" + ",".join(SUITES) + ",backends,csv} [options]\n"
              "  launch    kernel-launch latency, raw probe vs frameworks (paper Table 6)\n"
              "  blas      GEMM/GEMV/VJP/copy throughput vs the measured roofline (Figures 5-7)\n"
              "  train     GPT-2/Whisper training steps: phases, memory, energy (Tables 2-5, Figures 2-4)\n"
              "  suite     the community seed suites: BERT matrix, ResNet50, DistilBERT, LLM generation\n"
              "  report    result files from any machines into one Markdown/HTML report\n"
              "  backends  what this machine has, and why not\n"
              "  csv FILE  export a result JSON to CSV on stdout")
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    if cmd == "backends":
        from rich.console import Console

        from .cli import list_backends

        list_backends(Console())
        return 0
    if cmd == "csv":
        from .result import SchemaError, load_run, records_to_csv

        if len(rest) != 1:
            print("usage: gapbench csv RESULT.json", file=sys.stderr)
            return 2
        try:
            sys.stdout.write(records_to_csv(load_run(rest[0]).records))
        except SchemaError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        return 0
    if cmd not in SUITES:
        print(f"error: unknown suite {cmd!r}; choose from {', '.join(SUITES)}, backends, csv", file=sys.stderr)
        return 2
    import importlib

    return importlib.import_module(SUITES[cmd]).main(rest, prog=f"gapbench {cmd}")


if __name__ == "__main__":
    sys.exit(main())
