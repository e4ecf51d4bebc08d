"""python -m bench.train: end-to-end training steps (GPT-2, Whisper) split into forward, backward
and optimizer, with memory and page faults over time, energy per step, clocks, and the memory
scenario of the paper's Figure 2.

Spec: the paper's sections 3-4.3, Tables 2-5, Figures 2-4. Each case (model x backend x precision
x batch x mode) runs in a fresh process, so its memory timeline starts clean and a crash or an
out-of-memory in one case is a row while the sweep goes on.

Per case, in this order:
  1. check: the memory plan (theory vs device capacity), then build the model; a random-weight
     model's first loss must be finite and near ln(vocab) (it predicts uniformly), and every
     timed step's loss must be finite: a case that fails is recorded as failed, not timed.
  2. warm-up steps (reported apart, metric step_warmup).
  3. timed steps in interleaved rounds of three arms on the same model and batches: the harness
     (one sync per step like the plain loop; the phases split by device events recorded between
     them, or host timestamps on the CPU; MLX: one mx.eval per step, its phases from extra
     phase-by-phase evaluated steps after the rounds), the harness with the
     sampler paused, and the plain loop of gapbench/plain/train.py (one sync per step). Ratios between the arms say
     what the harness and its sampler cost.
  4. energy over the whole timed window (all arms do the same work), memory peaks, clocks and
     throttle reasons, and the declared work: FLOPs per step (torch's flop counter on one extra
     step for transformers models; the analytic count for the minimal GPT-2, which a test checks
     against the counter) and tokens or samples per step.
Run: python -m bench.train --model gpt2-large --batch-size 8 --seq-len 1024 --precision fp32 \\
       --backend torch-cuda --steps 20

Modules: train_config (Case), train_data (batches), train_workloads (torch and MLX models),
train_tables (tables), train_cli (the command), this file (one case, start to end).
"""
from __future__ import annotations

import itertools
import math
import time
import traceback
from dataclasses import asdict, replace

import numpy as np

from gapbench.backends import registry
from gapbench.core.names import Backend, DeviceClass, Family
from gapbench.core.cases import CaseError, error_record, run_case_in_worker
from gapbench.core.conditions import Clock, Conditions, Process, clock_of
from gapbench.core.result import ERROR, FAILED, OK, UNAVAILABLE, Record
from gapbench.benchmarks.train.config import BACKENDS, HF_MODELS, MINIMAL, MODELS, MODES, OFFLOADS, PRECISIONS, PROBE, Case  # noqa: F401
from gapbench.benchmarks.train.config import load_roofline  # noqa: F401
from gapbench.benchmarks.train.tables import build_table  # noqa: F401
from gapbench.benchmarks.train.data import byte_tokens, load_local, make_batches  # noqa: F401
from gapbench.benchmarks.train.workloads import MLXWorkload, TorchWorkload, mlx_fp32_matmul_precision  # noqa: F401


# ============================================================== one case
def _backend_device(backend: Backend) -> dict:
    info = registry.info(backend)
    return dict(info.device)


def _timed(fn, i, sync) -> float:
    t0 = time.perf_counter()
    fn(i)
    sync()
    return time.perf_counter() - t0


def _is_oom(e: BaseException) -> bool:
    t = f"{type(e).__name__}: {e}".lower()
    return "out of memory" in t or "outofmemory" in t or "malloc" in t and "metal" in t


def run_case(case: Case, progress=None) -> list[Record]:
    """Every record of one case. Never raises for a case-level problem: those become rows."""
    case = case.resolved()
    base = dict(probe=PROBE, backend=case.backend, variant=case.impl)
    params = {"case": asdict(case), "label": case.label()}
    info = registry.info(case.backend)
    if not info.available:
        return [Record(**base, metric="step", status=UNAVAILABLE, reason=info.reason, params=params)]
    try:
        return _run_case(case, base, params, progress)
    except CaseError as e:
        return [Record(**base, metric="step", status=e.status, reason=e.reason, params=params, device=_backend_device(case.backend))]
    except Exception as e:  # an OOM or a crash inside one case is a row; the sweep goes on
        oom = _is_oom(e)
        params["oom"] = oom
        reason = ("out of memory: " if oom else f"{type(e).__name__}: ") + str(e).strip().splitlines()[0][:400]
        params["traceback"] = traceback.format_exc()[-4000:]
        return [Record(**base, metric="step", status=ERROR, reason=reason, params=params, device=_backend_device(case.backend))]


