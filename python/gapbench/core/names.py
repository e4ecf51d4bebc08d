"""The names gapbench reads, as typed values, and the one parser of each.

A backend, an element type or an L2 mode is a string on the command line and in a result file;
everywhere in between it is one of the enums below. They are `str` enums, so a typed value is
written to JSON as its plain name and compares equal to it, but nothing outside this module takes
a name apart or checks it against a list: the command line parses with `parse_list` (argparse
`type=`) and result files are read with `Backend.of` / `DType.of`, which answer None for a name
this version does not know (a file from another version) instead of raising. Ops are declared in
csrc/ops.def and parsed by gapbench.ops.
"""
from __future__ import annotations

import argparse
import math
import sys
from enum import Enum
from typing import Callable, Iterable, TypeVar


class UnknownName(ValueError):
    """A name that is none of the known ones; the message lists them (exit 2 at the CLI)."""

    def __init__(self, what: str, name: str, choices: Iterable[str], hint: str = ""):
        self.what, self.name, self.choices = what, name, list(choices)
        super().__init__(f"unknown {what} {name!r}; choose from {', '.join(self.choices)}" + (f". {hint}" if hint else ""))


class _Named(str, Enum):
    """A str enum whose values are the names users type."""

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, text: str):
        try:
            return cls(text.strip())
        except ValueError:
            raise UnknownName(cls._what(), text.strip(), [m.value for m in cls]) from None

    @classmethod
    def of(cls, text: str | None):
        """The member named `text`, or None (a name from another version, or none)."""
        try:
            return cls(text)
        except ValueError:
            return None

    @classmethod
    def _what(cls) -> str:
        return cls.__name__.lower()


class DType(_Named):
    """Element types of the ops (accumulation is fp32 for all); tf32 is a precision of fp32 GEMM
    rows, not an element type (see Precision)."""
    fp32 = "fp32"
    fp16 = "fp16"
    bf16 = "bf16"

    @property
    def itemsize(self) -> int:
        return 4 if self is DType.fp32 else 2

    @classmethod
    def _what(cls) -> str:
        return "dtype"


class Precision(_Named):
    """What an fp32 row computed at: full fp32, or TF32 tensor cores (a vendor row, or a framework
    whose fp32 matmul defaults to TF32). The error bound of a check is chosen by it."""
    fp32 = "fp32"
    fp16 = "fp16"
    bf16 = "bf16"
    tf32 = "tf32"


class DeviceClass(_Named):
    """What runs the work; the native backend of a class is the floor of every backend in it."""
    cpu = "cpu"
    cuda = "cuda"
    metal = "metal"

    @property
    def floor(self) -> "Backend":
        return {DeviceClass.cpu: Backend.native_cpu, DeviceClass.cuda: Backend.native_cuda,
                DeviceClass.metal: Backend.native_metal}[self]

    @classmethod
    def _what(cls) -> str:
        return "device class"


class Family(_Named):
    native = "native"
    torch = "torch"
    mlx = "mlx"
    cupy = "cupy"
    plain = "plain"  # the plain C++ loops that check the harness: not a backend users choose

    @classmethod
    def _what(cls) -> str:
        return "family"


class Backend(_Named):
    """Every backend gapbench measures (plus plain-cuda, the rows of the plain-loop checks)."""
    native_cpu = "native-cpu"
    native_cuda = "native-cuda"
    native_metal = "native-metal"
    torch_cpu = "torch-cpu"
    torch_cuda = "torch-cuda"
    torch_mps = "torch-mps"
    mlx_cpu = "mlx-cpu"
    mlx_gpu = "mlx-gpu"
    cupy = "cupy"
    plain_cuda = "plain-cuda"

    @property
    def family(self) -> Family:
        return _FACTS[self][0]

    @property
    def device(self) -> str:
        """The device as the framework names it: cpu, cuda, mps, metal, gpu."""
        return _FACTS[self][1]

    @property
    def classes(self) -> tuple[DeviceClass, ...]:
        """The device classes this backend runs on on some machine (mlx-gpu: CUDA on Linux, Metal
        on a Mac); for reading other machines' result files."""
        return _FACTS[self][2]

    @property
    def device_class(self) -> DeviceClass:
        """The device class on this machine's platform."""
        if self is Backend.mlx_gpu:
            return DeviceClass.metal if sys.platform == "darwin" else DeviceClass.cuda
        return self.classes[0]

    @property
    def is_native(self) -> bool:
        return self.family is Family.native

    @property
    def is_framework(self) -> bool:
        return self.family in (Family.torch, Family.mlx, Family.cupy)

    @property
    def is_plain(self) -> bool:
        return self.family is Family.plain

    @property
    def synchronous(self) -> bool:
        """An op returns only once it is done (CPU frameworks that run eagerly: no device queue)."""
        return self is Backend.torch_cpu

    @classmethod
    def selectable(cls) -> list["Backend"]:
        """The backends a user can name (--backends)."""
        return [b for b in cls if not b.is_plain]

    @classmethod
    def parse(cls, text: str) -> "Backend":
        b = cls.of(text.strip())
        if b is None or b.is_plain:
            raise UnknownName("backend", text.strip(), [x.value for x in cls.selectable()])
        return b

    @classmethod
    def _what(cls) -> str:
        return "backend"


