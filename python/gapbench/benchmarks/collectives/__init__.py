"""bench.dist: collectives rung by rung (p2p floor, NCCL direct, torch.distributed, CuPy, MLX)
and data-parallel training (train_dp). See config.py for the sweep and launcher.py for how ranks
are started, watched and merged."""
