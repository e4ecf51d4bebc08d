"""The one way gapbench runs a piece of work in a fresh process (launch's cold-start processes,
train's and suite's cases): `run_in_worker("pkg.module:function", payload, timeout_s)`.

Parent side: `python -m gapbench.core.worker TARGET FD` starts in its own session (so its own process
group: a Ctrl-C at the terminal reaches only the parent, which decides), the JSON payload goes in on
its stdin and the JSON result comes back on the pipe FD. Nothing is written to disk, so nothing is
left behind however either side ends. On timeout, Ctrl-C, SIGTERM (turned into an exception by
`benchmark.run_cli`) or any other exception in the parent, the worker's whole process group is
killed before the exception goes on.

Child side: the first thing the worker does is arrange to die with its parent
(process.die_with_parent: on Linux prctl(PR_SET_PDEATHSIG, SIGKILL), elsewhere a thread that
polls os.getppid()). The process is started by gapbench.core.process, like every child. So a parent killed
with SIGKILL (which runs no handler) leaves no worker behind. The target's own children (if any)
are in the worker's process group and go with it on timeout or interrupt.

Progress: the target may call `gapbench.core.worker.progress(text)`; the parent's `on_progress`
receives each line. Everything else the worker prints is kept as the tail for error messages.
Compare pyperf's _manager.py (a worker per run, results over a pipe).
"""
from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import threading
from typing import Any, Callable

from gapbench.core import process

PROGRESS_MARK = "@progress "
PARENT_ENV = "GAPBENCH_WORKER_PARENT"


class WorkerError(RuntimeError):
    """The worker did not return a result. kind: "timeout" (it ran past timeout_s and was
    killed), "crash" (it exited without a result: a signal, the OOM killer, os._exit) or
    "error" (the target raised; detail is its "Type: message")."""

    KINDS = ("timeout", "crash", "error")

    def __init__(self, kind: str, detail: str = "", tail: list[str] | None = None):
        if kind not in self.KINDS:
            raise ValueError(f"WorkerError kind must be one of {self.KINDS}, got {kind!r}")
        super().__init__(detail or kind)
        self.kind, self.detail, self.tail = kind, detail, list(tail or [])


# ============================================================== parent side
def run_in_worker(target: str, payload: dict, timeout_s: float, *,
                  on_progress: Callable[[str], None] | None = None, env: dict[str, str] | None = None,
                  fast_exit: bool = False, cpus: list[int] | None = None) -> Any:
    """target(payload) in a fresh `python -m gapbench.core.worker` process; returns its JSON result.
    Raises WorkerError(kind=timeout|crash|error) when there is none; re-raises KeyboardInterrupt
    (and anything else raised here while waiting) after killing the worker's process group.
    `fast_exit`: once its result is written, the worker ends with os._exit, skipping Python's
    teardown (torch's takes about 0.5 s) for targets that leave nothing to clean up; the parent
    still waits until the process is gone. `cpus`: the CPUs the worker is bound to (None: any)."""
    if timeout_s <= 0:
        raise ValueError(f"timeout must be > 0 seconds, got {timeout_s}")
    rfd, wfd = os.pipe()
    try:
        cmd = [sys.executable, "-m", "gapbench.core.worker", target, str(wfd)] + (["--fast-exit"] if fast_exit else [])
        p = process.start(cmd, env=dict(os.environ, **(env or {}), **{PARENT_ENV: str(os.getpid())}),
                          stdin=process.PIPE, stdout=process.PIPE, stderr=process.STDOUT, pass_fds=(wfd,),
                          name=f"worker {target}", cpus=cpus).popen
    finally:
        os.close(wfd)
    result_chunks: list[bytes] = []
    tail: list[str] = []

    def read_result():
        with os.fdopen(rfd, "rb") as f:
            while chunk := f.read(1 << 16):
                result_chunks.append(chunk)

    def read_output():
        for raw in p.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            if line.startswith(PROGRESS_MARK):
                if on_progress is not None:
                    try:
                        on_progress(line[len(PROGRESS_MARK):])
                    except Exception:  # a progress display must never stop the run
                        pass
            else:
                tail.append(line)
                del tail[:-40]

    readers = [threading.Thread(target=read_result, daemon=True), threading.Thread(target=read_output, daemon=True)]
    for t in readers:
        t.start()
    try:
        try:
            p.stdin.write(json.dumps(payload).encode())
            p.stdin.close()
        except BrokenPipeError:
            pass
        # A blocking wait in a thread, joined with the timeout: this returns the moment the
        # worker has ended, where Popen.wait(timeout) polls with sleeps of up to 50 ms.
        waiter = threading.Thread(target=p.wait, daemon=True)
        waiter.start()
        try:
            waiter.join(timeout_s)
            if waiter.is_alive():
                raise TimeoutError
            rc = p.returncode
        except TimeoutError:
            process.kill_group(p)
            raise WorkerError("timeout", f"timed out after {timeout_s:g} s and was stopped (raise the timeout)",
                              tail) from None
    except BaseException:
        process.kill_group(p)
        raise
    for t in readers:
        t.join(timeout=10)
    data = b"".join(result_chunks)
    if not data:
        if rc < 0:
            sig = -rc
            name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
            why = f"was killed by signal {sig} ({name})" + (" - often the OS out-of-memory killer" if sig == 9 else "")
        else:
            why = f"exited with status {rc}"
        raise WorkerError("crash", f"the worker process {why} and returned no result: " + " | ".join(tail[-3:])[:600],
                          tail)
    doc = json.loads(data)
    if not doc.get("ok"):
        raise WorkerError("error", doc.get("error", "unknown error"), tail + [doc.get("traceback", "")])
    return doc["result"]