def _run_case(case: Case, base: dict, params: dict, progress) -> list[Record]:
    from gapbench.benchmarks.train import memplan
    from gapbench.backends.monitor import NVML, Energy, Sampler

    rng = np.random.default_rng(case.seed)
    device = _backend_device(case.backend)
    wl = (MLXWorkload if case.backend.family is Family.mlx else TorchWorkload)(case, rng)
    plan = memplan.plan(wl.params, wl.trainable, case.backend, case.capacity_bytes)
    params.update(memory_plan=plan.to_dict(), params=wl.params, trainable=wl.trainable, data=wl.data_desc)
    offload = case.offload
    if offload == "auto":
        offload = "cpu" if plan.scenario == memplan.DOES_NOT_FIT and case.backend is Backend.torch_cuda else "none"
        wl.case = case = replace(case, offload=offload)
        params["case"]["offload"] = f"auto -> {offload}"
    wl.prepare()
    is_mlx = isinstance(wl, MLXWorkload)
    nvml = NVML() if case.backend.device_class is DeviceClass.cuda else None
    if nvml is not None and nvml.ok:
        device.update(nvml=nvml.info())
    records: list[Record] = []
    say = progress or (lambda text: None)
    losses: list[float] = []

    def check_loss(where: str):
        v = wl.loss_value()
        losses.append(v)
        if not math.isfinite(v):
            raise CaseError(FAILED, f"loss is {v} at {where}: the step is broken, nothing was timed")

    # ---- 1. correctness: the first loss of a random model is ~ln(vocab)
    if is_mlx:
        wl.fwd_bwd(0)
        wl.optimizer(0)
    else:
        wl.forward(0)
        wl.backward(0)
        wl.optimizer(0)
    wl.sync()
    check_loss("the first step")
    expect = math.log(wl.vocab)
    verified, detail = True, f"every step's loss finite; first loss {losses[0]:.3f}"
    if not case.checkpoint and not case.data:
        ok = abs(losses[0] - expect) < 0.25 * expect
        detail += f" vs ln(vocab) = {expect:.3f} for a random-weight model ({'ok' if ok else 'FAILED'})"
        if not ok:
            return [Record(**base, metric="step", status=FAILED, verified=False, verify_detail=detail,
                           reason="first loss of a random-weight model is far from ln(vocab): the model or its loss is wrong",
                           params=params, device=device)]

    # ---- 2. warm-up (reported apart)
    # At least `warmup` steps and `warmup_s` seconds: a GPU needs seconds of load before its
    # clocks and power settle (seen on an H200: 150 W -> 360 W over the first 1.5 s of Whisper
    # bf16 steps, which ran 20% slower meanwhile), however short the step.
    warm = []
    t_warm = time.perf_counter()
    i = 0
    while i < case.warmup or (time.perf_counter() - t_warm < case.warmup_s and i < 10_000):
        say(f"warm-up {i + 1} (>= {case.warmup} steps and {case.warmup_s:g} s)")
        t0 = time.perf_counter()
        if is_mlx:
            wl.fwd_bwd(i)
            wl.optimizer(i)
        else:
            wl.forward(i)
            wl.backward(i)
            wl.optimizer(i)
        wl.sync()
        warm.append(time.perf_counter() - t0)
        check_loss(f"warm-up step {i}")
        i += 1
    flops, flops_how = wl.flops_per_step()
    items, item_unit = wl.items_per_step()
    work = {"items": items}
    if flops:
        work["flops"] = flops
    params.update(flops_source=flops_how, item_unit=item_unit, notes=wl.notes)

    # ---- 3. interleaved rounds: harness (sampler on), harness (sampler paused), plain loop
    fwd, bwd, opt, step, fwdbwd = [], [], [], [], []
    nosamp, plain, plain_def = [], [], []
    arms = ["harness", "nosampler", "plain"] if case.plain else ["harness"]
    if case.plain and not is_mlx:
        arms.append("plain_defaults")  # the plain loop with torch.optim.AdamW() as is
    per_round = [case.steps // case.rounds + (1 if r < case.steps % case.rounds else 0) for r in range(case.rounds)]
    energy = Energy(case.backend.device_class, nvml)
    sampler = Sampler(case.backend, case.sample_interval_s, nvml)
    done = 0
    total = case.steps * len(arms)
    plain_loops = {"plain": (wl.plain, plain, "plain loop"),
                   "plain_defaults": (getattr(wl, "plain_defaults", None), plain_def, "plain loop, library defaults")}
    with sampler:
        wl.sync()
        energy.start()
        for r, n in enumerate(per_round):
            order = arms if r % 2 == 0 else arms[::-1]
            for arm in order:
                if arm in plain_loops:  # a plain loop: no sampler, one sync per step
                    run, into, what = plain_loops[arm]
                    sampler.pause()
                    into += run(n)
                    sampler.resume()
                    done += n
                    say(f"round {r + 1}/{case.rounds} {what} ({done}/{total} steps)")
                    continue
                if arm == "nosampler":
                    sampler.pause()
                for i in range(n):
                    k = len(step) + len(nosamp)
                    sampler.mark(f"step {k}")
                    wl.sync()
                    if is_mlx:
                        wall = _timed(wl.fused_step, k, wl.sync)
                    else:
                        wall, (a, b, c) = wl.timed_step(k)
                    check_loss(f"step {k}")
                    if arm == "nosampler":
                        nosamp.append(wall)
                    else:
                        step.append(wall)
                        if not is_mlx:
                            fwd.append(a)
                            bwd.append(b)
                            opt.append(c)
                    done += 1
                    say(f"round {r + 1}/{case.rounds} {arm} step {i + 1}/{n} ({done}/{total}) loss {losses[-1]:.3f}")
                if arm == "nosampler":
                    sampler.resume()
        wl.sync()
        energy.stop()
        if is_mlx:
            # MLX evaluates a whole step lazily in one mx.eval, so its phases are timed in extra
            # steps evaluated phase by phase (value_and_grad, then the update), and the forward
            # alone in extra passes; backward is derived. The step record keeps the fused step
            # users run (on MLX-CUDA the split steps measured up to 5% faster than fused ones).
            for i in range(case.steps):
                say(f"MLX phase-split step {i + 1}/{case.steps}")
                fwdbwd.append(_timed(wl.fwd_bwd, i, wl.sync))
                opt.append(_timed(wl.optimizer, i, wl.sync))
                check_loss(f"phase-split step {i}")
            wl.forward_only(0)  # untimed: the first forward-only graph is built and allocated here
            for i in range(max(case.steps // 2, 3)):
                say(f"MLX forward-only pass {i + 1}")
                fwd.append(_timed(wl.forward_only, i, wl.sync))
            med = float(np.median(fwd))
            bwd = [max(x - med, 0.0) for x in fwdbwd]
            params["mlx_split_step_s"] = [a + c for a, c in zip(fwdbwd, opt)]
    tl = sampler.timeline()
    steps_run = len(step) + len(nosamp) + len(plain) + len(plain_def)
    params.update(
        energy=energy.result(steps_run),
        memory_peaks=dict(wl.memory_peaks(), **_timeline_peaks(tl)),
        timeline=tl,
        losses=losses,
        throttle_reasons=nvml.throttle_reasons() if nvml is not None and nvml.ok else [],
        roofline=_roofline_for(case),
    )
    if not is_mlx:
        # After all timing: once CUPTI has profiled a process, launches in it stay slower (on
        # the H200 a launch-bound GPT-2 bf16 step went from 34 to 52 ms when counted first).
        params["kernels_per_step"] = wl.kernels_per_step()
        if params["kernels_per_step"] is not None:
            params["kernel_time_per_step_s"] = wl.kernel_time_s  # sum of the profiled kernels' durations
    wl.close()
    common = dict(base, device=device)
    pclock = "host_wall" if is_mlx else wl.phase_clock
    # The choices that change a step's time, compared between arms (core/conditions.py): every arm
    # of this case shares them, but the library-defaults loop runs torch.optim.AdamW() as is.
    cond = Conditions(clock=Clock.HOST, process=Process.PAIRED, data=wl.data_desc if isinstance(wl.data_desc, str)
                      else "synthetic", optimizer=wl.optimizer_used, attention=wl.attention_used, compile=case.compile,
                      seed=case.seed)
    def rec(metric, samples, op, clock="host_wall", conditions=cond, **kw):
        conditions = conditions.replace(clock=clock_of(clock))
        return Record(**common, metric=metric, samples_s=samples, op=op, clock=clock, conditions=conditions.to_dict(),
                      **kw)
    how = ("value_and_grad + update, one mx.eval (as the plain loop)" if is_mlx else
           "host clock from a sync to the sync after the optimizer, no sync inside (as the plain loop)")
    records.append(rec("step", step, f"one training step: forward + backward + AdamW; {how}",
                       work=work, params=params, verified=verified, verify_detail=detail, warmup=len(warm)))
    records.append(rec("forward", fwd, "forward pass incl. loss" + (" (timed apart, MLX)" if is_mlx else ""),
                       clock=pclock, params={"label": case.label()}))
    records.append(rec("backward", bwd, "backward pass" + (": derived, (forward+backward in phase-split steps) - median(forward)" if is_mlx else ""),
                       clock=pclock, params={"label": case.label(), "derived": is_mlx}))
    records.append(rec("optimizer", opt, "AdamW step" + (" (its own mx.eval, in the phase-split steps)" if is_mlx else " + zero_grad"),
                       clock=pclock, params={"label": case.label()}))
    if warm:
        records.append(rec("step_warmup", warm, "warm-up steps, in order (not in the statistics of step)",
                           params={"label": case.label()}))
    if nosamp:
        records.append(rec("step_nosampler", nosamp, "harness step with the memory sampler paused", work=work,
                           params={"label": case.label()}))
    if plain:
        records.append(rec("plain_step", plain, "plain loop step (gapbench/plain/train.py): one sync per step",
                           work=work, params={"label": case.label()}))
    if plain_def:
        records.append(rec("plain_defaults_step", plain_def, "plain loop step with the library's defaults: "
                           "torch.optim.AdamW() with no options, one sync per step", work=work,
                           params={"label": case.label()}, conditions=cond.replace(optimizer="default")))
    return records


def _timeline_peaks(tl: dict) -> dict:
    out = {}
    for k, col in tl["columns"].items():
        vals = [v for v in col if v is not None]
        if k.endswith("_bytes") and vals:
            out[f"{k[:-6]}_peak_bytes" if not k.endswith("peak_bytes") else k] = max(vals)
    return out


def _roofline_for(case: Case) -> dict:
    key = {"fp32": "fp32", "amp-fp16": "fp16", "amp-bf16": "bf16"}[case.precision]
    r = case.roofline.get(key)
    return {"dtype": key, **r} if r else {}


# ============================================================== in a fresh process
def case_worker(payload: dict) -> list[dict]:
    """gapbench.core.worker target: one case from its fields; its records as dicts."""
    from gapbench.core.worker import progress

    return [r.to_dict() for r in run_case(Case(**payload), progress)]


def run_in_subprocess(case: Case, timeout_s: float, progress=None) -> list[Record]:
    """One case in a fresh process (gapbench.core.worker): a clean memory timeline, and a crash is a row."""
    c = case.resolved()
    return run_case_in_worker("gapbench.benchmarks.train.run:case_worker", case, timeout_s, progress,
                              error_record(PROBE, c.backend, c.impl, {"case": asdict(c), "label": c.label()}))


def expand(args_lists: dict, base: dict) -> list[Case]:
    keys = list(args_lists)
    return [Case(**base, **dict(zip(keys, combo))) for combo in itertools.product(*args_lists.values())]
