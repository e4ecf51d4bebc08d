"""The shape of the package, checked as CI checks it: imports go one way (import-linter contracts in
pyproject.toml: layers, independent benchmarks, no cycle), every child process is started by one
module, and names are parsed in one place: no module but gapbench.core.names spells a backend, an
element type or an L2 mode as a string to compare with, and no module but the op's own declares
an op's name."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import IN_CI, ROOT
from gapbench import ops
from gapbench.core.names import Backend, CacheMode, ColdScrub, DType, Precision

PKG = ROOT / "python" / "gapbench"


def _sources() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


def _rel(p: Path) -> str:
    return p.relative_to(PKG).as_posix()


def test_import_contracts_hold():
    try:
        import importlinter  # noqa: F401
    except ImportError:
        if IN_CI:
            pytest.fail("import-linter is not installed: it is in the test extras (pip install '.[test]')")
        pytest.skip("import-linter not installed (pip install '.[test]')")
    code = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True))"
    p = subprocess.run([sys.executable, "-c", code, str(ROOT / "pyproject.toml")], cwd=ROOT / "python",
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    assert "BROKEN" not in p.stdout and "4 kept, 0 broken" in p.stdout, p.stdout[-2000:]


def _string_constants(path: Path):
    """(line, value) of every string constant of a module that is not a docstring."""
    tree = ast.parse(path.read_text())
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = getattr(node, "body", [])
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docs.add(id(body[0].value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            yield node.lineno, node.value


#: names no module but gapbench.core.names spells: compared against, they would be parsed twice
TYPED = ({b.value for b in Backend} | {d.value for d in DType} | {p.value for p in Precision}
         | {c.value for c in CacheMode} | {s.value for s in ColdScrub})
#: where a typed name may stand as a string, and why
ALLOWED = {
    "core/names.py": "the one parser",
    "benchmarks/blas/tables.py": "datasheet peaks keyed as the run file's roofline keys them (precision names)",
    "benchmarks/train/config.py": "training precisions (fp32, amp-fp16, amp-bf16) are their own vocabulary",
    "benchmarks/train/workloads.py": "training precisions and MLX's matmul precision are their own vocabulary",
    "benchmarks/train/run.py": "training precisions are their own vocabulary",
    "benchmarks/train/tables.py": "training precisions are their own vocabulary",
    "benchmarks/train/command.py": "training precisions are their own vocabulary",
    "backends/cupy.py": "the cupy package's own name (import and version)",
    "tools/run/command.py": "a valid --backends value, to ask a parser whether it takes the option",
    "core/env.py": "package names of installed libraries",
}


def test_no_module_spells_a_typed_name_but_the_parser():
    found = []
    for path in _sources():
        rel = _rel(path)
        if rel in ALLOWED:
            continue
        for line, value in _string_constants(path):
            if value in TYPED:
                found.append(f"{rel}:{line}: {value!r}")
    assert not found, "typed names spelled as strings (use gapbench.core.names):\n" + "\n".join(found)


def test_no_module_splits_a_name_apart():
    """Backend names were once split on "-" in many places; only the parser may take a name apart."""
    found = []
    for path in _sources():
        rel = _rel(path)
        if rel == "core/names.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("partition", "split", "rpartition")
                    and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == "-"):
                found.append(f"{rel}:{node.lineno}")
    assert not found, found


def test_an_op_is_named_only_by_its_own_module():
    names = set(ops.declared()) | set(ops.groups())
    found = []
    for path in _sources():
        rel = _rel(path)
        if rel.startswith("ops/") or rel == "benchmarks/blas/plain.py":  # plain: the ops cuda/plain/blas.cu calls
            continue
        for line, value in _string_constants(path):
            if value in names:
                found.append(f"{rel}:{line}: {value!r}")
    assert not found, "op names spelled outside their own module:\n" + "\n".join(found)


def test_every_integration_entry_names_a_test_that_exists():
    """tests/conftest.py INTEGRATION: a renamed or removed test must not leave a stale entry (the
    tier would silently shrink)."""
    import ast

    from conftest import INTEGRATION

    here = Path(__file__).resolve().parent
    for entry in INTEGRATION:
        module, _, name = entry.partition("::")
        path = here / module
        assert path.is_file(), entry
        if name:
            tree = ast.parse(path.read_text())
            assert any(isinstance(n, ast.FunctionDef) and n.name == name for n in tree.body), entry
