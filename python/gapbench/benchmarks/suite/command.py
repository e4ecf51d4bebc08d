"""python -m bench.suite: the command (arguments, the cases of each suite, what it writes)."""
from __future__ import annotations

import argparse
from pathlib import Path

from gapbench.backends import registry
from gapbench.core.names import Backend, DeviceClass, split_list
from gapbench.core.cli import UsageError, add_common_arguments
from gapbench.core.benchmark import Benchmark
from gapbench.core.result import OK
from gapbench.benchmarks.suite.run import run_case, run_in_subprocess
from gapbench.benchmarks.suite.config import DEVICES, EXPERIMENTS, PROBE, SUITES, Case
from gapbench.benchmarks.suite.run import __doc__ as _SUITE_DOC
from gapbench.benchmarks.suite.tables import build_table, report_tables, seed_csvs, suite_figures


def _ints(text: str, what: str) -> list[int]:
    out = []
    for s in str(text).split(","):
        s = s.strip()
        if not s:
            continue
        if not s.isdigit() or int(s) < 1:
            raise ValueError(f"bad {what} {s!r}: positive integers, comma separated (e.g. \"16, 32, 64\")")
        out.append(int(s))
    if not out:
        raise ValueError(f"empty {what} list")
    return out


def _check_paths(args) -> None:
    """Local paths the cases would read, checked before any work (exit 2, not a failed case)."""
    for flag, path in (("--data", args.data), ("--gguf", args.gguf)):
        if path and not Path(path).exists():
            raise ValueError(f"{flag} {path}: no such file or directory")
    if args.gguf and not Path(args.gguf).is_file():
        raise ValueError(f"--gguf {args.gguf}: not a file (give the .gguf model file)")
    m = args.model
    if m and (m.startswith((".", "~")) or "/" in m and Path(m).anchor) and not Path(m).expanduser().exists():
        raise ValueError(f"--model {m}: no such local checkpoint directory")


