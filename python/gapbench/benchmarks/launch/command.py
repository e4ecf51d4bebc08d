"""Launch latency (paper Table 6, section 4.3), raw probe and every framework side by side.

For each backend, in fresh processes:
  import / context     import of the library, and device-context creation, timed apart
  cold                 the first launch of a never-launched kernel after the context exists
                       (one sample per fresh process; median/min/max over processes)
  first_warm           the second launch of that process
and, in the first of those processes (cfg.warm_processes of them), warm:
  submit        host cost of issuing one op (no wait inside the timed region)
  roundtrip     issue one op and wait for it (CPU-synchronous backends: the call itself)
  stream_b2b    per op, device timers around `inner` ops as the host issues them
  device_kernel per kernel on the device alone (native only: queue preloaded / one encoder)
  graph_node    per node of a CUDA graph replay
Native variants: 1 `null` (empty kernel: the floor) and 2 `add1` (1-element add); frameworks
run the same 1-element fp32 add (torch.add(out=), cupy.add(out=), mx.add + eval).

Ratios are paired (launch_pairing): a framework's `xfloor` comes from rounds interleaved with the
native floor inside each warm framework process, and the harness/plain C++ loop check from rounds
of a fresh native-cuda process and a fresh plain loop (those processes also give native-cuda
further cold samples). The parent imports
no framework: a framework's availability and device come back from its own fresh process.

Modules: launch_config (configuration, the op's check), launch_worker (what a fresh process
measures), launch_pairing (the paired ratios), launch_tables (terminal, Markdown and report
tables), this file (the processes, the command).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import time
from dataclasses import asdict
from pathlib import Path

from gapbench.backends import registry
from gapbench.backends.base import BackendInfo
from gapbench.benchmarks.launch.params import LaunchParams
from gapbench.core.names import Backend, injection
from gapbench.core.benchmark import Benchmark, print_lines
from gapbench.core.cli import UsageError, add_common_arguments
from gapbench.core.conditions import Clock, Conditions, Process
from gapbench.core.result import ERROR, FAILED, OK, UNAVAILABLE, Record
from gapbench.core.worker import WorkerError, run_in_worker  # noqa: F401 (WorkerError: callers)
from gapbench.benchmarks.launch.config import PHASES, PROBE, Config
from gapbench.benchmarks.launch.config import check_add as _check_add  # noqa: F401 (tests and callers)
from gapbench.benchmarks.launch.config import random_inputs as _random_inputs  # noqa: F401
from gapbench.benchmarks.launch.pairing import (PLAIN_MISSING, check_perturbation, new_seed, plain_check,
                                                plain_row, pool_paired)
from gapbench.benchmarks.launch.tables import (build_table, markdown_table, overhead, plain_comparison,  # noqa: F401
                                               report_tables, unavailable_table)

# ============================================================== parent (orchestration)
def spawn_worker(backend: Backend, cfg: Config, warm: bool, plain_round: bool = False) -> dict:
    """Run one fresh process for `backend` (gapbench.core.worker); a crash, a timeout or an error
    there is a WorkerError here. `plain_round` (native-cuda): the process also runs one harness
    round of the plain check (doc["plain_round"])."""
    payload = {"backend": Backend(backend).value, "config": asdict(cfg), "warm": warm}
    if plain_round:
        payload["plain_round"] = True
    return run_in_worker("gapbench.benchmarks.launch.worker:entry", payload, cfg.timeout, fast_exit=True,
                         cpus=None if cfg.cpu is None else [cfg.cpu])


def plain_binary() -> Path | None:
    from gapbench.core.native import tool

    return tool("gapbench_launch_plain")


def pool(runs: list[list[Record]]) -> list[Record]:
    """Pool the records of several fresh processes into one per key: the samples of every
    successful run together, so a one-off process (its placement, its clocks) weighs no more than
    its share, and the paired rounds against the floor together (launch_pairing.pool_paired). A
    failure in any run wins: it is never hidden by the others."""
    out: dict[tuple, Record] = {}
    counts: dict[tuple, int] = {}
    pairings: dict[tuple, list[dict]] = {}
    for recs in runs:
        for r in recs:
            k = (r.backend, r.variant, r.metric)
            if k not in out:
                out[k] = Record.from_dict(asdict(r))
                counts[k] = 1
            elif out[k].status == OK and r.status == OK:
                out[k].samples_s = out[k].samples_s + list(r.samples_s)
                counts[k] += 1
            elif out[k].status == OK and r.status in (FAILED, ERROR):
                out[k] = Record.from_dict(asdict(r))
            paired = LaunchParams.of(r).paired if r.status == OK else None
            if paired is not None:
                pairings.setdefault(k, []).append(paired)
    for k, r in out.items():
        if r.status == OK and len(runs) > 1:
            r.params = LaunchParams.of(r).replace(processes=counts[k]).to_dict()
        if r.status == OK and k in pairings:
            r.params = LaunchParams.of(r).replace(paired=pool_paired(pairings[k])).to_dict()
    return list(out.values())


def _phase_records(backend: Backend, device: dict, per_process: list[dict], ops: dict,
                   verify: dict, cpu_text: str = "not bound") -> list[Record]:
    recs = []
    variants = list(dict.fromkeys(v for doc in per_process for v in doc))
    for variant in variants:
        for phase in PHASES:
            vals = [doc[variant][phase] for doc in per_process if phase in doc.get(variant, {})]
            if not vals:
                continue
            v_ok, v_detail = verify.get(variant, (None, ""))
            recs.append(Record(probe=PROBE, backend=backend, variant=variant, metric=phase, op=ops.get(variant, ""),
                               clock="host_wall", samples_s=vals, inner=1, warmup=0, device=device,
                               params=LaunchParams(fresh_processes=len(vals)).to_dict(), verified=v_ok,
                               verify_detail=v_detail,
                               conditions=Conditions(clock=Clock.HOST, process=Process.STANDALONE,
                                                     cpu=cpu_text).to_dict()))
    return recs


def precheck(backend: Backend) -> BackendInfo | None:
    """What the parent knows about `backend` without importing a framework: native backends are
    checked for real (cheap), frameworks by registry.precheck (None: only a worker can tell)."""
    return registry.precheck(backend)


def _unavailable(backend: Backend, reason: str, device: dict) -> list[Record]:
    return [Record(probe=PROBE, backend=backend, metric="all", status=UNAVAILABLE, reason=reason, device=device)]


def process_plan(backend: Backend, cfg: Config, plain_exe: str | None) -> tuple[int, int]:
    """(plain fresh processes, plain-check rounds) for `backend`: cfg.warm_processes warm ones and
    enough cold ones for cfg.cold_samples; native-cuda with the plain loop built also runs
    cfg.plain_rounds rounds, each with a fresh harness process that is a cold sample too."""
    rounds = cfg.plain_rounds if backend is Backend.native_cuda and plain_exe is not None else 0
    return max(cfg.warm_processes, cfg.cold_samples - rounds, 1), rounds


def measure_backend(backend: Backend, cfg: Config, on_step=None) -> list[Record]:
    """Every record of one backend. Never raises: failures become error rows. A framework's
    availability is decided in its first fresh process (the parent never imports it); if that
    process finds it cannot run, the backend is one unavailable row and no more processes start.
    native-cuda then runs the paired plain-loop check (cfg.plain_rounds rounds of fresh processes)."""
    backend = Backend(backend)
    pre = precheck(backend)
    if pre is not None and not pre.available:
        return _unavailable(backend, pre.reason, pre.device)
    device = dict(pre.device) if pre is not None else {}
    plain_exe, extra = None, []
    if backend is Backend.native_cuda and cfg.plain_rounds > 0:
        exe = plain_binary()
        if exe is None:
            extra = [plain_row(UNAVAILABLE, PLAIN_MISSING)]
        else:
            plain_exe = str(exe)
    n_plain, n_rounds = process_plan(backend, cfg, plain_exe)
    n_proc = n_plain + n_rounds
    per_process: list[dict] = []
    warm_runs: list[list[Record]] = []
    ops: dict = {}
    verify: dict = {}
    errors: list[str] = []

    def take(doc: dict, warm: bool) -> None:
        nonlocal device
        device = doc.get("device", device)
        per_process.append(doc["phases"])
        ops.update(doc.get("ops", {}))
        verify.update({k2: tuple(v) for k2, v in doc.get("verify", {}).items()})
        if warm:
            run = [Record.from_dict(r) for r in doc["records"]]
            for rec in run:
                rec.device = device
            warm_runs.append(run)

    for k in range(n_plain):
        warm = k < cfg.warm_processes
        try:
            doc = spawn_worker(backend, cfg, warm)
        except (WorkerError, json.JSONDecodeError) as e:
            errors.append(f"process {k + 1}: {e}")
            if on_step:
                on_step()
            if warm:  # the warm measurements were lost with this process: say so, go on
                warm_runs.append([Record(probe=PROBE, backend=backend, metric="warm", status=ERROR,
                                         reason=str(e), device=device)])
            continue
        if "unavailable" in doc:
            if not per_process:  # the framework cannot run here: one row that says why, no more processes
                if on_step:
                    for _ in range(n_proc - k):
                        on_step()
                return _unavailable(backend, doc["unavailable"], doc.get("device") or device)
            errors.append(f"process {k + 1}: unavailable after earlier processes ran: {doc['unavailable']}")
            if on_step:
                on_step()
            continue
        take(doc, warm)
        if on_step:
            on_step()
    if n_rounds:
        started = []

        def harness_round() -> dict:
            started.append(1)
            try:
                doc = spawn_worker(backend, cfg, False, plain_round=True)
            finally:
                if on_step:
                    on_step()
            if "unavailable" in doc:
                raise RuntimeError(f"native-cuda unavailable in a harness round: {doc['unavailable']}")
            take(doc, False)
            return doc["plain_round"]

        extra = plain_check(plain_exe, cfg, harness_round, new_seed(cfg, 100))
        for _ in range(n_rounds - len(started)):  # rounds a failure cut short: the progress still completes
            if on_step:
                on_step()
    warm_records = pool(warm_runs)
    cpu_text = "not bound" if cfg.cpu is None else f"bound to CPU {cfg.cpu}"
    recs = _phase_records(backend, device, per_process, ops, verify, cpu_text) + warm_records + extra
    if errors and not per_process:
        recs.append(Record(probe=PROBE, backend=backend, metric="cold", status=ERROR, reason="; ".join(errors),
                           device=device))
    elif errors:
        recs.append(Record(probe=PROBE, backend=backend, metric="cold", variant="(errors)", status=ERROR,
                           reason=f"{len(errors)} of {n_proc} fresh processes failed: " + "; ".join(errors),
                           device=device))
    return recs


def _ratio_text(r: float, lo: float, hi: float) -> str:
    if math.isnan(lo):
        return f"{r:.3f} (ratio of medians, not paired)"
    if math.isinf(lo) or math.isinf(hi):
        return f"{r:.3f} (too few rounds for an interval)"
    return f"{r:.3f} [{lo:.3f}-{hi:.3f}]"


# ============================================================== CLI
def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--backends", type=registry.backend_list, default=None,
                    help="comma list of backends (default: all). Known: " + ", ".join(b.value for b in Backend.selectable()))
    ap.add_argument("--samples", type=int, default=None,
                    help="most timed samples per measurement and process (default 1000; quick 30)")
    ap.add_argument("--budget", type=float, default=None,
                    help="wall seconds per measurement and process (default 0.5; quick 0.2)")
    ap.add_argument("--rel-hw", type=float, default=None,
                    help="stop once the median's 95%% interval half-width is within this fraction (default 0.01)")
    ap.add_argument("--inner", type=int, default=None, help="ops per sample for batched metrics (default 100; quick 20)")
    ap.add_argument("--warmup", type=int, default=None, help="untimed warm-up samples (default 20; quick 5)")
    ap.add_argument("--cold-samples", type=int, default=None,
                    help="fresh processes per backend for cold launch (default 1; quick 2)")
    ap.add_argument("--warm-processes", type=int, default=None,
                    help="fresh processes whose warm samples are pooled (default 1; quick 1)")
    ap.add_argument("--n", type=int, default=1, help="elements of the add op (default 1)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds allowed per fresh process (> 0)")
    ap.add_argument("--no-plain", action="store_true",
                    help="skip the paired plain C++ loop check (native-cuda: 6 rounds, each a fresh harness process and a fresh plain loop)")
    ap.add_argument("--plain-rounds", type=int, default=None, metavar="N",
                    help="rounds of the plain C++ loop check (default 6, each ~1 s; ~16 resolve a 3%% harness overhead: "
                         "e.g. --backends native-cuda --plain-rounds 16)")
    ap.add_argument("--inject-delay-us", action="append", default=[], metavar="BACKEND=US",
                    type=injection(lambda b: not b.is_native, "a framework backend, e.g. torch-cpu=5 (native backends "
                                   "have no hook)"),
                    help="TEST ONLY: add US microseconds of host busy-wait to every op of that framework backend, a "
                         "known slowdown for checking gapbench compare (its records say so); never use for results")
    ap.add_argument("--no-pin", action="store_true",
                    help="do not bind the workers and the plain loop to one CPU (default: bound to one core on the "
                         "GPU's NUMA node; unbound, launch latencies moved more between speeds within a process)")
    add_common_arguments(ap, probe=PROBE, gpu=True, quick_help="few samples, a short budget per measurement")
    ap.add_argument("--list", action="store_true", help="list backends with availability and exit")


def config_from_args(args) -> Config:
    cfg = Config.quick() if args.quick else Config()
    for name, attr in (("samples", "samples"), ("inner", "inner"), ("warmup", "warmup"),
                       ("cold_samples", "cold_samples"), ("warm_processes", "warm_processes"),
                       ("budget", "budget_s"), ("rel_hw", "rel_hw")):
        v = getattr(args, name)
        if v is not None:
            setattr(cfg, attr, v)
    cfg.n = args.n
    cfg.timeout = args.timeout
    if args.plain_rounds is not None:
        cfg.plain_rounds = args.plain_rounds
    if args.no_plain:
        cfg.plain_rounds = 0
    cfg.inject_delay_us.update({b.value: us for b, us in args.inject_delay_us})
    cfg.validate()
    if not args.no_pin:
        cfg.cpu = pinned_cpu()
    return cfg


def pinned_cpu() -> int | None:
    """The CPU the launch workers are bound to: core.affinity.launch_cpu on the CPUs local to the
    GPU the workers use (CUDA device 0 under this process's CUDA_VISIBLE_DEVICES, gapbench.core.gpu)
    where there is a GPU, else on the CPUs this process may use."""
    from gapbench.core import gpu, process
    from gapbench.core.affinity import gpu_local_cpus, launch_cpu

    if not hasattr(os, "sched_getaffinity"):
        return None  # macOS: no CPU binding
    ident, _ = gpu.identify(0)
    local = gpu.local_cpus_of(ident)
    if ident is not None and not local:  # no sysfs list: nvidia-smi's table (queried only then)
        topo = process.query(["nvidia-smi", "topo", "-m"], timeout=10)
        local = gpu.local_cpus_of(ident, gpu_local_cpus(topo.stdout if topo is not None and topo.returncode == 0 else None))
    return launch_cpu(local)


class LaunchBenchmark(Benchmark):
    name = PROBE
    title = "Kernel-launch latency, cold and warm, raw probe next to every framework (paper Table 6)"

    def add_arguments(self, ap: argparse.ArgumentParser) -> None:
        add_arguments(ap)

    def run(self, args, prog: str, argv: list[str] | None) -> int:
        from gapbench.backends.registry import list_backends
        from gapbench.core.cli import console_for, open_run, progress_bar

        console = console_for()
        if args.list:
            list_backends(console)
            return 0
        try:
            cfg = config_from_args(args)
        except ValueError as e:
            raise UsageError(str(e)) from None
        names = args.backends or Backend.selectable()
        writer = open_run(PROBE, args.out, prog, argv, asdict(cfg), [b.value for b in names])
        # Availability without importing any framework here (each worker reports its own).
        runnable = [n for n in names if (pre := precheck(n)) is None or pre.available]
        plain = None if plain_binary() is None else "built"
        steps = sum(sum(process_plan(n, cfg, plain)) for n in runnable)
        wall: dict[str, float] = {}  # where a run's time goes: wall seconds per backend, processes included
        with progress_bar(console, steps, disable=args.no_progress) as prog_bar:
            for name in names:
                prog_bar.describe(f"launch: {name}")
                t0 = time.monotonic()
                writer.extend(measure_backend(name, cfg, on_step=prog_bar.advance))
                wall[name.value] = round(time.monotonic() - t0, 2)
        n_perturbed = check_perturbation(writer.records)
        writer.finish(backend_wall_s=wall)
        print_lines(console, self.tables(writer.records))
        if n_perturbed:
            console.print(f"[yellow]{n_perturbed} pairing(s) perturbed an arm[/yellow]: its speed paired with the floor "
                          "differed from its speed alone beyond both intervals; those rows give the standalone medians' "
                          "ratio (params.paired.perturbed says what moved)", highlight=False)
        cmp_rows = plain_comparison(writer.records)
        if cmp_rows:
            console.print("harness / plain C++ loop (native-cuda null kernel, median of paired rounds [95% interval]): "
                          + ", ".join(f"{m} {_ratio_text(r, lo, hi)}" for m, r, lo, hi in cmp_rows))
        console.print(f"results: {writer.path} and {writer.csv_path}")
        return 0

    def tables(self, records):
        return [build_table(records), unavailable_table(records)]

    def markdown(self, records):
        return markdown_table(records)

    def report_tables(self, runs):
        return report_tables(runs)

    def bundle_args(self, out, quick):
        return super().bundle_args(out, quick) + ["--no-progress"]


BENCHMARK = LaunchBenchmark()


def main(argv: list[str] | None = None, prog: str = "python -m bench.launch") -> int:
    return BENCHMARK.main(argv, prog)