class PacedCommand:
    """A plain C++ loop started once and run round by round (the loops' ROUNDS argument): once set
    up, the loop says so on one line ({"ready": true}); then each `round()` writes one line to its
    stdin, and the loop answers with one line of JSON (that round's samples) and waits for the
    next line. So a plain loop pays its start (the CUDA context, loading cuBLAS: about 2 s) once,
    the harness can prepare its own side while it starts (`ready()` waits for the start to be
    over, so none of it overlaps a timed round), and it can run its own round between two of the
    loop's, which pairs the two in time. Started through gapbench.core.process: its own process
    group, killed on timeout, error or interrupt, dead with its parent on Linux.

        with PacedCommand([exe, ..., "6"], timeout=60) as loop:
            ...                      # the harness's own set-up, while the loop starts
            loop.ready()
            for _ in range(6):
                doc = loop.round()"""

    def __init__(self, cmd: list[str], timeout: float, cpus: list[int] | None = None):
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        self.cmd, self.timeout = list(cmd), float(timeout)
        self._p = process.start(cmd, stdin=process.PIPE, stdout=process.PIPE, stderr=process.PIPE, text=True,
                                cpus=cpus).popen
        import queue

        self._lines: queue.Queue = queue.Queue()
        self._err: list[str] = []
        threading.Thread(target=self._pump, args=(self._p.stdout, self._lines.put), daemon=True).start()
        self._err_reader = threading.Thread(target=self._pump, args=(self._p.stderr, self._keep_err), daemon=True)
        self._err_reader.start()
        self._is_ready = False

    @staticmethod
    def _pump(stream, put) -> None:
        for line in stream:
            put(line)
        put(None)

    def _keep_err(self, line) -> None:
        if line is not None:
            self._err.append(line.rstrip("\n"))
            del self._err[:-20]

    def _failure(self, what: str) -> RuntimeError:
        process.kill_group(self._p)
        self._err_reader.join(timeout=2)  # its last words, once the pipe closes
        rc = self._p.returncode
        tail = " | ".join(self._err[-3:])[-400:]
        return RuntimeError(f"{' '.join(self.cmd[:1])} {what} (exit {rc}): {tail or 'no message'}")

    def ready(self) -> None:
        """Wait until the loop is set up and idle, waiting for its first round. RuntimeError if it
        failed or closed first, or did not get there within the timeout (it is then stopped)."""
        if not self._is_ready:
            if self._answer("while starting").get("ready") is not True:
                raise self._failure("did not say it was ready before its first round")
            self._is_ready = True

    def round(self) -> dict:
        """Run one round: the loop's JSON answer for it. RuntimeError if the loop failed, closed
        or did not answer within the timeout (it is then stopped)."""
        self.ready()
        try:
            self._p.stdin.write("go\n")
            self._p.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._failure("ended before this round") from None
        return self._answer("to this round")

    def _answer(self, when: str) -> dict:
        import queue

        try:
            line = self._lines.get(timeout=self.timeout)
        except queue.Empty:
            raise self._failure(f"gave no answer within {self.timeout:g} s ({when}) and was stopped") from None
        if line is None:
            self._p.wait(timeout=10)
            raise self._failure(f"ended without an answer ({when})")
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            raise self._failure(f"answered with a line that is not JSON ({when}): {line[:120]!r}") from None

    def close(self) -> int | None:
        """Close its stdin (the loop then ends) and wait for it; the exit status."""
        try:
            self._p.stdin.close()
        except OSError:
            pass
        try:
            return self._p.wait(timeout=min(self.timeout, 30))
        except process.TimeoutExpired:
            process.kill_group(self._p)
            return self._p.returncode

    def kill(self) -> None:
        """Stop the loop and its process group now."""
        process.kill_group(self._p)

    def __enter__(self) -> "PacedCommand":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.kill()


# ============================================================== child side
def die_with_parent(parent: int | None = None) -> None:
    """Make this process die when its parent does (called first thing in a worker)."""
    process.die_with_parent(parent if parent is not None else int(os.environ.get(PARENT_ENV, "0") or 0))


def progress(text: str) -> None:
    """From inside a worker target: one progress line for the parent's on_progress (elsewhere:
    to stderr, where it does no harm)."""
    print(PROGRESS_MARK + str(text).replace("\n", " "), file=sys.stderr, flush=True)


def resolve_target(target: str) -> Callable[[dict], Any]:
    module, _, func = target.partition(":")
    if not module or not func:
        raise ValueError(f"worker target must be 'package.module:function', got {target!r}")
    return getattr(importlib.import_module(module), func)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    die_with_parent()
    target, fd = argv[0], int(argv[1])
    payload = json.loads(sys.stdin.read() or "{}")
    try:
        doc = {"ok": True, "result": resolve_target(target)(payload)}
    except Exception as e:  # the parent reports it as WorkerError(kind="error")
        import traceback

        doc = {"ok": False, "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-4000:]}
    data = json.dumps(doc).encode()
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    if "--fast-exit" in argv[2:]:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
