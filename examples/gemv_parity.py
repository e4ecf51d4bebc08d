"""torch.mv declared through the API at bench.blas's GEMV shapes: its rows must agree with
`bench.blas --ops gemv`'s torch rows (the same path; issue 37 asks within 2% on the H100).

    gapbench bench examples/gemv_parity.py --backends torch-cuda --dtypes fp16
    python -m bench.blas --ops gemv --backends torch-cuda --dtypes fp16
"""
import numpy as np

import gapbench.api as gb

mv = gb.Case(
    "mv", axes={"m": [1024, 4096, 16384], "k": [1024, 4096, 16384]},
    inputs=lambda s, rng: [rng.standard_normal((s["m"], s["k"]), dtype=np.float32),
                           rng.standard_normal(s["k"], dtype=np.float32)],
    reference=lambda A, x: A @ x, reduction=lambda s: s["k"],
    elements=lambda s: (s["m"] * s["k"] + s["k"], s["m"]), flops=lambda s: 2.0 * s["m"] * s["k"],
    dtypes=("fp32", "fp16", "bf16"), quick_axes={"m": [512], "k": [1024]})


@mv.impl("torch", baseline=True, text="torch.mv(A, x)")
def torch_mv(A, x):
    import torch

    return torch.mv(A, x)
