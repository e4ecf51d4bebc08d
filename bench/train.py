"""python -m bench.train: end-to-end training steps split into forward, backward and optimizer,
with memory over time, page faults, energy per step and the memory scenarios."""
import sys

from gapbench.benchmarks import main

if __name__ == "__main__":
    sys.exit(main("train"))
