"""python -m bench.blas: GEMM / GEMV / VJP / copy throughput, native vs vendor vs frameworks."""
import sys

from gapbench.benchmarks import main

if __name__ == "__main__":
    sys.exit(main("blas"))
