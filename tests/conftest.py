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
