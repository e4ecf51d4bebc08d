"""Your own op, timed by gapbench's method (issue 37): declare a case, give it implementations,
and it runs through the path the built-in ops run through (a Case becomes an OpSpec, the
declaration every built-in op is; bench.blas's run times it).

    import numpy as np
    import gapbench.api as gb

    softmax = gb.Case("softmax", axes={"m": [4096], "k": [1024, 4096]},
                      inputs=lambda s, rng: [rng.standard_normal((s["m"], s["k"]), dtype=np.float32)],
                      reference=lambda x: np.exp(x - x.max(-1, keepdims=True)) / ...,
                      tolerance={"fp32": (1e-5, 1e-7)}, elements=lambda s: (s["m"] * s["k"],) * 2)

    @softmax.impl("torch", baseline=True)
    def composite(x):
        e = (x - x.amax(-1, keepdim=True)).exp()
        return e / e.sum(-1, keepdim=True)

    result = softmax.run(quick=True)          # or: gapbench bench this_file.py --quick

What the method gives every implementation, as it gives the built-in rows:
- it runs once on the case's inputs (rounded to the dtype), once more over its poisoned output,
  and that output is checked against the float64 reference under the case's error model (the
  built-in one from the terms summed per output, `reduction=`, or a stated `tolerance=`); a wrong
  result is a `failed` row, never timed;
- on a GPU its inputs are rotated past the L2 in as many sets as a native case would use, each
  run held behind the release gate where the framework's stream can be held (torch, CuPy);
- every implementation of a device class is an arm of one paired, interleaved timing with the
  stopping rule, and each is paired against the `baseline` (a ratio with its 95% interval);
- the last timed run's own output is checked again;
- the records are bench.blas records (probe blas, op = the case's name): tables, `gapbench
  compare`, `history` and `report` read them unchanged.

An implementation is any callable on the framework's arrays that returns the output:
`impl("torch")` receives torch tensors (CPU or CUDA: it runs on each torch backend of the run),
`impl("cupy")` CuPy arrays, `impl("mlx")` MLX arrays. A Triton kernel is a torch implementation
(its launcher takes torch tensors); a raw CUDA kernel is a CuPy implementation (cupy.RawKernel).
With `setup=True` the function is called once with the arrays and returns the callable that runs
the op (allocate an output buffer there; the method poisons it before the checked run)."""
from __future__ import annotations

import io
import itertools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from gapbench.core.names import DeviceClass, DType, Family, UnknownName
from gapbench.core.result import Record
from gapbench.ops.spec import Bound, FrameworkImpl, OpSpec, Source

FAMILIES = {f.value: f for f in (Family.torch, Family.cupy, Family.mlx)}


class CaseError(ValueError):
    """A case declared wrongly: the message says what to change."""


@dataclass
class Impl:
    family: Family
    name: str
    fn: Callable
    baseline: bool = False
    setup: bool = False
    text: str = ""
    devices: tuple | None = None


