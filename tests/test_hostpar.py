"""Host work in chunks on threads (gapbench.core.hostpar) gives what the whole-array computation gives:
the same draws for a seed on any number of cores, and checks that find a single bad output in any
chunk and name its index."""
import numpy as np
import pytest

from gapbench.core.names import DType
from gapbench.core import dtypes
from gapbench.core import hostpar


@pytest.mark.parametrize("n_workers", [1, 3])
def test_uniform_same_draws_on_any_number_of_cores(monkeypatch, n_workers):
    shape = (3, hostpar.CHUNK + 17)
    base = hostpar.uniform(np.random.default_rng(7), shape)
    monkeypatch.setattr(hostpar, "workers", lambda: n_workers)
    again = hostpar.uniform(np.random.default_rng(7), shape)
    assert again.dtype == np.float32 and again.shape == shape
    np.testing.assert_array_equal(again, base)
    assert base.min() >= -1.0 and base.max() < 1.0
    assert abs(float(base.mean())) < 0.01  # symmetric around zero: 3M draws, sd of the mean 3e-4
    other = hostpar.uniform(np.random.default_rng(8), shape)
    assert np.count_nonzero(other == base) < 100


def test_map_chunks_in_order_and_covering():
    n = 5 * hostpar.CHUNK + 3
    parts = hostpar.map_chunks(lambda lo, hi: (lo, hi), n)
    assert parts[0][0] == 0 and parts[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(parts, parts[1:]))


def test_background_work_runs_in_its_own_pool(monkeypatch):
    """Work a thread does beside the main thread's (hostpar.background) goes to a second pool, so
    the main thread's chunks never queue behind it; the results are the same and in order."""
    import threading

    monkeypatch.setattr(hostpar, "workers", lambda: 4)
    n = 3 * hostpar.CHUNK + 5
    name = lambda lo, hi: (lo, threading.current_thread().name)  # noqa: E731
    main = hostpar.map_chunks(name, n)
    with hostpar.background():
        side = hostpar.map_chunks(name, n)
    after = hostpar.map_chunks(name, n)
    assert [p[0] for p in main] == [p[0] for p in side] == [p[0] for p in after] == [0, 1 << 20, 2 << 20, 3 << 20]
    assert all(t.startswith("gapbench-host") for _, t in main + after)
    assert all(t.startswith("gapbench-bg") for _, t in side)


def test_elementwise_keeps_shape_and_values():
    x = np.arange(5 * (hostpar.CHUNK // 2 + 1), dtype=np.float32).reshape(5, -1)
    y = hostpar.elementwise(np.negative, x, np.float64)
    assert y.shape == x.shape and y.dtype == np.float64
    np.testing.assert_array_equal(y, -x.astype(np.float64))


N = 3 * hostpar.CHUNK + 11
BAD = 2 * hostpar.CHUNK + 7  # in the third chunk


@pytest.mark.parametrize("dtype", list(DType))
def test_one_bad_output_in_a_late_chunk_is_found_and_named(dtype):
    rng = np.random.default_rng(1)
    v = dtypes.round_to(rng.uniform(-1, 1, N).astype(np.float32), dtype)
    x = dtypes.round_to(rng.uniform(-1, 1, 1).astype(np.float32), dtype)
    ref = dtypes.expected(lambda a: np.outer(*a).ravel(), [v, x], 1)
    out = dtypes.round_to(ref.values.astype(np.float32), dtype)
    assert dtypes.check(out, ref, dtype)[0]
    out[BAD] = 0.0 if ref.values[BAD] != 0 else 1.0
    ok, detail = dtypes.check(out, ref, dtype)
    assert not ok
    assert detail.startswith(f"1 of {N} outputs outside their bound") and f"worst [{BAD}]" in detail


def test_exact_copy_catches_one_changed_bit_and_counts_nonfinite_over_chunks():
    x = dtypes.round_to(np.random.default_rng(2).uniform(-1, 1, N).astype(np.float32), "bf16")
    ref = dtypes.expected(lambda a: a[0], [x], 0)
    ok, detail = dtypes.check(x.copy(), ref, "bf16")
    assert ok and "exact copy" in detail
    bits = x.copy().view(np.uint32)
    bits[BAD] ^= 1 << 16  # the lowest bf16 mantissa bit
    ok, detail = dtypes.check(bits.view(np.float32), ref, "bf16")
    assert not ok and f"first [{BAD}]" in detail and "exact copy" in detail
    out = x.copy()
    out[[5, hostpar.CHUNK + 1, BAD]] = np.nan
    assert dtypes.check(out, ref, "bf16") == (False, f"3 of {N} outputs not finite (poison left or overflow)")


@pytest.mark.parametrize("n_workers", [1, 3])
@pytest.mark.parametrize("m,k", [(1, 1), (7, 33), (3, hostpar.CHUNK // 2 + 5), (hostpar.CHUNK // 64 + 9, 64),
                                 (2, 9 * hostpar.CHUNK)])
def test_float64_products_by_blocks_match_the_whole(monkeypatch, n_workers, m, k):
    """matvec64, rmatvec64, outer64 and by_rows give the float64 results of the whole arrays: the
    row-wise ones bit for bit, the reductions up to the order of their float64 sums."""
    monkeypatch.setattr(hostpar, "workers", lambda: n_workers)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((m, k), dtype=np.float32)
    x, v = rng.standard_normal(k, dtype=np.float32), rng.standard_normal(m, dtype=np.float32)
    a64, x64, v64 = (t.astype(np.float64) for t in (a, x, v))
    for got, want in ((hostpar.matvec64(a, x), a64 @ x64), (hostpar.rmatvec64(a, v), a64.T @ v64)):
        assert got.dtype == np.float64 and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * np.abs(a64).sum())
    if m * k <= 4 * hostpar.CHUNK:
        np.testing.assert_array_equal(hostpar.outer64(v, x), np.outer(v64, x64))
    np.testing.assert_array_equal(hostpar.by_rows(lambda r: r * 2 + r.sum(-1, keepdims=True), a, k),
                                  a64 * 2 + a64.sum(-1, keepdims=True))