_C, _M = DeviceClass.cuda, DeviceClass.metal
_FACTS: dict[Backend, tuple[Family, str, tuple[DeviceClass, ...]]] = {
    Backend.native_cpu: (Family.native, "cpu", (DeviceClass.cpu,)),
    Backend.native_cuda: (Family.native, "cuda", (_C,)),
    Backend.native_metal: (Family.native, "metal", (_M,)),
    Backend.torch_cpu: (Family.torch, "cpu", (DeviceClass.cpu,)),
    Backend.torch_cuda: (Family.torch, "cuda", (_C,)),
    Backend.torch_mps: (Family.torch, "mps", (_M,)),
    Backend.mlx_cpu: (Family.mlx, "cpu", (DeviceClass.cpu,)),
    Backend.mlx_gpu: (Family.mlx, "gpu", (_C, _M)),
    Backend.cupy: (Family.cupy, "cuda", (_C,)),
    Backend.plain_cuda: (Family.plain, "cuda", (_C,)),
}


def device_class_of(name: str) -> DeviceClass | None:
    """The device class of a backend name in a result file (this machine's platform for mlx-gpu);
    None for a name this version does not know."""
    b = Backend.of(name)
    return b.device_class if b is not None else None


class Data(_Named):
    """The input data of an op (--data): randn (standard normal, the default), uniform (in [-1, 1)),
    zeros. Bit patterns that toggle less draw less power, so a GEMM runs at a higher clock on zeros
    than on random data; every record names the data it ran on."""
    randn = "randn"
    uniform = "uniform"
    zeros = "zeros"

    @classmethod
    def _what(cls) -> str:
        return "--data distribution"


class CacheMode(_Named):
    """The L2 state before each timed run (gapbench._native.Cache): hot (input sets rotate past the
    L2), cold_clean (a 2x-L2 read pass first: nothing of the op in L2, no dirty lines), cold_dirty
    (a 2x-L2 memset first: the op also writes back the scrub's dirty lines)."""
    hot = "hot"
    cold_clean = "cold_clean"
    cold_dirty = "cold_dirty"

    @classmethod
    def _what(cls) -> str:
        return "cache mode"


class ColdScrub(_Named):
    """The --cold choices and the cache mode each one selects."""
    read = "read"
    write = "write"

    @property
    def cache(self) -> CacheMode:
        return CacheMode.cold_clean if self is ColdScrub.read else CacheMode.cold_dirty

    @classmethod
    def _what(cls) -> str:
        return "--cold scrub"


class StreamPlan(_Named):
    """bench.blas --streams: which streams a case's CUDA rows time on, one a paired round in turn.
    native (default): the native rows on their case's 8 streams, torch and CuPy on their default
    stream (the method every committed calibration run used); shared: every row of a round, native
    and framework, on one of the process's 8 timing streams; one: every row on one stream."""
    native = "native"
    shared = "shared"
    one = "one"

    @classmethod
    def _what(cls) -> str:
        return "--streams plan"


class Parity(_Named):
    """bench.blas --parity: how a CUDA row's gated samples stand to the parity of the count of kernels
    launched on their stream before them, which moves a cuBLAS GEMV's sample by 0.4-0.6 us on an H200
    (findings/between-runs.md, "The state is the parity..."). as-drawn (default): whatever the process's
    history gives (the method every committed calibration run used); balanced: one or two empty kernels
    after the gate in turn (cuda/gate.h parity pads), a round's runs a multiple of four, so each row's
    rounds hold both parities alike."""
    as_drawn = "as-drawn"
    balanced = "balanced"

    @classmethod
    def _what(cls) -> str:
        return "--parity"


