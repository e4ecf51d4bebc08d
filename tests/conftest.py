import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture
def root() -> Path:
    return ROOT


def run_module(module: str, *args: str, timeout: float = 300):
    """Run `python -m module args` from the repository root, as a user would."""
    import subprocess

    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def pytest_report_header(config):
    """The sources under test, as the build recorded them: a saved log (e.g. of `pytest -m cuda`
    on a GPU) names the commit and content hash it passed on."""
    try:
        from gapbench.core.env import provenance

        p = provenance()
    except Exception as e:  # the header must never stop the run
        return f"gapbench sources: unknown ({type(e).__name__}: {e})"
    return (f"gapbench sources: commit {p['source_commit']}, hash {p['source_hash']}, dirty {p['dirty']} "
            f"({p['provenance_from']})")


def as_from_a_terminal() -> None:
    """preexec_fn for a child a test will Ctrl-C: SIGINT at its default disposition, as a command
    typed at a terminal has it. A runner started in the background by a shell without job control
    (`nohup bash -c '... &'`) ignores SIGINT, and its children would inherit that, so a Ctrl-C test
    would hang on how the suite was launched rather than on gapbench."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
