"""`gapbench <command> ...` / `python -m gapbench <command> ...`: the commands of the installed
package, each a Benchmark in gapbench.benchmarks. From a checkout, `python -m bench.<command>`
runs the same code."""
from __future__ import annotations

import sys

EXTRA = {"backends": "what this machine has, and why not", "csv": "export a result JSON to CSV on stdout (csv FILE)",
         "compact": "store result files as compact .json.gz, or --describe them"}


def usage() -> str:
    from gapbench import benchmarks

    lines = ["usage: gapbench <command> [options]   (gapbench <command> --help for its options)", "", "commands:"]
    for name in benchmarks.available():
        lines.append(f"  {name:<9} {benchmarks.get(name).title}")
    lines += [f"  {name:<9} {text}" for name, text in EXTRA.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    if cmd == "backends":
        from gapbench.backends.registry import list_backends
        from gapbench.core.cli import console_for

        list_backends(console_for())
        return 0
    if cmd == "csv":
        from gapbench.core.result import SchemaError, load_run, records_to_csv

        if len(rest) != 1:
            print("usage: gapbench csv RESULT.json", file=sys.stderr)
            return 2
        try:
            sys.stdout.write(records_to_csv(load_run(rest[0]).records))
        except SchemaError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        return 0
    if cmd == "compact":
        from gapbench.core.compact import main as compact_main

        return compact_main(rest, prog="gapbench compact")
    from gapbench import benchmarks

    try:
        bench = benchmarks.get(cmd)
    except benchmarks.UnknownBenchmark:
        print(f"error: unknown command {cmd!r}\n\n{usage()}", file=sys.stderr)
        return 2
    return bench.main(rest, prog=f"gapbench {cmd}")


if __name__ == "__main__":
    sys.exit(main())
