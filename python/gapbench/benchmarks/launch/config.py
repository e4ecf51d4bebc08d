"""Launch benchmark: what the parent and its fresh worker processes share (the configuration,
the op's inputs and its check)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

PROBE = "launch"
#: the inputs of the 1-element add, as every launch row's conditions name them (the plain loop's
#: null kernel is paired with those rows under the same name)
INPUT_DATA = "uniform[0.5, 2)"

# Phases measured once per fresh process; aggregated over processes by the parent.
PHASES = ("import", "context", "library_compile", "pipeline_create", "cold", "first_warm")
WARM_METRICS = ("submit", "roundtrip", "stream_b2b", "device_kernel", "graph_node")
#: the most samples one measurement takes (each is kept, in every process)
MAX_SAMPLES = 100_000_000
#: host bytes per element of the add: two fp32 inputs and the output, their float64 copies and
#: the reference for the check
HOST_BYTES_PER_ELEMENT = 48


@dataclass
class Config:
    samples: int = 1000  # most samples per metric and process (the stopping rule usually ends sooner)
    inner: int = 100
    warmup: int = 20
    budget_s: float = 0.5  # wall seconds per metric and process
    rel_hw: float = 0.01  # stop once the median's 95% interval half-width is within this fraction
    #: fresh processes per backend: each pays its framework's import (torch 2.6-4.9 s on the lent
    #: GPUs), most of a default run's time, so one by default keeps the run under 30 s; its cold
    #: figures are then one process's (--cold-samples N, or gapbench run --repeat N, for a spread)
    cold_samples: int = 1
    warm_processes: int = 1  # of those, the ones whose warm samples are pooled
    n: int = 1  # elements of the add op
    seed: int | None = None
    timeout: float = 600.0
    #: wall seconds per metric and warm framework process for the rounds paired with the native floor
    pair_budget_s: float = 0.3
    #: paired rounds of the plain C++ loop and the harness (native-cuda; a fresh process pair each); 0: none
    plain_rounds: int = 6
    #: the CPU every worker and plain loop is bound to (core.affinity.launch_cpu; None: not bound)
    cpu: int | None = None
    #: TEST ONLY (--inject-delay-us): backend -> microseconds of host busy-wait added to every op of
    #: that framework, a known slowdown to check that gapbench compare detects one. Never on by default.
    inject_delay_us: dict = field(default_factory=dict)

    @classmethod
    def quick(cls) -> "Config":
        return cls(samples=30, inner=20, warmup=5, cold_samples=2, warm_processes=1, budget_s=0.2, pair_budget_s=0.1)

    def validate(self) -> None:
        for name in ("samples", "inner", "cold_samples", "warm_processes", "n"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        if self.warmup < 0:
            raise ValueError("--warmup must be >= 0")
        if not self.budget_s > 0 or not 0 < self.rel_hw < 1:
            raise ValueError("--budget must be > 0 and --rel-hw between 0 and 1")
        if not self.pair_budget_s > 0:
            raise ValueError(f"pair_budget_s must be > 0 seconds, got {self.pair_budget_s:g}")
        if self.plain_rounds < 0 or self.plain_rounds == 1:
            raise ValueError(f"--plain-rounds must be 0 (no plain check) or >= 2 (paired rounds), got {self.plain_rounds}")
        if not self.timeout > 0:
            raise ValueError(f"--timeout must be > 0 seconds, got {self.timeout:g}")
        if self.samples > MAX_SAMPLES:
            hours = self.samples * self.inner * len(WARM_METRICS) * self.warm_processes * 1e-6 / 3600
            raise ValueError(f"--samples {self.samples}: at most {MAX_SAMPLES} per measurement (every sample is kept; at "
                             f"even 1 us per op the warm metrics alone would take {hours:.3g} h per backend)")
        from gapbench.backends.memfit import host_available, shortfall

        why = shortfall(self.n * HOST_BYTES_PER_ELEMENT, host_available(), "host memory for the inputs and the check")
        if why:
            raise ValueError(f"--n {self.n}: {why}")


def add_work(n: int) -> dict:
    return {"flops": float(n), "bytes": float(12 * n)}  # two fp32 reads and one write per element


def rng(cfg: Config) -> np.random.Generator:
    return np.random.default_rng(cfg.seed)


def check_add(out: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[bool, str]:
    """Compare an fp32 add against the float64 reference; NaN (poison left behind) fails."""
    ref = a.astype(np.float64) + b.astype(np.float64)
    out = np.asarray(out, dtype=np.float64).reshape(ref.shape)
    if not np.all(np.isfinite(out)):
        return False, f"{int(np.sum(~np.isfinite(out)))} of {out.size} outputs not written (NaN poison left)"
    err = float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30))
    ok = err <= 1e-6  # one fp32 rounding of a sum
    return ok, f"rel. error {err:.2e} vs float64 (bound 1e-6), n={out.size}"


def random_inputs(cfg: Config, n: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    r = rng(cfg)
    n = n or cfg.n
    # Away from zero: a result on zeros proves nothing.
    a = r.uniform(0.5, 2.0, n).astype(np.float32)
    b = r.uniform(0.5, 2.0, n).astype(np.float32)
    return a, b
