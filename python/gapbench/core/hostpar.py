"""Host-side array work split into chunks and run on threads.

The BLAS probes verify outputs of up to 2^28 elements against float64 several times per case
(first and last timed run of every arm). Done whole in numpy, each check makes a dozen float64
temporaries of the full size on one core, which cost more than the timing itself. Split into
chunks, numpy's element-wise loops release the GIL, so the chunks run in parallel and their
temporaries stay in cache. Results are the same as the whole-array computation: each chunk's
partial results are combined in index order."""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

import numpy as np

T = TypeVar("T")

#: elements per chunk: large enough that numpy's per-call cost vanishes, small enough that a
#: chunk's float64 temporaries stay in a core's cache
CHUNK = 1 << 20

_pool: ThreadPoolExecutor | None = None
#: a second, smaller pool for work done beside the main thread's (`background`): its chunks never
#: queue ahead of the main thread's in one FIFO
_bg_pool: ThreadPoolExecutor | None = None
_local = threading.local()


def workers() -> int:
    """Threads for host work: the cores this process may run on (at most 16)."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(16, n))


def spans(n: int, chunk: int = CHUNK) -> list[tuple[int, int]]:
    return [(lo, min(n, lo + chunk)) for lo in range(0, n, chunk)]


@contextmanager
def background() -> Iterator[None]:
    """Host work this thread does beside the main thread's (bench.blas prepares the next case while
    the device times this one) goes to its own pool of half the workers, so the main thread's
    chunks (its checks) never wait behind it in one queue."""
    _local.background = True
    try:
        yield
    finally:
        _local.background = False


def _executor() -> ThreadPoolExecutor:
    global _pool, _bg_pool
    if getattr(_local, "background", False):
        if _bg_pool is None:
            _bg_pool = ThreadPoolExecutor(max_workers=max(1, workers() // 2), thread_name_prefix="gapbench-bg")
        return _bg_pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=workers(), thread_name_prefix="gapbench-host")
    return _pool


def map_chunks(fn: Callable[[int, int], T], n: int, chunk: int = CHUNK) -> list[T]:
    """[fn(lo, hi) for each chunk of range(n)], in order; on threads when there are several."""
    parts = spans(n, chunk)
    if len(parts) <= 1 or workers() == 1:
        return [fn(lo, hi) for lo, hi in parts]
    return list(_executor().map(lambda s: fn(*s), parts))


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


# Float64 references of large float32 inputs without a float64 copy of them: widening a 2^28-element
# matrix first writes (and page-faults) 2 GB per dtype, which cost more than the product itself.
# Each chunk is widened and multiplied on its own, with numpy's own loops (einsum: no BLAS thread
# team inside these threads). The values are those of the whole float64 product up to the order of
# its float64 sums (relative differences of order 1e-16, far inside every check's bound).
def _f64(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


def matvec64(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """a @ x in float64 for a (m, k) and x (k,) of any float type, by blocks of rows."""
    a, x64 = np.asarray(a), _f64(x)
    m, k = a.shape
    out = np.empty(m, dtype=np.float64)

    def part(lo, hi):
        out[lo:hi] = np.einsum("ij,j->i", _f64(a[lo:hi]), x64)

    map_chunks(part, m, max(1, CHUNK // max(k, 1)))
    return out


def rmatvec64(a: np.ndarray, v: np.ndarray) -> np.ndarray:
    """a.T @ v in float64 for a (m, k) and v (m,) of any float type: by blocks of rows, each a
    partial sum of k values, added in block order (by blocks of columns where those partial sums
    would take more than 8 chunks of memory)."""
    a, v64 = np.asarray(a), _f64(v)
    m, k = a.shape
    rows = max(1, CHUNK // max(k, 1))
    if -(-m // rows) * k <= 8 * CHUNK:
        parts = map_chunks(lambda lo, hi: np.einsum("i,ij->j", v64[lo:hi], _f64(a[lo:hi])), m, rows)
        out = np.zeros(k, dtype=np.float64)
        for p in parts:
            out += p
        return out
    out = np.empty(k, dtype=np.float64)

    def part(lo, hi):
        out[lo:hi] = np.einsum("ij,i->j", _f64(a[:, lo:hi]), v64)

    map_chunks(part, k, max(1, CHUNK // max(m, 1)))
    return out


def outer64(v: np.ndarray, x: np.ndarray) -> np.ndarray:
    """np.outer(v, x) in float64, by blocks of rows (the same values as the whole outer product)."""
    v64, x64 = _f64(v).ravel(), _f64(x).ravel()
    out = np.empty((v64.size, x64.size), dtype=np.float64)

    def part(lo, hi):
        np.multiply.outer(v64[lo:hi], x64, out=out[lo:hi])

    map_chunks(part, v64.size, max(1, CHUNK // max(x64.size, 1)))
    return out


def by_rows(fn: Callable[[np.ndarray], np.ndarray], x: np.ndarray, width: int) -> np.ndarray:
    """fn(rows of x widened to float64) for blocks of rows of a 2-D x, into one float64 array of
    x's shape: for a row-wise op (each output row depends on its input row only), the same values
    as fn on the whole of x in float64."""
    x = np.asarray(x)
    out = np.empty(x.shape, dtype=np.float64)

    def part(lo, hi):
        out[lo:hi] = fn(_f64(x[lo:hi]))

    map_chunks(part, x.shape[0], max(1, CHUNK // max(width, 1)))
    return out
