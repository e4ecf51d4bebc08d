"""The bundle: one shareable run of every benchmark on one machine (`gapbench run`).

A bundle is a folder `gapbench-<host>-<date>/` holding each benchmark's result file (compact
`<name>.json.gz`; no CSV or figures, which `gapbench csv` and the report draw from it), its console
output (`logs/<name>.log`) and a manifest `bundle.json`:

    {"schema": "gapbench.bundle", "schema_version": 1, "gapbench": version, "host": label,
     "created": iso, "finished": iso | null, "command": "gapbench run ...", "quick": bool,
     "env": gapbench.core.env.collect(), "benchmarks": [{"name", "status", "exit_code", "command",
     "result", "log", "started", "duration_s", "records", "measured", "reason"}, ...]}

The manifest is rewritten atomically as each benchmark starts and ends, so an interrupted bundle
says which benchmarks finished. `--archive` also writes `gapbench-<host>-<date>.tar.gz` of the
folder. bench.report reads result files, folders of them, bundle folders and bundle archives
(`expand_inputs`); the runs of a bundle carry the bundle's host label (env["host"]), so bundles
of several machines of the same model stay apart in the report.
"""
from __future__ import annotations

import io
import json
import re
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gapbench.core.result import Run, SchemaError, atomic_write_bytes, atomic_write_text, load_run

SCHEMA = "gapbench.bundle"
SCHEMA_VERSION = 1
MANIFEST = "bundle.json"
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz")

#: a benchmark's status in the manifest
OK, NOTHING, FAILED, INTERRUPTED, RUNNING = "ok", "nothing measured", "failed", "interrupted", "running"


