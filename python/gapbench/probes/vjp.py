"""vjp: both cotangents of y = W x (W row-major m x k) for a cotangent v (paper Figure 7):
dx = W^T v (vjp_dx) and dW = v x^T (vjp_dw). Frameworks use their own autodiff (torch.func.vjp,
mx.vjp; mx.vjp also recomputes the forward product, as MLX has no separate backward call);
cupy and the native kernels compute them directly. Kernels: cuda/vjp.cu, metal/vjp.metal.
Run: python -m bench.blas --ops vjp"""
import numpy as np

from ..blasspec import OpSpec, uniform
from .gemv import shapes


def _dx(ad, fam, arrays):
    W, v = arrays
    if fam == "torch":
        x = ad.torch.ones(W.shape[1], dtype=W.dtype, device=W.device)
        _, fn = ad.torch.func.vjp(lambda x_: W @ x_, x)
        return lambda: fn(v)[0]
    if fam == "cupy":
        return lambda: W.T @ v
    mx = ad.mx
    x = mx.ones((W.shape[1],), dtype=W.dtype)
    return lambda: mx.vjp(lambda x_: W @ x_, [x], [v])[1][0]


def _dw(ad, fam, arrays):
    v, x = arrays
    if fam == "torch":
        W = ad.torch.ones(v.shape[0], x.shape[0], dtype=x.dtype, device=x.device)
        _, fn = ad.torch.func.vjp(lambda W_: W_ @ x, W)
        return lambda: fn(v)[0]
    if fam == "cupy":
        return lambda: ad.cp.outer(v, x)
    mx = ad.mx
    W = mx.ones((v.shape[0], x.shape[0]), dtype=x.dtype)
    return lambda: mx.vjp(lambda W_: W_ @ x, [W], [v])[1][0]


DX = OpSpec(
    name="vjp_dx", native_op=2,
    variants={1: "one thread per column", 2: "row slices x 16-byte column packs, then reduce",
              3: "as 2, 4 rows' loads in flight, 2x the slices",
              4: "8 rows' loads in flight, 4x fewer slices than 3",
              5: "as 4 in one launch: last slice block reduces; evict-first loads",
              6: "as 4, the reduce launched as a programmatic dependent (sm_90+)",
              7: "rows split among a block's warps, one partial row per block, PDL reduce",
              8: "as 7 in one launch, 4-warp blocks: partial rows added atomically in L2",
              9: "TMA ring streams W, equal work per resident block, atomic finish (sm_90+)",
              10: "as 8 on 9's schedule: exactly the resident blocks, equal shares",
              11: "128-byte column strips: at wide k each block owns its columns, no finish",
              12: "as 11 with 256-byte strips (cuBLAS's width), one 32-warp block per SM",
              13: "12 on tall W; under 4096 rows 128-byte strips, blocks sized for one wave",
              14: "as 13, W loaded evict-first under 4096 rows (leaves other L2 lines be)"},
    shapes=shapes,
    inputs=lambda s, rng: [uniform(rng, s["m"], s["k"]), uniform(rng, s["m"])],
    reference=lambda a: a[0].T @ a[1],
    reduction=lambda s: s["m"],
    elements=lambda s: (s["m"] * s["k"] + s["m"], s["k"]),
    flops=lambda s: 2.0 * s["m"] * s["k"],
    framework=_dx,
    framework_text={"torch": "torch.func.vjp(W @ x, x)(v)", "cupy": "W.T @ v", "mlx": "mx.vjp(W @ x, x, v)"},
)

DW = OpSpec(
    name="vjp_dw", native_op=3,
    variants={1: "one thread per element", 2: "16-byte packs, grid-stride",
              3: "2-D grid, x pack reused down rows, streaming stores"},
    shapes=shapes,
    inputs=lambda s, rng: [uniform(rng, s["m"]), uniform(rng, s["k"])],
    reference=lambda a: np.outer(a[0], a[1]),
    reduction=lambda s: 1,
    elements=lambda s: (s["m"] + s["k"], s["m"] * s["k"]),
    flops=lambda s: 1.0 * s["m"] * s["k"],
    framework=_dw,
    framework_text={"torch": "torch.func.vjp(W @ x, W)(v)", "cupy": "cupy.outer(v, x)", "mlx": "mx.vjp(W @ x, W, v)"},
)
