"""The known per-rank data every collective is checked with, for array libraries (torch, CuPy,
MLX, NumPy); cuda/dist_pattern.cuh writes the same formulas for the direct-NCCL runner.
Small integers, exact in fp32, fp16 and bf16, and so are their sums over ranks:
  reductions (all_reduce, reduce_scatter): s(r, i) = ((i + r) mod 3) - 1
  data movement (the others):              m(r, i) = ((i + 7 r) mod 61) - 30
`idx` is a non-negative integer array of the library in use; the result is an integer array of it."""
from __future__ import annotations


def s(r: int, idx):
    return (idx + r) % 3 - 1


def m(r: int, idx):
    return (idx + 7 * r) % 61 - 30


def input_values(op: str, rank: int, root: int, idx):
    """The send buffer of `rank` (all_gather: the rank's own chunk; all_to_all: global index)."""
    if op in ("all_reduce", "reduce_scatter"):
        return s(rank, idx)
    if op == "broadcast":
        return m(root, idx)
    return m(rank, idx)


def expected_values(op: str, rank: int, world: int, root: int, chunk: int, idx):
    """The receive buffer of `rank` after the op (idx spans the output)."""
    if op == "all_reduce":
        out = s(0, idx)
        for q in range(1, world):
            out = out + s(q, idx)
        return out
    if op == "reduce_scatter":
        g = idx + rank * chunk
        out = s(0, g)
        for q in range(1, world):
            out = out + s(q, g)
        return out
    if op == "all_gather":
        return (idx % chunk + 7 * (idx // chunk)) % 61 - 30
    if op == "broadcast":
        return m(root, idx)
    if op == "all_to_all":
        return (rank * chunk + idx % chunk + 7 * (idx // chunk)) % 61 - 30
    if op == "sendrecv":
        return m((rank - 1 + world) % world, idx)
    raise ValueError(f"unknown op {op!r}")
