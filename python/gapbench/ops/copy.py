"""copy: device-memory copy, the measured bandwidth roofline (bytes = read + write).
Kernels: cuda/copy.cu. Run: python -m bench.blas --ops copy"""
from gapbench.ops.spec import OpSpec, uniform


def _shapes(quick: bool):
    # 2^26 elements (128-256 MB each way) is several times the 50 MB L2 of an H100/H200: the
    # bandwidth plateau. Larger copies only cost host time (inputs and checks): --shapes 268435456.
    return [{"n": 1 << 16}, {"n": 1 << 20}] if quick else [{"n": 1 << 20}, {"n": 1 << 24}, {"n": 1 << 26}]


def _framework(ad, arrays):
    (x,) = arrays
    return lambda: ad.copy(x)


SPEC = OpSpec(
    name="copy", native_op="copy",
    shapes=_shapes,
    inputs=lambda s, rng: [uniform(rng, s["n"])],
    reference=lambda a: a[0],  # exact: checked bit for bit
    elements=lambda s: (s["n"], s["n"]),
    flops=lambda s: 0.0,
    framework=_framework,
    framework_text={"torch": "x.clone()", "cupy": "x.copy()", "mlx": "x * 1 (same bytes as a copy)"},
)
