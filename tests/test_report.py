"""bench.report: reports built from result files the tests write (several machines, missing
backends, failed rows), checked against their inputs; A/B verdicts; bad files refused by name."""
from __future__ import annotations

import json

import pytest

from gapbench.core import published as pub
from gapbench.tools.report import command as rp
from gapbench.core.result import ERROR, OK, UNAVAILABLE, Record, RunWriter, read_document


def _env(gpu: str | None):
    return {"cpu": "Test CPU", "memory_bytes": 2**34, "time": "2026-11-22T00:00:00+00:00",
            "nvidia_smi": [{"name": gpu, "driver_version": "1.0", "memory.total": "1000"}] if gpu else []}


def _launch_run(path, gpu, raw_us, fw_us, dev_us):
    w = RunWriter(path, env=_env(gpu), run={"probe": "launch"})
    n = 50
    w.add(Record("launch", "native-cuda", "roundtrip", variant="add1", samples_s=[raw_us * 1e-6] * n, clock="host_wall"))
    w.add(Record("launch", "native-cuda", "cold", variant="add1", samples_s=[40e-6, 50e-6, 60e-6], clock="host_wall"))
    w.add(Record("launch", "native-cuda", "device_kernel", variant="add1", samples_s=[dev_us * 1e-6 * 100] * n, inner=100,
                 clock="device_events"))
    w.add(Record("launch", "torch-cuda", "roundtrip", variant="add", samples_s=[fw_us * 1e-6] * n, clock="host_wall"))
    w.add(Record("launch", "torch-mps", "all", status=UNAVAILABLE, reason="MPS needs macOS"))
    w.finish()
    return path


def _train_run(path, gpu, step_s, joules, failed=False):
    w = RunWriter(path, env=_env(gpu), run={"probe": "train"})
    lab = "gpt2-large[hf] torch-cuda fp32 b8x1024 pretrain"
    if failed:
        w.add(Record("train", "torch-cuda", "step", status=ERROR, reason="out of memory: CUDA out of memory", params={"label": lab}))
    else:
        w.add(Record("train", "torch-cuda", "step", samples_s=[step_s * (1 + 0.01 * i) for i in range(10)], clock="host_wall",
                     work={"items": 8192}, params={"label": lab, "item_unit": "tokens",
                                                   "energy": {"status": "ok", "joules_per_step": joules}}))
        for ph, frac in (("forward", 0.33), ("backward", 0.66), ("optimizer", 0.01)):
            w.add(Record("train", "torch-cuda", ph, samples_s=[step_s * frac] * 10, clock="host_wall", params={"label": lab}))
    w.finish()
    return path


def test_report_numbers_match_their_inputs(tmp_path):
    a = _launch_run(tmp_path / "a.json", "GPU A", raw_us=10.0, fw_us=18.0, dev_us=1.5)
    b = _train_run(tmp_path / "b.json", "GPU B", step_s=1.25, joules=600.0)
    c = _train_run(tmp_path / "c.json", "GPU C", 0, 0, failed=True)
    md, page = rp.build([str(a), str(b), str(c)], tmp_path / "rep")
    text = md.read_text()
    # launch: launch + wait 10 us raw, 18 us torch; the ladder's dispatch rung is the difference (8)
    assert "| GPU A (driver 1.0) | torch-cuda | 18 [18-18] | 8 | 10 [10-10] | 1.5 [1.5-1.5] | 1.80x |" in text
    assert "MPS needs macOS" in text  # a missing backend is a row saying why
    # training: median step of 1.25 * (1 + 0.01 i), i = 0..9 -> 1.25 * 1.045
    assert f"{1.25 * 1.045:.4g}" in text and "| GPU B (driver 1.0) | gpt2-large[hf] torch-cuda fp32 b8x1024 pretrain | 600 over" in text
    assert "out of memory" in text  # a failed row stays visible
    # the paper's numbers are there, marked as published
    for t, c_, f in pub.TABLE6:
        assert f"| {t} | {c_ * 1e3:.4g} | {f * 1e3:.4g} |" in text
    assert text.count("Published, not measured") >= 4
    assert "2.771" in text and "212.4" in text
    h = page.read_text()
    assert h.startswith("<!doctype html>") and "<table>" in h and "GPU A" in h


