"""What bench.dist measures: operations, their nccl-tests bus factors, the size sweep, dtypes,
placements and rungs (typed in gapbench.core.names), and the environment variables it records
(the environment every child runs under is gapbench.core.process's)."""
from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field

from gapbench.core.cli import UsageError
from gapbench.core.names import CollOp, DType, Placement, Rung

OPS = tuple(CollOp)
PLACEMENTS = (Placement.out, Placement.in_)
#: the rungs, lowest first
RUNGS = tuple(Rung)
COLLECTIVE_RUNGS = tuple(r for r in Rung if r is not Rung.p2p)
#: Variables recorded with every run because they shape what NCCL / gloo / MLX do.
SHAPING_PREFIXES = ("NCCL_", "TORCH_NCCL_", "TORCH_SYMM_MEM", "NVSHMEM_", "GLOO_", "MLX_", "CUDA_VISIBLE_DEVICES",
                    "MASTER_ADDR", "MASTER_PORT", "OMP_NUM_THREADS", "TORCH_DISTRIBUTED_DEBUG")


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' bus bandwidth factor (doc/PERFORMANCE.md): busbw = algbw * factor."""
    return CollOp(op).bus_factor(n)


def supports_placement(op: str, placement: str) -> bool:
    """all_to_all and send/recv exist out of place only (as in nccl-tests' grouped p2p form)."""
    return not (placement == Placement.in_ and CollOp(op).out_of_place_only)


def elements(op: str, size: int, dtype: str, n: int) -> int:
    """Elements of the op's `size` buffer (nccl-tests' size: all_gather's output, reduce_scatter's
    input, all_to_all's whole send buffer), rounded down to a multiple of the world size where the
    op splits it into per-rank chunks. 0 when the size is too small for this world."""
    count = size // DType(dtype).itemsize
    if CollOp(op).splits:
        count -= count % n
    return count


_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MB": 1 << 20,
          "MIB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30}


def parse_bytes(text: str) -> int:
    """'1K', '256M', '4G', '1024' -> bytes (binary units, as nccl-tests reads -b/-e)."""
    m = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", str(text))
    if not m or m.group(2).upper() not in _UNITS:
        raise UsageError(f"cannot read {text!r} as a byte count (e.g. 1K, 256M, 1G)")
    return int(m.group(1)) * _UNITS[m.group(2).upper()]


def human_bytes(n: float) -> str:
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= div:
            v = n / div
            return f"{v:.0f}{unit}" if v == int(v) else f"{v:.1f}{unit}"
    return f"{int(n)}B"


def sweep(min_bytes: int, max_bytes: int, factor: float) -> list[int]:
    """nccl-tests' -b/-e/-f: min, min*f, ... up to max."""
    if min_bytes < 1 or max_bytes < min_bytes:
        raise UsageError("need 1 <= --min-bytes <= --max-bytes")
    if factor <= 1:
        raise UsageError("--step-factor must be > 1")
    out, b = [], float(min_bytes)
    while b <= max_bytes * (1 + 1e-9):
        out.append(int(b))
        b *= factor
    return out


def iterations(size: int) -> int:
    """Collectives per timed sample: enough that a sample of a small message is far above the
    host clock's resolution, few for large ones (all ranks derive the same number)."""
    return 50 if size <= (1 << 20) else 20 if size <= (64 << 20) else 5


def samples_per_round(size: int) -> int:
    """Samples per engine per round: 3 up to 64 MiB, where a sample is under 10 ms and one host
    preemption would otherwise move a round's median (the median of 2 is their mean); 2 beyond."""
    return 3 if size <= (64 << 20) else 2


#: Interleaved rounds per case. A median's distribution-free 95% interval is [min, max] of the
#: rounds' ratios up to 8 rounds; from 9 it is [2nd, 8th], so one disturbed round cannot set a bound.
ROUNDS = 9


@dataclass
class DistConfig:
    """One bench.dist sweep, as every rank receives it (JSON)."""

    ops: list[str] = field(default_factory=lambda: list(OPS))
    dtypes: list[str] = field(default_factory=lambda: [DType.bf16])
    placements: list[str] = field(default_factory=lambda: [Placement.out])
    sizes: list[int] = field(default_factory=lambda: sweep(1 << 10, 1 << 30, 4))
    samples: int = 0  # per engine per round; 0: samples_per_round(size)
    rounds: int = ROUNDS  # interleaved rounds per case
    seed: int = 20261123  # the rounds' order (the same on every rank)
    warmup: int = 5
    iters: int = 0  # 0: iterations(size)
    root: int = 0
    device: str = "cuda"  # "cuda" or "cpu"
    op_timeout_s: float = 60.0  # every collective / wait gives up after this
    nccl_debug: bool = True  # rank 0 logs NCCL_DEBUG=INFO to a file that is parsed
    #: INIT,ENV log once per communicator (version, transports, settings). TUNING logs a line per
    #: call, which costs host time: bench.dist turns it on only in a separate untimed probe pass.
    nccl_debug_subsys: str = "INIT,ENV"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "DistConfig":
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})

    def iters_for(self, size: int) -> int:
        return self.iters or iterations(size)

    def samples_for(self, size: int) -> int:
        return self.samples or samples_per_round(size)


def shaping_env(env: dict | None = None) -> dict:
    env = os.environ if env is None else env
    return {k: v for k, v in sorted(env.items()) if k.startswith(SHAPING_PREFIXES)}
