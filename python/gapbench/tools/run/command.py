"""`gapbench run`: every measuring benchmark in turn, into one shareable bundle.

    gapbench run --quick                          # launch, blas, train, suite (dist if installed)
    gapbench run --quick --only launch,blas --backends native-cpu,torch-cpu --archive
    gapbench run --args blas="--ops gemm --dtypes bf16"
    python -m bench.report results/gapbench-*/ other-machine.tar.gz --out report/

Each benchmark runs in a fresh process (gapbench.core.worker), its console output going to the bundle's
logs/<name>.log, so one that fails, crashes or hangs (--timeout) is recorded as failed in
bundle.json and the next one runs. One line per benchmark as it starts and ends. Exit 0 when at
least one benchmark measured something, 1 when none did, 2 for bad arguments, 130 on Ctrl-C
(the partial bundle is named; every benchmark finished by then is in it). See gapbench.core.bundle for
the layout.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import platform
import shlex
import sys
import time
import traceback
from datetime import datetime
from pathlib import Path

from gapbench import __version__
from gapbench.core import bundle as bd
from gapbench.core.benchmark import EXIT_SIGINT, EXIT_SIGTERM, Benchmark, Terminated
from gapbench.core.cli import UsageError, add_common_arguments, csv_path_for
from gapbench.core.result import OK as REC_OK
from gapbench.core.result import SchemaError, load_run, now_iso


def measuring() -> list[str]:
    """The registered benchmarks that measure (launch, blas, train, suite; dist when installed)."""
    from gapbench import benchmarks

    return [n for n in benchmarks.available() if benchmarks.get(n).measures and benchmarks.get(n).bundled]


def _names(text: str | None, known: list[str], flag: str) -> list[str]:
    if not text:
        return []
    names = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in names if x not in known]
    if bad:
        raise UsageError(f"{flag} {','.join(bad)}: unknown benchmark; choose from {', '.join(known)}")
    return names


def select(only: str | None, skip: str | None) -> list[str]:
    known = measuring()
    chosen = _names(only, known, "--only") or known
    dropped = set(_names(skip, known, "--skip"))
    out = [n for n in known if n in chosen and n not in dropped]
    if not out:
        raise UsageError("--only/--skip leave no benchmark to run")
    return out


def extra_args(items: list[str], known: list[str]) -> dict[str, list[str]]:
    """--args NAME=ARGS (repeatable) -> {NAME: [args...]}."""
    out: dict[str, list[str]] = {}
    for item in items:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or name not in known:
            raise UsageError(f"--args {item!r}: use NAME=ARGS with NAME one of {', '.join(known)}, "
                             "e.g. --args blas='--ops gemm'")
        try:
            out.setdefault(name, []).extend(shlex.split(text))
        except ValueError as e:
            raise UsageError(f"--args {item!r}: {e}") from None
    return out


def backend_names(text: str) -> str:
    """argparse type of --backends: the text as given, once every name in it is a backend (or
    `all`); a name that is none is the one-line error, exit 2, before the bundle folder exists."""
    from gapbench.backends import registry

    registry.backend_list(text)
    return text.strip()


def takes_option(bench: Benchmark, *option: str) -> bool:
    """Whether the benchmark's parser takes `option` (e.g. "--backends", "native-cpu"): pass-throughs
    go only where they apply."""
    try:
        with contextlib.redirect_stderr(io.StringIO()):  # a parser that refuses says so on stderr
            _, rest = bench.parser(f"gapbench {bench.name}").parse_known_args(list(option))
    except SystemExit:
        return False
    return not rest


def takes_backends(bench: Benchmark) -> bool:
    """Whether the benchmark has a --backends option (the pass-through goes only there)."""
    return takes_option(bench, "--backends", "native-cpu")


def takes_gpu(bench: Benchmark) -> bool:
    """Whether the benchmark measures on one GPU chosen by --gpu (launch, blas, train)."""
    return takes_option(bench, "--gpu", "0")


def gpu_list(text: str) -> str:
    """argparse type of --gpus: `all`, or a comma list of GPU indices (which exist is checked when the run starts)."""
    t = text.strip().lower()
    if t == "all" or (t and all(x.strip().isdigit() for x in t.split(","))):
        return t
    raise argparse.ArgumentTypeError(f"{text!r}: give all, or GPU indices such as 0,2 (CUDA's numbering, after "
                                     "CUDA_VISIBLE_DEVICES)")


def resolve_gpus(spec: str | None) -> list[dict]:
    """The GPUs --gpus names, in order, each {"index", "uuid", "pci_bus_id", "name"}: `all` is every
    GPU this process sees; an index it does not see is a UsageError. [] without --gpus."""
    if not spec:
        return []
    from gapbench.core import gpu as gp

    gpus, why = gp.physical()
    seen, note = gp.visible(gpus, os.environ.get(gp.VISIBLE), os.environ.get(gp.ORDER))
    if not seen:
        raise UsageError(f"--gpus {spec}: no NVIDIA GPU is visible here ({note or why}); leave --gpus out")
    want = list(range(len(seen))) if spec == "all" else [int(x) for x in spec.split(",")]
    bad = [i for i in want if i >= len(seen)]
    if bad:
        raise UsageError(f"--gpus {spec}: this process sees {len(seen)} GPU(s) (indices 0..{len(seen) - 1}); "
                         f"{bad[0]} is none of them")
    if len(set(want)) != len(want):
        raise UsageError(f"--gpus {spec}: a GPU is named twice")
    return [{"index": i, "uuid": seen[i].uuid, "nvml_index": seen[i].nvml_index, "pci_bus_id": seen[i].pci_bus_id,
             "name": seen[i].name} for i in want]


def command_for(bench: Benchmark, out: Path, quick: bool, backends: str | None, extra: list[str],
                gpu: int | None = None) -> list[str]:
    argv = bench.bundle_args(out, quick)
    if backends and takes_backends(bench):
        argv += ["--backends", backends]
    if gpu is not None:
        argv += ["--gpu", str(gpu)]
    return argv + extra


def plan_entries(names: list[str], repeat: int, gpus: list[dict], folder: Path, quick: bool, backends: str | None,
                 extra: dict[str, list[str]]) -> list[tuple[dict, list[str]]]:
    """(manifest entry, argv) of every benchmark process, in order: rounds of every benchmark once,
    a benchmark that takes --gpu once per GPU of `gpus` (one process each, in turn), the others once."""
    from gapbench import benchmarks

    plan = []
    for k in range(1, repeat + 1):  # rounds: every benchmark once per round
        for name in names:
            bench = benchmarks.get(name)
            per_gpu = bool(gpus) and takes_gpu(bench)
            if per_gpu and "--gpu" in extra.get(name, []):
                raise UsageError(f"--gpus and --args {name}='--gpu ...' both choose the GPU; give one of them")
            for g in (gpus if per_gpu else [None]):
                stem = name + (f"-gpu{g['index']}" if g else "") + (f"-{k}" if repeat > 1 else "")
                bargs = command_for(bench, folder / f"{stem}.json.gz", quick, backends, extra.get(name, []),
                                    g["index"] if g else None)
                entry = {"name": name, "status": "pending", "exit_code": None,
                         "command": shlex.join(["gapbench", name, *bargs]), "result": f"{stem}.json.gz",
                         "log": f"logs/{stem}.log", "started": None, "duration_s": None, "records": 0, "measured": 0,
                         "reason": "", **({"repeat": k} if repeat > 1 else {}), **({"gpu": g} if g else {})}
                plan.append((entry, bargs))
    return plan


# ============================================================== one benchmark, in a worker
def run_one(payload: dict) -> dict:
    """Worker target: run one benchmark command with its console output in the log file."""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(payload["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    from gapbench import benchmarks

    name = payload["name"]
    try:
        code = benchmarks.get(name).main(payload["argv"], prog=f"gapbench {name}")
    except Exception:
        traceback.print_exc()
        raise
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return {"exit_code": code}


def _last_error(log: Path) -> str:
    """The line of a benchmark's log that says why it failed (its last error line, else the last line)."""
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    err = [ln for ln in lines if "error" in ln.lower()]
    return ((err or lines or [""])[-1])[:300]


