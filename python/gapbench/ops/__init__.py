"""The ops gapbench times, one OpSpec per op (gapbench.ops.<name>.SPEC), and the one parser of
op names. The list of ops is the native declaration (csrc/ops.def, as gapbench._native binds it):
every declared op has a module here named after it, so a new op is its declaration, its kernels
and its module, with nothing to register. Imports gapbench.core and gapbench.backends only."""
from __future__ import annotations

import importlib
from functools import lru_cache

from gapbench.core.names import UnknownName, split_list
from gapbench.ops.spec import OpSpec


@lru_cache(maxsize=1)
def declared() -> tuple[str, ...]:
    """The op names the native declaration holds, in its order."""
    from gapbench.core.native import load

    members = load().Op.__members__
    return tuple(sorted(members, key=lambda n: int(members[n].value)))


#: ops declared at run time in this process (a user's cases: gapbench.api), by name
_RUNTIME: dict[str, OpSpec] = {}


def register(spec: OpSpec) -> None:
    """A user's case, known by its name for the rest of this process (tables, checks)."""
    if spec.name in declared():
        raise ValueError(f"{spec.name!r} is a built-in op")
    _RUNTIME[spec.name] = spec


def get(name: str) -> OpSpec | None:
    """The spec of a declared op, or of a case registered in this process; None for a name that is
    neither (e.g. from another version's file, or a user's case read back from its file)."""
    if name in _RUNTIME:
        return _RUNTIME[name]
    return _builtin(name)


@lru_cache(maxsize=None)
def _builtin(name: str) -> OpSpec | None:
    if name not in declared():
        return None
    spec = importlib.import_module(f"gapbench.ops.{name}").SPEC
    if spec.name != name:
        raise RuntimeError(f"gapbench.ops.{name} declares SPEC named {spec.name!r}")
    return spec


def all_specs() -> list[OpSpec]:
    return [get(n) for n in declared()]


def groups() -> dict[str, list[OpSpec]]:
    """Names that select several ops at once (e.g. vjp: vjp_dx and vjp_dw)."""
    out: dict[str, list[OpSpec]] = {}
    for s in all_specs():
        if s.group:
            out.setdefault(s.group, []).append(s)
    return out


def choices() -> list[str]:
    """Every name --ops takes: each op and each group."""
    return list(declared()) + [g for g in groups() if g not in declared()]


def parse(text: str) -> list[OpSpec]:
    """One name of --ops: the op itself, or every op of a group."""
    name = text.strip()
    spec = get(name)
    if spec is not None:
        return [spec]
    if name in groups():
        return groups()[name]
    raise UnknownName("op", name, choices())


def op_list(text: str) -> list[OpSpec]:
    """argparse type of --ops: a comma list of ops and groups, each op once, in order."""
    import argparse

    try:
        nested = [parse(t) for t in split_list(text)]
    except UnknownName as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if not nested:
        raise argparse.ArgumentTypeError("give at least one op")
    return list(dict.fromkeys(s for specs in nested for s in specs))