class SuiteBenchmark(Benchmark):
    name = PROBE
    title = "the community seed suites: BERT matrix, ResNet50, DistilBERT, LLM generation"
    description = _SUITE_DOC.split("\n\n")[0]

    def add_arguments(self, ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--suite", default="bert", help=f"{', '.join(SUITES)} or an experiment: {', '.join(EXPERIMENTS)} (comma list)")
        ap.add_argument("--backend", "--backends", default=None, help="comma list of torch-cpu, torch-cuda, torch-mps")
        ap.add_argument("--device", help="the seed's flag: cpu|cuda|mps (comma list); same as --backend torch-<device>")
        ap.add_argument("--model", "--pre_trained_name", dest="model", default=None,
                        help="BERT: bert-base-cased|bert-large-cased (default both for --suite bert: bert-base-cased); or a local checkpoint")
        ap.add_argument("--batch-size", "--batch_size", "--batch_sizes", dest="batch_size", default=None,
                        help="comma list (defaults: BERT 16,64,256; CV 32; NLP 32; the seeds' \"16, 32, 64\" works)")
        ap.add_argument("--mode", default="training", help="training, inference or both (comma list; BERT)")
        ap.add_argument("--seq-len", "--sequence_length", dest="seq_len", default=None, help="BERT: default 128,512; DistilBERT 512")
        ap.add_argument("--steps", type=int, default=100, help="timed steps per case (default 100, as the seed)")
        ap.add_argument("--epochs", type=int, default=0, help="whole epochs of the dataset's train split instead of --steps")
        ap.add_argument("--warmup", type=int, default=3)
        ap.add_argument("--data", help="a local datasets directory (save_to_disk) for the experiment (default synthetic)")
        ap.add_argument("--gguf", "--path_to_gguf_model", dest="gguf", help="llama.cpp: a GGUF model file (--suite llamacpp)")
        ap.add_argument("--prompt-tokens", type=int, default=128)
        ap.add_argument("--new-tokens", type=int, default=64)
        ap.add_argument("--repeats", "--num_times_per_question", dest="repeats", type=int, default=5)
        ap.add_argument("--image-size", type=int, default=0, help=argparse.SUPPRESS)
        ap.add_argument("--in-process", action="store_true", help="no process per case (debugging)")
        ap.add_argument("--case-timeout", type=float, default=3600.0)
        ap.add_argument("--results-root", default="results", help="root of the seed-layout CSVs (default results/)")
        ap.add_argument("--plot", nargs="+", metavar="RESULT.json", help="only draw the figures from these result files (one line per machine)")
        add_common_arguments(ap, probe=PROBE, quick_help="tiny models, small batches, few steps")

    def run(self, args, prog: str, argv: list[str] | None) -> int:
        from gapbench.core.cli import check_out_path, console_for, open_run

        console = console_for()
        if args.plot:
            from gapbench.core.result import SchemaError, load_run

            try:
                runs = [load_run(p) for p in args.plot]
            except SchemaError as e:
                raise UsageError(str(e)) from None
            out = Path(args.out or Path(args.plot[0]).with_suffix("")).with_suffix("")
            for p in suite_figures(runs, out):
                console.print(f"figure: {p}")
            return 0
        try:
            exps: list[str] = []
            for s in (x.strip() for x in args.suite.split(",") if x.strip()):
                if s in SUITES:
                    exps += SUITES[s]
                elif s in EXPERIMENTS:
                    exps.append(s)
                else:
                    raise ValueError(f"unknown suite {s!r}; choose from {', '.join(SUITES)} or {', '.join(EXPERIMENTS)}")
            if args.device:
                devs = split_list(args.device)
                bad = [d for d in devs if d not in DEVICES]
                if bad:
                    raise ValueError(f"unknown device {', '.join(bad)}; choose from {', '.join(DEVICES)}")
                backends = [DEVICES[d] for d in devs]
            elif args.backend:
                backends = [Backend.parse(b) for b in split_list(args.backend)]
                bad = [b for b in backends if b not in DEVICES.values()]
                if bad:
                    raise ValueError(f"unknown backend {', '.join(bad)}; choose from "
                                     f"{', '.join(b.value for b in DEVICES.values())}")
            else:
                backends = [next((b for b in (Backend.torch_cuda, Backend.torch_mps, Backend.torch_cpu)
                                  if registry.info(b).available), Backend.torch_cpu)]
            modes = [m.strip() for m in args.mode.replace("both", "training,inference").split(",") if m.strip()]
            if any(m not in ("training", "inference") for m in modes):
                raise ValueError(f"unknown mode in {args.mode!r}; choose training, inference or both")
            if args.steps < 1 or args.warmup < 0 or args.epochs < 0 or args.repeats < 1:
                raise ValueError("--steps and --repeats must be >= 1, --warmup and --epochs >= 0")
            batches = _ints(args.batch_size, "batch size") if args.batch_size is not None else None
            seqs = _ints(args.seq_len, "sequence length") if args.seq_len is not None else None
            _check_paths(args)
            check_out_path(args.results_root, "--results-root", folder=True)
        except ValueError as e:
            raise UsageError(str(e)) from None
        q = args.quick
        cases = []
        for ex in exps:
            common = dict(steps=4 if q else args.steps, epochs=0 if q else args.epochs, warmup=1 if q else args.warmup,
                          data=args.data, image_size=args.image_size or (32 if q else 0))
            for backend in backends:
                if ex == "bert":
                    model = args.model or ("tiny-bert" if q else "bert-base-cased")
                    for mode in modes:
                        for s in seqs or ([32] if q else [128, 512]):
                            for b in batches or ([2] if q else [16, 64, 256]):
                                cases.append(Case(ex, backend, b, mode, s, model, **common))
                elif ex == "distilbert-imdb":
                    model = args.model if args.model and not args.model.startswith("bert") else ("tiny-distilbert" if q else "distilbert-base-uncased")
                    for s in seqs or ([32] if q else [512]):
                        for b in batches or ([2] if q else [32]):
                            cases.append(Case(ex, backend, b, "training", s, model, **common))
                elif ex.startswith("resnet50"):
                    for b in batches or ([2] if q else [32]):
                        cases.append(Case(ex, backend, b, "training", 0, "resnet50", **common))
                elif ex.startswith("tf-"):
                    tb = "tf-cpu" if backend.device_class is DeviceClass.cpu else "tf-gpu"
                    for b in batches or ([2] if q else [32]):
                        if "distilbert" in ex:
                            m = "tiny-distilbert" if q else "distilbert-base-uncased"
                            for s_ in seqs or ([16] if q else [512]):
                                cases.append(Case(ex, tb, b, "training", s_, m, **common))
                        else:
                            cases.append(Case(ex, tb, b, "training", 0, "resnet50", **common))
                elif ex == "llamacpp-generate":
                    lb = "llama.cpp-cpu" if backend.device_class is DeviceClass.cpu else "llama.cpp"
                    cases.append(Case(ex, lb, 1, "inference", 0, Path(args.gguf).name if args.gguf else "gguf",
                                      prompt_tokens=16 if q else args.prompt_tokens, new_tokens=4 if q else args.new_tokens,
                                      repeats=2 if q else args.repeats, gguf=args.gguf, **common))
                else:
                    model = "tiny-llama" if q else (args.model if args.model and not args.model.startswith("bert") else "llama-small")
                    cases.append(Case(ex, backend, 1, "inference", 0, model, prompt_tokens=16 if q else args.prompt_tokens,
                                      new_tokens=4 if q else args.new_tokens, repeats=2 if q else args.repeats, **common))
        writer = open_run(PROBE, args.out, prog, argv, {"cases": len(cases), "experiments": exps}, backends)
        for n, case in enumerate(cases, 1):
            console.print(f"[bold]case {n}/{len(cases)}[/bold] {case.label()}", highlight=False)

            def progress(text):
                if console.is_terminal and not args.no_progress:
                    console.print(f"  {text}", highlight=False, end="\r")

            if args.in_process:
                recs = run_case(case, progress)
            else:
                recs = run_in_subprocess(case, args.case_timeout, progress)
            writer.extend(recs)
            r = recs[-1]
            console.print(f"  -> {r.metric} {r.summary().median * 1e3:.4g} ms" if r.status == OK else f"  -> {r.status}: {r.reason}",
                          highlight=False)
        writer.finish()
        console.print(build_table(writer.records))
        dev_name = next((str(r.device.get("name")) for r in writer.records if r.device.get("name")), None) or (
            (writer.env.get("nvidia_smi") or [{}])[0].get("name") or writer.env.get("cpu") or "unknown")
        for p in seed_csvs(writer.records, Path(args.results_root), dev_name):
            console.print(f"seed-layout CSV: {p}")
        try:
            from gapbench.core.result import load_run

            for p in suite_figures([load_run(writer.path)], writer.path.with_suffix("")):
                console.print(f"figure: {p}")
        except ImportError:
            console.print("figures skipped: matplotlib is not installed (pip install 'gapbench[plot]')")
        console.print(f"results: {writer.path} and {writer.csv_path}")
        return 0

    def tables(self, records):
        return [build_table(records)]

    def figures(self, records, stem, run=None):
        from gapbench.core.result import Run

        return suite_figures([Run(Path(str(stem) + ".json"), dict(run or {}), {}, records)], stem)

    def report_tables(self, runs):
        return report_tables(runs)

    def bundle_args(self, out, quick):  # the seed-layout CSVs go into the bundle, not ./results
        return super().bundle_args(out, quick) + ["--results-root", str(Path(out).parent / "seed-layout")]

    def report_figures(self, runs, out):
        mine = [r for r in runs if r.run.get("probe") == PROBE]
        return suite_figures(mine, out / "suites") if mine else []


BENCHMARK = SuiteBenchmark()


def main(argv: list[str] | None = None, prog: str = "python -m bench.suite") -> int:
    return BENCHMARK.main(argv, prog)
