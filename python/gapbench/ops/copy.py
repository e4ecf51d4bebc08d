"""copy: device-memory copy, the measured bandwidth ceiling (bytes = read + write).
Kernels: cuda/ and metal/ (csrc/ops.def). Run: python -m bench.blas --ops copy"""
from gapbench.ops.spec import Bound, C, FrameworkImpl, M, OpSpec, T, draw, from_ops_def


def _shapes(quick: bool):
    # 2^26 elements (128-256 MB each way) is several times the 50 MB L2 of an H100/H200: the
    # bandwidth plateau. Larger copies only cost host time (inputs and checks): --shapes 268435456.
    return [{"n": 1 << 16}, {"n": 1 << 20}] if quick else [{"n": 1 << 20}, {"n": 1 << 24}, {"n": 1 << 26}]


SPEC = OpSpec(
    **from_ops_def("copy"),
    shapes=_shapes,
    inputs=lambda s, rng: [draw(rng, s["n"])],
    reference=lambda a: a[0],  # exact: checked bit for bit
    reduction=lambda s: 0,
    flops=lambda s: 0.0,
    frameworks=(
        FrameworkImpl(T, "x.clone()", lambda ad, a: lambda: a[0].clone()),
        FrameworkImpl(C, "x.copy()", lambda ad, a: lambda: a[0].copy()),
        # MLX has no explicit copy op: an elementwise op moving the same bytes
        FrameworkImpl(M, "x * 1 (same bytes as a copy)", lambda ad, a: lambda: a[0] * 1),
    ),
    ceiling=Bound.memory,
    test_shapes=({"n": 1}, {"n": 7}, {"n": 1000}, {"n": 4099}),
    fault_shape={"n": 65536},
)
