"""gapbench run: one bundle of every benchmark (layout, manifest, a failing benchmark recorded while
the others are kept, Ctrl-C), its archive, and bench.report over bundles of several machines."""
from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from conftest import ROOT, as_from_a_terminal, run_module
from gapbench import __version__
from gapbench import benchmarks
from gapbench.core import bundle as bd
from gapbench.tools.run.command import BENCHMARK as RUN, measuring, takes_backends
from gapbench.tools.report import command as rp
from gapbench.core.result import SchemaError, load_run

CPU = "native-cpu,torch-cpu"
FAST_BLAS = "blas=--ops gemv --dtypes fp32"  # one op, one dtype: a few seconds on a CPU


def _run(out: Path, *args: str) -> subprocess.CompletedProcess:
    return run_module("gapbench", "run", "--quick", "--backends", CPU, "--out", str(out), "--host", "testbox", *args,
                      timeout=240)


def _one_bundle(out: Path) -> Path:
    found = [p for p in out.iterdir() if p.is_dir()]
    assert len(found) == 1, found
    return found[0]


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    """launch and blas on the CPU backends, archived."""
    out = tmp_path_factory.mktemp("good")
    p = _run(out, "--only", "launch,blas", "--args", FAST_BLAS, "--archive")
    return p, _one_bundle(out)


def test_quick_run_writes_one_bundle_with_its_manifest(good):
    p, folder = good
    assert p.returncode == 0, p.stdout + p.stderr
    assert folder.name.startswith("gapbench-testbox-")
    man = json.loads((folder / "bundle.json").read_text())
    assert man["schema"] == bd.SCHEMA and man["gapbench"] == __version__ and man["host"] == "testbox"
    assert man["finished"] and man["quick"] is True and "gapbench run" in man["command"]
    assert man["env"]["cpu"] and "build" in man["env"]  # provenance of the machine and the build
    assert [b["name"] for b in man["benchmarks"]] == ["launch", "blas"]
    for i, b in enumerate(man["benchmarks"], 1):
        assert b["status"] == "ok" and b["exit_code"] == 0 and b["duration_s"] > 0, b
        assert f"--backends {CPU}" in b["command"] and "--quick" in b["command"]
        path = folder / b["result"]
        assert b["result"] == f"{b['name']}.json.gz" and path.read_bytes()[:2] == b"\x1f\x8b"  # compact
        recs = load_run(path).records
        assert b["records"] == len(recs) and b["measured"] == sum(r.status == "ok" for r in recs) > 0
        assert {r.backend for r in recs} <= set(CPU.split(","))  # the pass-through reached it
        assert (folder / b["log"]).is_file()
        # one line as each benchmark starts and as it ends, with its time
        assert f"[{i}/2] {b['name']}: started" in p.stdout
        assert f"[{i}/2] {b['name']}: ok in {b['duration_s']:.1f} s" in p.stdout
    assert sorted(p.name for p in folder.iterdir()) == ["blas.json.gz", "bundle.json", "launch.json.gz", "logs"]
    assert "--ops gemv --dtypes fp32" in man["benchmarks"][1]["command"]
    assert str(folder) in p.stdout


def test_a_failing_benchmark_is_recorded_and_the_others_kept(tmp_path):
    p = _run(tmp_path, "--only", "launch,blas", "--args", "launch=--no-such-option", "--args", FAST_BLAS)
    assert p.returncode == 0, p.stdout + p.stderr  # blas measured
    folder = _one_bundle(tmp_path)
    man = json.loads((folder / "bundle.json").read_text())
    launch, blas = man["benchmarks"]
    assert launch["status"] == "failed" and launch["exit_code"] == 2 and launch["result"] is None
    assert "--no-such-option" in launch["reason"] and "--no-such-option" in (folder / launch["log"]).read_text()
    assert "[1/2] launch: failed (exit 2)" in p.stdout
    assert blas["status"] == "ok" and blas["measured"] > 0 and load_run(folder / blas["result"]).records


def test_nothing_measured_exits_1_and_bad_names_exit_2(tmp_path, capsys):
    p = _run(tmp_path, "--only", "launch", "--args", "launch=--no-such-option")
    assert p.returncode == 1 and "no benchmark measured anything" in p.stderr
    assert json.loads((_one_bundle(tmp_path) / "bundle.json").read_text())["benchmarks"][0]["status"] == "failed"
    for argv in (["--only", "lunch"], ["--only", "launch", "--skip", "launch"], ["--args", "nope=--x"]):
        assert RUN.main(argv + ["--out", str(tmp_path / "bad")], "gapbench run") == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1
    assert not (tmp_path / "bad").exists()  # refused before any work


