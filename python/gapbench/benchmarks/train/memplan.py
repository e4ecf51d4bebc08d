"""The memory scenarios of the paper's Figure 2: how much memory a training job needs in theory
(the paper's Table 2), how much the device has, and which scenario that puts the job in.

Theory counts the model state only: weights, gradients and AdamW's two moments. With fp32
training and torch AMP alike the weights, gradients and moments are fp32 (AMP keeps fp32
master weights and casts per op), so every trainable parameter costs 16 bytes; a frozen one
(LoRA's base model) costs only its weight. Activations come on top and depend on batch and
sequence length, which is why the scenario has a "near capacity" band.

The paper's Table 2 lists parameters_in_millions x 16 / 1024 and labels it GiB (769M -> 12.016):
that mixes 10^6 and 2^30, so its figures are 4.9% above the true GiB. Both are kept here."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from gapbench.backends.memfit import device_capacity

GIB = 1 << 30
#: bytes per trainable parameter: fp32 weight + fp32 gradient + AdamW exp_avg + exp_avg_sq
BYTES_TRAINABLE = 16
#: below this fraction of capacity the model state "fits"; between it and 1.0 it is "near capacity"
NEAR_CAPACITY = 0.80

FITS, NEAR, DOES_NOT_FIT = "fits", "near capacity", "does not fit (needs offload)"


@dataclass
class Plan:
    params: int
    trainable: int
    theoretical_bytes: int
    paper_table2_gib: float  # the paper's convention, for comparison with its Table 2
    capacity_bytes: int | None
    capacity_source: str
    fraction: float | None
    scenario: str

    def to_dict(self) -> dict:
        d = asdict(self)
        d["theoretical_gib"] = self.theoretical_bytes / GIB
        return d


def theoretical_bytes(params: int, trainable: int, weight_bytes: int = 4) -> int:
    return trainable * BYTES_TRAINABLE + (params - trainable) * weight_bytes


def classify(need: int, capacity: int | None) -> tuple[float | None, str]:
    if not capacity:
        return None, "unknown (device capacity not readable)"
    f = need / capacity
    return f, FITS if f < NEAR_CAPACITY else (NEAR if f <= 1.0 else DOES_NOT_FIT)


def plan(params: int, trainable: int, backend: str, capacity: int | None = None) -> Plan:
    src = "given"
    if capacity is None:
        capacity, src = device_capacity(backend)
    need = theoretical_bytes(params, trainable)
    frac, scen = classify(need, capacity)
    return Plan(params, trainable, need, round(params / 1e6) * BYTES_TRAINABLE / 1024, capacity, src, frac, scen)
