"""Every declared op's Metal kernels (csrc/ops.def) on the CPU (metal/compat/metal_cpu.h), driven
as metal/blas.cpp dispatches them: the declared buffers, scalars and grid (threads or
threadgroups), on the op's ragged test shapes in every dtype, the output poisoned first (and a
poisoned tail past it that must stay untouched), checked against the op's float64 reference with its
own error model (OpSpec.expected / check). The C++ driver is generated from the declaration and the
kernel's signature, so a new op needs no edit here. Also: the source Metal compiles at run time is
self-contained."""
from __future__ import annotations

import re

import numpy as np
import pytest

from conftest import ROOT
from gapbench import ops
from gapbench.core import dtypes, metal_cpu, opdecl
from gapbench.core.names import DType
from metal_kernels import DT_CODE, build, poisoned_output, ptr

DECLS = opdecl.load(ROOT / "csrc" / "ops.def")
CASES = [(d, k) for d in DECLS for k in d.metal]
#: poisoned elements past the output: a kernel that writes beyond it is caught
TAIL = 3

# The thread-position arguments a kernel may take, as the emulated dispatch names them.
POSITION = {"thread_position_in_grid": "pos", "threadgroup_position_in_grid": "g",
            "thread_index_in_threadgroup": "tid", "simdgroup_index_in_threadgroup": "sg",
            "thread_index_in_simdgroup": "lane"}


def kernel_params(source: str, name: str) -> list[str]:
    m = re.search(r"\[\[kernel\]\]\s*void\s+" + name + r"\s*\((.*?)\)\s*\{", source, re.S)
    assert m, f"no [[kernel]] {name} in the Metal source"
    return [p.strip() for p in m.group(1).split(",")]


def driver(decl: opdecl.OpDecl, kern: opdecl.MetalKernel) -> str:
    """extern "C" run(dt, buffers, dims, scalar, grid): the kernel over the declared grid."""
    params = kernel_params((ROOT / "metal" / f"{decl.name}.metal").read_text(), kern.name)
    args, scalars = [], list(decl.metal_args)
    for i, p in enumerate(params):
        attr = re.search(r"\[\[(\w+)", p).group(1)
        if attr == "buffer" and p.startswith("device"):
            args.append(f"({'const T*' if ' const ' in f' {p} ' else 'T*'})bufs[{i}]")
        elif attr == "buffer":
            args.append(f"arg_{scalars.pop(0)}")
        else:
            pos = POSITION[attr]
            args.append("pos.x" if pos == "pos" and p.startswith("uint ") else pos)
    assert not scalars, f"{kern.name} takes fewer scalars than csrc/ops.def declares"
    call = f"{kern.name}<T>({', '.join(args)});"
    if kern.kind == "groups":
        body = (f"uint3 groups; groups.x = gx; groups.y = gy; groups.z = gz;\n"
                f"    gb_cpu::dispatch_threadgroups(groups, {kern.group}, [&](uint3 g, uint tid, uint sg, uint lane) {{\n"
                f"      (void)g; (void)tid; (void)sg; (void)lane;\n      {call}\n    }});")
    else:
        body = ("for (uint z = 0; z < gz; ++z) for (uint y = 0; y < gy; ++y) for (uint x = 0; x < gx; ++x) {\n"
                f"      uint3 pos; pos.x = x; pos.y = y; pos.z = z;\n      {call}\n    }}")
    return ('extern "C" void run(int dt, void** bufs, const unsigned* dims, float scalar, unsigned gx, unsigned gy,\n'
            '                    unsigned gz) {\n  by_dtype(dt, [&]<class T>() {\n'
            '    uint arg_batch = dims[0], arg_m = dims[1], arg_n = dims[2], arg_k = dims[3];\n'
            '    float arg_scalar = scalar;\n'
            '    (void)arg_batch; (void)arg_m; (void)arg_n; (void)arg_k; (void)arg_scalar;\n'
            f'    {body}\n  }});\n}}\n')


_LIBS: dict = {}


def lib_for(decl, kern, tmp_path_factory):
    key = (decl.name, kern.name)
    if key not in _LIBS:
        _LIBS[key] = build(decl.name, driver(decl, kern), tmp_path_factory.mktemp(kern.name))
    return _LIBS[key]


@pytest.mark.parametrize("dtype", list(DType), ids=lambda d: d.value)
@pytest.mark.parametrize("decl,kern", CASES, ids=lambda c: c.name)
def test_metal_kernel_matches_float64(decl, kern, dtype, tmp_path_factory):
    import ctypes

    spec = ops.get(decl.name)
    lib = lib_for(decl, kern, tmp_path_factory)
    rng = np.random.default_rng(11)
    for shape in spec.test_shapes:
        rounded = [dtypes.round_to(a, dtype) for a in spec.inputs(shape, rng)]
        bufs = [np.ascontiguousarray(dtypes.to_bytes(a, dtype)) for a in rounded]
        count = decl.output_count(shape)
        out = poisoned_output(count + TAIL, dtype)
        ptrs = (ctypes.c_void_p * (len(bufs) + 1))(*[ptr(b).value for b in bufs], ptr(out).value)
        dims = (ctypes.c_uint * 4)(*[int(shape.get(d, 1)) for d in opdecl.DIMS])
        gx, gy, gz = kern.grid_of(shape)
        lib.run(DT_CODE[dtype], ptrs, dims, ctypes.c_float(decl.scalar), gx, gy, gz)
        values = dtypes.from_bytes(out.tobytes(), dtype)
        exp = spec.expected(rounded, shape)
        ok, detail = spec.check(values[:count].reshape(np.shape(exp.values)), exp, dtype)
        assert ok, (kern.name, shape, detail)
        assert np.all(np.isnan(values[count:])), (kern.name, shape, "wrote past its output")


@pytest.mark.parametrize("decl", DECLS, ids=lambda d: d.name)
def test_runtime_source_is_self_contained(decl):
    src = metal_cpu.metal_source(ROOT / "metal" / f"{decl.name}.metal")
    assert '#include "' not in src and "#define GB_INSTANTIATE" in src
    for k in decl.metal:
        for dt in ("float", "half", "bfloat"):  # every kernel exists in every dtype
            assert f'GB_INSTANTIATE_ALL("{k.name}"' in src and f'base "_{dt}"' in src