def test_the_run_covers_every_measuring_benchmark():
    names = measuring()
    assert {"launch", "blas", "train", "suite"} <= set(names) and "report" not in names and "run" not in names
    assert takes_backends(benchmarks.get("launch")) and takes_backends(benchmarks.get("train"))
    assert not takes_backends(benchmarks.get("report"))


def _copy_as(folder: Path, dest: Path, host: str) -> Path:
    shutil.copytree(folder, dest)
    man = json.loads((dest / "bundle.json").read_text())
    man["host"] = host
    (dest / "bundle.json").write_text(json.dumps(man))
    return dest


def _machine_rows(md: str) -> list[str]:
    section = md.split("## Machines and runs")[1].split("\n## ")[0]
    return [ln for ln in section.splitlines() if ln.startswith("| gapbench-")]


def test_report_merges_bundles_of_two_machines(good, tmp_path):
    _, folder = good
    other = _copy_as(folder, tmp_path / "gapbench-otherbox-x", "otherbox")
    md, page = rp.build([str(folder), str(other)], tmp_path / "rep")
    text = md.read_text()
    rows = _machine_rows(text)
    assert len(rows) == 4  # two result files from each machine
    assert sum("@ testbox |" in r for r in rows) == 2 and sum("@ otherbox |" in r for r in rows) == 2
    # each machine has its own rows in the launch table
    for host in ("testbox", "otherbox"):
        assert any(ln.startswith("| ") and f"@ {host} | torch-cpu |" in ln for ln in text.splitlines())
    assert "otherbox" in page.read_text()


def test_archive_round_trip(good, tmp_path):
    _, folder = good
    archive = folder.with_name(folder.name + ".tar.gz")
    assert archive.is_file()
    back = bd.extract_archive(archive, tmp_path)
    assert back.name == folder.name
    files = sorted(p.relative_to(folder) for p in folder.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(back) for p in back.rglob("*") if p.is_file())
    for f in files:
        assert (back / f).read_bytes() == (folder / f).read_bytes(), f
    # the report reads the archive as it reads the folder
    from_dir = _machine_rows(rp.build([str(folder)], tmp_path / "a")[0].read_text())
    from_arc = _machine_rows(rp.build([str(archive)], tmp_path / "b")[0].read_text())
    assert [r.split("|")[2:] for r in from_dir] == [r.split("|")[2:] for r in from_arc]
    assert len(from_arc) == 2 and all(archive.name in r for r in from_arc)


def test_a_folder_of_bundles_and_archives_is_read_whole(good, tmp_path):
    _, folder = good
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    _copy_as(folder, shelf / "gapbench-a", "hosta")
    bd.write_archive(_copy_as(folder, tmp_path / "gapbench-b", "hostb"), shelf / "gapbench-b.tar.gz")
    runs = bd.load_inputs([shelf])
    assert sorted(r.env["host"] for r in runs) == ["hosta", "hosta", "hostb", "hostb"]
    # a result file named inside a bundle folder carries the bundle's host too
    assert bd.load_inputs([shelf / "gapbench-a" / "blas.json.gz"])[0].env["host"] == "hosta"


