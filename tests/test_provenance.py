"""Provenance without git: the build records the source commit, a content hash of csrc/ cuda/
metal/ python/ and a dirty flag (cmake/provenance.py, run by CMake at configure time); every run
file carries them."""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import ROOT

spec = importlib.util.spec_from_file_location("gapbench_provenance", ROOT / "cmake" / "provenance.py")
prov = importlib.util.module_from_spec(spec)
spec.loader.exec_module(prov)

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]


def test_hash_of_known_contents():
    # each file: its path, NUL, its length, NUL, its bytes, in path order
    want = hashlib.sha256(b"a/x\x002\x00hi" + b"b\x000\x00").hexdigest()
    assert prov.hash_contents([("b", b""), ("a/x", b"hi")]) == want
    # moving bytes from one file to the next is another source tree
    assert prov.hash_contents([("a/x", b"h"), ("b", b"i")]) != want


@pytest.fixture
def tree(tmp_path):
    """A copy of the sources the build hashes, committed to a fresh git repository."""
    for d in prov.SOURCE_DIRS:
        if (ROOT / d).is_dir():
            shutil.copytree(ROOT / d, tmp_path / d, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyc"))
    if shutil.which("git") is None:
        pytest.skip("no git here")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(GIT + ["add", "-A"], cwd=tmp_path, check=True)
    subprocess.run(GIT + ["commit", "-qm", "x"], cwd=tmp_path, check=True)
    return tmp_path


def test_clean_checkout_then_an_edit_is_dirty(tree):
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tree, capture_output=True, text=True).stdout.strip()
    clean = prov.provenance(tree)
    assert clean == {"source_commit": head, "source_hash": clean["source_hash"], "dirty": False}
    f = tree / "cuda" / "ops" / "gemv.cuh"
    original = f.read_bytes()
    f.write_bytes(original + b"\n// edited\n")
    edited = prov.provenance(tree)
    assert edited["dirty"] is True and edited["source_commit"] == head
    assert edited["source_hash"] != clean["source_hash"]
    f.write_bytes(original)  # back as committed: clean, and the same hash
    assert prov.provenance(tree) == clean


def test_new_untracked_source_is_dirty_build_outputs_are_not(tree):
    clean = prov.provenance(tree)
    (tree / "python" / "gapbench" / "__pycache__").mkdir(exist_ok=True)
    (tree / "python" / "gapbench" / "__pycache__" / "env.cpython-311.pyc").write_bytes(b"\0")
    (tree / "python" / "gapbench" / "_native.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\0")
    (tree / "python" / "gapbench" / "_provenance.py").write_text("SOURCE_HASH = 'x'\n")
    assert prov.provenance(tree) == clean
    (tree / "csrc" / "extra.cpp").write_text("int x;\n")
    assert prov.provenance(tree)["dirty"] is True


def test_no_git_is_dirty_with_the_same_hash(tree):
    clean = prov.provenance(tree)
    shutil.rmtree(tree / ".git")
    assert prov.provenance(tree) == {"source_commit": "unknown", "source_hash": clean["source_hash"], "dirty": True}


def test_a_result_names_the_commit_of_its_code_by_content(tree):
    # the lent machine builds from a copy with stale git: its content hash finds the commit, the
    # newer of two, and a commit's hash is kept for the next digest looked for
    first = prov.provenance(tree)
    f = tree / "cuda" / "ops" / "gemv.cuh"
    f.write_bytes(f.read_bytes() + b"\n// second\n")
    subprocess.run(GIT + ["commit", "-qam", "y"], cwd=tree, check=True)
    second = prov.provenance(tree)
    assert second["source_hash"] != first["source_hash"]
    assert prov.commit_for_hash(tree, first["source_hash"]) == first["source_commit"]
    assert prov.commit_for_hash(tree, second["source_hash"]) == second["source_commit"]
    assert prov.commit_for_hash(tree, "0" * 64) is None
    assert prov._COMMIT_HASHES[(str(tree.resolve()), first["source_commit"])] == first["source_hash"]


def test_the_commit_of_an_old_result_is_found_however_many_commits_come_later(tree):
    """`until` (the result's time and a margin) anchors the search: a commit pushed out of the last
    max_commits by later ones is still found, and commits made after `until` are not looked at."""
    import datetime as dt

    first = prov.provenance(tree)
    t0 = dt.datetime.now(dt.timezone.utc)
    f = tree / "cuda" / "ops" / "gemv.cuh"
    for days in (10, 20):
        f.write_bytes(f.read_bytes() + b"\n// later\n")
        when = (t0 + dt.timedelta(days=days)).isoformat()
        subprocess.run(GIT + ["commit", "-qam", "later"], cwd=tree, check=True,
                       env={**os.environ, "GIT_COMMITTER_DATE": when, "GIT_AUTHOR_DATE": when})
    mid = prov.day_after(t0.isoformat())
    assert prov.day_after(None) is None and prov.day_after("not a time") is None
    assert prov.commit_for_hash(tree, first["source_hash"], max_commits=1) is None  # pushed out by HEAD's
    assert prov.commit_for_hash(tree, first["source_hash"], max_commits=1, until=mid) == first["source_commit"]
    last = prov.provenance(tree)["source_hash"]
    assert prov.commit_for_hash(tree, last, until=mid) is None  # made after `until`


def _well_formed(info: dict) -> None:
    assert re.fullmatch(r"[0-9a-f]{40}|unknown", info["source_commit"]), info
    assert re.fullmatch(r"[0-9a-f]{64}", info["source_hash"]), info
    assert isinstance(info["dirty"], bool), info


def test_installed_build_records_its_provenance():
    native = pytest.importorskip("gapbench._native", reason="gapbench not built here (pip install .)")
    from gapbench import _provenance as p  # written by the same build as the extension

    info = {"source_commit": p.SOURCE_COMMIT, "source_hash": p.SOURCE_HASH, "dirty": p.DIRTY}
    _well_formed(info)
    if "source_hash" in native.build_info:  # the extension carries the same three values
        assert {k: native.build_info[k] for k in info} == info


def test_every_run_file_carries_the_provenance(tmp_path):
    from gapbench.core import cli

    w = cli.open_run("launch", str(tmp_path / "r.json"), "gapbench launch", [], {}, [])
    w.finish()
    env = json.loads((tmp_path / "r.json").read_text())["env"]
    _well_formed(env)
    assert env["provenance_from"]
