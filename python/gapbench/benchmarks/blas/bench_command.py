"""`gapbench bench FILE.py`: time the cases a file declares (gapbench.api.Case) by bench.blas's
method, with the usual flags. The file is plain Python: run it, collect every Case at its top
level, measure them (usercase.measure), print the tables and write one result file."""
from __future__ import annotations

import argparse

from gapbench.backends import registry
from gapbench.benchmarks.blas import tables
from gapbench.core.benchmark import Benchmark, print_lines
from gapbench.core.cli import UsageError, add_common_arguments
from gapbench.core.names import Backend, ColdScrub, DType, Parity, parse_list, parse_one


class BenchFile(Benchmark):
    name = "bench"
    title = "your own op from a Python file, timed by gapbench's method (gapbench.api.Case)"
    description = __doc__.split("\n\n")[0]
    bundled = False  # needs a file: not part of `gapbench run`

    def add_arguments(self, ap: argparse.ArgumentParser) -> None:
        ap.add_argument("file", help="a Python file declaring gapbench.api.Case objects (examples/*.py)")
        ap.add_argument("--backends", type=registry.backend_list,
                        help="comma list (default: every backend of the cases' frameworks that runs here). Known: "
                             + ", ".join(b.value for b in Backend.selectable() if not b.is_native))
        ap.add_argument("--dtypes", type=parse_list(DType.parse), help="comma list (default: each case's own)")
        ap.add_argument("--cold", nargs="?", type=parse_list(ColdScrub.parse), const=[ColdScrub.read], default=None,
                        metavar="SCRUBS", help="also time with the L2 scrubbed before each run (torch-cuda, CuPy): "
                                               "read (default) or write")
        ap.add_argument("--graph", action="store_true",
                        help="also time each CUDA implementation captured into a CUDA graph (`<name>@graph`)")
        ap.add_argument("--seed", type=int, default=None, help="random seed of the inputs (default: fresh, recorded)")
        ap.add_argument("--parity", type=parse_one(Parity.parse), default=Parity.as_drawn,
                        help="as bench.blas --parity: as-drawn (default) or balanced (each gated CUDA sample padded "
                             "to both launch parities of its stream)")
        add_common_arguments(ap, probe=self.name, gpu=True, quick_help="each axis at its --quick values (default: its "
                                                                   "smallest) and few samples")

    def run(self, args, prog: str, argv: list[str] | None) -> int:
        from rich.markup import escape

        from gapbench.benchmarks.blas import usercase
        from gapbench.core.cli import console_for, default_out

        console = console_for()
        try:
            cases = usercase.load_file(args.file)
            for c in cases:
                c.spec()  # a case without implementations or baseline is refused before any work
        except usercase.CaseError as e:
            raise UsageError(str(e)) from None
        names = args.backends
        if names is not None:
            native = [b.value for b in names if b.is_native]
            if native:
                raise UsageError(f"--backends {','.join(native)}: a case's implementations run on frameworks "
                                 "(torch-cpu, torch-cuda, cupy, mlx-cpu, mlx-gpu)")
        res = usercase.measure(cases, backends=names, quick=args.quick,
                               dtypes=[d.value for d in args.dtypes] if args.dtypes else None,
                               cold=[c.value for c in args.cold] if args.cold else None, seed=args.seed, graph=args.graph,
                               out=args.out or default_out(self.name),
                               progress=not args.no_progress, argv=argv, parity=args.parity.value)
        print_lines(console, res.tables)
        for r in (r for r in res.records if r.metric == "all"):
            console.print(f"[yellow]{r.backend}[/yellow]: {r.status}: {escape(r.reason)}", highlight=False)
        console.print(f"results: {res.path}")
        return 0

    def tables(self, records):
        return tables.build_tables(records)


BENCHMARK = BenchFile()
