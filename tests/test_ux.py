"""What a user meets on day one (issue 16, items 3, 5, 6, 7, 8, 10): output paths, silent no-ops,
shapes too large for the machine, tables at 80 and 100 columns, progress when piped, rows whose
rate cannot be true."""
import io
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gapbench import benchmarks
from gapbench.core.names import Backend, DType
from gapbench.core.result import ERROR, OK, Record, RunWriter, load_run

from conftest import ROOT, run_module


def _main(name, *args):
    return benchmarks.get(name).main(list(args), prog=f"python -m bench.{name}")


# ------------------------------------------------------------------ item 3: output paths
def _unwritable_dir(tmp_path):
    if os.geteuid() == 0:  # root writes through modes: use a folder the kernel refuses to root too
        return "/sys"
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o555)
    return str(d)


CLIS = {
    "launch": ["--quick", "--backends", "native-cpu"],
    "blas": ["--quick", "--ops", "copy", "--backends", "torch-cpu", "--no-plots"],
    "train": ["--quick", "--no-plots"],
    "suite": ["--quick"],
}


@pytest.mark.parametrize("cli", list(CLIS))
@pytest.mark.parametrize("where", ["read-only", "under a file", "a directory"])
def test_bad_out_path_is_one_line_exit_2_before_any_work(tmp_path, capsys, cli, where):
    afile = tmp_path / "afile"
    afile.write_text("x")
    out = {"read-only": f"{_unwritable_dir(tmp_path)}/r.json", "under a file": f"{afile}/r.json",
           "a directory": str(tmp_path)}[where]
    before = sorted(p.name for p in tmp_path.iterdir())
    assert _main(cli, *CLIS[cli], "--out", out) == 2
    err = capsys.readouterr()
    lines = [ln for ln in (err.err + err.out).splitlines() if ln.strip()]
    assert len(lines) <= 2 and "--out" in lines[0] and "Traceback" not in err.err  # rich may wrap at 100 columns
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written, no work done


