"""bench.blas: what a run measures (ops, dtypes, shapes, cache modes) and how long it may take."""
from __future__ import annotations

from dataclasses import dataclass, field

from gapbench import ops
from gapbench.core.names import Backend, CacheMode, ColdScrub, Data, DType, Parity, StreamPlan, split_list
from gapbench.ops.spec import OpSpec, Shape

PROBE = "blas"
#: streams a case's native rows time on, one a paired round in turn: cuda/blas.h kTimingStreams (a
#: GPU test checks the two agree); with --streams shared, every CUDA row of the case
STREAMS = 8


@dataclass(frozen=True)
class Mode:
    """A cache mode a case is timed in: the metric its records carry and its `cache` text."""
    cache: CacheMode
    metric: str
    text: str


HOT = Mode(CacheMode.hot, "time", CacheMode.hot.value)
COLD = {
    ColdScrub.read: Mode(CacheMode.cold_clean, "time_cold", "cold (L2 flushed clean: 2x-L2 read pass before each run)"),
    ColdScrub.write: Mode(CacheMode.cold_dirty, "time_cold_dirty",
                          "cold (L2 scrubbed dirty: 2x-L2 memset before each run)"),
}


@dataclass
class Config:
    ops: list[OpSpec] = field(default_factory=ops.all_specs)
    dtypes: list[DType] = field(default_factory=lambda: list(DType))
    shapes: list[Shape] | None = None  # None: each op's own list
    samples: int = 1000  # most paired rounds per case and cache mode
    warmup: int = 2  # untimed runs per arm before the rounds (plus 10 ms of its own run time)
    budget_s: float = 1.0  # wall seconds per case and cache mode for the paired rounds
    rel_hw: float = 0.01  # stop when every median's and ratio's 95% interval is within this
    min_rounds: int = 10
    cold: list[ColdScrub] = field(default_factory=list)  # cold-cache scrubs to time native CUDA with
    quick: bool = False
    seed: int | None = None  # None: a fresh seed, drawn once per run and recorded with every row
    data: Data = Data.randn
    #: TEST ONLY (--inject-delay-us): backend -> microseconds of device-side delay queued after every
    #: timed op of that framework, a known slowdown to check gapbench compare. Never on by default.
    inject_delay_us: dict = field(default_factory=dict)
    #: also time each CUDA framework row captured into a CUDA graph (`<row>@graph`)
    graph: bool = False
    #: --variants all: every kernel of each op's library (csrc/ops.def) a row of its own, named by
    #: strategy, beside the dispatcher's (native CUDA; arms.kernel_rows)
    kernels: bool = False
    #: False (--no-overlap): each case's inputs and float64 reference are made after the previous
    #: case, never on a host thread beside its device work (run.iterate; by default they are where
    #: every row is gated on the device)
    overlap: bool = True
    #: --processes K: the short cases (`is_short`) are timed in K fresh processes in all, this run's
    #: first and K-1 more after it (benchmarks/blas/processes.py), so their rows carry the medians of
    #: K processes and compare's interval covers the spread between processes. 1: this process only
    processes: int = 1
    #: set in those more processes only: run the short cases and nothing else
    short_only: bool = False
    #: --streams: which streams the CUDA rows time on (StreamPlan; findings/between-runs.md)
    streams: StreamPlan = StreamPlan.native
    #: --launch-floor (the default but for --quick): an empty kernel rides along in each short case's
    #: rounds (params.launch_floor); the rows alone decide when the rounds stop
    launch_floor: bool = True
    #: --parity: the CUDA rows' samples as the stream's launch parity falls, or padded to both (Parity)
    parity: Parity = Parity.as_drawn

    @staticmethod
    def default_launch_floor(quick: bool) -> bool:
        """Whether a run times the launch floor when not told: yes, but for --quick runs."""
        return not quick

    def run_seed(self) -> int:
        """The seed of this run's input data: --seed, or one drawn now (and recorded)."""
        if self.seed is None:
            import secrets

            self.seed = secrets.randbits(31)
        return self.seed

    @property
    def balanced(self) -> bool:
        """Are the CUDA rows' samples padded to both launch parities (--parity balanced)?"""
        return self.parity is Parity.balanced

    def native_streams(self) -> int:
        """Streams the native rows of a case take in turn."""
        return 1 if self.streams is StreamPlan.one else STREAMS

    def framework_streams(self) -> int:
        """Streams torch's and CuPy's rows take in turn (1: their default stream)."""
        return STREAMS if self.streams is StreamPlan.shared else 1

    def modes(self) -> list[Mode]:
        return [HOT] + [COLD[c] for c in self.cold]

    def shapes_for(self, spec: OpSpec) -> list[Shape]:
        """The shapes this op runs: --shapes entries of the op's own form, else the op's sweep."""
        return [s for s in (self.shapes or spec.shapes(self.quick)) if spec.fits(s)]

    def cases(self) -> list[tuple[OpSpec, Shape, DType]]:
        """The run's cases in the order they run: each op, its shapes, each dtype. With more than one
        process the short cases come first, in that order, so every process times them after the
        same cases (what ran before a row moves it: findings/between-runs.md); `short_only` keeps
        only them."""
        todo = [(spec, shape, dtype) for spec in self.ops for shape in self.shapes_for(spec)
                for dtype in self.dtypes if spec.dtypes is None or dtype in spec.dtypes]
        if self.processes > 1 or self.short_only:
            short = [c for c in todo if is_short(c[0], c[1])]
            todo = short if self.short_only else short + [c for c in todo if not is_short(c[0], c[1])]
        return todo

    def to_dict(self) -> dict:
        """As the run file's config records it (names, not objects)."""
        return {"ops": [s.name for s in self.ops], "dtypes": [d.value for d in self.dtypes], "shapes": self.shapes,
                "samples": self.samples, "warmup": self.warmup, "budget_s": self.budget_s, "rel_hw": self.rel_hw,
                "min_rounds": self.min_rounds, "cold": [c.value for c in self.cold], "quick": self.quick,
                "seed": self.seed, "data": self.data.value,
                **({"inject_delay_us": {b.value: us for b, us in self.inject_delay_us.items()}}
                   if self.inject_delay_us else {}),
                **({"kernels": True} if self.kernels else {}),
                **({"overlap": False} if not self.overlap else {}),
                "processes": self.processes,
                **({"short_only": True} if self.short_only else {}),
                **({"streams": self.streams.value} if self.streams is not StreamPlan.native else {}),
                "launch_floor": self.launch_floor,
                **({"parity": self.parity.value} if self.parity is not Parity.as_drawn else {})}

    @classmethod
    def from_dict(cls, d: dict) -> "Config":
        """The Config a run file's config (to_dict) records: what --processes hands its more
        processes, so they run the same cases on the same data."""
        specs = [ops.get(n) for n in d["ops"]]
        if any(s is None for s in specs):
            raise ValueError(f"unknown op in {d['ops']}: only declared ops run in more than one process")
        return cls(ops=specs, dtypes=[DType(x) for x in d["dtypes"]], shapes=d.get("shapes"), samples=d["samples"],
                   warmup=d["warmup"], budget_s=d["budget_s"], rel_hw=d["rel_hw"], min_rounds=d["min_rounds"],
                   cold=[ColdScrub(c) for c in d["cold"]], quick=d["quick"], seed=d["seed"], data=Data(d["data"]),
                   inject_delay_us={Backend(b): us for b, us in (d.get("inject_delay_us") or {}).items()},
                   kernels=bool(d.get("kernels")), overlap=d.get("overlap", True), processes=d.get("processes", 1),
                   short_only=bool(d.get("short_only")),
                   streams=StreamPlan(d.get("streams") or StreamPlan.native.value),
                   launch_floor=bool(d.get("launch_floor", False)),  # runs before 2026-11-28 had none
                   parity=Parity(d.get("parity") or Parity.as_drawn.value))


