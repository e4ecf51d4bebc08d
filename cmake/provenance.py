"""Provenance of a gapbench build: which sources were built, computed the same way by CMake at
configure time (it runs this file) and by the tests and gapbench.core.env (they import it).

- source_hash: sha256 over the sorted relative paths and contents of every file under csrc/,
  cuda/, metal/, python/ and bench/ (the entry points), and the generators of committed tables
  (docs/results/*.py), build outputs left out (EXCLUDED_DIRS, EXCLUDED_SUFFIXES,
  GENERATED);
- source_commit: `git rev-parse HEAD` of the checkout, or "unknown" without git;
- dirty: the sources differ from that commit's (the same hash over HEAD's files), or no git.

Run: python3 cmake/provenance.py [--root DIR] [--out FILE.py] [--deps FILE]
prints the JSON; --out writes the Python module gapbench._provenance; --deps writes the files
whose change must re-run it (one a line: the hashed files and git's HEAD, ref and index)."""
from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

SOURCE_DIRS = ("csrc", "cuda", "metal", "python", "bench")
#: top-level files that shape the build
SOURCE_FILES = ("CMakeLists.txt", "pyproject.toml", "cmake/native.exports", "cmake/native_includes.cmake")
#: what generates committed tables, hashed too (a generator's change changes the tables)
GENERATOR_GLOBS = ("docs/results/*.py",)
EXCLUDED_DIRS = {"__pycache__", ".pytest_cache", ".import_linter_cache"}
#: build output folders, excluded only directly under a source folder (python/build, not gapbench/dist:
#: until 2026-11-23 a bare "dist" rule left python/gapbench/dist, bench.dist's code, out of the hash)
EXCLUDED_TOP = {"build", "dist"}
EXCLUDED_SUFFIXES = (".pyc", ".pyo", ".so", ".pyd", ".dylib", ".o", ".egg-info")
GENERATED = {"python/gapbench/_provenance.py"}  # what this script writes into an installed package


def _wanted(rel: str) -> bool:
    parts = rel.split("/")
    if rel in SOURCE_FILES or any(fnmatch.fnmatchcase(rel, g) for g in GENERATOR_GLOBS):
        return True
    if len(parts) > 2 and parts[1] in EXCLUDED_TOP:
        return False
    return (parts[0] in SOURCE_DIRS and rel not in GENERATED and not EXCLUDED_DIRS.intersection(parts[:-1])
            and not any(p.endswith(".egg-info") for p in parts) and not rel.endswith(EXCLUDED_SUFFIXES))


def source_files(root: Path) -> list[str]:
    """The hashed files under `root`, as sorted '/'-separated relative paths."""
    out = [f for f in SOURCE_FILES if (root / f).is_file()]
    out += [p.relative_to(root).as_posix() for g in GENERATOR_GLOBS for p in root.glob(g) if p.is_file()]
    for top in SOURCE_DIRS:
        for dirpath, dirnames, filenames in os.walk(root / top):
            dirnames[:] = sorted(d for d in dirnames if d not in EXCLUDED_DIRS and not d.endswith(".egg-info"))
            for f in filenames:
                rel = Path(dirpath, f).relative_to(root).as_posix()
                if _wanted(rel) and not os.path.islink(Path(dirpath, f)):
                    out.append(rel)
    return sorted(out)


def hash_contents(items) -> str:
    """sha256 over (path, contents) pairs in path order: each path, a NUL, its length, a NUL, its bytes."""
    h = hashlib.sha256()
    for rel, data in sorted(items):
        h.update(rel.encode() + b"\0" + str(len(data)).encode() + b"\0" + data)
    return h.hexdigest()


def source_hash(root: Path) -> str:
    return hash_contents((rel, (root / rel).read_bytes()) for rel in source_files(root))


def _git(root: Path, *args: str, text: bool = True):
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=text, timeout=60)


def git_commit(root: Path) -> str | None:
    """HEAD of the git checkout `root` is the top of, else None."""
    try:
        top = _git(root, "rev-parse", "--show-toplevel")
        if top.returncode != 0 or Path(top.stdout.strip()).resolve() != root.resolve():
            return None
        p = _git(root, "rev-parse", "HEAD")
    except (OSError, subprocess.SubprocessError):
        return None
    sha = p.stdout.strip()
    return sha if p.returncode == 0 and len(sha) == 40 else None


_COMMIT_HASHES: dict = {}


