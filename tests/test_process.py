"""gapbench.core.process, the one module that starts children: every child sees NVLink multicast
off whatever environment its caller passes; a hung child is stopped at its deadline with its whole
process group and the error names it; a child dies with its parent; the multicast-off variables
are written in one module; and no other module starts a process."""
from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT
from gapbench.core import process

LINUX = sys.platform.startswith("linux")
MULTICAST_VARS = ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")
ENV_OF_CHILD = "import json, os; print(json.dumps({k: os.environ.get(k) for k in %r}))" % (MULTICAST_VARS,)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead: it only waits to be reaped
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def _wait_gone(pid: int, within_s: float = 20.0) -> bool:
    t0 = time.monotonic()
    while time.monotonic() - t0 < within_s:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_a_child_sees_multicast_off_over_a_callers_env_that_turns_it_on():
    on = dict(os.environ, NCCL_NVLS_ENABLE="1", TORCH_SYMM_MEM_DISABLE_MULTICAST="0", NVSHMEM_DISABLE_NVLS="0",
              GAPBENCH_ALLOW_MULTICAST="1")
    p = process.run([sys.executable, "-c", ENV_OF_CHILD], timeout=60, env=on)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == process.MULTICAST_OFF


def test_only_the_explicit_opt_in_leaves_multicast_to_the_caller():
    on = dict(os.environ, NCCL_NVLS_ENABLE="1")
    env = process.child_env(base=on, allow_multicast=True)
    assert env["NCCL_NVLS_ENABLE"] == "1" and env[process.ALLOW_MULTICAST] == "1"
    assert process.child_env({"NCCL_NVLS_ENABLE": "1"})["NCCL_NVLS_ENABLE"] == "0"


def test_ranks_see_multicast_off(tmp_path):
    prog = tmp_path / "rankenv.py"
    prog.write_text(ENV_OF_CHILD + "\n")
    outs = process.run_ranks(2, "rankenv", [], tmp_path, timeout_s=60, hang_s=60,
                             per_rank_env=lambda r: {"PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
                                                     "NCCL_NVLS_ENABLE": "1"})
    assert [o.rc for o in outs] == [0, 0], [o.stderr_tail for o in outs]
    for o in outs:
        assert json.loads(o.stderr_tail) == process.MULTICAST_OFF


GRANDPARENT = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print(child.pid, flush=True)
time.sleep(600)
"""


def test_a_hung_child_is_stopped_at_its_deadline_with_its_group_and_named(tmp_path):
    log = tmp_path / "hung.log"
    with process.start([sys.executable, "-c", GRANDPARENT], stdout=process.PIPE, text=True, name="rank 3",
                       log=log) as c:
        grandchild = int(c.popen.stdout.readline())
        assert _alive(grandchild)
        with pytest.raises(process.ChildTimeout) as e:
            c.wait(timeout=1.0)
    msg = str(e.value)
    assert "rank 3" in msg and "deadline" in msg and str(log) in msg
    assert _wait_gone(c.pid, 10) and _wait_gone(grandchild, 10)


def test_run_raises_a_timeout_that_names_the_child():
    with pytest.raises(process.ChildTimeout, match="the sleeper ran past its 0.5 s deadline"):
        process.run([sys.executable, "-c", "import time; time.sleep(600)"], timeout=0.5, name="the sleeper")


def test_a_hung_rank_is_stopped_and_its_outcome_names_it_and_its_log(tmp_path):
    prog = tmp_path / "hang.py"
    prog.write_text("import os, time\nif os.environ['RANK'] == '1':\n    time.sleep(600)\n")
    outs = process.run_ranks(2, "hang", [], tmp_path, timeout_s=60, hang_s=1.0,
                             per_rank_env=lambda r: {"PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"})
    assert outs[0].ok
    assert not outs[1].ok and "hang" in outs[1].how
    text = outs[1].describe()
    assert "rank 1" in text and str(tmp_path / "rank1.err") in text
    assert _wait_gone(outs[1].pid, 10)


def test_cleanup_on_exception_stops_the_group():
    with pytest.raises(RuntimeError, match="boom"):
        with process.start([sys.executable, "-c", "import time; time.sleep(600)"]) as c:
            pid = c.pid
            raise RuntimeError("boom")
    assert _wait_gone(pid, 10)


PARENT = """
import sys, time
from gapbench.core import process
c = process.start([sys.executable, "-c", "import time; time.sleep(600)"])
print(c.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.skipif(not LINUX, reason="PR_SET_PDEATHSIG is Linux's")
def test_a_child_dies_with_its_parent():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        assert _alive(child)
        parent.send_signal(signal.SIGKILL)  # runs no handler: only the kernel can take the child along
        parent.wait(timeout=30)
        assert _wait_gone(child, 20), f"child {child} outlived its SIGKILLed parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_query_answers_none_for_a_tool_that_is_absent_or_hangs():
    assert process.query(["gapbench-no-such-tool-here"]) is None
    assert process.query([sys.executable, "-c", "import time; time.sleep(600)"], timeout=0.5) is None
    p = process.query([sys.executable, "-c", "print('hi')"])
    assert p is not None and p.returncode == 0 and p.stdout.strip() == "hi"


# ---------------------------------------------------------------- the shape of the code
def _modules() -> list[Path]:
    return sorted(p for d in ("python", "bench") for p in (ROOT / d).rglob("*.py") if "__pycache__" not in p.parts)


def test_the_multicast_off_variables_are_written_in_one_module():
    """Anywhere in the code (strings, comments, docstrings): one module, gapbench.core.process."""
    for v in MULTICAST_VARS:
        where = [p.relative_to(ROOT).as_posix() for p in _modules() if v in p.read_text()]
        assert where == ["python/gapbench/core/process.py"], f"{v} is spelled in {where}"


#: calls that start a process: module attribute names, per module
SPAWNERS = {"subprocess": {"Popen", "run", "call", "check_call", "check_output", "getoutput", "getstatusoutput"},
            "os": {"fork", "forkpty", "system", "popen", "spawnv", "spawnve", "spawnl", "spawnle", "spawnvp",
                   "spawnvpe", "execv", "execve", "execvp", "execvpe", "posix_spawn", "posix_spawnp"},
            "multiprocessing": {"Process", "Pool", "get_context", "set_start_method"},
            "pty": {"fork", "spawn"}}


def test_no_module_but_process_starts_a_process():
    found = []
    for path in _modules():
        rel = path.relative_to(ROOT).as_posix()
        if rel == "python/gapbench/core/process.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                if any(n.split(".")[0] in ("subprocess", "multiprocessing", "pty") for n in names):
                    found.append(f"{rel}:{node.lineno}: imports {', '.join(names)}")
                if isinstance(node, ast.ImportFrom) and node.module == "os":
                    bad = [a.name for a in node.names if a.name in SPAWNERS["os"]]
                    if bad:
                        found.append(f"{rel}:{node.lineno}: from os import {', '.join(bad)}")
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.attr in SPAWNERS.get(node.value.id, ())):
                found.append(f"{rel}:{node.lineno}: {node.value.id}.{node.attr}")
    assert not found, "start processes through gapbench.core.process:\n" + "\n".join(found)
