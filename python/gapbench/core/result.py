"""The result model: one schema-versioned record per measurement, one JSON file per run.

A run file is {"schema": "gapbench.run", "schema_version": 1, "run": {...}, "env": {...},
"records": [...]} and is rewritten atomically as records come (RunWriter: lazily, and on
interrupt, error and the end), so an interrupted run keeps every completed row and never leaves a
half-written file. CSV is an export of the same rows.
A path ending in `.json.gz` is written as gzip-compressed JSON (compact, no derived fields
needed); `load_run` reads either form, recognising gzip by its magic bytes, not by the name.
"""
from __future__ import annotations

import csv
import gzip
import io
import json
import os
import time
import tempfile
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from gapbench.core import stats
from gapbench.core.conditions import Clock

SCHEMA = "gapbench.run"
SCHEMA_VERSION = 1

#: status values of a record
OK, UNAVAILABLE, FAILED, ERROR, NOT_APPLICABLE = "ok", "unavailable", "failed", "error", "n/a"
STATUSES = (OK, UNAVAILABLE, FAILED, ERROR, NOT_APPLICABLE)
#: clocks a sample can come from
CLOCKS = ("host_wall", "device_events", "gpu_timestamps")


class SchemaError(ValueError):
    """A result file that is not a gapbench run, or of a schema version this code cannot read."""


