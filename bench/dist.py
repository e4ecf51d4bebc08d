"""python -m bench.dist: collectives rung by rung (p2p floor, NCCL direct, torch.distributed,
CuPy, MLX distributed), sizes swept as nccl-tests does, every result checked before timing."""
import sys

from gapbench.benchmarks.collectives.command import main

if __name__ == "__main__":
    sys.exit(main())
