"""gapbench compare on synthetic result files with known distributions: classification, its
false-alarm and detection rates, refusal of unequal conditions, the CI gate's exit code, devices,
and a corrupt input. No test times anything."""
import gzip
import json

import numpy as np
import pytest

from gapbench.benchmarks.compare import command
from gapbench.core import compare as cmp
from gapbench.core.result import OK, Record, RunWriter, load_run


def _row(op, samples, cache="rotated", backend="native-cuda"):
    return Record(probe="blas", backend=backend, variant="gapbench", metric="time", status=OK, samples_s=list(samples),
                  params={"op": op, "dtype": "fp16", "shape_text": "1024x1024"}, work={"bytes": 4e6},
                  conditions={"cache": cache, "data": "randn", "clock": "device events, gated", "process": "paired"})


def _write(path, rows, device="NVIDIA H100 80GB HBM3", roof=None):
    w = RunWriter(path, env={"nvidia_smi": [{"name": device, "driver_version": "580"}]},
                  run={"probe": "blas", **({"roofline": roof} if roof else {})}, overhead=None)
    for r in rows:
        w.add(r)
    w.finish()
    return path


def _lognormal(rng, scale, sigma=0.01, n=60):
    return scale * 1e-5 * rng.lognormal(0, sigma, n)


def test_classification_of_known_changes(tmp_path):
    rng = np.random.default_rng(0)
    a = _write(tmp_path / "a.json", [_row("same", _lognormal(rng, 1)), _row("slow", _lognormal(rng, 1)),
                                     _row("fast", _lognormal(rng, 1)), _row("noisy", _lognormal(rng, 1, 0.3, 8))])
    b = _write(tmp_path / "b.json", [_row("same", _lognormal(rng, 1)), _row("slow", _lognormal(rng, 1.10)),
                                     _row("fast", _lognormal(rng, 0.90)), _row("noisy", _lognormal(rng, 1.03, 0.3, 8))])
    by = {c.key[4].split()[0]: c for c in cmp.compare_runs(load_run(a), load_run(b))}
    assert by["same"].verdict == cmp.SAME and by["slow"].verdict == cmp.SLOWER and by["fast"].verdict == cmp.FASTER
    assert by["noisy"].verdict == cmp.AMBIGUOUS
    assert by["slow"].lo <= 1.10 * np.exp(0) and by["slow"].ratio == pytest.approx(1.10, rel=0.01)


def test_false_alarms_and_detection_on_synthetic_runs(tmp_path):
    """200 rows at 1% noise: A/A calls at most 2% of them faster or slower; a 5% slowdown injected
    into every row is called slower in at least 95% of them."""
    rng = np.random.default_rng(1)
    scales = rng.uniform(0.5, 5, 200)
    a = _write(tmp_path / "a.json", [_row(f"op{i}", _lognormal(rng, s)) for i, s in enumerate(scales)])
    aa = _write(tmp_path / "aa.json", [_row(f"op{i}", _lognormal(rng, s)) for i, s in enumerate(scales)])
    slow = _write(tmp_path / "slow.json", [_row(f"op{i}", _lognormal(rng, 1.05 * s)) for i, s in enumerate(scales)])
    n_aa = cmp.counts(cmp.compare_runs(load_run(a), load_run(aa)))
    n_slow = cmp.counts(cmp.compare_runs(load_run(a), load_run(slow)))
    assert n_aa[cmp.FASTER] + n_aa[cmp.SLOWER] <= 0.02 * 200, n_aa
    assert n_slow[cmp.SLOWER] >= 0.95 * 200, n_slow


def test_rows_under_different_conditions_are_not_compared(tmp_path):
    rng = np.random.default_rng(2)
    a = _write(tmp_path / "a.json", [_row("gemv", _lognormal(rng, 1), cache="rotated")])
    b = _write(tmp_path / "b.json", [_row("gemv", _lognormal(rng, 0.6), cache="l2-resident")])
    (c,) = cmp.compare_runs(load_run(a), load_run(b))
    assert c.verdict == cmp.NOT_COMPARABLE and c.why.startswith("cache: rotated vs l2-resident") and c.ratio is None


