"""python -m bench.compare A B [C ...]: did it get faster or slower (gapbench compare)."""
import sys

from gapbench.benchmarks import main

if __name__ == "__main__":
    sys.exit(main("compare"))