class CollOp(_Named):
    """The collective operations of bench.dist, in the order of gapbench._native.dist.CollOp
    (tests/test_dist.py checks they agree)."""
    all_reduce = "all_reduce"
    all_gather = "all_gather"
    reduce_scatter = "reduce_scatter"
    broadcast = "broadcast"
    all_to_all = "all_to_all"
    sendrecv = "sendrecv"

    @property
    def reduces(self) -> bool:
        return self in (CollOp.all_reduce, CollOp.reduce_scatter)

    @property
    def splits(self) -> bool:
        """Its `size` buffer is cut into one chunk per rank (nccl-tests' size convention)."""
        return self in (CollOp.all_gather, CollOp.reduce_scatter, CollOp.all_to_all)

    @property
    def out_of_place_only(self) -> bool:
        """all_to_all and send/recv exist out of place only (nccl-tests' grouped p2p form)."""
        return self in (CollOp.all_to_all, CollOp.sendrecv)

    def bus_factor(self, n: int) -> float:
        """nccl-tests' bus bandwidth factor (doc/PERFORMANCE.md): busbw = algbw * factor."""
        if self is CollOp.all_reduce:
            return 2.0 * (n - 1) / n
        if self.splits:
            return (n - 1) / n
        return 1.0

    @classmethod
    def _what(cls) -> str:
        return "collective op"


class Placement(_Named):
    """Where a collective writes: out of place, in place, or (a choice only) each API's own form."""
    out = "out"
    in_ = "in"
    auto = "auto"


class Rung(_Named):
    """bench.dist's engines, lowest first: the p2p copy floor, direct NCCL, then the frameworks."""
    p2p = "p2p"
    nccl = "nccl"
    torch = "torch"
    cupy = "cupy"
    mlx = "mlx"

    @property
    def is_framework(self) -> bool:
        return self in (Rung.torch, Rung.cupy, Rung.mlx)

    @property
    def on_nccl(self) -> bool:
        """Its collectives go through NCCL on GPUs (so NCCL's algorithm log applies)."""
        return self in (Rung.nccl, Rung.torch, Rung.cupy)


T = TypeVar("T")


def split_list(text: str) -> list[str]:
    """A comma list as its items: blanks dropped, each once, in order ("a, b,,a" -> [a, b])."""
    return list(dict.fromkeys(s.strip() for s in str(text).split(",") if s.strip()))


def parse_list(parse: Callable[[str], T]) -> Callable[[str], list[T]]:
    """An argparse `type=` for a comma list whose items `parse` reads (e.g. parse_list(DType.parse)):
    a bad item is an argparse error (exit 2) with parse's one-line message."""

    def convert(text: str) -> list[T]:
        try:
            items = [parse(s) for s in split_list(text)]
        except UnknownName as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        if not items:
            raise argparse.ArgumentTypeError("give at least one name")
        return list(dict.fromkeys(items))

    convert.__name__ = getattr(parse, "__qualname__", "list").split(".")[0].lower() + " list"
    return convert


def parse_one(parse: Callable[[str], T]) -> Callable[[str], T]:
    """An argparse `type=` for one name that `parse` reads: a bad name is an argparse error (exit 2)
    with parse's one-line message."""

    def convert(text: str) -> T:
        try:
            return parse(text)
        except UnknownName as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    convert.__name__ = getattr(parse, "__qualname__", "name").split(".")[0].lower()
    return convert


def one_of(what: str, choices: Iterable[str]) -> Callable[[str], str]:
    """A parser of a name from a benchmark's own vocabulary (a model size, a training strategy):
    the name itself, or UnknownName listing the choices. With parse_list, an argparse `type=`."""
    allowed = tuple(choices)

    def parse(text: str) -> str:
        if text.strip() not in allowed:
            raise UnknownName(what, text.strip(), allowed)
        return text.strip()

    parse.__qualname__ = what
    return parse


def parse_ints(text: str, what: str, minimum: int = 1) -> list[int]:
    """A comma list of integers >= minimum ("1,8,64"); ValueError with one line saying what is wrong."""
    out = []
    for s in split_list(text):
        try:
            v = int(s)
        except ValueError:
            raise ValueError(f"{what}: {s!r} is not an integer") from None
        if v < minimum:
            raise ValueError(f"{what}: {v} is below {minimum}")
        out.append(v)
    if not out:
        raise ValueError(f"{what}: give at least one integer")
    return out


def injection(allowed: Callable[[Backend], bool], hook: str) -> Callable[[str], tuple[Backend, float]]:
    """An argparse `type=` for the TEST ONLY --inject-delay-us BACKEND=US: a backend that `allowed`
    accepts and a delay > 0 microseconds. `hook` says which backends have one (for the error)."""

    def convert(text: str) -> tuple[Backend, float]:
        name, sep, us = text.partition("=")
        try:
            b, delay = Backend.parse(name.strip()), float(us)
        except (ValueError, UnknownName):
            b, delay = None, math.nan
        if not sep or b is None or not allowed(b):
            raise argparse.ArgumentTypeError(f"{text!r}: give BACKEND=MICROSECONDS, {hook}")
        if not delay > 0 or not math.isfinite(delay):
            raise argparse.ArgumentTypeError(f"{text!r}: the delay must be > 0 microseconds")
        return b, delay

    convert.__name__ = "BACKEND=US"
    return convert
