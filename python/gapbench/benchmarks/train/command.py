"""python -m bench.train: the command (arguments, the sweep of cases, what it prints and draws)."""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from gapbench.backends import registry
from gapbench.core.names import Backend, UnknownName
from gapbench.core.cli import UsageError, add_common_arguments
from gapbench.core.benchmark import Benchmark
from gapbench.core.result import OK
from gapbench.benchmarks.train.run import __doc__ as _TRAIN_DOC
from gapbench.benchmarks.train.run import expand, run_case, run_in_subprocess
from gapbench.benchmarks.train.config import (ATTENTIONS, BACKENDS, COMPILES, HF_MODELS, MINIMAL, MODELS, MODES, OFFLOADS,
                                             OPTIMIZERS, PRECISIONS, PROBE, load_roofline)
from gapbench.benchmarks.train.tables import build_table, report_tables


def _list(text: str | None, default, allowed, what: str, conv=str) -> list:
    if text is None:
        return list(default)
    items = [s.strip() for s in str(text).split(",") if s.strip()]
    out = []
    for s in items:
        try:
            v = conv(s)
        except UnknownName:
            raise
        except ValueError:
            raise ValueError(f"bad {what} {s!r}: expected {conv.__name__}") from None
        if allowed is not None and v not in allowed:
            raise ValueError(f"unknown {what} {s!r}; choose from {', '.join(map(str, allowed))}")
        if conv is int and v < 1:
            raise ValueError(f"{what} must be >= 1, got {v}")
        out.append(v)
    if not out:
        raise ValueError(f"empty {what} list")
    return out


#: what a run without --quick and one with it take where the user names nothing; a value the user
#: gives is checked and kept either way (--quick --model gpt5 is an error, as without --quick)
DEFAULTS = {"model": "gpt2", "batch_size": "8", "steps": 20, "warmup": 3, "warmup_s": 3.0, "rounds": 2}
QUICK = {"model": "tiny-gpt2", "batch_size": "2", "steps": 4, "warmup": 1, "warmup_s": 0.0, "rounds": 2, "seq_len": "64"}


