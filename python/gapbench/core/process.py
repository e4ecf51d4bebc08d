"""The one module that starts child processes: workers (core.worker), ranks, external launchers
(torchrun, mlx.launch, mpirun), the plain C++ loops and lab binaries, compilers and short
queries (nvidia-smi, git, sysctl). No other module calls subprocess, os.fork or multiprocessing
(tests/test_process.py checks this).

Every child gets:
- the environment of `child_env`: NVLink multicast off (MULTICAST_OFF, written here and nowhere
  else), applied over whatever environment the caller passes. The only way to leave it on is the
  documented opt-in `allow_multicast=True` (bench.dist --allow-multicast), which also sets
  GAPBENCH_ALLOW_MULTICAST=1 so the ranks record it;
- its own session, so its own process group: a Ctrl-C at the terminal reaches only gapbench,
  which decides, and stopping a child stops whatever it started;
- death with its parent: on Linux PR_SET_PDEATHSIG=SIGKILL, set between fork and exec (a child
  whose parent died before that exits at once); elsewhere Python children call
  `die_with_parent()` themselves (core.worker does);
- a deadline: past it the whole group gets SIGTERM, then SIGKILL after a grace, and the error
  (ChildTimeout) names the child and, where it has one, its log;
- cleanup: `Child` is a context manager that stops the group on any exception, and `run`,
  `query` and `run_ranks` stop every child they started before they return or raise.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

#: NVLink multicast (NVLS) stays off in every process gapbench starts.
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
#: set (to "1") in a child's environment only by the explicit opt-in `allow_multicast=True`
ALLOW_MULTICAST = "GAPBENCH_ALLOW_MULTICAST"
PIPE, DEVNULL, STDOUT = subprocess.PIPE, subprocess.DEVNULL, subprocess.STDOUT
CompletedProcess, TimeoutExpired = subprocess.CompletedProcess, subprocess.TimeoutExpired
#: after SIGTERM, how long a group gets before SIGKILL
GRACE_S = 2.0
LINUX = sys.platform.startswith("linux")
PR_SET_PDEATHSIG = 1


def _libc_prctl():
    """libc's prctl, looked up once here: a preexec_fn must not import or load anything (another
    thread of the parent may have held the import lock at fork)."""
    if not LINUX:
        return None
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _libc_prctl()


class ChildTimeout(subprocess.TimeoutExpired):
    """A child ran past its deadline and was stopped with its whole process group."""

    def __init__(self, cmd, timeout: float, name: str = "", log: str | os.PathLike | None = None,
                 output=None, stderr=None):
        super().__init__(cmd, timeout, output, stderr)
        self.name = name or os.path.basename(str(cmd[0] if isinstance(cmd, (list, tuple)) else cmd))
        self.log = str(log) if log else None

    def __str__(self) -> str:
        where = f"; its log: {self.log}" if self.log else ""
        return (f"{self.name} ran past its {self.timeout:g} s deadline and was stopped with its process group"
                f"{where} (raise the timeout if it was still working)")


# ============================================================== environment
def child_env(extra: dict[str, str] | None = None, *, base: dict[str, str] | None = None,
              allow_multicast: bool = False) -> dict[str, str]:
    """The environment of a child: `base` (default: this process's) updated with `extra`, then
    MULTICAST_OFF over both, so no caller turns multicast back on by passing a variable. Only
    `allow_multicast=True` (the documented --allow-multicast opt-in) leaves it to the caller's
    environment, and marks the child with GAPBENCH_ALLOW_MULTICAST=1 so it records that."""
    env = dict(os.environ if base is None else base)
    env.update(extra or {})
    env["PYTHONUNBUFFERED"] = "1"
    if allow_multicast:
        env[ALLOW_MULTICAST] = "1"
    else:
        env.pop(ALLOW_MULTICAST, None)
        env.update(MULTICAST_OFF)
    return env


def multicast_off_here() -> bool:
    """In a rank started by a launcher this process did not configure (torchrun, mpirun,
    mlx.launch): put MULTICAST_OFF into this process's own environment before any communicator
    exists, unless the opt-in marked it. Returns whether multicast was allowed by the user."""
    allowed = os.environ.get(ALLOW_MULTICAST) == "1"
    if not allowed:
        os.environ.update(MULTICAST_OFF)
    return allowed


def launcher_env_flags(flag: str, with_values: bool) -> list[str]:
    """Command-line flags that make an external launcher pass MULTICAST_OFF to the ranks it starts
    on other hosts: mpirun `-x NAME` (`with_values=False`: forwards this process's value, which
    child_env set), mlx.launch `--env NAME=VALUE`."""
    out: list[str] = []
    for k, v in MULTICAST_OFF.items():
        out += [flag, f"{k}={v}" if with_values else k]
    return out


# ============================================================== starting and stopping
def _child_setup(parent: int, cpus: Sequence[int] | None) -> Callable[[], None]:
    """preexec_fn: runs in the child between fork and exec."""

    def setup() -> None:
        if cpus:
            os.sched_setaffinity(0, list(cpus))
        if _PRCTL is not None:
            _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent:  # the parent died before the line above: nobody will signal us
                os._exit(1)

    return setup


def stop_group(p: subprocess.Popen, grace_s: float = GRACE_S) -> None:
    """SIGTERM to the child's process group, SIGKILL after `grace_s`; reaps the leader, then
    SIGKILLs any group member that outlived it."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        if grace_s <= 0 and sig == signal.SIGTERM:
            continue
        try:
            os.killpg(p.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            p.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_group(p: subprocess.Popen) -> None:
    """SIGKILL the group at once (no grace): a worker whose result is not wanted any more."""
    stop_group(p, grace_s=0)


class Child:
    """One child in its own session, dead with its parent, multicast off. A context manager:
    leaving the block with an exception stops the group; leaving it normally waits for the child
    and SIGKILLs any group member still alive.

        with process.start(cmd, stdout=process.PIPE, name="rank 1", log=path) as c:
            out, err = c.communicate(timeout=60)     # ChildTimeout naming it on the deadline
    """

    def __init__(self, cmd: Sequence[str], *, env: dict[str, str] | None = None, allow_multicast: bool = False,
                 cpus: Sequence[int] | None = None, name: str = "", log: str | os.PathLike | None = None,
                 stdin=DEVNULL, stdout=None, stderr=None, text: bool = False, pass_fds: Sequence[int] = (),
                 cwd: str | os.PathLike | None = None):
        self.cmd = [str(c) for c in cmd]
        self.name = name or os.path.basename(self.cmd[0])
        self.log = log
        self.popen = subprocess.Popen(self.cmd, env=child_env(base=env, allow_multicast=allow_multicast),
                                      stdin=stdin, stdout=stdout, stderr=stderr, text=text, pass_fds=tuple(pass_fds),
                                      cwd=cwd, start_new_session=True, preexec_fn=_child_setup(os.getpid(), cpus))

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode

    def poll(self) -> int | None:
        return self.popen.poll()

    def timeout_error(self, timeout: float, output=None, stderr=None) -> ChildTimeout:
        return ChildTimeout(self.cmd, timeout, self.name, self.log, output, stderr)

    def wait(self, timeout: float | None = None) -> int:
        """The exit status; past `timeout` the group is stopped and ChildTimeout raised."""
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise self.timeout_error(timeout) from None

    def communicate(self, input=None, timeout: float | None = None):
        """(stdout, stderr); past `timeout` the group is stopped and ChildTimeout raised."""
        try:
            return self.popen.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            out, err = self.popen.communicate()
            raise self.timeout_error(timeout, out, err) from None

    def stop(self, grace_s: float = GRACE_S) -> None:
        stop_group(self.popen, grace_s)

    def kill(self) -> None:
        kill_group(self.popen)

    def __enter__(self) -> "Child":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.stop(grace_s=0.5)
        else:
            if self.popen.poll() is None:
                self.popen.wait()
            try:  # a group member that outlived its leader
                os.killpg(self.popen.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def start(cmd: Sequence[str], **kw) -> Child:
    """Start `cmd` as a Child (see Child for the keywords)."""
    return Child(cmd, **kw)


def run(cmd: Sequence[str], timeout: float, *, name: str = "", input: str | None = None, env=None,
        allow_multicast: bool = False, cwd=None) -> subprocess.CompletedProcess:
    """Run `cmd` to its end with output captured as text; ChildTimeout (a subprocess.TimeoutExpired)
    when it runs past `timeout` seconds, after its whole group was stopped. OSError if it cannot
    be started."""
    if timeout <= 0:
        raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
    with start(cmd, env=env, allow_multicast=allow_multicast, cwd=cwd, name=name, text=True,
               stdin=PIPE if input is not None else DEVNULL, stdout=PIPE, stderr=PIPE) as c:
        out, err = c.communicate(input, timeout=timeout)
    return subprocess.CompletedProcess(c.cmd, c.returncode, out, err)


def query(cmd: Sequence[str], timeout: float = 10.0, *, cwd=None) -> subprocess.CompletedProcess | None:
    """A short question to a tool (nvidia-smi, git, sysctl, a compiler's --version): its completed
    process, or None when it cannot be started or does not answer within `timeout` seconds."""
    try:
        return run(cmd, timeout, cwd=cwd)
    except (OSError, subprocess.SubprocessError):
        return None


def die_with_parent(parent: int) -> None:
    """Called first thing in a Python child: die when `parent` does. Linux: PR_SET_PDEATHSIG (set
    again: an exec'd interpreter keeps it, but a child started by another tool may not have it);
    elsewhere a thread that polls os.getppid() and kills the child's group."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    else:
        _watch_parent(parent)
    if parent and os.getppid() != parent:
        os._exit(1)


def _watch_parent(parent: int) -> None:
    def watch():
        while True:
            if os.getppid() != parent:
                try:
                    os.killpg(0, signal.SIGKILL)  # this child and whatever it started
                finally:
                    os._exit(1)
            time.sleep(0.5)

    if parent:
        threading.Thread(target=watch, daemon=True, name="gapbench-parent-watch").start()


# ============================================================== ranks on this machine
#: after one rank fails, how long its peers get to finish or fail on their own
PEER_GRACE_S = 3.0


@dataclass
class RankOutcome:
    rank: int
    pid: int
    rc: int | None  # None: still running when stopped
    how: str  # "exited", "killed (a peer rank failed)", "killed (hang: ...)", "killed (timeout: ...)"
    stderr_tail: str = ""
    lines: list[dict] = field(default_factory=list)
    log: str = ""  # the rank's stdout+stderr file

    @property
    def ok(self) -> bool:
        return self.rc == 0

    def describe(self) -> str:
        where = f" (its log: {self.log})" if self.log else ""
        if self.rc is None or self.how != "exited":
            return f"rank {self.rank} {self.how}{where}"
        if self.rc < 0:
            sig = -self.rc
            name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
            return f"rank {self.rank} was killed by signal {sig} ({name}){where}"
        return f"rank {self.rank} exited with status {self.rc}{where}"


def free_ports(n: int = 1, host: str = "127.0.0.1") -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def read_lines(path: Path) -> list[dict]:
    """The JSON lines a rank wrote; a torn last line (the rank died mid-write) is dropped."""
    out = []
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return out
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return out


def _tail(path: Path, n: int = 1500) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return ""
    return data[-n:].decode("utf-8", "replace").strip()


def run_ranks(nproc: int, module: str, args: list[str], rank_dir: Path, *, timeout_s: float, hang_s: float,
              per_rank_env: Callable[[int], dict] | None = None, allow_multicast: bool = False,
              log_glob: str = "rank{rank}*.jsonl", cpus: list[list[int]] | None = None) -> list[RankOutcome]:
    """Run `python -m module args` as ranks 0..nproc-1 on 127.0.0.1 with torch's env:// variables
    (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) plus `per_rank_env(r)` (MLX's), and
    watch them: a rank that exits non-zero gets its peers stopped after PEER_GRACE_S; no progress
    (the files matching log_glob stop growing) for `hang_s`, or the whole launch past `timeout_s`,
    stops them all. Each rank's stdout+stderr goes to rank_dir/rank<r>.err, named in its outcome.
    `cpus[r]`: the CPUs rank r is bound to (core.affinity.rank_cpus); None: unbound."""
    rank_dir.mkdir(parents=True, exist_ok=True)
    port = free_ports(1)[0]
    kids: list[Child] = []
    errs: list[Path] = []
    try:
        for r in range(nproc):
            env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(nproc), LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(nproc),
                       GROUP_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
            env.update(per_rank_env(r) if per_rank_env else {})
            err = rank_dir / f"rank{r}.err"
            errs.append(err)
            with open(err, "wb") as ef:
                kids.append(start([sys.executable, "-m", module, *args], env=env, allow_multicast=allow_multicast,
                                  cpus=cpus[r] if cpus else None, name=f"rank {r}", log=err, stdout=ef, stderr=STDOUT))
        how = _watch(kids, rank_dir, log_glob, timeout_s=timeout_s, hang_s=hang_s)
    except BaseException:
        for k in kids:
            k.stop(grace_s=0.5)
        raise
    outcomes = []
    for r, k in enumerate(kids):
        lines = []
        for f in sorted(rank_dir.glob(log_glob.format(rank=r))):
            lines.extend(read_lines(f))
        outcomes.append(RankOutcome(rank=r, pid=k.pid, rc=k.returncode, how=how.get(r, "exited"),
                                    stderr_tail=_tail(errs[r]), lines=lines, log=str(errs[r])))
    return outcomes


def _progress(rank_dir: Path, log_glob: str, n: int) -> int:
    total = 0
    for r in range(n):
        for f in rank_dir.glob(log_glob.format(rank=r)):
            try:
                total += f.stat().st_size
            except FileNotFoundError:
                pass
    return total


def _watch(kids: list[Child], rank_dir: Path, log_glob: str, *, timeout_s: float, hang_s: float) -> dict[int, str]:
    """Wait for every rank; stop them all on a failure (after PEER_GRACE_S), a hang or the deadline.
    Returns {rank: how} for ranks that were stopped."""
    t0 = time.monotonic()
    last_progress, last_change = -1, t0
    failed_at = None
    reason = None
    while True:
        time.sleep(0.1)
        now = time.monotonic()
        rcs = [k.poll() for k in kids]
        if all(rc is not None for rc in rcs):
            return {}
        if failed_at is None and any(rc not in (None, 0) for rc in rcs):
            failed_at = now
        prog = _progress(rank_dir, log_glob, len(kids))
        if prog != last_progress:
            last_progress, last_change = prog, now
        if failed_at is not None and now - failed_at > PEER_GRACE_S:
            reason = "killed (a peer rank failed)"
        elif now - last_change > hang_s:
            reason = f"killed (hang: no progress for {hang_s:.0f} s)"
        elif now - t0 > timeout_s:
            reason = f"killed (timeout: the launch ran past {timeout_s:.0f} s)"
        if reason:
            stopped = {r: reason for r, k in enumerate(kids) if k.poll() is None}
            for k in kids:
                if k.poll() is None:
                    k.stop()
            return stopped


def run_launcher(cmd: list[str], *, timeout_s: float, allow_multicast: bool = False,
                 env_extra: dict | None = None) -> tuple[int | None, str]:
    """Run an external launcher (torchrun, mlx.launch, mpirun) in its own process group with a
    deadline; its output passes through to this terminal. Returns (exit status, or None when it
    ran past the deadline and was stopped, how)."""
    with start(cmd, env=dict(os.environ, **(env_extra or {})), allow_multicast=allow_multicast,
               name=os.path.basename(cmd[0])) as c:
        try:
            return c.wait(timeout_s), "exited"
        except ChildTimeout:
            return None, f"killed (timeout: the launch ran past {timeout_s:.0f} s)"


def run_rank_set(cmds: list[list[str]], timeout_s: float, cpus: list[list[int]] | None = None) -> list[str] | str:
    """One process per rank (rank r bound to cpus[r] where given), each printing its answer on
    stdout: every rank's stdout, or one line saying why not (a failing or hung rank stops the
    others)."""
    kids = [start(c, stdout=PIPE, stderr=PIPE, text=True, cpus=cpus[r] if cpus else None, name=f"rank {r}")
            for r, c in enumerate(cmds)]
    outs, why = [], None
    try:
        for r, k in enumerate(kids):
            try:
                out, err = k.communicate(timeout=timeout_s)
            except ChildTimeout as e:
                why = str(e)
                break
            if k.returncode != 0:
                why = f"rank {r} exited with {k.returncode}: {err.strip()[-300:]}"
                break
            outs.append(out)
    finally:
        for k in kids:
            if k.poll() is None:
                k.stop(grace_s=0.5)
    return why if why else outs
