"""The native op declarations, csrc/ops.def, read from Python: one OpDecl per GB_OP line (the tests
hold the rest of the project to it; see csrc/ops.def for what each field means). A small parser of
that one file's macro calls, not of C."""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

DIMS = ("batch", "m", "n", "k")


@dataclass(frozen=True)
class MetalKernel:
    name: str
    #: "threads" (dispatchThreads over the grid) or "groups" (dispatchThreadgroups)
    kind: str
    #: x[, y, z] as expressions over the dims
    grid: tuple[str, ...]
    #: threads per threadgroup (groups only)
    group: int = 0

    def grid_of(self, shape: dict) -> tuple[int, int, int]:
        g = [evaluate(e, shape) for e in self.grid] + [1, 1]
        return g[0], g[1], g[2]


@dataclass(frozen=True)
class OpDecl:
    name: str
    index: int
    form: tuple[str, ...]
    #: element count of each input, in argument order, as products of dims
    inputs: tuple[str, ...]
    output: str
    scalar: float
    #: CUDA kernels of cuda/ops/<op>.cuh: the reference first, then the dispatcher's
    kernels: tuple[str, ...]
    #: (CUDA strategy, Metal strategy) of the vendor path, or None
    vendor: tuple[str, str] | None
    vendor_reason: str | None
    tf32: bool
    #: the scalars the Metal kernels take after their buffers, and the kernels (reference first)
    metal_args: tuple[str, ...]
    metal: tuple[MetalKernel, ...]

    def input_counts(self, shape: dict) -> list[int]:
        return [evaluate(e, shape) for e in self.inputs]

    def output_count(self, shape: dict) -> int:
        return evaluate(self.output, shape)

    def elements(self, shape: dict) -> tuple[int, int]:
        """(elements read, elements written) by one run: every input once, the output once."""
        return sum(self.input_counts(shape)), self.output_count(shape)


def evaluate(expr: str, shape: dict) -> int:
    """An integer expression over the dims (+ - * / and parentheses; / divides integers, as in C)."""
    if not re.fullmatch(r"[\sa-z0-9+\-*/()]*", expr):
        raise ValueError(f"csrc/ops.def: not a dims expression: {expr!r}")
    env = {d: int(shape.get(d, 1)) for d in DIMS}
    return int(eval(expr.replace("/", "//"), {"__builtins__": {}}, env))  # noqa: S307 (checked above)


def split_top(text: str) -> list[str]:
    """`a, (b, c), d` -> ["a", "(b, c)", "d"]: commas outside parentheses and strings."""
    out, depth, cur, quoted = [], 0, "", False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch == "(":
            depth += 1
        elif not quoted and ch == ")":
            depth -= 1
        if ch == "," and depth == 0 and not quoted:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _list(text: str) -> tuple[str, ...]:
    text = text.strip()
    if not (text.startswith("(") and text.endswith(")")):
        raise ValueError(f"csrc/ops.def: expected a parenthesised list, got {text!r}")
    return tuple(split_top(text[1:-1]))


def _call(text: str) -> tuple[str, tuple[str, ...]]:
    m = re.fullmatch(r"(\w+)\s*(\(.*\))", text.strip(), re.S)
    if not m:
        raise ValueError(f"csrc/ops.def: expected name(args), got {text!r}")
    return m.group(1), _list(m.group(2))


def _metal_kernel(text: str) -> MetalKernel:
    name, grid = _list(text)
    kind, args = _call(grid)
    if kind == "threads":
        return MetalKernel(name, kind, args)
    if kind == "groups":
        return MetalKernel(name, kind, args[:3], int(args[3]))
    raise ValueError(f"csrc/ops.def: unknown Metal grid {kind!r} of {name}")


def parse(text: str) -> list[OpDecl]:
    decls = []
    for line in text.splitlines():
        if not line.startswith("GB_OP("):
            continue
        f = split_top(line.strip()[len("GB_OP("):-1])
        if len(f) != 9:
            raise ValueError(f"csrc/ops.def: GB_OP takes 9 fields, got {len(f)}: {line}")
        name, index, form, inputs, output, scalar, kernels, vendor, metal = f
        vkind, vargs = _call(vendor)
        mkind, margs = _call(metal)
        if mkind != "metal":
            raise ValueError(f"csrc/ops.def: {name}: expected metal(...), got {mkind}")
        decls.append(OpDecl(
            name=name, index=int(index), form=_list(form), inputs=_list(inputs), output=output,
            scalar=float(scalar), kernels=_list(kernels),
            vendor=None if vkind == "none" else (vargs[0], vargs[1]),
            vendor_reason=vargs[0].strip('"') if vkind == "none" else None,
            tf32=vkind == "vendor_tf32",
            metal_args=_list(margs[0]), metal=tuple(_metal_kernel(k) for k in margs[1:])))
    return decls


def default_path() -> Path:
    """csrc/ops.def of the checkout this module is in, else the copy installed with the package."""
    here = Path(__file__).resolve().parents[3] / "csrc" / "ops.def"
    if here.is_file():
        return here
    return Path(str(resources.files("gapbench").joinpath("ops.def")))


@lru_cache(maxsize=None)
def load(path: str | Path | None = None) -> tuple[OpDecl, ...]:
    return tuple(parse(Path(path or default_path()).read_text()))


def get(name: str, path: str | Path | None = None) -> OpDecl:
    for d in load(path):
        if d.name == name:
            return d
    raise KeyError(f"{name} is not declared in csrc/ops.def")


def parse_lab(text: str) -> dict[str, tuple[str, ...]]:
    """csrc/lab.def: op -> the lab's kernels of that op that never shipped (GB_LAB lines)."""
    out: dict[str, tuple[str, ...]] = {}
    for line in text.splitlines():
        if not line.startswith("GB_LAB("):
            continue
        f = split_top(line.strip()[len("GB_LAB("):-1])
        if len(f) != 2:
            raise ValueError(f"csrc/lab.def: GB_LAB takes 2 fields, got {len(f)}: {line}")
        out[f[0]] = out.get(f[0], ()) + _list(f[1])
    return out


@lru_cache(maxsize=None)
def lab_kernels(path: str | Path | None = None) -> dict[str, tuple[str, ...]]:
    """The lab's kernels by op (csrc/lab.def beside ops.def: runnable with GAPBENCH_LAB=ON)."""
    p = Path(path) if path else default_path().with_name("lab.def")
    return parse_lab(p.read_text()) if p.is_file() else {}
