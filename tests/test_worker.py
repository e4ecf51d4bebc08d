"""The worker protocol (gapbench.core.worker) and the command-line mechanism (gapbench.core.benchmark.run_cli):
results and errors from a fresh process, and what a user's Ctrl-C, SIGTERM or SIGKILL leaves
behind (nothing: no worker, no temporary files) with the exit code and the line they see."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT, as_from_a_terminal, run_module
from gapbench.core.names import Backend
from gapbench import benchmarks
from gapbench.core.benchmark import EXIT_SIGINT, EXIT_SIGTERM
from gapbench.core.worker import PacedCommand, WorkerError, run_in_worker

psutil = pytest.importorskip("psutil")

TARGETS = '''
import os, time
from gapbench.core.worker import progress
def echo(p):
    progress("half way")
    return {"got": p, "pid": os.getpid()}
def boom(p):
    raise ValueError("bad thing " + p["why"])
def sleep(p):
    time.sleep(p["s"])
def die(p):
    os._exit(3)
def leave_note(p):
    import atexit
    atexit.register(lambda: open(p["note"], "w").write("teardown ran"))
    return "done"
'''


@pytest.fixture
def targets(tmp_path, monkeypatch):
    (tmp_path / "wtargets.py").write_text(TARGETS)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    return "wtargets"


def test_result_and_progress_come_back(targets):
    seen = []
    got = run_in_worker(f"{targets}:echo", {"a": [1, 2]}, 60, on_progress=seen.append)
    assert got["got"] == {"a": [1, 2]} and got["pid"] != os.getpid()
    assert seen == ["half way"]
    assert not psutil.pid_exists(got["pid"]) or psutil.Process(got["pid"]).status() == psutil.STATUS_ZOMBIE


@pytest.mark.parametrize("func, payload, timeout, kind, words", [
    ("boom", {"why": "here"}, 60, "error", "ValueError: bad thing here"),
    ("sleep", {"s": 60}, 3, "timeout", "timed out after 3 s"),
    ("die", {}, 60, "crash", "exited with status 3"),
])
def test_failures_are_typed(targets, func, payload, timeout, kind, words):
    t0 = time.monotonic()
    with pytest.raises(WorkerError) as e:
        run_in_worker(f"{targets}:{func}", payload, timeout)
    assert e.value.kind == kind and words in str(e.value)
    assert time.monotonic() - t0 < 50  # the sleeping worker was stopped, not waited for


def _workers_of(pid: int) -> list:
    try:
        kids = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    out = []
    for c in kids:
        try:
            if "gapbench.core.worker" in " ".join(c.cmdline()):
                out.append(c)
        except psutil.Error:  # ended between the listing and the look (a cold launch process does)
            pass
    return out


def _start_long_launch(tmp_path):
    """A launch run that would take hours, once its first worker is running."""
    out = tmp_path / "long.json"
    env = dict(os.environ, TMPDIR=str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "bench.launch", "--backends", "native-cpu", "--samples", "50000000",
                             "--warmup", "50000000", "--budget", "600", "--no-progress", "--out", str(out)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=as_from_a_terminal)
    deadline = time.time() + 120
    workers = []
    while time.time() < deadline and not workers:
        workers = _workers_of(proc.pid)
        time.sleep(0.1)
    assert workers, "no worker process started"
    time.sleep(1.0)  # the worker is inside its measurement loop now
    return proc, out, workers


def _gone(procs, within: float = 15.0) -> bool:
    _, alive = psutil.wait_procs(procs, timeout=within)
    return not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.parametrize("sig, code, name", [(signal.SIGINT, EXIT_SIGINT, "Ctrl-C"),
                                             (signal.SIGTERM, EXIT_SIGTERM, "SIGTERM")])
def test_interrupt_names_the_partial_file_and_leaves_nothing(tmp_path, sig, code, name):
    proc, out, workers = _start_long_launch(tmp_path)
    try:
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, err
    assert "Traceback" not in err and f"interrupted ({name})" in err and str(out) in err
    assert json.loads(out.read_text())["run"]["probe"] == "launch"  # the partial file is valid
    assert _gone(workers), [w.pid for w in workers]
    assert not any((tmp_path / "tmp").iterdir())


def test_sigkill_of_the_parent_takes_the_worker_with_it(tmp_path):
    proc, _, workers = _start_long_launch(tmp_path)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()
    proc.stderr.close()
    try:
        assert _gone(workers, within=10.0), "worker orphaned after its parent was killed"
    finally:
        for w in workers:
            if w.is_running():
                w.kill()
    assert not any((tmp_path / "tmp").iterdir())


def test_nothing_measured_is_exit_1_with_one_line(tmp_path):
    from gapbench.backends import registry

    if registry.info(Backend.native_metal).available:
        pytest.skip("needs a machine without Metal")
    p = run_module("bench.launch", "--backends", "native-metal", "--out", str(tmp_path / "x.json"))
    assert p.returncode == 1
    assert "nothing was measured" in p.stderr and str(tmp_path / "x.json") in p.stderr


@pytest.mark.parametrize("args, words", [(["--timeout", "0"], "--timeout"), (["--n", "0"], "--n")])
def test_launch_bad_values_are_exit_2(tmp_path, args, words):
    p = run_module("bench.launch", "--backends", "native-cpu", *args, "--out", str(tmp_path / "x.json"))
    assert p.returncode == 2 and words in p.stderr and not (tmp_path / "x.json").exists()


def test_unknown_command_lists_the_commands():
    p = run_module("gapbench", "foo")
    assert p.returncode == 2 and "unknown command 'foo'" in p.stderr
    for name in ("launch", "blas", "train", "suite", "report"):
        assert f"  {name} " in p.stderr


def test_registry_lists_each_benchmark_once_and_skips_absent_modules(monkeypatch):
    names = benchmarks.available()
    assert {"launch", "blas", "train", "suite", "report"} <= set(names) and len(names) == len(set(names))
    for n in names:
        b = benchmarks.get(n)
        assert b.name == n and b.title
    monkeypatch.setitem(benchmarks.REGISTRY, "ghost", "gapbench.no_such_package.bench:BENCHMARK")
    assert "ghost" not in benchmarks.available()
    with pytest.raises(benchmarks.UnknownBenchmark):
        benchmarks.get("ghost")


PACED = r'''
import json, sys, time
rounds, mode = int(sys.argv[1]), sys.argv[2]
if mode == "die-starting":
    print("no device", file=sys.stderr, flush=True)
    sys.exit(2)
time.sleep(0.3 if mode == "slow-start" else 0)
print(json.dumps({"ready": True, "t": time.monotonic()}), flush=True)
for r in range(rounds):
    if rounds > 1 and not sys.stdin.readline():
        break
    if mode == "die" and r == 1:
        print("cuda said no", file=sys.stderr, flush=True)
        sys.exit(3)
    if mode == "hang" and r == 1:
        time.sleep(60)
    print(json.dumps({"round": r, "t": time.monotonic()}), flush=True)
'''


@pytest.fixture
def paced(tmp_path):
    script = tmp_path / "paced.py"
    script.write_text(PACED)
    return lambda rounds, mode="ok", timeout=20: PacedCommand([sys.executable, str(script), str(rounds), mode],
                                                              timeout=timeout)


def test_paced_command_runs_one_round_per_call_in_one_process(paced):
    with paced(3) as loop:
        got = []
        for _ in range(3):
            t_ask = time.monotonic()
            doc = loop.round()
            got.append(doc["round"])
            assert doc["t"] >= t_ask  # the round ran only once asked, so rounds interleave with ours
    assert got == [0, 1, 2] and loop.close() == 0


def test_paced_command_ready_waits_for_the_loops_start(paced):
    """ready() returns only once the loop has said it is set up (so the harness's own set-up can
    overlap the loop's start, and no timed round does); round() waits for it too."""
    t0 = time.monotonic()
    with paced(2, "slow-start") as loop:
        loop.ready()
        t_ready = time.monotonic()
        assert t_ready - t0 >= 0.3
        loop.ready()  # once said, not waited for again
        assert loop.round()["round"] == 0 and loop.round()["round"] == 1
    assert loop.close() == 0


@pytest.mark.parametrize("mode, words", [("die", "cuda said no"), ("hang", "no answer within")])
def test_paced_command_failures_name_the_loop_and_stop_it(paced, mode, words):
    loop = paced(3, mode, timeout=3)
    assert loop.round()["round"] == 0
    with pytest.raises(RuntimeError, match=words):
        loop.round()
    assert loop._p.poll() is not None  # stopped, not left behind


def test_paced_command_failure_while_starting_says_so(paced):
    loop = paced(3, "die-starting")
    with pytest.raises(RuntimeError, match="no device.*|while starting"):
        loop.ready()
    assert loop._p.poll() is not None


@pytest.mark.parametrize("fast", [False, True])
def test_fast_exit_returns_the_result_and_skips_only_the_teardown(targets, tmp_path, fast):
    note = tmp_path / "note.txt"
    got = run_in_worker("wtargets:leave_note", {"note": str(note)}, 60, fast_exit=fast)
    assert got == "done"
    assert note.exists() is not fast  # atexit handlers (Python's teardown) run only without fast_exit