def test_the_gate_exits_1_with_a_line_per_regressed_row(tmp_path, capsys):
    rng = np.random.default_rng(3)
    a = _write(tmp_path / "a.json", [_row("x", _lognormal(rng, 1)), _row("y", _lognormal(rng, 1))])
    b = _write(tmp_path / "b.json", [_row("x", _lognormal(rng, 1.2)), _row("y", _lognormal(rng, 1.03))])
    assert command.main([str(a), str(b), "--fail-if", "slower>5%", "--json", str(tmp_path / "c.json"),
                         "--markdown", str(tmp_path / "c.md")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("slower by more than 5%: blas x fp16") and "y fp16" not in err[0]
    doc = json.loads((tmp_path / "c.json").read_text())
    # the 3% move lies inside the calibrated between-run margin (--margin auto); within-run alone it is slower
    assert doc["comparisons"][0]["counts"]["slower"] == 1 and "| blas x fp16" in (tmp_path / "c.md").read_text()
    assert command.main([str(a), str(b), "--margin", "none", "--json", str(tmp_path / "d.json")]) == 0
    assert json.loads((tmp_path / "d.json").read_text())["comparisons"][0]["counts"]["slower"] == 2
    assert command.main([str(a), str(b), "--fail-if", "slower>25%"]) == 0


def test_different_devices_are_said_and_rows_shown_against_their_own_ceiling(tmp_path, capsys):
    rng = np.random.default_rng(4)
    roof_a = {"cuda": {"bytes_per_s": {"value": 3.0e12, "from": "copy"}}}
    roof_b = {"cuda": {"bytes_per_s": {"value": 4.3e12, "from": "copy"}}}
    a = _write(tmp_path / "a.json", [_row("gemv", _lognormal(rng, 1))], roof=roof_a)
    b = _write(tmp_path / "b.json", [_row("gemv", _lognormal(rng, 0.7))], "NVIDIA H200", roof=roof_b)
    (c,) = cmp.compare_runs(load_run(a), load_run(b))
    assert c.verdict == cmp.FASTER
    # same efficiency, faster memory: each side near the same fraction of its own ceiling
    assert c.of_ceiling["A"] == pytest.approx(4e6 / (1e-5 * 3.0e12), rel=0.02)
    assert c.of_ceiling["B"] == pytest.approx(4e6 / (0.7e-5 * 4.3e12), rel=0.02)
    assert command.main([str(a), str(b)]) == 0
    assert "different devices: NVIDIA H100 80GB HBM3 -> NVIDIA H200" in capsys.readouterr().out


@pytest.mark.parametrize("content", [b"{not json", gzip.compress(b'{"schema": "something else"}'), b""])
def test_a_corrupt_or_foreign_file_is_one_clear_line(tmp_path, capsys, content):
    rng = np.random.default_rng(5)
    a = _write(tmp_path / "a.json", [_row("x", _lognormal(rng, 1))])
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(content)
    assert command.main([str(a), str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.json.gz" in err[0]


@pytest.mark.parametrize("args,msg", [(["--fail-if", "worse"], "slower>N%"), (["--min-effect", "2"], "minimum effect")])
def test_bad_options_are_clear_errors(tmp_path, capsys, args, msg):
    rng = np.random.default_rng(6)
    a = _write(tmp_path / "a.json", [_row("x", _lognormal(rng, 1))])
    assert command.main([str(a), str(a), *args]) == 2
    assert msg in capsys.readouterr().err


def test_history_marks_the_run_where_a_row_turned_slower_and_stayed(tmp_path):
    """Five runs of two rows: x is steady; y turns 10% slower at run 3 and stays; z has a one-off
    slow run 2 and recovers (not marked)."""
    from gapbench.benchmarks.compare import history

    rng = np.random.default_rng(7)
    folder = tmp_path / "runs"
    folder.mkdir()
    for i, (y, z) in enumerate([(1, 1), (1, 1), (1, 1.2), (1.1, 1), (1.1, 1)]):
        _write(folder / f"run{i}.json", [_row("x", _lognormal(rng, 1)), _row("y", _lognormal(rng, y)),
                                         _row("z", _lognormal(rng, z))])
        doc = json.loads((folder / f"run{i}.json").read_text())
        doc["run"]["started"] = f"2026-11-2{i}T00:00:00+00:00"
        (folder / f"run{i}.json").write_text(json.dumps(doc))
    (folder / "notes.json").write_text("{}")  # not a result file: listed as not read, nothing lost
    assert history.BENCHMARK.main([str(folder), "--out", str(tmp_path / "h")]) == 0
    runs = sorted((load_run(p) for p in folder.glob("run*.json")), key=lambda r: r.run["started"])
    marked = {k[4].split()[0]: i for k, i in history.regressions(runs).items()}
    assert marked == {"y": 3}
    text = (tmp_path / "h" / "history.md").read_text()
    assert "**blas y fp16 1024x1024" in text and "turned slower at run 3" in text and "notes.json" in text
    assert (tmp_path / "h" / "blas-nvidia-h100-80gb-hbm3.png").stat().st_size > 1000


def test_several_processes_per_side_give_the_interval_between_processes(tmp_path):
    """Each run is a fresh process with its own speed (a 5% spread between processes) and 0.5%
    noise inside. Single runs a few percent apart look faster or slower inside their tight
    within-run interval; with three processes a side, the interval covers the spread and the
    verdict is no longer a false alarm."""
    rng = np.random.default_rng(8)
    factors_a, factors_b = [1.0, 1.05, 0.95], [1.04, 0.97, 1.01]
    a = [load_run(_write(tmp_path / f"a{i}.json", [_row("x", _lognormal(rng, f, 0.005))])) for i, f in enumerate(factors_a)]
    b = [load_run(_write(tmp_path / f"b{i}.json", [_row("x", _lognormal(rng, f, 0.005))])) for i, f in enumerate(factors_b)]
    (single,) = cmp.compare_runs(a[0], b[0])
    assert single.verdict == cmp.SLOWER and single.covers == "within-run"
    (pooled,) = cmp.compare_groups(a, b)
    assert pooled.covers == "between processes (3 + 3)" and pooled.verdict in (cmp.SAME, cmp.AMBIGUOUS)
    assert pooled.lo < 1 < pooled.hi


def test_an_injected_slowdown_is_found_and_a_bad_injection_refused(tmp_path):
    """bench.launch --inject-delay-us (test only) makes torch-cpu's ops 200 us slower: compare calls
    its launch + sync row slower; the records say the delay was injected."""
    pytest.importorskip("torch")
    from conftest import run_module

    base, slow = tmp_path / "base.json", tmp_path / "slow.json"
    common = ["--quick", "--backends", "torch-cpu", "--no-progress", "--no-pin"]
    for out, extra in ((base, []), (slow, ["--inject-delay-us", "torch-cpu=200"])):
        p = run_module("bench.launch", *common, *extra, "--out", str(out))
        assert p.returncode == 0, p.stderr[-2000:]
    rows = {c.key: c for c in cmp.compare_runs(load_run(base), load_run(slow))}
    rt = next(c for k, c in rows.items() if k[1] == "torch-cpu" and k[3] == "roundtrip")
    assert rt.verdict == cmp.SLOWER and "injected delay (test only)" in rt.b.op
    p = run_module("bench.launch", *common, "--inject-delay-us", "native-cpu=5", "--out", str(tmp_path / "x.json"))
    assert p.returncode == 2 and "native backends have no hook" in p.stderr


def test_a_between_run_shift_is_absorbed_by_the_margin_and_a_larger_slowdown_is_not(tmp_path):
    """Two runs whose rows all moved 4% between processes (1% noise within each): within-run
    intervals call most of them slower; with a 5.6% between-run margin none is; a 15% slowdown is
    still called slower. A per-metric margin applies to its metric only."""
    rng = np.random.default_rng(3)
    scales = rng.uniform(0.5, 5, 100)
    a = load_run(_write(tmp_path / "a.json", [_row(f"op{i}", _lognormal(rng, s)) for i, s in enumerate(scales)]))
    shifted = load_run(_write(tmp_path / "b.json", [_row(f"op{i}", _lognormal(rng, 1.04 * s)) for i, s in enumerate(scales)]))
    slow = load_run(_write(tmp_path / "c.json", [_row(f"op{i}", _lognormal(rng, 1.15 * s)) for i, s in enumerate(scales)]))
    m = float(np.log(1.056))
    assert cmp.counts(cmp.compare_runs(a, shifted))[cmp.SLOWER] >= 90
    with_margin = cmp.compare_runs(a, shifted, margin=m)
    assert cmp.counts(with_margin)[cmp.SLOWER] == 0 and "between-run margin +-5.6%" in with_margin[0].covers
    assert cmp.counts(cmp.compare_runs(a, slow, margin=m))[cmp.SLOWER] == 100
    assert cmp.counts(cmp.compare_runs(a, shifted, margin={"*": 0.0, "time": m}))[cmp.SLOWER] == 0
    assert cmp.counts(cmp.compare_runs(a, shifted, margin={"*": m, "other": 0.0}))[cmp.SLOWER] == 0
    assert cmp.counts(cmp.compare_runs(a, shifted, margin={"*": 0.0, "other": m}))[cmp.SLOWER] >= 90
    with pytest.raises(ValueError, match="margin must be >= 0"):
        cmp.compare_runs(a, shifted, margin=-0.1)


def test_the_shipped_margins_come_from_committed_calibration_runs_and_compare_uses_them(tmp_path):
    """compare_margins.json names its generator and calibration files, which are committed; the CLI
    applies a benchmark's margin by default (--margin auto) and says so, and takes none or N%."""
    from pathlib import Path

    from conftest import run_module

    cal = cmp.calibrated_margins()
    root = Path(__file__).resolve().parents[1]
    assert {"blas", "launch"} <= set(cal)
    for probe, entry in cal.items():
        assert entry["margin_log"] > 0 and (root / entry["generator"]).is_file()
        assert all((root / "docs/results/calib" / f).is_file() for f in entry["sources"]), entry["sources"]
    rng = np.random.default_rng(4)
    a = _write(tmp_path / "a.json", [_row("x", _lognormal(rng, 1))])
    b = _write(tmp_path / "b.json", [_row("x", _lognormal(rng, 1.04))])
    for margin, want in (("auto", "calibrated"), ("none", "within-run noise only"), ("10%", "given with --margin")):
        md = tmp_path / f"{margin.strip('%')}.md"
        p = run_module("gapbench", "compare", str(a), str(b), "--margin", margin, "--markdown", str(md))
        assert p.returncode == 0 and want in md.read_text(), p.stderr
        # the file names the command that generated it, as typed
        assert md.read_text().splitlines()[0] == (f"Generated by `gapbench compare {a} {b} --margin {margin} "
                                                  f"--markdown {md}`; do not edit by hand.")
    p = run_module("gapbench", "compare", str(a), str(b), "--margin", "wide")
    assert p.returncode == 2 and "give auto, none, or a percentage" in p.stderr


def test_a_compute_bound_row_is_held_against_its_machines_flop_ceiling_not_the_copy(tmp_path):
    """Across machines each row is a fraction of its own roofline: min(FLOP ceiling, intensity x
    copy bandwidth). A GEMM-like row (high intensity) at its machine's GEMM rate is 100% on both
    sides, whatever the copy bandwidths."""
    rng = np.random.default_rng(5)

    def gemm(scale):
        r = _row("gemm", _lognormal(rng, scale))
        r.work = {"flops": 1e9, "bytes": 1e6}
        return r

    roof = lambda bw, f: {"cuda": {"bytes_per_s": {"value": bw}, "fp16": {"value": f}}}  # noqa: E731
    a = _write(tmp_path / "a.json", [gemm(1)], roof=roof(3.0e12, 1e14))
    b = _write(tmp_path / "b.json", [gemm(0.5)], "NVIDIA H200", roof=roof(4.3e12, 2e14))
    (c,) = cmp.compare_runs(load_run(a), load_run(b))
    assert c.of_ceiling["A"] == pytest.approx(1.0, rel=0.03) and c.of_ceiling["B"] == pytest.approx(1.0, rel=0.03)
