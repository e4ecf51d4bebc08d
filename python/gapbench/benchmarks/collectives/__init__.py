"""bench.dist: collectives rung by rung (p2p floor, NCCL direct, torch.distributed, CuPy, MLX).
See config.py for the sweep, gapbench.core.process.run_ranks for how ranks are started and
watched, and merge.py for how their lines are merged. Data-parallel training is bench.train's
(benchmarks/train/dp.py), on the same core modules."""
