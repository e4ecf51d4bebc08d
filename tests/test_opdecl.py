"""csrc/ops.def, the one declaration of every op, against everything that depends on it: the
extension's Op enum, the .pyi stubs, and each op's files (cuda/ops/<op>.cuh with a kernel of every
declared strategy name, metal/<op>.metal with every declared Metal kernel, python/gapbench/ops/<op>.py
with a SPEC of the declared form and buffer sizes). A new op is covered with no edit here."""
from __future__ import annotations

import ast
import re

import numpy as np
import pytest

from conftest import ROOT
from gapbench import _native, ops
from gapbench.core import opdecl

DECLS = opdecl.load(ROOT / "csrc" / "ops.def")


def _id(d):
    return d.name


def _pyi_members(cls: str) -> list[str]:
    tree = ast.parse((ROOT / "python" / "gapbench" / "_native.pyi").read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            return [t.id for n in node.body if isinstance(n, ast.Assign) for t in n.targets]
    raise AssertionError(f"_native.pyi declares no class {cls}")


def _pyi_values(cls: str) -> list[int]:
    tree = ast.parse((ROOT / "python" / "gapbench" / "_native.pyi").read_text())
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    return [n.value.value for n in node.body if isinstance(n, ast.Assign)]


def test_indices_are_positions_and_names_unique():
    assert [d.index for d in DECLS] == list(range(len(DECLS)))
    assert len({d.name for d in DECLS}) == len(DECLS)
    kernels = [k for d in DECLS for k in d.kernels]
    assert len(set(kernels)) == len(kernels)  # the Kernel enum holds every op's kernels


def test_the_extension_binds_the_declared_ops():
    members = _native.Op.__members__
    assert [(n, int(members[n].value)) for n in members] == [(d.name, d.index) for d in DECLS]
    assert ops.declared() == tuple(d.name for d in DECLS)


def test_the_stubs_declare_the_declared_ops():
    assert _pyi_members("Op") == [d.name for d in DECLS]
    assert _pyi_values("Op") == [d.index for d in DECLS]


def test_the_stubs_declare_every_kernel_in_contract_order():
    """_native.pyi's Kernel: every library kernel of csrc/ops.def in op order, then the lab's of
    csrc/lab.def, valued by position (as csrc/contract.h numbers gb::Kernel)."""
    kernels = [k for d in DECLS for k in d.kernels]
    kernels += [k for ks in opdecl.lab_kernels(ROOT / "csrc" / "lab.def").values() for k in ks]
    assert _pyi_members("Kernel") == kernels
    assert _pyi_values("Kernel") == list(range(len(kernels)))


@pytest.mark.parametrize("decl", DECLS, ids=_id)
def test_cuda_header_defines_every_declared_kernel(decl):
    path = ROOT / "cuda" / "ops" / f"{decl.name}.cuh"
    assert path.is_file(), f"{decl.name} is declared in csrc/ops.def but has no {path.relative_to(ROOT)}"
    text = path.read_text()
    for kernel in decl.kernels:
        # a __global__ of that name, or a named handle on one configuration of a template kernel
        kernel_def = re.search(r"__global__[^;{]*?\b" + kernel + r"\s*\(", text)
        handle = re.search(r"constexpr auto " + kernel + r"\s*=", text)
        assert kernel_def or handle, f"{path.name} defines no kernel {kernel}"
    assert "#ifdef GB_OPS_LIBRARY" in text  # its launcher, rule, workspace and vendor call
    for fn in ("Kernel rule(", "long long work_floats(", "void launch("):
        assert fn in text.split("#ifdef GB_OPS_LIBRARY", 1)[1], (decl.name, fn)
    assert ("void vendor(" in text) == (decl.vendor is not None), decl.name


@pytest.mark.parametrize("decl", DECLS, ids=_id)
def test_metal_file_instantiates_every_declared_kernel(decl):
    path = ROOT / "metal" / f"{decl.name}.metal"
    assert path.is_file(), f"{decl.name} has no {path.relative_to(ROOT)}"
    text = path.read_text()
    for k in decl.metal:
        assert f'GB_INSTANTIATE_ALL("{k.name}", {k.name})' in text, (decl.name, k.name)
        assert k.kind in ("threads", "groups") and 1 <= len(k.grid) <= 3
    assert set(decl.metal_args) <= set(opdecl.DIMS) | {"scalar"}


@pytest.mark.parametrize("decl", DECLS, ids=_id)
def test_python_spec_matches_the_declaration(decl):
    assert (ROOT / "python" / "gapbench" / "ops" / f"{decl.name}.py").is_file()
    spec = ops.get(decl.name)
    assert spec.form == decl.form
    rng = np.random.default_rng(5)
    for shape in spec.test_shapes:
        ins = spec.inputs(shape, rng)
        assert [a.size for a in ins] == decl.input_counts(shape)
        assert spec.elements(shape) == (sum(a.size for a in ins), decl.output_count(shape))
        assert np.asarray(spec.reference([a.astype(np.float64) for a in ins])).size == decl.output_count(shape)
    if decl.vendor is None:
        assert decl.vendor_reason  # a NotApplicable says why


def test_parser_rejects_a_malformed_line():
    with pytest.raises(ValueError, match="9 fields"):
        opdecl.parse("GB_OP(x, 0, (n), (n), n)\n")
    with pytest.raises(ValueError, match="not a dims expression"):
        opdecl.evaluate("__import__('os')", {})


def test_no_op_module_restates_what_ops_def_fixes():
    """An op's form and element counts come from its GB_OP line (ops.spec.from_ops_def), not typed
    again in python/gapbench/ops/<op>.py."""
    for decl in DECLS:
        text = (ROOT / "python" / "gapbench" / "ops" / f"{decl.name}.py").read_text()
        assert f'from_ops_def("{decl.name}")' in text, decl.name
        assert "form=" not in text and "elements=" not in text, decl.name