def _status(code: int) -> str:
    return {0: bd.OK, 1: bd.NOTHING, EXIT_SIGINT: bd.INTERRUPTED, EXIT_SIGTERM: bd.INTERRUPTED}.get(code, bd.FAILED)


def run_benchmark(entry: dict, folder: Path, argv: list[str], timeout_s: float) -> None:
    """Run the benchmark of `entry` (a manifest entry, filled in here) in a fresh process."""
    from gapbench.core.worker import WorkerError, run_in_worker

    log = folder / entry["log"]
    t0 = time.monotonic()
    try:
        res = run_in_worker("gapbench.tools.run.command:run_one", {"name": entry["name"], "argv": argv, "log": str(log)},
                            timeout_s)
        entry["exit_code"] = int(res["exit_code"])
        entry["status"] = _status(entry["exit_code"])
        if entry["status"] != bd.OK:
            entry["reason"] = _last_error(log)
    except WorkerError as e:
        entry["status"], entry["exit_code"] = bd.FAILED, None
        entry["reason"] = f"{e.kind}: {e.detail}"[:300]
    finally:
        entry["duration_s"] = round(time.monotonic() - t0, 3)
        _tidy(entry, folder)


def _tidy(entry: dict, folder: Path) -> None:
    """Leave the result file, not its derived exports (CSV, figures drawn beside it: `gapbench csv`
    and the report make them again), and count its records into the manifest entry."""
    path = folder / entry["result"]
    for extra in [*folder.glob(f"{entry['result'][:-len('.json.gz')]}.json?*"), csv_path_for(path)]:
        if extra != path and extra.is_file():
            extra.unlink()
    if not path.is_file():
        entry["result"] = None
        return
    try:
        recs = load_run(path).records
    except SchemaError as e:
        entry["reason"] = (entry.get("reason") or "") + f" (result file unreadable: {e})"
        return
    entry["records"] = len(recs)
    entry["measured"] = sum(1 for r in recs if r.status == REC_OK and r.samples_s)


