"""gemv: y = A x, A row-major m x k (paper Figure 6). Memory-bound: the roofline is the copy
bandwidth. Kernels: cuda/gemv.cu, metal/gemv.metal. Run: python -m bench.blas --ops gemv"""
from gapbench.ops.spec import OpSpec, uniform

SQUARE = [256, 1024, 4096, 16384]
SKINNY = [(1024, 16384), (16384, 1024), (4096, 16384)]


def shapes(quick: bool):
    if quick:
        return [{"m": 256, "k": 256}, {"m": 512, "k": 1024}]
    return [{"m": s, "k": s} for s in SQUARE] + [{"m": m, "k": k} for m, k in SKINNY]


def _framework(ad, arrays):
    A, x = arrays
    return lambda: ad.mv(A, x)


SPEC = OpSpec(
    name="gemv", native_op="gemv",
    shapes=shapes,
    inputs=lambda s, rng: [uniform(rng, s["m"], s["k"]), uniform(rng, s["k"])],
    reference=lambda a: a[0] @ a[1],
    elements=lambda s: (s["m"] * s["k"] + s["k"], s["m"]),
    flops=lambda s: 2.0 * s["m"] * s["k"],
    reduction=lambda s: s["k"],
    framework=_framework,
    framework_text={"torch": "torch.mv(A, x)", "cupy": "A @ x", "mlx": "A @ x"},
)
