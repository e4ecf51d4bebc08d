"""The rank side of a multi-process run (bench.dist's collectives, bench.train's data-parallel
training): who this rank is, from whichever launcher started it, and its JSON-lines log, which the
parent (gapbench.core.process.run_ranks) watches for progress and reads back."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path


def rank_from_env() -> tuple[int, int, int]:
    """(rank, world, local_rank) from torchrun/env://, mpirun (Open MPI, PMI) or mlx.launch."""
    e = os.environ
    for r, w, lr in (("RANK", "WORLD_SIZE", "LOCAL_RANK"),
                     ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
                     ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID")):
        if r in e and w in e:
            return int(e[r]), int(e[w]), int(e.get(lr, e[r]))
    if "MLX_RANK" in e:
        world = int(e.get("MLX_WORLD_SIZE", "0") or 0)
        if not world and e.get("MLX_HOSTFILE"):
            try:
                with open(e["MLX_HOSTFILE"]) as f:
                    world = len(json.load(f))
            except (OSError, ValueError):
                world = 0
        return int(e["MLX_RANK"]), world or 1, int(e.get("LOCAL_RANK", "0"))
    return 0, 1, 0


class RankLog:
    """A rank's results, one JSON object a line, each flushed as it is written (a rank that dies
    leaves at most a torn last line, which process.read_lines drops)."""

    def __init__(self, path: Path, rank: int):
        self.path, self.rank, self.lines = path, rank, []
        path.parent.mkdir(parents=True, exist_ok=True)
        self.f = open(path, "a", encoding="utf-8")

    def write(self, **d) -> None:
        d["rank"] = self.rank
        d["t"] = round(time.time(), 4)  # wall clock: bench.dist's stage breakdown
        self.lines.append(d)
        self.f.write(json.dumps(d) + "\n")
        self.f.flush()