@dataclass
class Case:
    """One op of yours: its axes (every combination is a shape), inputs, float64 reference, error
    model, work, and implementations (`impl`)."""
    name: str
    axes: dict[str, Sequence[int]]
    inputs: Callable[[dict, np.random.Generator], list[np.ndarray]]
    reference: Callable[..., np.ndarray]
    #: (elements read, elements written) per run: the bytes moved, for the rate and the roofline
    elements: Callable[[dict], tuple[int, int]]
    flops: Callable[[dict], float] = lambda s: 0.0
    #: the built-in error model: terms summed per output (a sum of products; 0: an exact copy) ...
    reduction: Callable[[dict], int] | None = None
    #: ... or a stated one: dtype name -> (rtol, atol), each output within atol + rtol |ref|
    tolerance: dict[str, tuple[float, float]] | None = None
    dtypes: Sequence[str] = (DType.fp32.value,)
    #: the axes of --quick (default: the smallest value of each axis)
    quick_axes: dict[str, Sequence[int]] | None = None
    #: memory: its rate is bytes/s against the copy bandwidth; compute: flop/s
    bound: str = "memory"
    impls: list[Impl] = field(default_factory=list)

    def __post_init__(self):
        if not self.name or not self.name.replace("_", "").replace("-", "").isalnum():
            raise CaseError(f"case name {self.name!r}: use letters, digits, - and _")
        from gapbench import ops

        if self.name in ops.choices():
            raise CaseError(f"case name {self.name!r} is a built-in op: run it with bench.blas --ops {self.name}")
        if not self.axes or any(len(v) == 0 for v in self.axes.values()):
            raise CaseError(f"case {self.name}: give every axis at least one value, e.g. axes={{'n': [1024]}}")
        if (self.reduction is None) == (self.tolerance is None):
            raise CaseError(f"case {self.name}: give exactly one error model, reduction= (terms summed per output) "
                            "or tolerance= ({'fp32': (rtol, atol), ...})")
        try:
            self.dtypes = tuple(DType.parse(d).value for d in self.dtypes)
        except UnknownName as e:
            raise CaseError(f"case {self.name}: {e}") from None
        if self.tolerance is not None:
            missing = [d for d in self.dtypes if d not in self.tolerance]
            if missing:
                raise CaseError(f"case {self.name}: tolerance= states no (rtol, atol) for {', '.join(missing)}")
        if self.bound not in ("memory", "compute"):
            raise CaseError(f"case {self.name}: bound= is 'memory' or 'compute', not {self.bound!r}")

    # ---- implementations
    def impl(self, family: str, name: str | None = None, *, baseline: bool = False, setup: bool = False,
             text: str = "", devices: Sequence[str] | None = None) -> Callable[[Callable], Callable]:
        """Decorator: `fn(*arrays) -> output` runs the op on `family`'s arrays (torch, cupy, mlx).
        `baseline`: the implementation the others are paired against (one per case). `setup`: `fn`
        is called once with the arrays and returns the callable that runs the op. `devices`: the
        device classes it runs on (cpu, cuda, metal; a Triton kernel: ["cuda"]): elsewhere its row
        says so."""
        def add(fn: Callable) -> Callable:
            self.add(family, fn, name or fn.__name__, baseline=baseline, setup=setup, text=text, devices=devices)
            return fn
        return add

    def add(self, family: str, fn: Callable, name: str, *, baseline: bool = False, setup: bool = False,
            text: str = "", devices: Sequence[str] | None = None) -> None:
        if family not in FAMILIES:
            raise CaseError(f"case {self.name}: implementation family {family!r}: use one of {', '.join(FAMILIES)}")
        if any(i.name == name and i.family.value == family for i in self.impls):
            raise CaseError(f"case {self.name}: two {family} implementations named {name!r}")
        if baseline and any(i.baseline for i in self.impls):
            raise CaseError(f"case {self.name}: one baseline per case ({self._baseline().name} already is)")
        try:
            devs = tuple(DeviceClass.parse(d) for d in devices) if devices is not None else None
        except UnknownName as e:
            raise CaseError(f"case {self.name}: {e}") from None
        self.impls.append(Impl(FAMILIES[family], name, fn, baseline, setup, text or f"{name} ({family})", devs))

    def _baseline(self) -> Impl | None:
        return next((i for i in self.impls if i.baseline), None)

    # ---- the declaration the built-in ops make
    def shapes(self, quick: bool) -> list[dict]:
        axes = self.quick_axes if quick and self.quick_axes else (
            {k: [min(v)] for k, v in self.axes.items()} if quick else self.axes)
        names = list(self.axes)
        return [dict(zip(names, combo)) for combo in itertools.product(*(axes[n] for n in names))]

    def spec(self) -> OpSpec:
        """This case as an OpSpec, the declaration bench.blas times."""
        if not self.impls:
            raise CaseError(f"case {self.name}: no implementation; add one with @{self.name}.impl('torch')")
        if self._baseline() is None:
            raise CaseError(f"case {self.name}: name one implementation baseline=True (the others are paired "
                            "against it)")

        def inputs(shape: dict, src: Source) -> list[np.ndarray]:
            arrays = self.inputs(dict(shape), src.rng)
            return [np.ascontiguousarray(a, dtype=np.float32) for a in arrays]

        def build(impl: Impl):
            if impl.setup:
                return lambda ad, arrays: impl.fn(*arrays)
            return lambda ad, arrays: (lambda: impl.fn(*arrays))

        # the baseline first: on each device class it is the arm every other is paired against
        ordered = sorted(self.impls, key=lambda i: not i.baseline)
        tol = {DType.parse(k).value: tuple(v) for k, v in self.tolerance.items()} if self.tolerance else None
        return OpSpec(
            name=self.name, form=tuple(self.axes), shapes=self.shapes, inputs=inputs,
            reference=lambda arrays: np.asarray(self.reference(*arrays), dtype=np.float64),
            reduction=self.reduction or (lambda s: 1),
            flops=self.flops, elements=lambda s: tuple(int(x) for x in self.elements(s)),
            frameworks=tuple(FrameworkImpl(i.family, i.text, build(i), variant=i.name, baseline=i.baseline,
                                           devices=i.devices) for i in ordered),
            bound=Bound(self.bound), tolerance=tol, dtypes=tuple(DType.parse(d) for d in self.dtypes),
            tf32_fallback=False)

    def run(self, **kw) -> "Result":
        """Measure this case (see measure)."""
        return measure([self], **kw)


