"""python -m bench.launch: cold and warm kernel-launch latency for every backend here."""
import sys

from gapbench.benchmarks import main

if __name__ == "__main__":
    sys.exit(main("launch"))
