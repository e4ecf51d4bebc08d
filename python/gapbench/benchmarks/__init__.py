"""The registry of gapbench's commands (the measuring scenarios here, and the tools of
gapbench.tools that work on their results): name -> "module:OBJECT" of a Benchmark, imported only
when asked for. A benchmark whose module is absent (e.g. the optional `dist` package) is left
out of `available()` and said to be missing by `get()`."""
from __future__ import annotations

import importlib
import importlib.util

from gapbench.core.benchmark import Benchmark

REGISTRY: dict[str, str] = {
    "launch": "gapbench.benchmarks.launch.command:BENCHMARK",
    "blas": "gapbench.benchmarks.blas.command:BENCHMARK",
    "bench": "gapbench.benchmarks.blas.bench_command:BENCHMARK",
    "train": "gapbench.benchmarks.train.command:BENCHMARK",
    "suite": "gapbench.benchmarks.suite.command:BENCHMARK",
    "dist": "gapbench.benchmarks.collectives.command:BENCHMARK",
    "report": "gapbench.tools.report.command:BENCHMARK",
    "compare": "gapbench.tools.compare.command:BENCHMARK",
    "history": "gapbench.tools.compare.history:BENCHMARK",
    "run": "gapbench.tools.run.command:BENCHMARK",
}


class UnknownBenchmark(KeyError):
    def __init__(self, name: str):
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        return f"unknown command {self.name!r}; choose from {', '.join(available())}"


_loaded: dict[str, Benchmark] = {}


def _missing(err: ModuleNotFoundError, module: str) -> bool:
    """Whether the import failed because `module` (or a package above it) does not exist, not
    because something it imports is missing."""
    return err.name is not None and (module == err.name or module.startswith(err.name + "."))


def get(name: str) -> Benchmark:
    if name in _loaded:
        return _loaded[name]
    if name not in REGISTRY:
        raise UnknownBenchmark(name)
    module, _, obj = REGISTRY[name].partition(":")
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if _missing(e, module):
            raise UnknownBenchmark(name) from None
        raise
    bench = getattr(mod, obj)
    _loaded[name] = bench
    return bench


def available() -> list[str]:
    """Names of the registered benchmarks whose module is present."""
    out = []
    for name, spec in REGISTRY.items():
        module = spec.partition(":")[0]
        try:
            if importlib.util.find_spec(module) is not None:
                out.append(name)
        except ModuleNotFoundError:
            pass
    return out


def all_benchmarks() -> list[Benchmark]:
    return [get(n) for n in available()]


def for_probe(probe: str | None) -> Benchmark | None:
    """The benchmark that wrote records of this probe (None when unknown here)."""
    try:
        return get(str(probe))
    except UnknownBenchmark:
        return None


def main(name: str, argv: list[str] | None = None) -> int:
    """`python -m bench.<name>`: the same command as `gapbench <name>`."""
    return get(name).main(argv, prog=f"python -m bench.{name}")