@dataclass
class Result:
    """What a run of cases gives back: its records (bench.blas's schema), the file they were
    written to (None without out=), and the terminal tables."""
    records: list[Record]
    path: Path | None
    tables: list = field(default_factory=list)

    def ok(self) -> list[Record]:
        return [r for r in self.records if r.status == "ok" and r.samples_s]

    def __str__(self) -> str:
        from rich.console import Console

        con = Console(width=120, record=True, file=io.StringIO(), force_terminal=False)
        for t in self.tables:
            con.print(t)
        return con.export_text()


def measure(cases: Sequence[Case], *, backends: str | Sequence | None = None, quick: bool = False,
            dtypes: Sequence[str] | None = None, cold: Sequence[str] | None = None, seed: int | None = None,
            graph: bool = False, out: str | Path | None = None, progress: bool = False,
            argv: Sequence[str] | None = None, parity: str = "as-drawn") -> Result:
    """Time `cases` on `backends` (a comma list or names; default: every backend of the cases'
    families that runs here) by bench.blas's method; write the records to `out` if given.
    `graph`: each CUDA implementation also captured into a CUDA graph and timed beside it.
    `parity`: "balanced" pads each gated CUDA sample to both launch parities of its stream, as
    bench.blas --parity balanced does (names.Parity)."""
    from gapbench.backends import registry
    from gapbench.benchmarks.blas import tables
    from gapbench.benchmarks.blas.config import PROBE, Config
    from gapbench.benchmarks.blas.run import Phases, iterate
    from gapbench.core.cli import console_for, open_run, progress_bar
    from gapbench.core.names import Backend, ColdScrub, Parity

    from gapbench import ops

    specs = [c.spec() for c in cases]
    for sp in specs:  # tables and checks of this process find the case's declaration by its name
        ops.register(sp)
    families = {i.family for c in cases for i in c.impls}
    if backends is None:
        names = [b for b in Backend.selectable() if not b.is_native and b.family in families]
    else:
        names = registry.backend_list(backends) if isinstance(backends, str) else [Backend(b) for b in backends]
    cfg = Config(quick=quick, seed=seed, cold=[ColdScrub.parse(c) for c in (cold or [])], graph=graph,
                 launch_floor=Config.default_launch_floor(quick), parity=Parity.parse(str(parity)))
    if quick:
        cfg.samples, cfg.min_rounds, cfg.budget_s = 10, 5, 0.3
    cfg.ops = specs
    cfg.dtypes = [DType.parse(d) for d in dtypes] if dtypes else list(dict.fromkeys(
        DType.parse(d) for c in cases for d in c.dtypes))
    cfg.run_seed()
    run_cfg = cfg.to_dict() | {"cases": [c.name for c in cases]}
    writer = open_run(PROBE, str(out) if out else None, "gapbench bench", list(argv or []), run_cfg,
                      [b.value for b in names]) if out else None
    recs: list[Record] = []
    live = [n for n in names if registry.info(n).available]
    n_cases = sum(len(cfg.shapes_for(s)) * len([d for d in cfg.dtypes if d in s.dtypes]) for s in specs)
    phases, t0 = Phases(), time.perf_counter()
    with progress_bar(console_for(), n_cases * max(1, len(live)), disable=not progress) as bar:
        def on_case(text):
            bar.describe(f"bench: {text}")
            bar.advance()

        for rec in iterate(cfg, names, on_case, phases):
            recs.append(rec)
            if writer is not None:
                writer.add(rec)
    roof = tables.roofline(recs)
    tables.mark_suspects(recs, roof)
    path = None
    if writer is not None:
        writer.finish(roofline=roof, wall_s=phases.wall(time.perf_counter() - t0))
        path = Path(writer.path)
    return Result(recs, path, tables.build_tables(recs, roof))


def load_file(path: str | Path) -> list[Case]:
    """The cases a Python file declares: every Case bound at its top level, in order."""
    import importlib.util

    path = Path(path)
    if not path.is_file():
        raise CaseError(f"{path}: no such file")
    mod_name = f"gapbench_user_{path.stem}_{abs(hash(str(path.resolve()))) % 10**8}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise CaseError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cases = [v for v in vars(module).values() if isinstance(v, Case)]
    if not cases:
        raise CaseError(f"{path}: declares no gapbench Case at its top level (see docs/your-own-op.md)")
    names = [c.name for c in cases]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise CaseError(f"{path}: two cases named {dup!r}")
    return cases