def test_html_links_its_figures_and_embeds_them_only_when_asked(tmp_path):
    pytest.importorskip("matplotlib")
    b = _train_run(tmp_path / "b.json", "GPU B", step_s=1.0, joules=1.0)
    md, page = rp.build([str(b)], tmp_path / "rep")
    h = page.read_text()
    assert "src='fig0-b-steps.png'" in h and "base64" not in h and (tmp_path / "rep" / "fig0-b-steps.png").exists()
    assert "](fig0-b-steps.png)" in md.read_text()
    assert rp.main([str(b), "--out", str(tmp_path / "one"), "--self-contained"]) == 0
    h1 = (tmp_path / "one" / "report.html").read_text()
    assert "src='data:image/png;base64," in h1 and len(h1) > len(h) + 10_000


def test_a_folder_stands_for_its_result_files(tmp_path):
    _train_run(tmp_path / "runs" / "b.json", "GPU B", step_s=1.0, joules=1.0)
    md, _ = rp.build([str(tmp_path / "runs")], tmp_path / "rep")
    assert "GPU B" in md.read_text()
    (tmp_path / "empty").mkdir()
    assert rp.main([str(tmp_path / "empty"), "--out", str(tmp_path / "r2")]) == 2


def _rec(samples):
    return Record("blas", "torch-cuda", "time", variant="", samples_s=samples, clock="device_events",
                  work={"bytes": 4096 * 4097 * 4.0}, params={"op": "gemv", "dtype": "fp32", "shape_text": "4096x4096"})


def test_compare_table_matches_rows_by_key(tmp_path):
    def run(path, scale):
        w = RunWriter(path, env=_env("G"), run={"probe": "blas"})
        w.add(_rec([scale * x * 1e-6 for x in (10, 10.1, 9.9, 10.2, 9.8) * 4]))
        w.finish()
        return str(path)

    md, _ = rp.build([run(tmp_path / "a.json", 1.0), run(tmp_path / "b.json", 0.5)], tmp_path / "rep", compare=True)
    row = next(line for line in md.read_text().splitlines() if line.startswith("| blas | torch-cuda"))
    # gapbench compare's ratio and verdict: device "G" has no noise model, so no verdict, and it says so
    assert "| 0.500 [" in row and "can't tell (uncalibrated on g " in row and "use --repeat" in row
    with pytest.raises(rp.SchemaError):
        rp.build([run(tmp_path / "a.json", 1.0)], tmp_path / "rep2", compare=True)


def test_bad_and_foreign_files_are_refused_by_name(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"schema": "gapbench.run", "schema_version": 0, "records": []}))
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"hello": 1}))
    for p, words in ((bad, "not valid JSON"), (old, "schema version 0"), (other, "not a gapbench run file")):
        assert rp.main([str(p), "--out", str(tmp_path / "r")]) == 2
        err = capsys.readouterr().err
        assert str(p) in err and words in err


def _blas_run(path, started, cases, finish=True):
    """A BLAS run on "GPU A": cases are (shape, variant, median us) rows of vjp_dw fp32."""
    w = RunWriter(path, env=_env("GPU A"), run={"probe": "blas", "started": started})
    for shape, variant, us in cases:
        w.add(Record("blas", "native-cuda", "time", variant=variant, samples_s=[us * 1e-6] * 20, clock="device_events",
                     params={"op": "vjp_dw", "dtype": "fp32", "shape_text": shape}, work={"bytes": 1e6}))
    if finish:
        w.finish()
    else:
        w.flush()  # cut short: what an interrupted run writes on its way out
    return path


