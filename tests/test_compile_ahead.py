"""bench.blas compiles the kernels a framework compiles on first use (CuPy's) before the first case,
on threads (benchmarks/blas/compile_ahead.py): which jobs a run plans, how they run, and on a GPU
with CuPy that the cases then find every kernel compiled."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from gapbench.backends import registry
from gapbench.benchmarks.blas import compile_ahead
from gapbench.benchmarks.blas.config import Config
from gapbench.core.names import Backend, DType, Family


class FakeAdapter:
    """Stands in for a framework adapter: records which thread did what."""

    def __init__(self, family: Family, compiles: bool, fail_op: str | None = None):
        self.family, self.compiles_on_first_use, self.fail_op = family, compiles, fail_op
        self.lock = threading.Lock()
        self.on_threads, self.ran, self.poisoned, self.copied, self.synced = set(), [], 0, 0, set()
        self.done = 0
        self.own_calls = []
        self.cp = np  # what CuPy's ways of running an op call, numpy's like-named functions here

    def supports(self, dtype):
        return DType(dtype) is not DType.bf16, "no bf16 here"

    def on_thread(self):
        with self.lock:
            self.on_threads.add(threading.get_ident())

    def thread_array(self, a, dtype):
        assert threading.get_ident() in self.on_threads, "an array made before on_thread"
        return np.array(a)

    def evaluated(self, fn):
        return fn

    def poison(self, x):
        with self.lock:
            self.poisoned += 1

    def copy_array(self, x, a, dtype):
        with self.lock:
            self.copied += 1
        return x.copy()

    def sync(self):
        with self.lock:
            self.synced.add(threading.get_ident())

    def threads_done(self):
        self.done += 1

    def own_kernels(self):
        return [("empty kernel", lambda: self.own_calls.append(threading.current_thread().name))]


def _cases(cfg: Config):
    return cfg.cases()


def test_the_plan_runs_each_impl_of_each_op_at_its_smallest_shape_in_each_supported_dtype():
    cfg = Config(quick=True)
    cupy, torch = FakeAdapter(Family.cupy, True), FakeAdapter(Family.torch, False)
    jobs = compile_ahead.plan(_cases(cfg), {Backend.cupy: cupy, Backend.torch_cuda: torch})
    names = [j.name for j in jobs]
    assert len(names) == len(set(names))
    assert all(j.adapter is cupy for j in jobs)  # torch does not compile on first use: no job
    want = {"cupy empty kernel"}
    for spec in cfg.ops:
        for impl in spec.impls(Family.cupy):
            want |= {f"cupy {impl.row} {spec.name} {d.value}" for d in cfg.dtypes if d is not DType.bf16}
    assert set(names) == want
    # the inputs are the op's at its smallest shape of the run, rounded to the job's dtype
    for spec in cfg.ops:
        shapes = [sh for s, sh, _ in cfg.cases() if s is spec]
        small = min(shapes, key=lambda sh: sum(spec.elements(sh)))
        job = next(j for j in jobs if j.name.endswith(f" {spec.name} fp16"))
        ins = job.call.args[2]
        assert [a.shape for a in ins] == [a.shape for a in spec.inputs(small, np.random.default_rng(0))]
        assert all(np.array_equal(a, a.astype(np.float16).astype(np.float32)) for a in ins)
    assert compile_ahead.plan(_cases(cfg), {Backend.torch_cuda: torch}) == []


def test_every_job_runs_on_a_worker_thread_and_one_failure_loses_none_of_the_others():
    cfg = Config(quick=True)
    ok = FakeAdapter(Family.cupy, True)
    jobs = compile_ahead.plan(_cases(cfg), {Backend.cupy: ok})
    ran = []

    def failing():
        raise RuntimeError("nvrtc: no")

    copies = sum(len(j.call.args[2]) for j in jobs if hasattr(j.call, "args"))
    jobs.insert(1, compile_ahead.Job("cupy broken", ok, failing))
    for j in jobs:
        call = j.call
        object.__setattr__(j, "call", lambda call=call: (ran.append(threading.current_thread().name), call()))
    out = compile_ahead.run(jobs, threads=3)
    assert out.jobs == len(jobs) and out.threads == 3
    assert out.failed == ("cupy broken: RuntimeError: nvrtc: no",)
    assert len(ran) == len(jobs) and all(n.startswith("gapbench-compile") for n in ran)
    assert threading.get_ident() not in ok.on_threads and 1 <= len(ok.on_threads) <= 3
    assert ok.synced <= ok.on_threads and ok.synced  # each job waits for its own work, on its thread
    impl_jobs = len(jobs) - 2  # less the failing one and the empty kernel
    assert ok.poisoned == impl_jobs  # every op here returns a new array: poisoned as a case does
    assert ok.copied == copies > 0
    assert ok.own_calls and ok.done == 1  # the adapter lets go of its threads' leftovers once, at the end
    assert compile_ahead.run([]) == compile_ahead.Outcome()


def test_compile_ahead_is_on_by_default_and_recorded_only_when_off():
    from gapbench.benchmarks.blas.command import BlasBenchmark

    assert Config().compile_ahead and "compile_ahead" not in Config().to_dict()
    off = Config(compile_ahead=False)
    assert off.to_dict()["compile_ahead"] is False
    assert Config.from_dict(off.to_dict()).compile_ahead is False  # what --processes hands its more processes
    assert Config.from_dict(Config().to_dict()).compile_ahead is True
    ap = BlasBenchmark().parser("bench.blas")
    assert BlasBenchmark.config(ap.parse_args(["--no-compile-ahead"])).compile_ahead is False
    assert BlasBenchmark.config(ap.parse_args([])).compile_ahead is True


_AFTER = textwrap.dedent("""
    import os, sys
    import numpy as np
    from gapbench.backends import registry
    from gapbench.benchmarks.blas import compile_ahead
    from gapbench.benchmarks.blas.config import Config
    from gapbench.core.dtypes import round_to
    from gapbench.core.names import Backend, Data, DType
    from gapbench.ops.spec import Source

    cache = os.environ["CUPY_CACHE_DIR"]
    count = lambda: sum(len(f) for _, _, f in os.walk(cache))
    ad = registry.make_adapter(Backend.cupy)
    ad.setup_context()
    cases = Config().cases()  # a default run's
    out = compile_ahead.run(compile_ahead.plan(cases, {Backend.cupy: ad}))
    assert not out.failed, out.failed
    ahead = count()
    # every case's CuPy rows as a case makes them (arrays, first run, poison, input set copies),
    # at every shape of the run up to 2^27 elements, then the launch floor's empty kernel
    rng = np.random.default_rng(1)
    for spec, shape, dtype in cases:
        if not ad.supports(dtype)[0] or sum(spec.elements(shape)) > 1 << 27:
            continue
        ins = [round_to(a, dtype) for a in spec.inputs(shape, Source(Data.randn, rng))]
        for impl in spec.impls(ad.family):
            arrays = [ad.array(a, dtype) for a in ins]
            op = impl.build(ad, arrays)
            first = op()
            ad.poison(first)
            ad.host_view(op())
            [ad.copy_array(x, a, dtype) for x, a in zip(arrays, ins)]
    ad.empty_kernel()()
    ad.sync()
    print(ahead, count())
""")


@pytest.mark.cuda
@pytest.mark.skipif(not registry.info(Backend.cupy).available, reason="needs CuPy on a CUDA GPU")
def test_after_compiling_ahead_the_cases_compile_nothing(tmp_path):
    """In a fresh process with an empty CuPy kernel cache: compiling ahead for a default run fills
    it, and running every CuPy row of the run's cases as a case does, at every shape up to 2^27
    elements (the plan took each op's smallest), adds nothing to it."""
    env = dict(os.environ, CUPY_CACHE_DIR=str(tmp_path / "kernels"))
    p = subprocess.run([sys.executable, "-c", _AFTER], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    ahead, after = map(int, p.stdout.split()[-2:])
    assert ahead > 0 and after == ahead, (ahead, after)
