"""Starting, watching and stopping the ranks of bench.dist and train_dp on this machine.

`launch_local` starts one `python -m <module>` process per rank with torch's env:// variables
(RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) plus any per-rank variables (MLX's),
each in its own process group and tied to the parent (PR_SET_PDEATHSIG), then watches them:
a rank that exits non-zero gets its peers stopped after a short grace; no progress (its log
files stop growing) for `hang_s`, or the whole launch past `timeout_s`, stops them all. Nothing
waits forever and nothing is left behind: every group is sent SIGTERM, then SIGKILL.
Multi-node launchers (torchrun, mlx.launch, mpirun) are driven by `run_external`.
"""
from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from gapbench.benchmarks.collectives.affinity import preexec
from gapbench.benchmarks.collectives.config import process_env

GRACE_S = 3.0  # after one rank fails, how long its peers get to finish or fail on their own


@dataclass
class RankOutcome:
    rank: int
    pid: int
    rc: int | None  # None: still running when stopped
    how: str  # "exited", "killed (peer failed)", "killed (hang)", "killed (timeout)"
    stderr_tail: str = ""
    lines: list[dict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.rc == 0

    def describe(self) -> str:
        if self.rc is None or self.how != "exited":
            return f"rank {self.rank} {self.how}"
        if self.rc < 0:
            return f"rank {self.rank} was killed by signal {-self.rc} ({signal.Signals(-self.rc).name})"
        return f"rank {self.rank} exited with status {self.rc}"


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


def _die_with_parent() -> None:
    """preexec: the child gets SIGKILL when the launcher dies (Linux), and is a group leader."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except OSError:
            pass


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


def stop_group(p: subprocess.Popen, grace_s: float = 2.0) -> None:
    """SIGTERM to the process group, then SIGKILL; reaps the leader."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(p.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            p.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    try:  # a group member that outlived its leader
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def launch_local(nproc: int, module: str, args: list[str], rank_dir: Path, *, timeout_s: float,
                 hang_s: float, per_rank_env=None, allow_multicast: bool = False,
                 log_glob: str = "rank{rank}*.jsonl", cpus: list[list[int]] | None = None) -> list[RankOutcome]:
    """Run `python -m module args` as ranks 0..nproc-1 on 127.0.0.1 and watch them (see module doc).
    Each rank's stdout+stderr goes to rank_dir/rank<r>.err; its progress is the size of the files
    matching log_glob. `cpus[r]`: the CPUs rank r is bound to (affinity.rank_cpus); None: unbound."""
    rank_dir.mkdir(parents=True, exist_ok=True)
    port = free_ports(1)[0]
    procs: list[subprocess.Popen] = []
    errs: list[Path] = []
    try:
        for r in range(nproc):
            env = process_env(allow_multicast=allow_multicast)
            env.update(RANK=str(r), WORLD_SIZE=str(nproc), LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(nproc),
                       GROUP_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), PYTHONUNBUFFERED="1")
            if per_rank_env:
                env.update(per_rank_env(r))
            err = rank_dir / f"rank{r}.err"
            errs.append(err)
            with open(err, "wb") as ef:
                procs.append(subprocess.Popen([sys.executable, "-m", module, *args], env=env, stdout=ef,
                                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                              start_new_session=True,
                                              preexec_fn=preexec(cpus[r] if cpus else None, _die_with_parent)))
        how = _watch(procs, rank_dir, log_glob, timeout_s=timeout_s, hang_s=hang_s)
    except BaseException:
        for p in procs:
            stop_group(p, grace_s=0.5)
        raise
    outcomes = []
    for r, p in enumerate(procs):
        lines = []
        for f in sorted(rank_dir.glob(log_glob.format(rank=r))):
            lines.extend(read_lines(f))
        outcomes.append(RankOutcome(rank=r, pid=p.pid, rc=p.returncode, how=how.get(r, "exited"),
                                    stderr_tail=_tail(errs[r]), lines=lines))
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


def _watch(procs, rank_dir: Path, log_glob: str, *, timeout_s: float, hang_s: float) -> dict[int, str]:
    """Wait for every rank; stop them all on a failure (after GRACE_S), a hang or the deadline.
    Returns {rank: how} for ranks that were stopped."""
    t0 = time.monotonic()
    last_progress, last_change = -1, t0
    failed_at = None
    reason = None
    while True:
        time.sleep(0.1)
        now = time.monotonic()
        rcs = [p.poll() for p in procs]
        if all(rc is not None for rc in rcs):
            return {}
        if failed_at is None and any(rc not in (None, 0) for rc in rcs):
            failed_at = now
        prog = _progress(rank_dir, log_glob, len(procs))
        if prog != last_progress:
            last_progress, last_change = prog, now
        if failed_at is not None and now - failed_at > GRACE_S:
            reason = "killed (a peer rank failed)"
        elif now - last_change > hang_s:
            reason = f"killed (hang: no progress for {hang_s:.0f} s)"
        elif now - t0 > timeout_s:
            reason = f"killed (timeout: the launch ran past {timeout_s:.0f} s)"
        if reason:
            stopped = {r: reason for r, p in enumerate(procs) if p.poll() is None}
            for p in procs:
                if p.poll() is None:
                    stop_group(p)
            return stopped


def run_external(cmd: list[str], *, timeout_s: float, allow_multicast: bool = False,
                 env_extra: dict | None = None) -> tuple[int | None, str]:
    """Run a launcher (torchrun, mlx.launch, mpirun) in its own process group with a deadline;
    output passes through to this terminal. Returns (exit status or None on timeout, how)."""
    env = process_env(allow_multicast=allow_multicast)
    env.update(env_extra or {})
    p = subprocess.Popen(cmd, env=env, start_new_session=True, preexec_fn=_die_with_parent, stdin=subprocess.DEVNULL)
    try:
        p.wait(timeout=timeout_s)
        return p.returncode, "exited"
    except subprocess.TimeoutExpired:
        stop_group(p)
        return None, f"killed (timeout: the launch ran past {timeout_s:.0f} s)"
    except BaseException:
        stop_group(p, grace_s=0.5)
        raise