def test_a_case_several_runs_measured_is_shown_from_the_newest(tmp_path):
    # run 1 was cut short inside 1024x16384 (only v2 timed there); run 2 measured that case whole
    old = _blas_run(tmp_path / "old.json", "2026-11-22T09:19:00+00:00",
                    [("16384x16384", "v3", 127.0), ("1024x16384", "v2", 26.0)], finish=False)
    new = _blas_run(tmp_path / "new.json", "2026-11-22T09:33:00+00:00",
                    [("1024x16384", "v2", 26.5), ("1024x16384", "v3", 18.0)])
    md, _ = rp.build([str(old), str(new)], tmp_path / "rep")
    text = md.read_text()
    rows = [line for line in text.splitlines() if "| vjp_dw |" in line]
    assert len(rows) == 2, rows  # 16384x16384 from the old run, 1024x16384 once, from the new one
    assert any("16384x16384" in r and "127 [127-127]" in r and "2026-11-22 09:19" in r for r in rows)
    assert any("1024x16384" in r and "hand-written v3" in r and "18 [18-18]" in r and "2026-11-22 09:33" in r for r in rows)
    assert "1 older case(s) left out" in text
    assert "2026-11-22 09:19 (unfinished: no finish time)" in text and "2026-11-22 09:33 (unfinished" not in text


def test_report_of_the_committed_gpu_results(tmp_path):
    """The report over real result files in docs/results builds, names the code that produced each
    (source commit and content hash) and shows their headline numbers, computed here from the
    files' raw samples."""
    import statistics
    from pathlib import Path

    from gapbench.core import reportkit as rk

    root = Path(__file__).resolve().parents[1] / "docs" / "results"
    files = [root / "launch-h200-2026-11-25-default.json.gz", root / "blas-h200-2026-11-25-default.json.gz"]
    if not all(f.exists() for f in files):
        pytest.skip("docs/results not in this checkout")
    md, _ = rp.build([str(f) for f in files], tmp_path / "rep")
    text = md.read_text()
    assert "NVIDIA H200" in text and "torch-cuda" in text
    for f in files:
        assert read_document(f)["env"]["source_hash"][:12] in text
    launch = read_document(files[0])["records"]
    rt = next(r for r in launch if (r["backend"], r["variant"], r["metric"]) == ("native-cuda", "null", "roundtrip"))
    med = statistics.median(rt["samples_s"]) * 1e6
    row = next(line for line in text.splitlines() if "| native-cuda | null |" in line)
    assert f"| {rk.num(med)} [" in row, (row, med)


def test_html_page_draws_its_plots_in_headless_chromium(tmp_path):
    """Open the HTML page in Debian's chromium, headless, screenshot it, and find the plot's
    colours in the screenshot: the embedded figures are really drawn, not just present."""
    import shutil
    import subprocess

    pytest.importorskip("matplotlib")
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        pytest.skip("no chromium here (Debian: apt-get install chromium; .ci/run installs it)")
    import matplotlib.image as mpimg
    import numpy as np

    b = _train_run(tmp_path / "b.json", "GPU B", step_s=1.0, joules=1.0)
    _, page = rp.build([str(b)], tmp_path / "rep")
    shot = tmp_path / "shot.png"
    p = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--screenshot={shot}",
                        "--window-size=1200,6000", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 10_000, p.stderr[-2000:]
    img = mpimg.imread(str(shot))[..., :3]
    img = (img * 255).astype(int) if img.max() <= 1.0 else img.astype(int)
    # the step figure's bars: matplotlib's tab:blue (31,119,180) forward and tab:orange (255,127,14) backward
    blue = (np.abs(img - np.array([31, 119, 180])).sum(axis=2) < 30).sum()
    orange = (np.abs(img - np.array([255, 127, 14])).sum(axis=2) < 30).sum()
    assert blue > 2000 and orange > 2000, (blue, orange)
    # and with the figures removed from the page, those colours are gone: the test can fail
    bare = page.with_name("bare.html")
    bare.write_text(page.read_text().split("<h3>")[0] + "</body></html>")
    shot2 = tmp_path / "shot2.png"
    subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--screenshot={shot2}",
                    "--window-size=1200,6000", bare.as_uri()], capture_output=True, text=True, timeout=120)
    img2 = mpimg.imread(str(shot2))[..., :3]
    img2 = (img2 * 255).astype(int) if img2.max() <= 1.0 else img2.astype(int)
    assert (np.abs(img2 - np.array([31, 119, 180])).sum(axis=2) < 30).sum() < 50


