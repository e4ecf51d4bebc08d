"""Host-side array work split into chunks and run on threads.

The BLAS probes verify outputs of up to 2^28 elements against float64 several times per case
(first and last timed run of every arm). Done whole in numpy, each check makes a dozen float64
temporaries of the full size on one core, which cost more than the timing itself. Split into
chunks, numpy's element-wise loops release the GIL, so the chunks run in parallel and their
temporaries stay in cache. Results are the same as the whole-array computation: each chunk's
partial results are combined in index order."""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, TypeVar

import numpy as np

T = TypeVar("T")

#: elements per chunk: large enough that numpy's per-call cost vanishes, small enough that a
#: chunk's float64 temporaries stay in a core's cache
CHUNK = 1 << 20

_pool: ThreadPoolExecutor | None = None


def workers() -> int:
    """Threads for host work: the cores this process may run on (at most 16)."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(16, n))


def spans(n: int, chunk: int = CHUNK) -> list[tuple[int, int]]:
    return [(lo, min(n, lo + chunk)) for lo in range(0, n, chunk)]


def map_chunks(fn: Callable[[int, int], T], n: int, chunk: int = CHUNK) -> list[T]:
    """[fn(lo, hi) for each chunk of range(n)], in order; on threads when there are several."""
    parts = spans(n, chunk)
    if len(parts) <= 1 or workers() == 1:
        return [fn(lo, hi) for lo, hi in parts]
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=workers(), thread_name_prefix="gapbench-host")
    return list(_pool.map(lambda s: fn(*s), parts))


def elementwise(fn: Callable[[np.ndarray], np.ndarray], x: np.ndarray, dtype, into: np.ndarray | None = None
                ) -> np.ndarray:
    """fn applied to x (any shape) chunk by chunk into a new array of `dtype` and x's shape, or
    into the first bytes of `into` (a contiguous byte buffer, such as a reused staging buffer)."""
    flat = np.ascontiguousarray(x).reshape(-1)
    if into is None:
        out = np.empty(flat.size, dtype=dtype)
    else:
        nbytes = flat.size * np.dtype(dtype).itemsize
        if into.nbytes < nbytes:
            raise ValueError(f"a buffer of {into.nbytes} bytes cannot hold {nbytes}")
        out = into.reshape(-1).view(np.uint8)[:nbytes].view(dtype)

    def part(lo, hi):
        out[lo:hi] = fn(flat[lo:hi])

    map_chunks(part, flat.size)
    return out.reshape(np.shape(x))


def _draw(rng: np.random.Generator, shape: tuple[int, ...], fill) -> np.ndarray:
    """float32 values of `shape`, each chunk filled by `fill(generator, view)` with its own
    generator spawned from `rng` (so a seeded rng gives the same values on any number of cores)."""
    n = int(np.prod(shape, dtype=np.int64))
    out = np.empty(n, dtype=np.float32)
    parts = spans(n, 4 * CHUNK)
    gens = rng.spawn(len(parts)) if parts else []

    def part(i):
        lo, hi = parts[i]
        fill(gens[i], out[lo:hi])

    map_chunks(lambda i, _: part(i), len(parts), chunk=1)
    return out.reshape(shape)


def uniform(rng: np.random.Generator, shape: tuple[int, ...], low: float = -1.0, high: float = 1.0) -> np.ndarray:
    """float32 values uniform in [low, high), drawn in chunks on the host's cores."""
    def fill(g, view):
        g.random(out=view, dtype=np.float32)
        view *= np.float32(high - low)
        view += np.float32(low)

    return _draw(rng, shape, fill)


def normal(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """float32 values from the standard normal distribution, drawn in chunks on the host's cores."""
    return _draw(rng, shape, lambda g, view: g.standard_normal(out=view, dtype=np.float32))
