"""What a bench.blas record carries (Record.params), typed: every reader goes through BlasParams.of."""
from __future__ import annotations

from dataclasses import dataclass

from gapbench.core.names import DType, Precision
from gapbench.core.params import Params


@dataclass
class Stop(Params):
    """Why an arm's paired timing stopped, and how precise its median got."""
    reason: str | None = None  # converged, budget, max_samples
    converged: bool | None = None
    rel_hw: float | None = None
    drift: float | None = None
    median_ci_s: list | None = None
    rounds: int | None = None
    runs_per_round: int | None = None
    seed: int | None = None


@dataclass
class Paired(Params):
    """The row's speed against its class's vendor arm, from the same interleaved rounds."""
    vs: str | None = None  # backend/variant of the vendor arm
    speed_ratio: float | None = None  # vendor time / this row's time, median of per-round ratios
    lo: float | None = None
    hi: float | None = None
    verdict: str | None = None  # faster, level, slower
    rounds: int | None = None
    meaning: str | None = None
    #: the ratio's own 95% interval reached the run's target half-width (False: it stopped at its
    #: budget first; the table marks it *)
    converged: bool | None = None
    #: why no ratio is given: the two arms ran under different conditions (the differing field)
    not_comparable: str | None = None
    #: an arm ran at another speed in the pairing than alone (timed briefly after it), beyond both
    #: intervals: what moved. Then speed_ratio_alone, the standalone medians' ratio, is the row's.
    perturbed: str | None = None
    speed_ratio_alone: float | None = None


@dataclass
class LaunchFloor(Params):
    """bench.blas's launch floor (on by default; --launch-floor): an empty kernel timed in the case's
    paired rounds, on the stream the row's runs took (docs/findings/between-runs.md: what a one-call
    sample of a short row holds beside its kernel moves with its stream and process, and an empty
    kernel beside it moves with it). gapbench compare of two such runs takes the noise model's share of the floor's
    move off the row's (core.noise.floor_s reads `median_s`)."""
    median_s: float | None = None  # the empty kernel's median over the rounds
    what: str | None = None  # which empty kernel, on which streams
    rounds: int | None = None


@dataclass
class CpuThreads(Params):
    threads: int | None = None
    cores: int | None = None
    busy_cores_other: float | None = None
    reduced: bool | None = None


@dataclass
class Lab(Params):
    """A row of the kernel lab's own sweep binaries (until cc105c5; read from older result files):
    its variant and the lab's paired ratio against cuBLAS. The lab's kernels are rows of the run now
    (source "kernel"), timed by the one path."""
    id: int | None = None
    name: str | None = None
    config: str | None = None
    ratio_vs_vendor: float | None = None
    ci_lo: float | None = None
    ci_hi: float | None = None
    ci_coverage: float | None = None
    rounds: int | None = None
    seed: int | None = None


@dataclass
class BlasParams(Params):
    op: str | None = None  # a gapbench.ops name
    dtype: DType | None = None
    shape: dict | None = None
    shape_text: str | None = None
    strategy: str | None = None  # the kernel (or vendor call) the row ran
    precision: Precision | None = None  # tf32 where an fp32 row ran on TF32 tensor cores
    library: str | None = None  # the vendor library's path
    reference_check: str | None = None  # the library's reference kernel, checked before the case
    cache: str | None = None  # the L2 state before each timed run, in words
    l2_resident: bool | None = None  # hot mode's rotated sets fit in 2x L2 (memory allowed no more)
    rotations: int | None = None  # input sets cycled through in hot mode
    stop: Stop | None = None
    paired: Paired | None = None
    invalid_samples: int | None = None  # release-gate timeouts dropped and retaken
    hold: str | None = None  # how a framework's stream was held behind the gate
    cpu_threads: CpuThreads | None = None
    launch_floor: LaunchFloor | None = None  # --launch-floor: the row's stream's empty kernel, same rounds
    graph: bool | None = None  # the op captured into a CUDA graph and replayed (a `<row>@graph` row)
    suspect: str | None = None  # why the rate is implausibly low (under 1% of the roofline)
    #: why the rate is implausibly high: over the ceiling measured in the run, not L2-resident
    implausible: str | None = None
    #: a row off the L2 above the copy bandwidth measured in the run (read-mostly streams: a few
    #: percent), under the datasheet: labeled, not implausible
    above_copy: str | None = None
    #: a row above the ceiling measured in the run, even at the slow end of its interval, that is not
    #: implausible: within the interval of the row that set it (a tie), or that row ran under 50 us
    #: (overhead-bound, not a throughput ceiling): labeled
    above_roof: str | None = None
    #: "kernel" for a kernel timed by name (--variants all: the library's and the lab's); "lab" in
    #: older files for the lab binaries' own rows
    source: str | None = None
    lab: Lab | None = None
    # the plain cuBLAS loop's rows (backend plain-cuda)
    rounds: int | None = None
    harness_interleaved_s: list | None = None
    round_medians_s: list | None = None

    @property
    def key(self) -> tuple:
        """(op, dtype, shape): the case a record belongs to."""
        return self.op, self.dtype, self.shape_text

    @property
    def tf32(self) -> bool:
        return self.precision is Precision.tf32