def commit_hash(root: Path, commit: str) -> str | None:
    """source_hash of the files as they are in `commit` (symlinks left out, as on disk); a full
    commit id's answer is kept (its files never change), so commit_for_hash walks each commit once
    per process however many digests it looks for."""
    key = (str(Path(root).resolve()), commit)
    if len(commit) == 40 and key in _COMMIT_HASHES:
        return _COMMIT_HASHES[key]
    got = _commit_hash(root, commit)
    if len(commit) == 40 and got is not None:
        _COMMIT_HASHES[key] = got
    return got


def _commit_hash(root: Path, commit: str) -> str | None:
    try:
        ls = _git(root, "ls-tree", "-r", "-z", commit, "--", *SOURCE_DIRS, *SOURCE_FILES,
                  *{g.rsplit("/", 1)[0] for g in GENERATOR_GLOBS})
        if ls.returncode != 0:
            return None
        entries = []
        for line in ls.stdout.split("\0"):
            if line:
                meta, rel = line.split("\t", 1)
                mode, kind, obj = meta.split()
                if kind == "blob" and mode != "120000" and _wanted(rel):
                    entries.append((rel, obj))
        batch = subprocess.run(["git", "cat-file", "--batch"], cwd=root, capture_output=True, timeout=120,
                               input="".join(obj + "\n" for _, obj in entries).encode())
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    if batch.returncode != 0:
        return None
    data, pos, items = batch.stdout, 0, []
    for rel, _ in entries:
        nl = data.index(b"\n", pos)
        size = int(data[pos:nl].split()[2])
        items.append((rel, data[nl + 1:nl + 1 + size]))
        pos = nl + 1 + size + 1
    return hash_contents(items)


def day_after(when: str | None) -> str | None:
    """A day after an ISO time (a result's env.time), for commit_for_hash's `until`: a result's code
    is committed by then (a tree built on the lent machine may be committed some hours after it
    ran); None where there is no time to read."""
    import datetime as dt

    try:
        return (dt.datetime.fromisoformat(str(when)) + dt.timedelta(days=1)).isoformat() if when else None
    except ValueError:
        return None


def commit_for_hash(root: Path, digest: str, max_commits: int = 300, until: str | None = None) -> str | None:
    """The newest of the last `max_commits` commits (committed by `until`, an ISO time, where given)
    whose sources hash to `digest`, else None: a result built where there was no git (the lent GPU
    machine gets a copy of the tree) or from a stale checkout still names the commit of its code,
    found by content. `until` anchors the search at the result's own time, so the answer for an old
    result does not change as later commits push its code's commit out of the last `max_commits`."""
    try:
        p = _git(root, "rev-list", f"--max-count={max_commits}", *([f"--before={until}"] if until else []), "HEAD")
    except (OSError, subprocess.SubprocessError):
        return None
    for commit in p.stdout.split() if p.returncode == 0 else []:
        if commit_hash(root, commit) == digest:
            return commit
    return None


def provenance(root: Path) -> dict:
    root = Path(root).resolve()
    digest = source_hash(root)
    commit = git_commit(root)
    dirty = True if commit is None else commit_hash(root, commit) != digest
    return {"source_commit": commit or "unknown", "source_hash": digest, "dirty": dirty}


def git_deps(root: Path) -> list[str]:
    """git's files whose change means another commit or index: HEAD, the branch's ref, packed refs, index."""
    try:
        if git_commit(root) is None:
            return []
        paths = ["HEAD", "index", "packed-refs"]
        ref = _git(root, "symbolic-ref", "-q", "HEAD").stdout.strip()
        if ref:
            paths.append(ref)
        out = []
        for p in paths:
            g = _git(root, "rev-parse", "--path-format=absolute", "--git-path", p).stdout.strip()
            if g and os.path.isfile(g):
                out.append(g)
        return out
    except (OSError, subprocess.SubprocessError):
        return []


def module_text(info: dict) -> str:
    return ('"""Generated at build time by cmake/provenance.py: the sources this package was built from."""\n'
            f"SOURCE_COMMIT = {info['source_commit']!r}\n"
            f"SOURCE_HASH = {info['source_hash']!r}\n"
            f"DIRTY = {info['dirty']!r}\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=str(Path(__file__).resolve().parents[1]))
    ap.add_argument("--out", help="write the gapbench._provenance module here")
    ap.add_argument("--deps", help="write the files that must re-run this when changed, one a line")
    a = ap.parse_args(argv)
    root = Path(a.root).resolve()
    info = provenance(root)
    if a.out:
        text = module_text(info)
        out = Path(a.out)
        if not out.exists() or out.read_text() != text:  # unchanged: keep its time stamp
            out.write_text(text)
    if a.deps:
        deps = [str(root / rel) for rel in source_files(root)] + git_deps(root)
        Path(a.deps).write_text("".join(d.replace("\\", "/") + "\n" for d in deps))
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
