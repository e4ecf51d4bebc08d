"""rmsnorm: RMSNorm forward, y = x * w / sqrt(mean(x^2) + eps) over each row of x (m tokens of k
hidden), w of length k; eps is the op's scalar in csrc/ops.def. Memory-bound (read x and w, write
y): held against the copy bandwidth. Kernels: cuda/ and metal/ (csrc/ops.def); no vendor library
has it. Run: python -m bench.blas --ops rmsnorm"""
import numpy as np

from gapbench.core import hostpar, opdecl
from gapbench.ops.spec import C, FrameworkImpl, M, OpSpec, T, draw, from_ops_def

EPS = opdecl.get("rmsnorm").scalar
#: fp32 roundings of a correct kernel beyond the sum of squares, each relative to y: the mean, + eps,
#: the reciprocal square root (up to 2 ulps on GPUs), and the two products; in units of one
#: accumulation term's rounding, so the bound's scale is (1 + NORM_ROUNDINGS) |y|
NORM_ROUNDINGS = 6


def shapes(quick: bool):
    if quick:
        return [{"m": 256, "k": 1024}, {"m": 1024, "k": 4096}]
    # LLM hidden sizes; 8192 tokens x 4096 (bf16: 64 MB each way) is well past an H100's 50 MB L2.
    # One shape, so the default bench.blas stays within its two minutes (--shapes takes more).
    return [{"m": 8192, "k": 4096}]


def _rms(x: np.ndarray, sum_sq: np.ndarray) -> np.ndarray:
    return np.sqrt(sum_sq / x.shape[-1] + EPS)


def reference(a):
    x, w = a
    return x / _rms(x, np.sum(x * x, axis=-1, keepdims=True)) * w


def values64(a):
    """reference in float64, block by block of rows (each row is normalised on its own: the same
    values as on whole float64 copies)."""
    x, w = a
    w64 = np.asarray(w, dtype=np.float64)
    return hostpar.by_rows(lambda rows: reference([rows, w64]), x, x.shape[-1])


def _scale(a, values, k):
    return hostpar.elementwise(lambda c: np.abs(c) * (1 + NORM_ROUNDINGS), values, np.float64)


def dropped(a, j):
    """A kernel that left x[:, j]^2 out of the mean."""
    x, w = a
    return x / _rms(x, np.sum(x * x, axis=-1, keepdims=True) - x[:, j:j + 1] ** 2) * w


def _torch(ad, a):
    x, w = a
    return lambda: ad.torch.nn.functional.rms_norm(x, (x.shape[-1],), w, eps=EPS)


def _torch_unfused(ad, a):
    x, w = a
    torch = ad.torch

    def run():
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * w.float()).to(x.dtype)
    return run


def _mlx(ad, a):
    """mx.fast.rms_norm rounds x / rms to the storage type before the product with w: for fp16/bf16
    that second rounding (up to an ulp) is outside the fp32-accumulation contract every row is
    checked against, so those dtypes run it on fp32 copies and cast the result."""
    x, w = a
    mx = ad.mx
    if x.dtype == mx.float32:
        return lambda: mx.fast.rms_norm(x, w, EPS)
    return lambda: mx.fast.rms_norm(x.astype(mx.float32), w.astype(mx.float32), EPS).astype(x.dtype)


def _cupy_unfused(ad, a):
    x, w = a
    cp = ad.cp

    def run():
        xf = x.astype(cp.float32)
        return (xf / cp.sqrt((xf * xf).mean(-1, keepdims=True) + EPS) * w.astype(cp.float32)).astype(x.dtype)
    return run


SPEC = OpSpec(
    **from_ops_def("rmsnorm"),
    shapes=shapes,
    inputs=lambda s, rng: [draw(rng, s["m"], s["k"]), draw(rng, s["k"])],
    reference=reference,
    values64=values64,
    reduction=lambda s: s["k"],
    flops=lambda s: 4.0 * s["m"] * s["k"],  # square-add, and two products per element
    frameworks=(
        FrameworkImpl(T, "torch.nn.functional.rms_norm(x, (k,), w, eps)", _torch),
        FrameworkImpl(T, "x * rsqrt(x.pow(2).mean(-1) + eps) * w (fp32, then cast)", _torch_unfused,
                      variant="torch-unfused"),
        FrameworkImpl(C, "x / sqrt((x * x).mean(-1) + eps) * w (fp32, then cast)", _cupy_unfused,
                      variant="cupy-unfused"),
        FrameworkImpl(M, "mx.fast.rms_norm(x, w, eps) (fp16/bf16: on fp32 copies, then cast)", _mlx),
    ),
    test_shapes=({"m": 1, "k": 1}, {"m": 7, "k": 33}, {"m": 64, "k": 256}, {"m": 33, "k": 1000}),
    # 256 rows of 32: one dropped square moves a whole row by ~1% (x^2 / (2 k mean(x^2)))
    fault_shape={"m": 256, "k": 32},
    dropped=dropped,
    scale=_scale,
)
