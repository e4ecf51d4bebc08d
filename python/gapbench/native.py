"""Access to the compiled extension, gapbench._native, with the reason when it is missing."""
from __future__ import annotations

import importlib
from types import ModuleType

_native: ModuleType | None = None
_error: str | None = None


def load() -> ModuleType:
    """The extension module; raises RuntimeError saying how to build it when it is absent."""
    global _native, _error
    if _native is not None:
        return _native
    if _error is None:
        try:
            _native = importlib.import_module("gapbench._native")
            return _native
        except ImportError as e:  # a source checkout on sys.path instead of an install
            _error = (f"gapbench._native is not importable ({e}); install the package with "
                      "`pip install .` from the repository root")
    raise RuntimeError(_error)


def build_info() -> dict:
    try:
        return dict(load().build_info)
    except RuntimeError as e:
        return {"error": str(e)}