#: A case is short where it reads and writes at most SHORT_ELEMENTS elements and does at most
#: SHORT_FLOPS: at the default shapes, the cases whose rows take under about 10 us on an H100 or
#: H200 (copy 2^20, GEMV and VJP 256^2 and 1024^2, GEMM 8x256^3). Such rows move 1-2% between
#: fresh processes, each its own way (findings/between-runs.md), more than a 3% band can hold from
#: one process a side; their process medians are what --processes adds. By the case's size, not
#: its measured time, so every run and every process picks the same cases.
SHORT_ELEMENTS = 4 << 20
SHORT_FLOPS = 1e9


def is_short(spec: OpSpec, shape: Shape) -> bool:
    """Whether a case is short (SHORT_ELEMENTS, SHORT_FLOPS)."""
    r, w = spec.elements(shape)
    return r + w <= SHORT_ELEMENTS and spec.flops(shape) <= SHORT_FLOPS


def parse_shapes(text: str) -> list[Shape]:
    """"4096x4096" (m x k), "8x2000x2000x2000" (batch x m x n x k), "1048576" (elements: n). Each op
    takes the shapes of its own form."""
    forms = {1: ("n",), 2: ("m", "k"), 4: ("batch", "m", "n", "k")}
    out = []
    for part in split_list(text):
        try:
            dims = [int(x) for x in part.lower().split("x")]
        except ValueError:
            raise ValueError(f"bad shape {part!r}: use N, MxK or BxMxNxK with integers") from None
        if any(d < 1 for d in dims):
            raise ValueError(f"bad shape {part!r}: every dimension must be >= 1")
        if len(dims) not in forms:
            raise ValueError(f"bad shape {part!r}: use N (copy), MxK (gemv, vjp) or BxMxNxK (gemm)")
        out.append(dict(zip(forms[len(dims)], dims)))
    return out


def form_text(spec: OpSpec) -> str:
    return "N" if spec.form == ("n",) else "x".join(d[0].upper() for d in spec.form)


def ops_for_shapes(specs: list[OpSpec], shapes: list[Shape], explicit: bool) -> list[OpSpec]:
    """The ops --shapes runs. Each op takes the shapes of its own form; a shape no selected op
    takes, or (with --ops given) an op no shape fits, is an error, not a silent no-op. Without
    --ops, the ops are those the shapes fit."""
    from gapbench.ops.spec import shape_text

    unused = [shape_text(s) for s in shapes if not any(spec.fits(s) for spec in specs)]
    if unused:
        raise ValueError(f"--shapes {', '.join(unused)}: no selected op takes this form; "
                         + "; ".join(f"{s.name} takes {form_text(s)}" for s in specs))
    if not explicit:
        return [spec for spec in specs if any(spec.fits(s) for s in shapes)]
    empty = [spec for spec in specs if not any(spec.fits(s) for s in shapes)]
    if empty:
        raise ValueError(f"--shapes gives no shape for {', '.join(s.name for s in empty)}: "
                         + "; ".join(f"{s.name} takes {form_text(s)}" for s in empty))
    return specs