def test_unsafe_or_foreign_archives_are_refused(tmp_path):
    evil = tmp_path / "evil.tar.gz"
    with tarfile.open(evil, "w:gz") as tar:
        data = b"{}"
        info = tarfile.TarInfo("../outside.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    with pytest.raises(SchemaError, match="unsafe member"):
        bd.extract_archive(evil, tmp_path / "x")
    assert not (tmp_path / "outside.json").exists()
    (tmp_path / "plain" / "top").mkdir(parents=True)
    (tmp_path / "plain" / "top" / "a.txt").write_text("hi")
    with pytest.raises(SchemaError, match="not a gapbench bundle"):
        bd.extract_archive(bd.write_archive(tmp_path / "plain" / "top"), tmp_path / "y")
    assert rp.main([str(evil), "--out", str(tmp_path / "rep")]) == 2


def _is_worker(psutil, proc) -> bool:
    try:
        return "gapbench.core.worker" in " ".join(proc.cmdline())
    except psutil.Error:  # it ended between the listing and the look (a cold launch process does)
        return False


def test_ctrl_c_names_the_partial_bundle(tmp_path):
    psutil = pytest.importorskip("psutil")
    proc = subprocess.Popen([sys.executable, "-m", "gapbench", "run", "--only", "launch,blas", "--backends", "native-cpu",
                             "--args", "launch=--samples 50000000 --warmup 50000000 --budget 600", "--out", str(tmp_path), "--host", "testbox"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=as_from_a_terminal)
    try:
        deadline, kids = time.time() + 120, []
        while time.time() < deadline and len(kids) < 2:  # the bundle's worker and launch's own
            kids = [c for c in psutil.Process(proc.pid).children(recursive=True) if _is_worker(psutil, c)]
            time.sleep(0.1)
        assert len(kids) >= 2, "launch's worker never started"
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    folder = _one_bundle(tmp_path)
    assert proc.returncode == 130 and "Traceback" not in err
    assert f"interrupted (Ctrl-C): partial bundle in {folder}" in err
    man = json.loads((folder / "bundle.json").read_text())
    assert [b["status"] for b in man["benchmarks"]] == ["interrupted", "pending"] and man["finished"] is None
    _, alive = psutil.wait_procs(kids, timeout=15)
    assert not [k for k in alive if k.status() != psutil.STATUS_ZOMBIE]


def test_compact_is_a_gapbench_command(good, capsys):
    from gapbench.__main__ import main, usage

    _, folder = good
    assert "  compact " in usage() and "  run " in usage()
    assert main(["compact", "--describe", str(folder / "blas.json.gz")]) == 0
    assert "gapbench run" in capsys.readouterr().out  # its kind; the command is `gapbench blas ...`
    with gzip.open(folder / "blas.json.gz") as f:
        assert json.load(f)["run"]["command"].startswith("gapbench blas ")
    assert os.path.exists(ROOT / "bench" / "run.py")


def test_a_folder_reads_compact_files_and_a_compact_copy_once(tmp_path):
    from gapbench.core.compact import compact_file
    from gapbench.core.result import Record, RunWriter

    for name in ("a", "b"):
        w = RunWriter(tmp_path / f"{name}.json", env={"cpu": f"CPU {name}"}, run={"probe": "launch"})
        w.add(Record("launch", "torch-cpu", "roundtrip", samples_s=[1e-5, 2e-5, 3e-5], clock="host_wall"))
        w.finish()
    compact_file(tmp_path / "a.json")  # a.json.gz beside a.json: the same run
    compact_file(tmp_path / "b.json")
    (tmp_path / "b.json").unlink()  # only b.json.gz is left
    runs = bd.load_inputs([tmp_path])
    assert sorted(r.path.name for r in runs) == ["a.json", "b.json.gz"]
    assert [r.records[0].samples_s for r in runs] == [[1e-5, 2e-5, 3e-5]] * 2


def test_repeat_runs_each_benchmark_in_rounds_and_compare_reads_the_processes(tmp_path, capsys):
    """--repeat 2: blas twice (each its own fresh processes) into one bundle, blas-1 and blas-2;
    gapbench compare of that bundle against itself takes each row's interval between the runs."""
    p = _run(tmp_path, "--only", "blas", "--args", FAST_BLAS, "--repeat", "2")
    assert p.returncode == 0, p.stdout + p.stderr
    folder = _one_bundle(tmp_path)
    man = json.loads((folder / "bundle.json").read_text())
    assert [(b["result"], b["repeat"], b["status"]) for b in man["benchmarks"]] == [
        ("blas-1.json.gz", 1, "ok"), ("blas-2.json.gz", 2, "ok")]
    from gapbench.tools.compare import command as compare

    assert compare.main([str(folder), str(folder), "--json", str(tmp_path / "c.json")]) == 0
    doc = json.loads((tmp_path / "c.json").read_text())
    (c,) = doc["comparisons"]
    assert c["runs"] == [2, 2] and c["rows"]
    assert all(r["interval_covers"] == "between processes (2 + 2)" for r in c["rows"] if r["ratio_b_over_a"])
    # the same runs on both sides: ratio 1; two processes a side give a wide interval, never a verdict
    assert all(r["verdict"] in ("same", "can't tell") and r["ratio_b_over_a"] == 1.0
               for r in c["rows"] if r["ratio_b_over_a"])