def test_report_out_must_be_a_writable_folder(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    for out in (str(afile), f"{afile}/rep", f"{_unwritable_dir(tmp_path)}/rep"):
        assert _main("report", str(ROOT / "docs" / "results"), "--out", out) == 2
        assert "--out" in capsys.readouterr().err


def test_report_reads_a_folder_of_compact_result_files(tmp_path, capsys):
    """docs/results holds .json.gz files only: the folder stands for them. Piped (as here), the
    report says what it is doing, a line a step (one report over the folder serves both checks)."""
    out = tmp_path / "rep"
    assert _main("report", str(ROOT / "docs" / "results"), "--out", str(out), "--no-plots") == 0
    assert (out / "report.md").exists() and "H200" in (out / "report.md").read_text()
    assert not list(out.glob("*.png"))  # --no-plots: the tables only
    said = capsys.readouterr().out
    assert re.search(r"^\[1/\d+\] report: read .*\.json\.gz", said, re.M) and "report: tables: blas" in said


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_result_files_get_the_mode_the_umask_gives(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        w = RunWriter(tmp_path / "r.json", env={}, run={"probe": "p"}, csv_path=tmp_path / "r.csv")
        w.add(Record(probe="p", backend="b", metric="m", samples_s=[1.0]))
    finally:
        os.umask(old)
    for p in (tmp_path / "r.json", tmp_path / "r.csv"):
        assert stat.S_IMODE(p.stat().st_mode) == mode


# ------------------------------------------------------------------ item 5: silent no-ops
@pytest.mark.parametrize("args, msg", [
    (["--ops", "gemm", "--shapes", "64x64"], "64x64: no selected op takes this form; gemm takes BxMxNxK"),
    (["--ops", "copy,gemm", "--shapes", "4096"], "gives no shape for gemm"),
    (["--ops", "copy", "--shapes", "4096,64x64"], "64x64: no selected op"),
])
def test_shapes_of_the_wrong_form_are_errors(tmp_path, capsys, args, msg):
    assert _main("blas", "--quick", "--backends", "torch-cpu", "--out", str(tmp_path / "r.json"), *args) == 2
    assert msg in " ".join(capsys.readouterr().err.split())
    assert not (tmp_path / "r.json").exists()


def test_shapes_without_ops_select_the_ops_they_fit():
    from gapbench import ops
    from gapbench.benchmarks.blas.config import ops_for_shapes, parse_shapes

    every = ops.op_list("copy,gemv,vjp,gemm")
    names = lambda specs: [s.name for s in specs]
    assert names(ops_for_shapes(every, parse_shapes("64x64"), explicit=False)) == ["gemv", "vjp_dx", "vjp_dw"]
    assert names(ops_for_shapes(every, parse_shapes("8,1x8x8x8"), explicit=False)) == ["copy", "gemm"]


def test_seed_csv_of_a_gguf_is_named_by_device_and_model(tmp_path):
    from gapbench.benchmarks.suite.tables import seed_csvs

    case = {"experiment": "llamacpp-generate", "model": "tiny-llama.gguf", "batch_size": 1, "seq_len": 0, "mode": "inference"}
    r = Record(probe="suite", backend="llama.cpp-cpu", metric="generate", status=ERROR, reason="x",
               params={"suite": "llamacpp", "case": case})
    (p,) = seed_csvs([r], tmp_path, "Intel Xeon")
    assert p.name == "intel_xeon_prompts_tiny-llama_llama.cpp-cpu.csv"


# ------------------------------------------------------------------ item 6: shapes too large
def test_a_copy_too_large_for_the_machine_is_an_error_row_not_a_traceback(tmp_path, capsys):
    out = tmp_path / "r.json"
    code = _main("blas", "--quick", "--ops", "copy", "--shapes", "100000000000", "--backends", "torch-cpu",
                 "--dtypes", "fp32", "--no-plots", "--out", str(out))
    assert code == 1  # nothing measured
    (r,) = [r for r in load_run(out).records if r.params.get("op") == "copy"]
    assert r.status == ERROR and "does not fit" in r.reason and "GB" in r.reason
    assert "Traceback" not in capsys.readouterr().err


def test_memory_check_asks_before_allocating(monkeypatch):
    from gapbench.backends import memfit
    from gapbench.benchmarks.blas import run as blas
    from gapbench.ops import copy

    monkeypatch.setattr(memfit, "host_available", lambda: (10 ** 9, "test"))
    tc = Backend.torch_cpu
    assert blas.memory_check(copy.SPEC, {"n": 1 << 20}, DType.fp32, [tc]) == {}
    too = blas.memory_check(copy.SPEC, {"n": 1 << 26}, DType.fp32, [tc])  # 2^27 elements read + written x 40 host bytes each > 1 GB
    assert "does not fit" in too[tc] and "5.37 GB" in too[tc]


@pytest.mark.parametrize("args, msg", [(["--samples", "1000000000"], "at most 100000000"),
                                       (["--n", "100000000000"], "does not fit")])
def test_launch_refuses_sizes_the_machine_cannot_hold(tmp_path, capsys, args, msg):
    assert _main("launch", "--backends", "native-cpu", "--out", str(tmp_path / "r.json"), *args) == 2
    assert msg in capsys.readouterr().err and not (tmp_path / "r.json").exists()


# ------------------------------------------------------------------ item 7: tables at 80 and 100 columns
def _blas_records():
    from gapbench.ops import copy
    from gapbench.ops import gemm

    out = []
    for backend, med, n in (("torch-cpu", 104.2e-6, 1 << 20), ("mlx-cpu", 1.208e-2, 1 << 20), ("torch-cpu", 6.631e-6, 65536)):
        shape = {"n": n}
        out.append(Record(probe="blas", backend=backend, metric="time", variant=backend.split("-")[0], clock="host_wall",
                          samples_s=[med * f for f in (0.97, 1.0, 1.02, 1.0, 1.31)], verified=True,
                          params={"shape": shape, "shape_text": f"n={n}", "dtype": "fp32", "op": "copy"},
                          work=copy.SPEC.work(shape, "fp32")))
    shape = {"batch": 8, "m": 2000, "n": 2000, "k": 2000}
    out.append(Record(probe="blas", backend="torch-cpu", metric="time", variant="torch", clock="host_wall",
                      samples_s=[0.5123, 0.5234, 0.5345], verified=True, work=gemm.SPEC.work(shape, "bf16"),
                      params={"shape": shape, "shape_text": "8x2000x2000x2000", "dtype": "bf16", "op": "gemm"}))
    out.append(Record(probe="blas", backend="mlx-cpu", metric="time", variant="mlx", status=ERROR,
                      reason="out of memory: needs 123456789 bytes",
                      params={"shape": shape, "shape_text": "8x2000x2000x2000", "dtype": "bf16", "op": "gemm"}))
    return out


def _launch_records():
    out = []
    for backend, variant, base in (("native-cpu", "noop", 3.44e-8), ("torch-cpu", "torch", 4.567e-6),
                                   ("mlx-cpu", "mlx", 1.2345e-5)):
        for i, metric in enumerate(("context", "cold", "first_warm", "submit", "roundtrip", "stream_b2b")):
            out.append(Record(probe="launch", backend=backend, variant=variant, metric=metric, clock="host_wall",
                              samples_s=[base * (i + 1) * f for f in (0.9, 1.0, 1.1)]))
    out.append(Record(probe="launch", backend="cupy-cuda", metric="all", status="unavailable",
                      reason="cupy is not installed: pip install 'gapbench[cupy]' for CUDA 13"))
    return out


def _train_records():
    out = []
    for label, step in (("tiny-gpt2 torch-cpu fp32 b2 s64 full", 0.013456), ("gpt2 torch-cuda amp-bf16 b8 s1024 lora", 0.25671)):
        params = {"label": label, "item_unit": "tokens", "memory_plan": {"scenario": "fits"},
                  "memory_peaks": {"rss_peak_bytes": 1.5 * 2 ** 30, "torch_cuda_max_reserved": 3.25 * 2 ** 30},
                  "energy": {"status": "ok", "joules_per_step": 12.345}, "roofline": {"flops_per_s": 1e12}}
        for metric, f in (("forward", 0.3), ("backward", 0.55), ("optimizer", 0.15), ("step", 1.0)):
            out.append(Record(probe="train", backend=label.split()[1], metric=metric, clock="host_wall",
                              samples_s=[step * f * g for g in (0.98, 1.0, 1.03)], params=params,
                              work={"flops": 1.234e9, "items": 128.0}))
    return out


def _suite_records():
    out = []
    for ex, b, seq, med in (("bert", 16, 128, 0.08765), ("distilbert-imdb", 32, 512, 1.2345), ("resnet50", 32, 0, 0.4321)):
        case = {"experiment": ex, "batch_size": b, "seq_len": seq, "mode": "training", "model": "m"}
        out.append(Record(probe="suite", backend="torch-cpu", metric="step", clock="host_wall",
                          samples_s=[med * g for g in (0.97, 1.0, 1.04)] * 4, params={"case": case},
                          work={"items": float(b)}))
    return out


FIXTURES = {"blas": _blas_records, "launch": _launch_records, "train": _train_records, "suite": _suite_records}


@pytest.mark.parametrize("width", [80, 100])
@pytest.mark.parametrize("name", list(FIXTURES))
def test_tables_fit_the_width_and_never_break_a_number(name, width):
    from rich.console import Console

    from gapbench.core.termtable import FitTable

    tables = [t for t in benchmarks.get(name).tables(FIXTURES[name]()) if t]
    assert tables
    for t in tables:
        assert isinstance(t, FitTable)  # every command's table goes through the one helper
        c = Console(width=width, record=True, file=io.StringIO(), color_system=None)
        c.print(t)
        text = c.export_text()
        lines = text.splitlines()
        assert all(len(ln.rstrip()) <= width for ln in lines), text
        flat = " ".join(text.split())
        fit = t.layout(width)
        shown = fit[0] if fit else range(len(t.cols))
        for cells, _ in t.rows:
            for i, cell in enumerate(cells):
                if not re.search(r"\d", cell):
                    continue
                if i in shown and t.cols[i].text:  # a label may wrap, at spaces only
                    assert all(any(w in ln for ln in lines) for w in cell.split()), (cell, text)
                elif i in shown:  # the whole cell on one line: no number split or cut
                    assert any(cell in ln for ln in lines), (cell, text)
                else:  # a dropped column is named
                    assert t.cols[i].header in flat and f"Not shown at {width} columns" in flat
        for i in shown:
            assert t.cols[i].header.split()[0] in flat
        for note, _ in t.notes:  # notes wrap at spaces: each word whole
            for word in note.split():
                assert word in flat


def test_narrow_tables_become_blocks_of_column_value_lines():
    from rich.console import Console

    t = benchmarks.get("blas").tables(_blas_records())[0]
    c = Console(width=40, record=True, file=io.StringIO(), color_system=None)
    c.print(t)
    text = c.export_text()
    assert t.layout(40) is None and "median us" in text
    for cells, _ in t.rows:
        assert all(cell in text for cell in cells if cell)


def test_piped_output_is_100_columns_unless_columns_says(monkeypatch):
    from gapbench.core import cli

    monkeypatch.delenv("COLUMNS", raising=False)
    assert cli.console_for().width == 100  # pytest captures stdout: not a terminal
    monkeypatch.setenv("COLUMNS", "132")
    assert cli.console_for().width == 132


# ------------------------------------------------------------------ item 8: progress when piped
def test_progress_is_one_flushed_line_per_step_when_not_a_terminal():
    from rich.console import Console

    from gapbench.core.cli import progress_bar

    buf = io.StringIO()
    c = Console(file=buf, width=100)
    with progress_bar(c, 2) as bar:
        bar.describe("blas: copy fp32 n=65536 torch-cpu")
        bar.advance()
        assert buf.getvalue().startswith("[1/2] blas: copy fp32 n=65536 torch-cpu")
        bar.describe("blas: copy bf16 n=65536 torch-cpu")
        bar.advance()
    assert len(buf.getvalue().splitlines()) == 2
    quiet = io.StringIO()
    with progress_bar(Console(file=quiet), 2, disable=True) as bar:
        bar.advance()
    assert quiet.getvalue() == ""


def test_a_piped_launch_prints_a_line_per_step_before_the_table(tmp_path):
    p = run_module("bench.launch", "--quick", "--backends", "native-cpu", "--out", str(tmp_path / "r.json"))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    steps = [i for i, ln in enumerate(lines) if ln.startswith("[") and "launch: native-cpu" in ln]
    table = next(i for i, ln in enumerate(lines) if "Launch latency" in ln)
    assert len(steps) == 2 and steps[-1] < table


# ------------------------------------------------------------------ item 10: implausible rows
def _copy_row(med_s, n=1 << 20):
    from gapbench.ops import copy

    shape = {"n": n}
    return Record(probe="blas", backend="torch-cpu", metric="time", variant="torch", clock="host_wall",
                  samples_s=[med_s] * 5, verified=True, work=copy.SPEC.work(shape, "fp32"),
                  params={"shape": shape, "shape_text": f"n={n}", "dtype": "fp32", "op": "copy"})


def test_a_rate_under_one_percent_of_the_roofline_is_suspect_in_table_and_record():
    from rich.console import Console

    from gapbench.benchmarks.blas.tables import build_tables, mark_suspects, roofline

    best, slow, short = _copy_row(100e-6), _copy_row(20e-3), _copy_row(50e-6, n=1 << 10)
    fine = _copy_row(150e-6)
    recs = [best, slow, short, fine]
    roof = roofline(recs)
    assert mark_suspects(recs, roof) == 1
    assert "0.5% of the roofline" in slow.params["suspect"]
    assert "suspect" not in best.params and "suspect" not in fine.params
    assert "suspect" not in short.params  # 50 us for 8 KB: under 1%, but too short to say (call overhead)
    c = Console(width=100, record=True, file=io.StringIO(), color_system=None)
    c.print(build_tables(recs, roof)[0])
    assert sum("suspect" in ln for ln in c.export_text().splitlines() if "n=1048576" in ln) == 1


def test_cpu_frameworks_run_on_the_free_cores(monkeypatch):
    """A thread team larger than the free cores waits a scheduler slice at every op (the 8 ms
    copies of issue 16): with one of two cores busy elsewhere, torch-cpu gets one thread."""
    torch = pytest.importorskip("torch")
    import psutil

    from gapbench.backends import base, registry
    from gapbench.benchmarks.blas import framework_arms

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(psutil, "cpu_count", lambda logical=True: 2)
    monkeypatch.setattr(psutil, "cpu_percent", lambda interval=None: 50.0)
    assert base.free_cpu_cores(0.0) == (1, 2, 1.0)
    before = torch.get_num_threads()
    ad = registry.make_adapter(Backend.torch_cpu)
    try:
        framework_arms.fit_cpu_threads({Backend.torch_cpu: ad})
        assert torch.get_num_threads() == 1
        assert ad.cpu_threads.to_dict() == {"threads": 1, "cores": 2, "busy_cores_other": 1.0, "reduced": True}
    finally:
        torch.set_num_threads(before)
    monkeypatch.setattr(psutil, "cpu_percent", lambda interval=None: 0.0)
    ad2 = registry.make_adapter(Backend.torch_cpu)
    framework_arms.fit_cpu_threads({Backend.torch_cpu: ad2})
    assert ad2.cpu_threads.reduced is False and torch.get_num_threads() == before


BAD_VALUES = [
    ("bench.blas", ["--dtypes", "fp8"], "fp8"), ("bench.blas", ["--ops", "gemmm"], "gemmm"),
    ("bench.blas", ["--backends", "torch-xpu"], "torch-xpu"), ("bench.blas", ["--data", "ones"], "ones"),
    ("bench.launch", ["--backends", "cuda"], "cuda"), ("bench.train", ["--precision", "bogus"], "bogus"),
    ("bench.train", ["--model", "gpt5"], "gpt5"), ("bench.train", ["--backend", "torch-xpu"], "torch-xpu"),
    ("bench.train", ["--optimizer", "sgd"], "sgd"), ("bench.train", ["--attention", "linear"], "linear"),
    ("bench.suite", ["--suite", "bogus"], "bogus"), ("bench.dist", ["--ops", "frobnicate"], "frobnicate"),
    ("bench.dist", ["--dtypes", "fp8"], "fp8"),
]


@pytest.mark.parametrize("module,args,bad", BAD_VALUES, ids=[f"{m}{' '.join(a)}" for m, a, _ in BAD_VALUES])
def test_a_bad_value_fails_before_any_framework_is_imported(module, args, bad):
    """Every CLI checks its arguments before heavy imports or model loading: a bad value exits 2 with
    one line naming it, and no framework (torch, mlx, cupy, tensorflow, transformers) was imported."""
    code = ("import runpy, sys\n"
            f"sys.argv = [{module!r}] + {args!r}\n"
            "try:\n"
            f"    runpy.run_module({module!r}, run_name='__main__')\n"
            "except SystemExit as e:\n"
            "    heavy = [m for m in ('torch', 'mlx', 'cupy', 'tensorflow', 'transformers') if m in sys.modules]\n"
            "    print('EXIT', e.code, 'HEAVY', ','.join(heavy) or '-', file=sys.stderr)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=str(Path(__file__).resolve().parents[1]))
    last = p.stderr.strip().splitlines()
    assert last and last[-1] == "EXIT 2 HEAVY -", p.stderr[-800:]
    assert any(bad in line for line in last[:-1]), p.stderr[-800:]
