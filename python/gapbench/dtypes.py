"""Element types of the BLAS probes and how numpy holds them. numpy has no bfloat16: bf16 values
are kept as float32 already rounded to bf16 (round to nearest even, as the GPUs do) and packed to
their 16-bit pattern only when handed to native code."""
from __future__ import annotations

import numpy as np

DTYPES = ("fp32", "fp16", "bf16")
ITEMSIZE = {"fp32": 4, "fp16": 2, "bf16": 2}
#: relative-error bound ||out - ref|| / ||ref|| against float64 on the rounded inputs; beyond it
#: a result is a failure. fp32: summation-order noise; fp16/bf16: output rounding dominates.
TOLERANCE = {"fp32": 1e-4, "tf32": 5e-3, "fp16": 5e-3, "bf16": 3e-2}


def round_bf16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to the nearest bf16 (ties to even), returned as float32."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return rounded.view(np.float32)


def round_to(x: np.ndarray, dtype: str) -> np.ndarray:
    """x (float32) rounded to `dtype`, held as float32."""
    x = np.asarray(x, dtype=np.float32)
    if dtype == "fp16":
        return x.astype(np.float16).astype(np.float32)
    if dtype == "bf16":
        return round_bf16(x)
    return x


def to_bytes(x: np.ndarray, dtype: str) -> np.ndarray:
    """The array as the native code stores it (C-contiguous, element type `dtype`)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if dtype == "fp16":
        return x.astype(np.float16)
    if dtype == "bf16":
        return (round_bf16(x).view(np.uint32) >> 16).astype(np.uint16)
    return x


def from_bytes(buf: bytes, dtype: str) -> np.ndarray:
    """Native output bytes back to float64 values."""
    if dtype == "fp16":
        return np.frombuffer(buf, dtype=np.float16).astype(np.float64)
    if dtype == "bf16":
        u = np.frombuffer(buf, dtype=np.uint16).astype(np.uint32) << 16
        return u.view(np.float32).astype(np.float64)
    return np.frombuffer(buf, dtype=np.float32).astype(np.float64)


def rel_error(out: np.ndarray, ref: np.ndarray) -> float:
    out = np.asarray(out, dtype=np.float64).ravel()
    ref = np.asarray(ref, dtype=np.float64).ravel()
    if out.shape != ref.shape:
        raise ValueError(f"output has {out.size} elements, reference {ref.size}")
    if not np.all(np.isfinite(out)):
        return float("inf")
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-300))


def check(out: np.ndarray, ref: np.ndarray, dtype: str) -> tuple[bool, str]:
    out = np.asarray(out, dtype=np.float64).ravel()
    bad = int(np.sum(~np.isfinite(out)))
    if bad:
        return False, f"{bad} of {out.size} outputs not finite (poison left or overflow)"
    err = rel_error(out, ref)
    bound = TOLERANCE[dtype]
    return err <= bound, f"rel. error {err:.2e} vs float64 (bound {bound:.0e})"