class TrainBenchmark(Benchmark):
    name = PROBE
    title = "GPT-2/Whisper training steps: phases, memory, energy (paper Tables 2-5, Figures 2-4)"
    description = _TRAIN_DOC.split("\n\n")[0]

    def add_arguments(self, ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--nproc", type=int, default=None,
                        help="data-parallel training on N ranks (DDP, FSDP2, MLX): see --nproc 2 --help")
        ap.add_argument("--model", default=None,
                        help=f"comma list of {', '.join(MODELS)} (default gpt2; --quick: tiny-gpt2)")
        ap.add_argument("--backend", "--backends", dest="backend", default=None,
                        help=f"comma list of {', '.join(b.value for b in BACKENDS)} (default: torch-cuda, torch-mps or torch-cpu, whichever is here)")
        ap.add_argument("--precision", default="fp32", help=f"comma list of {', '.join(PRECISIONS)}")
        ap.add_argument("--batch-size", default=None, help="comma list, e.g. 4,8,16 (default 8; --quick: 2)")
        ap.add_argument("--seq-len", default=None, help="tokens per sequence (GPT-2, default 1024) or label tokens (Whisper, default 128); comma list")
        ap.add_argument("--mode", default="pretrain", help=f"comma list of {', '.join(MODES)} (lora: peft LoRA r=8)")
        ap.add_argument("--impl", default="", choices=["", "hf", "minimal"], help="hf: transformers (torch); minimal: gapbench's GPT-2 (torch and MLX); default hf for torch, minimal for MLX")
        ap.add_argument("--offload", default="none", choices=OFFLOADS, help="cpu: FSDP2 CPU offload; auto: offload when the memory plan says the model state does not fit")
        ap.add_argument("--optimizer", default="fused", choices=OPTIMIZERS,
                        help="torch AdamW: fused (default on CUDA), foreach, or default (torch.optim.AdamW() as is)")
        ap.add_argument("--attention", default="sdpa", choices=ATTENTIONS,
                        help="transformers attention implementation: sdpa (default), eager, flash (needs flash-attn)")
        ap.add_argument("--compile", default="none", choices=COMPILES, help="torch.compile the model with this mode")
        ap.add_argument("--steps", type=int, default=None, help="timed steps per arm (default 20; --quick: 4)")
        ap.add_argument("--warmup", type=int, default=None, help="warm-up steps, reported apart (default 3; --quick: 1)")
        ap.add_argument("--warmup-s", type=float, default=None,
                        help="and warm up for at least this many seconds (default 3; --quick: 0)")
        ap.add_argument("--rounds", type=int, default=None,
                        help="interleaved rounds of harness / no-sampler / plain arms (default 2)")
        ap.add_argument("--no-plain", action="store_true", help="time the harness arm only (no plain loop, no sampler-off arm)")
        ap.add_argument("--checkpoint", help="a local transformers checkpoint directory (instead of random weights)")
        ap.add_argument("--data", help="local data: a datasets directory (save_to_disk) or a .txt file (default synthetic)")
        ap.add_argument("--tokenizer", help="a local tokenizer directory for --data (default: UTF-8 bytes as ids)")
        ap.add_argument("--roofline", help="a bench.blas result JSON whose measured GEMM peak the FLOP/s are compared with")
        ap.add_argument("--sample-interval", type=float, default=0.1, help="memory sampler period in seconds")
        ap.add_argument("--case-timeout", type=float, default=3600.0, help="seconds before a case's process is stopped")
        ap.add_argument("--in-process", action="store_true", help="run cases in this process (no isolation; for debugging)")
        ap.add_argument("--seed", type=int, default=0)
        ap.add_argument("--no-plots", action="store_true")
        ap.add_argument("--list", action="store_true", help="list models and backends, then exit")
        add_common_arguments(ap, probe=PROBE, gpu=True,
                             quick_help="tiny-gpt2 on this machine's first backend, a few steps (what you name is kept)")

    def run(self, args, prog: str, argv: list[str] | None) -> int:
        from gapbench.core.cli import console_for, open_run, write_figures

        console = console_for()
        if args.list:
            console.print("models: " + ", ".join(MODELS) + "\nminimal GPT-2 sizes: " + ", ".join(MINIMAL))
            for b in BACKENDS:
                i = registry.info(b)
                console.print(f"  {b}: " + ("available" if i.available else f"unavailable: {i.reason}"), highlight=False,
                              markup=False)
            return 0
        try:
            for name, value in (QUICK if args.quick else DEFAULTS).items():  # only where the user gave none
                if getattr(args, name) is None:
                    setattr(args, name, value)
            models = _list(args.model, [], MODELS, "model")
            backends = _list(args.backend, [], BACKENDS, "backend", Backend.parse) if args.backend else None
            precisions = _list(args.precision, [], PRECISIONS, "precision")
            batches = _list(args.batch_size, [], None, "batch size", int)
            modes = _list(args.mode, [], MODES, "mode")
            seqs = _list(args.seq_len, [], None, "sequence length", int) if args.seq_len else None
            if args.steps < 1 or args.warmup < 0 or args.warmup_s < 0 or args.rounds < 1 or args.rounds > args.steps:
                raise ValueError("--steps must be >= 1, --warmup >= 0, --warmup-s >= 0, 1 <= --rounds <= --steps")
            roof = load_roofline(args.roofline) if args.roofline else {}
            for flag, path in (("--checkpoint", args.checkpoint), ("--data", args.data), ("--tokenizer", args.tokenizer)):
                if path and not Path(path).exists():
                    raise ValueError(f"{flag} {path}: no such file or directory (give a local path)")
        except (ValueError, OSError) as e:
            raise UsageError(str(e)) from None
        if backends is None:  # asked only now: availability imports the frameworks (seconds)
            backends = [next((b for b in (Backend.torch_cuda, Backend.torch_mps, Backend.torch_cpu)
                              if registry.info(b).available), Backend.torch_cpu)]
        base = dict(impl=args.impl, offload=args.offload, optimizer=args.optimizer, attention=args.attention,
                    compile=args.compile, steps=args.steps, warmup=args.warmup, warmup_s=args.warmup_s, rounds=args.rounds,
                    plain=not args.no_plain, checkpoint=args.checkpoint, data=args.data, tokenizer=args.tokenizer,
                    sample_interval_s=args.sample_interval, seed=args.seed, roofline=roof)
        cases = []
        for model in models:
            seq_default = [128] if HF_MODELS[model][0] == "whisper" else ([64] if model.startswith("tiny") else [1024])
            cases += expand({"backend": backends, "precision": precisions, "batch_size": batches,
                             "seq_len": seqs or seq_default, "mode": modes}, dict(base, model=model))
        writer = open_run(PROBE, args.out, prog, argv, {"cases": len(cases), **{k: v for k, v in base.items() if k != "roofline"},
                                                        "roofline": roof}, [b.value for b in backends])
        for n, case in enumerate(cases, 1):
            label = case.resolved().label()
            console.print(f"[bold]case {n}/{len(cases)}[/bold] {label}", highlight=False)
            last = [0.0]

            def progress(text, _label=label):
                now = time.monotonic()
                if console.is_terminal and not args.no_progress and now - last[0] > 0.2:
                    console.print(f"  {text}", highlight=False, end="\r")
                    last[0] = now

            recs = run_case(case, progress) if args.in_process else run_in_subprocess(case, args.case_timeout, progress)
            writer.extend(recs)
            st = next((r for r in recs if r.metric == "step"), None)
            if st is not None:
                msg = f"step {st.summary().median * 1e3:.4g} ms" if st.status == OK else f"{st.status}: {st.reason}"
                console.print(f"  -> {msg}", highlight=False)
        writer.finish()
        console.print(build_table(writer.records))
        if not args.no_plots:
            write_figures(console, self, writer)
        console.print(f"results: {writer.path} and {writer.csv_path}")
        return 0

    def tables(self, records):
        return [build_table(records)]

    def figures(self, records, stem, run=None):
        from gapbench.benchmarks.train.figures import train_figures

        return train_figures(records, stem)

    def report_tables(self, runs):
        return report_tables(runs)

    def bundle_args(self, out, quick):
        return super().bundle_args(out, quick) + ["--no-plots"]

    def main(self, argv=None, prog=None):
        """`--nproc N`: data-parallel training across N ranks (DDP, FSDP2, MLX data parallel;
        gapbench.benchmarks.train.dp and its own options); otherwise one device."""
        import sys

        args = list(sys.argv[1:] if argv is None else argv)
        if any(a == "--nproc" or a.startswith("--nproc=") for a in args):
            from gapbench.benchmarks.train import dp as train_dp

            return train_dp.main(args, prog or "python -m bench.train")
        return super().main(argv, prog)


BENCHMARK = TrainBenchmark()


def main(argv: list[str] | None = None, prog: str = "python -m bench.train") -> int:
    return BENCHMARK.main(argv, prog)