def test_table1_view_shows_measured_peak_and_entered_price(tmp_path, capsys):
    w = RunWriter(tmp_path / "blas.json", env=_env("GPU Z"), run={"probe": "blas"})
    w.finish(roofline={"cuda": {"bytes_per_s": {"value": 4e12, "from": "copy"}, "fp32": {"value": 5.25e13, "from": "cublas"}}})
    assert rp.main([str(tmp_path / "blas.json"), "--out", str(tmp_path / "r"), "--price", "GPU Z=1,234"]) == 0
    text = (tmp_path / "r" / "report.md").read_text()
    assert "| fp32 52.5 | 1,234 (entered) |" in text
    assert rp.main([str(tmp_path / "blas.json"), "--out", str(tmp_path / "r"), "--price", "GPU Z=cheap"]) == 2
    assert "NAME=USD" in capsys.readouterr().err


def test_bert_matrix_in_the_seeds_layout_beside_its_published_table(tmp_path):
    w = RunWriter(tmp_path / "s.json", env=_env("GPU S"), run={"probe": "suite"})
    case = {"experiment": "bert", "model": "bert-base-cased", "mode": "training", "batch_size": 16, "seq_len": 128}
    w.add(Record("suite", "torch-cuda", "step", variant="bert", samples_s=[0.035] * 100, params={"case": case}))
    w.add(Record("suite", "torch-cuda", "step", variant="bert", status=ERROR, reason="out of memory: x",
                 params={"case": dict(case, batch_size=256), "oom": True}))
    w.finish()
    md, _ = rp.build([str(tmp_path / "s.json")], tmp_path / "rep")
    text = md.read_text()
    assert "| training | 16 | 128 | 3.5s | 2m 29s | 43s | 12s | 31s |" in text
    assert "| training | 256 | 128 | - | 50m 10s | 18m 1s | - | - |" in text


def test_training_launch_cost_is_an_estimate_from_measured_parts(tmp_path):
    w = RunWriter(tmp_path / "l.json", env=_env("GPU K"), run={"probe": "launch"})
    w.add(Record("launch", "native-cuda", "stream_b2b", variant="null", samples_s=[5e-6 * 100] * 20, inner=100,
                 clock="device_events"))
    w.finish()
    t = RunWriter(tmp_path / "t.json", env=_env("GPU K"), run={"probe": "train"})
    t.add(Record("train", "torch-cuda", "step", samples_s=[0.1] * 5, params={"label": "x", "kernels_per_step": 2000, "kernel_time_per_step_s": 0.08}))
    t.finish()
    md, _ = rp.build([str(tmp_path / "l.json"), str(tmp_path / "t.json")], tmp_path / "rep")
    assert "| 0.08 | 2000 | 0.01 (estimate) |" in md.read_text()  # 2000 kernels x 5 us


def test_machines_table_names_the_code_each_run_measured():
    """Provenance in the report: commit and content hash (12 digits), the dirty flag; an old file
    that carries only its checkout's commit says it has no content hash."""
    new = rp._source({"source_commit": "0123456789abcdef", "source_hash": "fedcba9876543210ff", "dirty": True})
    assert new == "0123456789ab fedcba987654 dirty"
    clean = rp._source({"source_commit": "0123456789abcdef", "source_hash": "fedcba9876543210ff", "dirty": False})
    assert clean == "0123456789ab fedcba987654"
    assert rp._source({"git_sha_checkout": "abc123-dirty"}) == "abc123-dirty (checkout, no content hash)"
    assert rp._source({}) == "-"


def test_the_report_shows_each_runs_conditions(tmp_path):
    w = RunWriter(tmp_path / "a.json", env=_env("G"), run={"probe": "blas"})
    for cache in ("rotated", "rotated", "l2-resident"):
        w.add(Record("blas", "torch-cuda", "time", variant="", samples_s=[1e-5] * 5, clock="device_events",
                     params={"op": "gemv", "dtype": "fp32", "shape_text": cache},
                     conditions={"cache": cache, "data": "randn", "process": "paired"}))
    w.finish()
    md, _ = rp.build([str(tmp_path / "a.json")], tmp_path / "rep")
    text = md.read_text()
    assert "| a.json | blas | cache rotated, data randn, process paired | 2 |" in text
    assert "| a.json | blas | cache l2-resident, data randn, process paired | 1 |" in text