@dataclass
class Record:
    """One measurement. `samples_s` are raw sample durations in seconds, each covering `inner`
    operations; `work` declares flops and bytes per operation, from which rates are derived."""

    probe: str
    backend: str
    metric: str
    variant: str = ""
    status: str = OK
    reason: str = ""  # why unavailable / failed / error / n/a
    op: str = ""  # what operation was timed, in words
    clock: str | None = None
    samples_s: list[float] = field(default_factory=list)
    inner: int = 1
    warmup: int = 0
    params: dict[str, Any] = field(default_factory=dict)
    work: dict[str, float] = field(default_factory=dict)  # per op: {"flops": .., "bytes": .., "items": ..}
    verified: bool | None = None  # None: nothing to verify (say why in verify_detail)
    verify_detail: str = ""
    device: dict[str, Any] = field(default_factory=dict)  # backend's device and driver
    time: str = field(default_factory=lambda: now_iso())
    #: what the measurement ran under (gapbench.core.conditions.Conditions): a ratio between two
    #: records is taken only where their compared conditions match
    conditions: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # typed names (gapbench.core.names: str enums) are stored as their plain names
        self.backend, self.variant = str(self.backend), str(self.variant)
        if self.status not in STATUSES:
            raise ValueError(f"record status must be one of {STATUSES}, got {self.status!r}")
        if self.clock is not None and self.clock not in CLOCKS:
            raise ValueError(f"record clock must be one of {CLOCKS}, got {self.clock!r}")
        if self.inner < 1:
            raise ValueError("inner (operations per sample) must be >= 1")
        if self.status == OK and not self.samples_s:
            raise ValueError(f"{self.backend}/{self.metric}: an ok record needs samples")
        self.samples_s = [float(x) for x in self.samples_s]

    # ---- derived values: never stored, always recomputed from the raw samples
    def per_op(self) -> np.ndarray:
        return np.asarray(self.samples_s, dtype=np.float64) / self.inner

    def _kept(self, name: str, extra: tuple, make):
        """make(), kept on the record under `name` for as long as the samples, `inner` and `extra`
        are what it was made of (a result file is written many times in a run, and gapbench compare
        meets a record in every pair of runs it is in: the calibration's 1753 pairs)."""
        made_of = (self.inner, tuple(self.samples_s), extra)
        memo = self.__dict__.get(name)
        if memo is None or memo[0] != made_of:
            memo = (made_of, make())
            self.__dict__[name] = memo
        return memo[1]

    def summary(self) -> stats.Summary | None:
        """The samples' summary (kept: _kept)."""
        if self.status != OK or not self.samples_s:
            return None
        return self._kept("_summary", (), lambda: stats.summarize(self.per_op()))

    def median(self) -> float:
        """np.median of the per-op samples (kept: compare's ratio without its interval, the
        calibration's, takes two a row and pair of runs)."""
        return self._kept("_median", (), lambda: float(np.median(self.per_op())))

    def quantiles(self, qs: tuple[float, ...] = (0.5, 0.9, 0.99)) -> list[float]:
        """The per-op quantiles `qs` of the samples (kept: 1.8 million quantiles over the calibration)."""
        return self._kept("_quantiles", tuple(qs), lambda: [float(np.quantile(self.per_op(), x)) for x in qs])

    def rates(self) -> dict:
        s = self.summary()
        if s is None:
            return {}
        return stats.rates(s.median, self.work.get("flops"), self.work.get("bytes"), self.work.get("items"))

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.probe, self.backend, self.variant, self.metric)

    def to_dict(self) -> dict:
        d = asdict(self)
        s = self.summary()
        # Derived fields are written for readers without gapbench; they are ignored on load.
        d["derived"] = {"summary": s.to_dict() if s else None, "rates": self.rates()}
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Record":
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in known})


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write `text` to `path` so that readers see the old file or the new one, never a part."""
    atomic_write_bytes(path, text.encode("utf-8"))


def _umask() -> int:
    """The process umask, read without changing it where /proc says it (Linux); elsewhere by
    setting it and putting it back at once."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to `path` so that readers see the old file or the new one, never a part."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp makes 0600; a result file gets the mode any new file would get here (0644 under
        # the usual umask 022), or keeps the mode of the file it replaces.
        try:
            mode = path.stat().st_mode & 0o7777
        except OSError:
            mode = 0o666 & ~_umask()
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


CSV_COLUMNS = [
    "probe", "backend", "variant", "metric", "status", "reason", "op", "clock", "n", "inner",
    "median_s", "p10_s", "p90_s", "iqr_s", "min_s", "max_s", "noise", "noisy",
    "flops_per_s", "bytes_per_s", "verified", "device", "time",
]


def records_to_csv(records: Iterable[Record]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in records:
        s = r.summary()
        rates = r.rates()
        row = {
            "probe": r.probe, "backend": r.backend, "variant": r.variant, "metric": r.metric,
            "status": r.status, "reason": r.reason, "op": r.op, "clock": r.clock or "",
            "n": s.n if s else 0, "inner": r.inner,
            "median_s": s.median if s else "", "p10_s": s.p10 if s else "",
            "p90_s": s.p90 if s else "", "iqr_s": s.iqr if s else "",
            "min_s": s.min if s else "", "max_s": s.max if s else "",
            "noise": s.noise if s else "", "noisy": s.noisy if s else "",
            "flops_per_s": rates.get("flops_per_s", ""), "bytes_per_s": rates.get("bytes_per_s", ""),
            "verified": "" if r.verified is None else r.verified,
            "device": r.device.get("name", ""), "time": r.time,
        }
        w.writerow(row)
    return buf.getvalue()


class RunWriter:
    """Collects the records of one run and rewrites its JSON (and CSV), atomically, as they come.
    A rewrite costs more as the run grows (every record again, gzip, CSV), so `add` rewrites only
    once the time since the last rewrite is at least 1/`overhead` times what that rewrite took:
    rewriting then costs at most `overhead` of the run's time (a record reaches the disk within
    seconds, even on a long run), and a run of N records no longer costs N full rewrites.
    `overhead=None` rewrites after every record. `flush` writes what is pending (the CLI calls it on
    interrupt and error) and `finish` always does."""

    def __init__(self, path: str | os.PathLike, *, env: dict, run: dict, csv_path: str | os.PathLike | None = None,
                 overhead: float | None = 0.02, clock=time.monotonic):
        self.path = Path(path)
        self.csv_path = Path(csv_path) if csv_path else None
        self.env = env
        self.run = dict(run)
        self.run.setdefault("started", now_iso())
        self.records: list[Record] = []
        self.overhead, self._clock = overhead, clock
        self.pending = False
        self._last, self._cost = clock(), 0.0
        self.flush()

    def add(self, record: Record) -> Record:
        self.records.append(record)
        self._maybe_flush()
        return record

    def extend(self, records: Iterable[Record]) -> None:
        for r in records:
            self.records.append(r)
        self._maybe_flush()

    def _maybe_flush(self) -> None:
        self.pending = True
        if self.overhead is None or self._clock() - self._last >= self._cost / self.overhead:
            self.flush()

    def finish(self, **extra: Any) -> None:
        self.run["finished"] = now_iso()
        self.run.update(extra)
        self.flush()

    def document(self) -> dict:
        return {
            "schema": SCHEMA, "schema_version": SCHEMA_VERSION, "run": self.run,
            "env": self.env, "records": [r.to_dict() for r in self.records],
        }

    def flush(self) -> None:
        t0 = self._clock()
        write_document(self.path, self.document())
        if self.csv_path:
            atomic_write_text(self.csv_path, records_to_csv(self.records))
        self._last = self._clock()
        self._cost, self.pending = self._last - t0, False


def _json_default(o: Any):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


GZIP_MAGIC = b"\x1f\x8b"


def is_compact_path(path: str | os.PathLike) -> bool:
    """True for a path that names a compact (gzip JSON) run file."""
    return str(path).endswith(".json.gz")


def encode_document(doc: dict, *, compact: bool) -> bytes:
    """A run document as bytes: indented JSON text, or for `compact` minified JSON in gzip with
    no timestamp in the header (the same document always gives the same bytes)."""
    if not compact:
        return (json.dumps(doc, indent=1, default=_json_default) + "\n").encode("utf-8")
    text = json.dumps(doc, separators=(",", ":"), default=_json_default).encode("utf-8")
    return gzip.compress(text, compresslevel=9, mtime=0)


def write_document(path: str | os.PathLike, doc: dict) -> None:
    """Write a run document atomically; gzip-compressed when the path ends in `.json.gz`."""
    atomic_write_bytes(path, encode_document(doc, compact=is_compact_path(path)))


def read_document(path: str | os.PathLike) -> dict:
    """The checked JSON document of a run file (plain or gzip). Anything that is not a gapbench
    run of a known schema version is refused with a SchemaError naming the file."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise SchemaError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise SchemaError(f"{path}: is a directory, not a result file") from None
    if data[:2] == GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise SchemaError(f"{path}: damaged gzip file ({e})") from None
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SchemaError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise SchemaError(f"{path}: not a gapbench run file (schema is {doc.get('schema') if isinstance(doc, dict) else None!r}, expected {SCHEMA!r})")
    ver = doc.get("schema_version")
    if ver != SCHEMA_VERSION:
        raise SchemaError(
            f"{path}: schema version {ver!r}, this gapbench reads version {SCHEMA_VERSION}; "
            "use the gapbench release that wrote it, or re-run the benchmark")
    return doc


@dataclass
class Run:
    path: Path
    run: dict
    env: dict
    records: list[Record]


#: files written before the graph-launch clock existed (2026-11-26) label launch's graph replays
#: "device events, as issued": they were timed by events around one graph launch all along
_GRAPH_LEGACY = ("launch", "graph_node", Clock.ISSUED)


def _upgrade(d: dict) -> dict:
    """A record dict as this version writes it: graph replays of older files get their clock."""
    cond = d.get("conditions")
    if isinstance(cond, dict) and (d.get("probe"), d.get("metric"), cond.get("clock")) == _GRAPH_LEGACY:
        d = {**d, "conditions": {**cond, "clock": Clock.GRAPH}}
    return d


def load_run(path: str | os.PathLike) -> Run:
    """Read a run file, plain JSON or gzip JSON (`.json.gz`). Anything that is not a gapbench run
    of a known schema version is refused with a message naming the file; it is never misread."""
    path = Path(path)
    doc = read_document(path)
    try:
        records = [Record.from_dict(_upgrade(r)) for r in doc.get("records", [])]
    except (TypeError, ValueError) as e:
        raise SchemaError(f"{path}: malformed record ({e})") from None
    return Run(path=path, run=doc.get("run", {}), env=doc.get("env", {}), records=records)