def safe_label(text: str) -> str:
    """A host label fit for a folder name: letters, digits, '.', '_' and '-' only."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or "host"


def bundle_dir(parent: Path, host: str, stamp: str) -> Path:
    """A fresh folder name gapbench-<host>-<stamp> in `parent` (a suffix when it is taken)."""
    base = parent / f"gapbench-{safe_label(host)}-{stamp}"
    path, n = base, 1
    while path.exists() or path.with_name(path.name + ".tar.gz").exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path


def write_manifest(folder: Path, manifest: dict) -> Path:
    path = folder / MANIFEST
    atomic_write_text(path, json.dumps(manifest, indent=1, default=str) + "\n")
    return path


def read_manifest(folder: Path) -> dict:
    path = Path(folder) / MANIFEST
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SchemaError(f"{folder}: not a gapbench bundle (no {MANIFEST} in it)") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SchemaError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise SchemaError(f"{path}: not a gapbench bundle manifest (schema {SCHEMA!r} expected)")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise SchemaError(f"{path}: bundle schema version {doc.get('schema_version')!r}, this gapbench reads "
                          f"version {SCHEMA_VERSION}; use the gapbench release that wrote it")
    return doc


def is_bundle(folder: Path) -> bool:
    return (Path(folder) / MANIFEST).is_file()


def is_archive(path: Path) -> bool:
    return Path(path).name.endswith(ARCHIVE_SUFFIXES)


# ============================================================== archive
def write_archive(folder: Path, dest: Path | None = None) -> Path:
    """`folder` as one gzip tar (the folder's name at its top), written atomically beside it."""
    folder = Path(folder)
    dest = Path(dest) if dest is not None else folder.with_name(folder.name + ".tar.gz")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for p in sorted(folder.rglob("*")):
            if p.is_file() and not p.name.startswith(".") and not p.is_symlink():
                info = tar.gettarinfo(str(p), arcname=f"{folder.name}/{p.relative_to(folder).as_posix()}")
                info.mode, info.uid, info.gid, info.uname, info.gname = 0o644, 0, 0, "", ""
                with p.open("rb") as f:
                    tar.addfile(info, f)
    atomic_write_bytes(dest, buf.getvalue())
    return dest


def extract_archive(archive: Path, into: Path) -> Path:
    """Unpack a bundle archive into `into` and return the bundle folder. Only regular files under
    one top folder are taken; absolute paths, '..' and links are refused."""
    try:
        tar = tarfile.open(archive, mode="r:*")
    except (tarfile.TarError, OSError) as e:
        raise SchemaError(f"{archive}: not a readable tar archive ({e})") from None
    tops: set[str] = set()
    with tar:
        for m in tar.getmembers():
            parts = Path(m.name).parts
            if m.name.startswith(("/", "\\")) or ".." in parts or not parts:
                raise SchemaError(f"{archive}: unsafe member {m.name!r}; not a gapbench bundle archive")
            if m.isdir():
                continue
            if not m.isfile():
                raise SchemaError(f"{archive}: member {m.name!r} is not a regular file; not a gapbench bundle archive")
            tops.add(parts[0])
            dest = into.joinpath(*parts)
            dest.parent.mkdir(parents=True, exist_ok=True)
            src = tar.extractfile(m)
            dest.write_bytes(src.read() if src is not None else b"")
    if len(tops) != 1:
        raise SchemaError(f"{archive}: a bundle archive holds one folder, this one holds {len(tops)}")
    folder = into / tops.pop()
    read_manifest(folder)  # refuse archives that are not bundles
    return folder


# ============================================================== reading bundles for the report
@dataclass
class Source:
    """A result file to read, and the bundle it came from (None for a loose file)."""

    path: Path
    host: str | None = None
    shown_as: Path | None = None  # the name to show (for files unpacked from an archive)


def bundle_sources(folder: Path, shown: Path | None = None) -> list[Source]:
    """The result files of a bundle, as its manifest lists them (benchmarks that wrote none, e.g.
    bad arguments, are skipped; a partial file of an interrupted benchmark is read)."""
    man = read_manifest(folder)
    host = str(man.get("host") or "")
    out = []
    for b in man.get("benchmarks", []):
        rel = b.get("result")
        if rel and (folder / rel).is_file():
            out.append(Source(folder / rel, host or None, (shown or folder) / rel))
    return out


def expand_inputs(paths: list[str | Path], scratch: Path) -> list[Source]:
    """What bench.report reads: a result file (.json or .json.gz); a bundle folder; a bundle
    archive (unpacked under `scratch`); a folder standing for its result files, the bundles in
    it and the bundle archives in it. A file inside a bundle folder carries the bundle's host."""
    out: list[Source] = []
    for p in map(Path, paths):
        if p.is_dir():
            if is_bundle(p):
                found = bundle_sources(p)
                if not found:
                    raise SchemaError(f"{p}: a bundle with no result files (every benchmark failed; see its bundle.json)")
                out += found
                continue
            plain = sorted(p.glob("*.json"))
            # x.json.gz beside x.json is its compact copy (gapbench compact): the same run, read once
            found = [Source(f) for f in sorted([*plain, *(g for g in p.glob("*.json.gz") if g.with_suffix("") not in plain)])]
            for sub in sorted(d for d in p.iterdir() if d.is_dir() and is_bundle(d)):
                found += bundle_sources(sub)
            for arc in sorted(f for f in p.iterdir() if f.is_file() and is_archive(f)):
                found += _archive_sources(arc, scratch)
            if not found:
                raise SchemaError(f"{p}: a folder with no result files (*.json, *.json.gz) or bundles in it")
            out += found
        elif is_archive(p):
            if not p.is_file():
                raise SchemaError(f"{p}: no such file")
            out += _archive_sources(p, scratch)
        else:
            host = None
            if is_bundle(p.parent):
                host = str(read_manifest(p.parent).get("host") or "") or None
            out.append(Source(p, host))
    return out


def _archive_sources(archive: Path, scratch: Path) -> list[Source]:
    into = Path(tempfile.mkdtemp(prefix="bundle-", dir=scratch))
    folder = extract_archive(archive, into)
    return bundle_sources(folder, shown=archive)


def load_inputs(paths: list[str | Path]) -> list[Run]:
    """Every run named by `paths` (see expand_inputs), loaded; the runs of a bundle carry its host
    label as env["host"], and archives are unpacked only while they are read."""
    with tempfile.TemporaryDirectory(prefix="gapbench-report-") as tmp:
        runs = []
        for src in expand_inputs(paths, Path(tmp)):
            run = load_run(src.path)
            if src.host:
                run.env = dict(run.env, host=src.host)
            if src.shown_as is not None:
                run.path = src.shown_as
            runs.append(run)
    return runs


def summarize(manifest: dict) -> str:
    """One line per benchmark of a manifest (for `gapbench run` and people reading a bundle)."""
    lines = []
    for b in manifest.get("benchmarks", []):
        dur = b.get("duration_s")
        lines.append(f"  {b['name']:<7} {b['status']:<17} exit {b.get('exit_code')!s:<4} "
                     f"{f'{dur:.1f} s' if isinstance(dur, (int, float)) else '-':>8}  {b.get('result') or '-'}"
                     + (f"  ({b['reason']})" if b.get("reason") else ""))
    return "\n".join(lines)
