"""python -m bench.history DIR: every run in a folder over time, regressions marked (gapbench history)."""
import sys

from gapbench.benchmarks import main

if __name__ == "__main__":
    sys.exit(main("history"))
