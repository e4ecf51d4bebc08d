"""Typed record parameters: each benchmark declares what its records carry as a dataclass derived
from `Params`, and reads records through it (`BlasParams.of(record)`), never by string key.

In the file they stay the plain JSON object of `Record.params` (the schema is unchanged): `to_dict`
writes each field that is set (None is left out) with enums as their names and nested Params as
objects; `from_dict` reads them back into their types, and keeps keys it does not know (a file of
another version) in `extra`, which `to_dict` writes back unchanged.
"""
from __future__ import annotations

import dataclasses
import functools
import types
import typing
from enum import Enum
from typing import Any, TypeVar

P = TypeVar("P", bound="Params")


@dataclasses.dataclass
class Params:
    #: keys of the file this version does not know, kept as they were
    extra: dict = dataclasses.field(default_factory=dict, repr=False)

    def to_dict(self) -> dict:
        out: dict = {}
        for f in dataclasses.fields(self):
            if f.name == "extra":
                continue
            v = _plain(getattr(self, f.name))
            if v is not None:
                out[f.name] = v
        return {**self.extra, **out}

    @classmethod
    def from_dict(cls: type[P], d: dict | None) -> P:
        d = dict(d or {})
        hints = _hints(cls)
        kw, extra = {}, {}
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        for k, v in d.items():
            if k in names:
                kw[k] = _typed(hints[k], v)
            else:
                extra[k] = v
        return cls(extra=extra, **kw)

    @classmethod
    def of(cls: type[P], record: Any) -> P:
        """The typed parameters of a record (a gapbench.core.result.Record)."""
        return cls.from_dict(record.params)

    def replace(self: P, **changes) -> P:
        return dataclasses.replace(self, **changes)


@functools.lru_cache(maxsize=None)
def _hints(cls) -> dict:
    return typing.get_type_hints(cls)


def _plain(v):
    if isinstance(v, Params):
        return v.to_dict()
    if isinstance(v, Enum):
        return v.value
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


def _typed(hint, v):
    """`v` (from JSON) as the type `hint` names, where it is a Params, an Enum or a list of them;
    a value that does not fit (another version's) is kept as it is."""
    if v is None:
        return None
    args = typing.get_args(hint)
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        for a in args:
            if a is type(None):
                continue
            t = _typed(a, v)
            if t is not v or isinstance(v, a if isinstance(a, type) else object):
                return t
        return v
    if origin in (list, tuple) and args and isinstance(v, list):
        return [_typed(args[0], x) for x in v]
    if isinstance(hint, type):
        if issubclass(hint, Params) and isinstance(v, dict):
            return hint.from_dict(v)
        if issubclass(hint, Enum):
            try:
                return hint(v)
            except ValueError:
                return v
    return v
