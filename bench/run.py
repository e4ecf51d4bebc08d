"""python -m bench.run: every benchmark briefly (--quick), into one bundle that bench.report
merges with other machines' bundles."""
import sys

from gapbench.benchmarks import main

if __name__ == "__main__":
    sys.exit(main("run"))