# ============================================================== the command
class RunBenchmark(Benchmark):
    name = "run"
    title = "Every benchmark briefly, into one shareable bundle for bench.report (gapbench run --quick)"
    measures = False  # it writes a bundle, not a result file; its exit code says whether anything measured
    description = __doc__.split("\n\n")[0]

    def add_arguments(self, ap: argparse.ArgumentParser) -> None:
        add_common_arguments(ap, probe=self.name, progress=False, quick_help="each benchmark's own --quick",
                             out_help="folder the bundle is made in (default results/)")
        ap.add_argument("--only", help="comma list of benchmarks to run (default: all measuring ones)")
        ap.add_argument("--skip", help="comma list of benchmarks to leave out")
        ap.add_argument("--backends", type=backend_names,
                        help="passed to every benchmark that has a --backends option (a name that is no backend at all "
                        "is refused here; a benchmark that does not take a backend fails and is recorded so; --args "
                        "sets one benchmark's)")
        ap.add_argument("--args", action="append", default=[], metavar="NAME=ARGS",
                        help="more arguments for one benchmark, e.g. --args blas='--ops gemm' (repeatable)")
        ap.add_argument("--host", help="the name this machine has in the bundle and the report (default: the host "
                        "name; give a neutral label to keep it private)")
        ap.add_argument("--archive", action="store_true", help="also write the bundle as one .tar.gz beside it")
        ap.add_argument("--timeout", type=float, default=7200.0, help="seconds allowed per benchmark (default 7200)")
        ap.add_argument("--gpus", type=gpu_list, default=None, metavar="all|LIST",
                        help="run each single-GPU benchmark (launch, blas, train) on each of these GPUs in turn, one "
                             "process each (`all`, or indices such as 0,2); the end shows the GPUs side by side as "
                             "fractions of the node's best, and marks one outside the others' spread")
        ap.add_argument("--repeat", type=int, default=1,
                        help="run every benchmark N times, each in fresh processes, in rounds (each benchmark once per "
                             "round): gapbench compare then takes each row's interval from the spread between them")

    def run(self, args, prog: str, argv: list[str] | None) -> int:
        names = select(args.only, args.skip)
        extra = extra_args(args.args, measuring())
        if args.timeout <= 0:
            raise UsageError("--timeout must be > 0 seconds")
        if args.repeat < 1:
            raise UsageError(f"--repeat {args.repeat}: must be >= 1")
        from gapbench.core import env

        gpus = resolve_gpus(args.gpus)
        host = args.host or platform.node() or "host"
        folder = bd.bundle_dir(Path(args.out or "results"), host, datetime.now().strftime("%Y%m%d-%H%M%S"))
        plan = plan_entries(names, args.repeat, gpus, folder, args.quick, args.backends, extra)  # refusals first
        (folder / "logs").mkdir(parents=True)
        given = argv if argv is not None else sys.argv[1:]
        manifest = {"schema": bd.SCHEMA, "schema_version": bd.SCHEMA_VERSION, "gapbench": __version__, "host": host,
                    "created": now_iso(), "finished": None, "command": shlex.join([*prog.split(), *given]),
                    "quick": bool(args.quick), "env": env.collect(), "benchmarks": []}
        manifest["benchmarks"] = [entry for entry, _ in plan]
        if gpus:
            manifest["gpus"] = gpus
        bd.write_manifest(folder, manifest)
        print(f"gapbench run: {len(plan)} benchmark(s) into {folder}", flush=True)
        t_all = time.monotonic()
        current = None
        try:
            for i, (entry, bargs) in enumerate(plan, 1):
                current = entry
                entry["status"], entry["started"] = bd.RUNNING, now_iso()
                bd.write_manifest(folder, manifest)
                print(f"[{i}/{len(plan)}] {entry['name']}: started  ({entry['command']})", flush=True)
                run_benchmark(entry, folder, bargs, args.timeout)
                bd.write_manifest(folder, manifest)
                print(f"[{i}/{len(plan)}] {entry['name']}: {_outcome(entry)}", flush=True)
                current = None
        except (KeyboardInterrupt, Terminated) as e:
            if current is not None:
                current["status"], current["reason"] = bd.INTERRUPTED, "interrupted by the user"
            manifest["interrupted"] = now_iso()
            bd.write_manifest(folder, manifest)
            done = sum(1 for b in manifest["benchmarks"] if b["status"] not in ("pending", bd.INTERRUPTED))
            sig = "SIGTERM" if isinstance(e, Terminated) else "Ctrl-C"
            print(f"\ninterrupted ({sig}): partial bundle in {folder} ({done} of {len(plan)} benchmark(s) finished; "
                  f"see {folder / bd.MANIFEST})", file=sys.stderr, flush=True)
            return EXIT_SIGTERM if isinstance(e, Terminated) else EXIT_SIGINT
        manifest["finished"] = now_iso()
        bd.write_manifest(folder, manifest)
        n_ok = sum(1 for b in manifest["benchmarks"] if b["status"] == bd.OK)
        print(f"bundle: {folder} ({n_ok} of {len(plan)} benchmark(s) measured, {time.monotonic() - t_all:.1f} s)")
        print(bd.summarize(manifest))
        if gpus:
            print(side_by_side(folder, manifest))
        if args.archive:
            print(f"archive: {bd.write_archive(folder)}")
        if not n_ok:
            print("error: no benchmark measured anything (reasons above; logs in the bundle)", file=sys.stderr)
            return 1
        print(f"report: gapbench report {folder} [other machines' bundles...] --out report/")
        return 0


def side_by_side(folder: Path, manifest: dict) -> str:
    """The GPUs of this bundle side by side (gapbench.core.pergpu), per benchmark run on several."""
    from gapbench.core import pergpu

    runs = []
    for b in manifest["benchmarks"]:
        if b.get("gpu") and b.get("result") and b["status"] == bd.OK:
            try:
                runs.append(load_run(folder / b["result"]))
            except SchemaError:
                continue
    found = pergpu.comparisons(runs)
    if not found:
        return "GPUs side by side: fewer than two GPUs measured a benchmark (nothing to set side by side)"
    return "\n\n".join(pergpu.text(c) for c in found)


def _outcome(entry: dict) -> str:
    took = f"in {entry['duration_s']:.1f} s"
    if entry["status"] == bd.OK:
        return f"ok {took}, {entry['records']} record(s), {entry['measured']} measured -> {entry['result']}"
    code = "" if entry["exit_code"] is None else f" (exit {entry['exit_code']})"
    return f"{entry['status']}{code} {took}: {entry['reason'] or 'no reason given'} (log: {entry['log']})"


BENCHMARK = RunBenchmark()


def main(argv: list[str] | None = None, prog: str = "python -m bench.run") -> int:
    return BENCHMARK.main(argv, prog)
