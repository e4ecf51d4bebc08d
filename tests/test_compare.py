"""gapbench compare on synthetic result files with known distributions: classification, its
false-alarm and detection rates, refusal of unequal conditions, the CI gate's exit code, devices,
and a corrupt input. No test times anything."""
import gzip
import math
import json

import numpy as np
import pytest

from gapbench.tools.compare import command
from gapbench.core import compare as cmp
from gapbench.core.result import OK, Record, RunWriter, load_run
from gapbench.core.shifts import judged_shifts


def _row(op, samples, cache="rotated", backend="native-cuda"):
    return Record(probe="blas", backend=backend, variant="gapbench", metric="time", status=OK, samples_s=list(samples),
                  params={"op": op, "dtype": "fp16", "shape_text": "1024x1024"}, work={"bytes": 4e6},
                  conditions={"cache": cache, "data": "randn", "clock": "device events, gated", "process": "paired"})


def _write(path, rows, device="NVIDIA H100 80GB HBM3", roof=None, host=None, config=None):
    env = {"nvidia_smi": [{"name": device, "driver_version": "580"}] if device else [], "cpu": "Test CPU",
           **({"host_id": host} if host else {})}
    w = RunWriter(path, env=env, run={"probe": "blas", **({"roofline": roof} if roof else {}),
                                      **({"config": config} if config else {})}, overhead=None)
    w.extend(rows)
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
    assert by["noisy"].verdict == cmp.CANT_TELL
    assert by["slow"].lo <= 1.10 * np.exp(0) and by["slow"].ratio == pytest.approx(1.10, rel=0.01)


def test_short_rows_left_cant_tell_point_to_more_processes_where_the_runs_could_have_them(tmp_path):
    # rows of 2-5 us, 8% noise: can't tell one run a side; a benchmark whose configuration has
    # `processes` (bench.blas) at 1 on both sides gets the note, counting those rows only
    rng = np.random.default_rng(5)
    rows = lambda: [_row(f"s{i}", _lognormal(rng, 0.2 + 0.1 * i, 0.08, 12)) for i in range(3)] + \
        [_row("long", _lognormal(rng, 50, 0.08, 12))]  # noqa: E731
    one = {"processes": 1}
    a, b = (load_run(_write(tmp_path / f"{n}.json", rows(), config=one)) for n in "ab")
    changes = cmp.compare_runs(a, b)
    assert sum(c.verdict == cmp.CANT_TELL for c in changes) == 4
    hint = [n for n in cmp.notes(a, b, changes) if "--processes 3" in n]
    assert len(hint) == 1 and hint[0].startswith("3 of the can't-tell rows run under 10 us")
    for cfg in ({"processes": 3}, None):  # runs that had them, or a benchmark without the option
        c = load_run(_write(tmp_path / "c.json", rows(), config=cfg))
        assert not any("--processes" in n for n in cmp.notes(a, c, cmp.compare_runs(a, c)))


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


def test_rows_under_different_parities_say_so_and_what_to_do(tmp_path):
    """A run of bench.blas --parity balanced against an as-drawn one: every gated row not comparable,
    and one note names the field, both values as the options spell them, and the fix."""
    rng = np.random.default_rng(2)
    rows = [_row(f"op{i}", _lognormal(rng, 1)) for i in range(3)]
    a = load_run(_write(tmp_path / "a.json", rows))
    padded = [_row(f"op{i}", _lognormal(rng, 1)) for i in range(3)]
    for r in padded[:2]:
        r.conditions["parity"] = "balanced"
    b = load_run(_write(tmp_path / "b.json", padded))
    changes = cmp.compare_runs(a, b)
    assert [c.verdict == cmp.NOT_COMPARABLE for c in changes] == [True, True, False]
    line, = [n for n in cmp.notes(a, b, changes) if "not comparable" in n]
    assert line.startswith("2 row(s) not comparable, their conditions differ: parity: as-drawn vs balanced")
    assert line.endswith("run both sides with the same --parity")


def test_the_gate_exits_1_with_a_line_per_regressed_row(tmp_path, capsys):
    rng = np.random.default_rng(3)
    a = _write(tmp_path / "a.json", [_row("x", _lognormal(rng, 1)), _row("y", _lognormal(rng, 1))])
    b = _write(tmp_path / "b.json", [_row("x", _lognormal(rng, 1.2)), _row("y", _lognormal(rng, 1.045))])
    assert command.main([str(a), str(b), "--margin", "2%", "--fail-if", "slower>5%", "--json", str(tmp_path / "c.json"),
                         "--markdown", str(tmp_path / "c.md")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("slower by more than 5%: blas x fp16") and "y fp16" not in err[0]
    assert "[1.1" in err[0]  # the row's interval is named
    doc = json.loads((tmp_path / "c.json").read_text())
    # the 4.5% move, widened by a 2% margin on each side, straddles 3%; within-run alone it is slower
    assert doc["comparisons"][0]["counts"]["slower"] == 1 and "| x | fp16 | 1024x1024 |" in (tmp_path / "c.md").read_text()
    assert command.main([str(a), str(b), "--margin", "none", "--json", str(tmp_path / "d.json")]) == 0
    assert json.loads((tmp_path / "d.json").read_text())["comparisons"][0]["counts"]["slower"] == 2
    assert command.main([str(a), str(b), "--margin", "2%", "--fail-if", "slower>25%"]) == 0


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
    # a --quick run's "ceiling" set by a 6 us copy is bound by overhead: no fraction of it is shown
    roof_q = {"cuda": {"bytes_per_s": {"value": 1.4e12, "from": "copy", "time_s": 6e-6}}}
    q = _write(tmp_path / "q.json", [_row("gemv", _lognormal(rng, 0.7))], "NVIDIA H200", roof=roof_q)
    (c,) = cmp.compare_runs(load_run(a), load_run(q))
    assert c.of_ceiling == {}
    from gapbench.core.reportkit import peaks_by_machine

    assert [v for m in peaks_by_machine([load_run(a), load_run(q)]).values() for v in m.values()] == [3.0e12]


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
    from gapbench.tools.compare import history

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
    assert history.BENCHMARK.main([str(folder), "--out", str(tmp_path / "h"), "--margin", "0.5%"]) == 0
    runs = sorted((load_run(p) for p in folder.glob("run*.json")), key=lambda r: r.run["started"])
    marked = {k[4].split()[0]: i for k, i in history.regressions(runs, noise=cmp.noise_for(0.005)).items()}
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
    assert pooled.covers == "between processes (3 + 3)" and pooled.verdict in (cmp.SAME, cmp.CANT_TELL)
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


def test_the_cli_leads_with_the_answer_and_says_what_its_noise_is(tmp_path):
    """The summary comes first; --margin auto (the noise model), none and N% each say what they are;
    a CPU run, where no model was fitted, gets no verdict and so never fails the gate."""
    from conftest import run_module

    rng = np.random.default_rng(4)
    a = _write(tmp_path / "a.json", [_row("x", _lognormal(rng, 1))])
    b = _write(tmp_path / "b.json", [_row("x", _lognormal(rng, 1.04))])
    for margin, want in (("auto", "per-row noise model"), ("none", "the noise within the runs only"),
                         ("10%", "+-10% for every row")):
        md = tmp_path / f"{margin.strip('%')}.md"
        p = run_module("gapbench", "compare", str(a), str(b), "--margin", margin, "--markdown", str(md))
        assert p.returncode == 0 and want in md.read_text(), p.stderr
        # the file names the command that generated it, as typed
        assert md.read_text().splitlines()[0] == (f"Generated by `gapbench compare {a} {b} --margin {margin} "
                                                  f"--markdown {md}`; do not edit by hand.")
    out = run_module("gapbench", "compare", str(a), str(b)).stdout.splitlines()
    assert out[1].startswith("1 rows: ") and "can't tell" in out[1] or "slower" in out[1]
    p = run_module("gapbench", "compare", str(a), str(b), "--margin", "wide")
    assert p.returncode == 2 and "give auto, none, or a percentage" in p.stderr
    cpu_a = _write(tmp_path / "ca.json", [_row("x", _lognormal(rng, 1))], device="")
    cpu_b = _write(tmp_path / "cb.json", [_row("x", _lognormal(rng, 1.3))], device="")
    (c,) = cmp.compare_runs(load_run(cpu_a), load_run(cpu_b), model=_model())
    assert c.verdict == cmp.CANT_TELL and "uncalibrated on cpu:" in c.why and "--repeat" in c.why
    assert command.main([str(cpu_a), str(cpu_b), "--fail-if", "slower>5%"]) == 0


def test_newcomer_errors_are_one_line(tmp_path, capsys):
    """Files with no benchmark in common, and an output folder that cannot be written, are one
    line and exit 2, before any table is printed."""
    import os

    rng = np.random.default_rng(9)
    a = _write(tmp_path / "a.json", [_row("x", _lognormal(rng, 1))])
    other = tmp_path / "l.json"
    w = RunWriter(other, env={}, run={"probe": "launch"}, overhead=None)
    w.add(Record(probe="launch", backend="native-cuda", metric="roundtrip", samples_s=[1e-5, 1e-5]))
    w.finish()
    assert command.main([str(a), str(other)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no benchmark in common" in err[0]
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o500)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("running as a user who can write a read-only folder")
        assert command.main([str(a), str(a), "--markdown", str(ro / "c.md")]) == 2
        cap = capsys.readouterr()
        assert len(cap.err.strip().splitlines()) == 1 and "--markdown" in cap.err and cap.out == ""
    finally:
        os.chmod(ro, 0o700)


def _model(scale=0.003, device="h100-80gb-hbm3", scope="across", groups=30, rms=None):
    """A noise model whose every BLAS row class has this between-run scale."""
    from gapbench.core.noise import NoiseModel

    cls = {"blas/*/*/gated/many/*": {"n": 900, "groups": groups, "rms": rms or scale, "q99": 2.6 * scale,
                                      "scale": scale}}
    return NoiseModel({"devices": {device: {scope: cls}}})


def test_the_noise_model_calls_same_finds_a_5pct_slowdown_and_keeps_false_alarms_rare(tmp_path):
    """200 rows at 0.5% noise within each run and a 0.3% between-run shift (the model's scale):
    A/A is mostly "same" with at most 1% faster or slower; a 5% slowdown is found in >= 95%."""
    rng = np.random.default_rng(11)
    scales = rng.uniform(0.5, 5, 200)
    shift = lambda: np.exp(rng.normal(0, 0.003))  # noqa: E731
    a = load_run(_write(tmp_path / "a.json", [_row(f"op{i}", _lognormal(rng, s, 0.005)) for i, s in enumerate(scales)]))
    aa = load_run(_write(tmp_path / "aa.json", [_row(f"op{i}", _lognormal(rng, s * shift(), 0.005))
                                                for i, s in enumerate(scales)]))
    slow = load_run(_write(tmp_path / "s.json", [_row(f"op{i}", _lognormal(rng, 1.05 * s * shift(), 0.005))
                                                 for i, s in enumerate(scales)]))
    m = _model(0.003)
    n_aa, n_slow = cmp.counts(cmp.compare_runs(a, aa, model=m)), cmp.counts(cmp.compare_runs(a, slow, model=m))
    assert n_aa[cmp.SAME] >= 0.8 * 200 and n_aa[cmp.FASTER] + n_aa[cmp.SLOWER] <= 2, n_aa
    assert n_slow[cmp.SLOWER] >= 0.95 * 200, n_slow
    # a wider class: the same runs can no longer be called same (and still raise no alarm)
    n_wide = cmp.counts(cmp.compare_runs(a, aa, model=_model(0.03)))
    assert n_wide[cmp.CANT_TELL] == 200
    (c,) = [x for x in cmp.compare_runs(a, aa, model=m) if x.key[4].startswith("op0 ")]
    assert "noise model" in c.covers and "across starts" in c.note


def test_one_start_uses_the_within_start_scale(tmp_path):
    """Two runs that record one boot of one host are judged by the within-start classes; without
    the ids (or another boot) by the across-start ones."""
    from gapbench.core.noise import NoiseModel

    rng = np.random.default_rng(12)
    host = {"boot_id": "b1", "machine_id": "m1", "runs_this_boot": 3}
    rows = lambda f: [_row("x", _lognormal(rng, f, 0.002))]  # noqa: E731
    a = load_run(_write(tmp_path / "a.json", rows(1.0), host=host))
    b = load_run(_write(tmp_path / "b.json", rows(1.0), host=host))
    c = load_run(_write(tmp_path / "c.json", rows(1.0), host=dict(host, boot_id="b2")))
    doc = {"devices": {"h100-80gb-hbm3": {"within": _model(0.002).devices["h100-80gb-hbm3"]["across"],
                                          "across": _model(0.05).devices["h100-80gb-hbm3"]["across"]}}}
    m = NoiseModel(doc)
    assert cmp.same_start(a, b) and not cmp.same_start(a, c)
    assert cmp.compare_runs(a, b, model=m)[0].verdict == cmp.SAME
    (x,) = cmp.compare_runs(a, c, model=m)
    assert x.verdict == cmp.CANT_TELL and "another machine start (boot)" in " ".join(cmp.notes(a, c, [x]))


def _event_pair_runs(tmp_path, seed: int, **conditions):
    """Two runs of a 5 us and a 500 us row, B 1.3x slower, whose empty event pair went from 1.3 to 2.9 us."""
    rng = np.random.default_rng(seed)

    def rows(ev, f):
        out = []
        for name, t in (("short", 0.5), ("long", 50.0)):  # 5 us and 500 us
            r = _row(name, _lognormal(rng, t * f, 0.002))
            r.conditions.update(event_pair_s=ev, **conditions)
            out.append(r)
        return out

    return (load_run(_write(tmp_path / "a.json", rows(1.3e-6, 1.0))),
            load_run(_write(tmp_path / "b.json", rows(2.9e-6, 1.3))))


def test_a_moved_event_pair_floor_leaves_short_device_rows_without_a_verdict(tmp_path):
    a, b = _event_pair_runs(tmp_path, 13)
    by = {c.key[4].split()[0]: c for c in cmp.compare_runs(a, b, model=_model(0.003))}
    assert by["short"].verdict == cmp.CANT_TELL and "event pair" in by["short"].why
    assert by["long"].verdict == cmp.SLOWER
    assert any("event pair 2.23x slower" in n for n in cmp.notes(a, b, list(by.values())))


def test_balanced_rows_have_classes_of_their_own_and_fall_back_to_the_as_drawn_ones(tmp_path):
    """bench.blas --parity balanced: a padded gated row's clock is gated-balanced (floored:
    gated-balanced-floor); a fit files its shifts under balanced classes only, never under the
    as-drawn ones; a model without balanced classes judges it by the as-drawn ones, one with them by
    its own; and the rules of gated rows (the event-pair floor) hold for it."""
    from gapbench.core import noise
    from gapbench.core.names import Parity

    r = _row("x", [1e-5] * 5)
    r.conditions["parity"] = Parity.balanced.value
    cls = noise.row_class(r, 1e-5)
    assert cls[3] == "gated-balanced" and noise.row_class(r, 1e-5, floored=True)[3] == "gated-balanced-floor"
    assert noise.base_clock("gated-balanced-floor") == "gated" and noise.row_class(_row("x", [1e-5]), 1e-5)[3] == "gated"
    fitted = noise.fit([(cls, d, i % 2) for i, d in enumerate(np.random.default_rng(3).normal(0, 0.002, 200))])
    assert fitted and all("/gated-balanced/" in k for k in fitted)
    as_drawn = _model(0.004)
    scale, where = as_drawn.scale("h100-80gb-hbm3", cls)
    assert scale == pytest.approx(0.004) and where.endswith("blas/*/*/gated/many/*")
    own = noise.NoiseModel({"devices": {"h100-80gb-hbm3": {"across": {**as_drawn.devices["h100-80gb-hbm3"]["across"],
                                                                      **fitted}}}})
    assert "gated-balanced" in own.scale("h100-80gb-hbm3", cls)[1]
    # within one start: the row's own within-start level, then its as-drawn row's within one start,
    # before either across starts; a fitted own level wins over the as-drawn one at each level
    row = lambda clock: "/".join((*cls[:3], clock, cls[4], "*", cls[6]))  # noqa: E731
    fit = {"n": 40, "groups": 20, "rms": 0.002, "q99": 0.005}
    levels = {"within": {row("gated"): {**fit, "scale": 0.002}},
              "across": {row("gated-balanced"): {**fit, "scale": 0.009}}}
    model = noise.NoiseModel({"devices": {"h100-80gb-hbm3": levels}})
    assert model.scale("h100-80gb-hbm3", cls, same_start=True) == (0.002, f"one start: {row('gated')}")
    assert model.scale("h100-80gb-hbm3", cls)[0] == 0.009  # across starts: its own
    levels["within"][row("gated-balanced")] = {**fit, "scale": 0.001}
    assert model.scale("h100-80gb-hbm3", cls, same_start=True)[0] == 0.001
    a, b = _event_pair_runs(tmp_path, 17, parity=Parity.balanced.value)
    by = {c.key[4].split()[0]: c for c in cmp.compare_runs(a, b, model=_model(0.003))}
    assert by["short"].verdict == cmp.CANT_TELL and "event pair" in by["short"].why
    assert by["long"].verdict == cmp.SLOWER


def _launch_run(path, host_f, torch_f, host=None, plain=True):
    rng = np.random.default_rng(abs(hash((str(path), host_f))) % 2**32)

    def rec(backend, t, metric="roundtrip"):
        return Record(probe="launch", backend=backend, variant="add" if backend != "plain-cuda" else "null",
                      metric=metric, status=OK, samples_s=list(t * 1e-6 * rng.lognormal(0, 0.01, 200)),
                      conditions={"clock": "host wall", "process": "standalone", "data": "uniform"})

    rows = [rec("torch-cuda", 14 * torch_f * host_f), rec("native-cuda", 8 * host_f)]
    if plain:
        rows.append(rec("plain-cuda", 8 * host_f))
    w = RunWriter(path, env={"nvidia_smi": [{"name": "NVIDIA H100 80GB HBM3"}], "host_id": host or {}},
                  run={"probe": "launch"}, overhead=None)
    for r in rows:
        w.add(r)
    w.finish()
    return load_run(path)


def test_host_bound_rows_are_judged_against_their_host_floor(tmp_path):
    """Across machine starts, B's host is 1.4x slower (its plain C++ loop says so): torch's round
    trip, 1.4x slower in absolute time, is the same gap to the floor; a real 10% torch slowdown on
    top is still found. Without a plain loop a host-bound row gets no verdict; within one start a
    moved plain loop leaves it none either."""
    from gapbench.core.noise import NoiseModel

    m = NoiseModel({"devices": {"h100-80gb-hbm3": {"across": {
        "launch/*/*/host/many/*": {"n": 100, "groups": 30, "rms": 0.005, "q99": 0.01, "scale": 0.005}}}}})
    a = _launch_run(tmp_path / "a.json", 1.0, 1.0)
    b = _launch_run(tmp_path / "b.json", 1.4, 1.0)
    c = _launch_run(tmp_path / "c.json", 1.4, 1.1)
    by = {x.key[1]: x for x in cmp.compare_runs(a, b, model=m)}
    assert by["torch-cuda"].verdict == cmp.SAME and by["torch-cuda"].absolute == pytest.approx(1.4, rel=0.02)
    assert "gap to the host floor" in by["torch-cuda"].note
    assert by["plain-cuda"].verdict == cmp.CANT_TELL and "floor of the host" in by["plain-cuda"].why
    assert {x.key[1]: x for x in cmp.compare_runs(a, c, model=m)}["torch-cuda"].verdict == cmp.SLOWER
    assert any("plain roundtrip 1.40x slower" in n for n in cmp.notes(a, b, list(by.values())))
    # within one start a moved plain loop leaves the host-bound rows without a verdict: there they do
    # not keep their gap to it (the committed starts: none same, 11 of 282 faster or slower)
    one = {"boot_id": "b1", "machine_id": "m1", "runs_this_boot": 3}
    a1, b1 = _launch_run(tmp_path / "a1.json", 1.0, 1.0, host=one), _launch_run(tmp_path / "b1.json", 1.4, 1.0, host=one)
    mw = NoiseModel({"devices": {"h100-80gb-hbm3": {"within": m.devices["h100-80gb-hbm3"]["across"]}}})
    by1 = {x.key[1]: x for x in cmp.compare_runs(a1, b1, model=mw)}
    assert by1["torch-cuda"].verdict == cmp.CANT_TELL and "issue rate moved within this start (plain roundtrip 1.40x" in by1["torch-cuda"].why
    assert by1["plain-cuda"].verdict == cmp.CANT_TELL and "floor of the host" in by1["plain-cuda"].why
    a2 = _launch_run(tmp_path / "a2.json", 1.0, 1.0, plain=False)
    b2 = _launch_run(tmp_path / "b2.json", 1.0, 1.0, plain=False)
    assert all(x.verdict == cmp.CANT_TELL and "another machine start" in x.why
               for x in cmp.compare_runs(a2, b2, model=m))


def test_rows_that_move_with_the_hosts_cpu_get_no_verdict_where_it_moved_within_a_start(tmp_path):
    """Within one H100 start (2026-11-27) the host's bound no-op ran 2.09x faster in one process than
    in the one before, and every host-bound row without a plain loop of its metric (imports, the
    CPU calls) moved with it: 0.5-0.6x, called faster. Where that floor moved, such rows get no
    verdict and say why; the floor is the bound no-op, not its Python-function sibling (py-noop);
    a graph replay (device work) keeps its verdict; the same runs with the CPU unmoved judge them."""
    from gapbench.core import floors
    from gapbench.core.noise import NoiseModel

    m = NoiseModel({"devices": {"h100-80gb-hbm3": {"within": {
        "launch/*/*/host/many/*": {"n": 100, "groups": 30, "rms": 0.02, "scale": 0.02},
        "launch/*/*/host/single/*": {"n": 100, "groups": 30, "rms": 0.005, "scale": 0.005},
        "launch/*/*/graph/many/*": {"n": 100, "groups": 30, "rms": 0.003, "scale": 0.003}}}}})
    host = {"boot_id": "b1", "machine_id": "m1", "runs_this_boot": 3}

    def run(path, cpu_f, py_f=1.0):
        rng = np.random.default_rng(7)

        def rec(backend, variant, metric, us, n=200, clock="host wall"):
            return Record(probe="launch", backend=backend, variant=variant, metric=metric, status=OK,
                          samples_s=list(us * 1e-6 * rng.lognormal(0, 0.005, n)),
                          conditions={"clock": clock, "process": "standalone", "data": "uniform"})

        rows = [rec("native-cpu", "noop", "roundtrip", 0.08 * cpu_f), rec("native-cpu", "py-noop", "roundtrip", 0.05 * py_f),
                rec("native-cpu", "noop", "import", 3500 * cpu_f, n=1), rec("torch-cpu", "add", "import", 1.9e6 * cpu_f, n=1),
                rec("plain-cuda", "null", "graph_node", 0.8, clock="device events, one graph launch"),
                rec("native-cuda", "null", "graph_node", 0.8, clock="device events, one graph launch")]
        w = RunWriter(path, env={"nvidia_smi": [{"name": "NVIDIA H100 80GB HBM3"}], "host_id": host},
                      run={"probe": "launch"}, overhead=None)
        for r in rows:
            w.add(r)
        w.finish()
        return load_run(path)

    a, b = run(tmp_path / "a.json", 1.0), run(tmp_path / "b.json", 0.5)
    assert floors.floors(a)[floors.HOST_CPU][0] == pytest.approx(0.08e-6, rel=0.02)
    by = {(x.key[1], x.key[2], x.key[3]): x for x in cmp.compare_runs(a, b, model=m)}
    for k in (("native-cpu", "noop", "import"), ("torch-cpu", "add", "import")):
        assert by[k].verdict == cmp.CANT_TELL and "host's CPU moved (native-cpu no-op 2.00x faster" in by[k].why
    assert by[("native-cpu", "noop", "roundtrip")].verdict == cmp.CANT_TELL and "floor of the host" in by[("native-cpu", "noop", "roundtrip")].why
    assert by[("native-cuda", "null", "graph_node")].verdict == cmp.SAME
    # the Python-function call is no floor: it alone moving leaves the CPU-bound rows judged
    c = run(tmp_path / "c.json", 1.0, py_f=0.5)
    by = {(x.key[1], x.key[2], x.key[3]): x for x in cmp.compare_runs(a, c, model=m)}
    assert by[("torch-cpu", "add", "import")].verdict == cmp.SAME and not by[("torch-cpu", "add", "import")].why


def test_a_single_sample_row_never_gets_a_zero_width_interval(tmp_path):
    rng = np.random.default_rng(14)
    a = _write(tmp_path / "a.json", [_row("x", _lognormal(rng, 1, n=1))])
    b = _write(tmp_path / "b.json", [_row("x", _lognormal(rng, 1.5, n=1))])
    (c,) = cmp.compare_runs(load_run(a), load_run(b))
    assert c.verdict == cmp.CANT_TELL and "one sample a side" in c.why


def test_same_is_two_one_sided_tests_at_5pct_and_faster_slower_keep_the_95pct_interval():
    """classify: "same" from the 90% interval (TOST), faster/slower from the 95% one."""
    assert cmp.classify(0.965, 1.025) == cmp.CANT_TELL
    assert cmp.classify(0.965, 1.025, same=(0.972, 1.02)) == cmp.SAME
    assert cmp.classify(0.965, 1.035, same=(0.972, 1.031)) == cmp.CANT_TELL
    assert cmp.classify(1.035, 1.1, same=(1.04, 1.09)) == cmp.SLOWER
    assert cmp.classify(0.9, 0.969, same=(0.91, 0.96)) == cmp.FASTER
    assert cmp.classify(1.02, 1.06, same=(1.025, 1.029)) == cmp.SAME  # within the band, 90% inside


def _tost_model(scale):
    """_model with the 90% scale the fit gives a normal class of many pairs (t95 ~ Z90, so equal)."""
    m = _model(scale)
    for cls in m.devices["h100-80gb-hbm3"]["across"].values():
        cls["scale90"] = scale
    return m


def test_a_change_of_exactly_the_min_effect_is_called_same_at_most_5pct_of_the_time(tmp_path):
    """Simulated rows whose B is truly 3% slower (or faster), each moved between the runs by the
    model's scale and noisy within them: TOST's promise, "same" at most 5% of the time at the bound.
    On A/A runs TOST calls more rows same than the 95% interval alone, and every 95%-same row too."""
    rng = np.random.default_rng(23)
    n, s = 400, 0.006
    scales = rng.uniform(0.5, 5, n)
    shift = lambda: np.exp(rng.normal(0, s))  # noqa: E731
    a = load_run(_write(tmp_path / "a.json", [_row(f"op{i}", _lognormal(rng, x, 0.004)) for i, x in enumerate(scales)]))
    m = _tost_model(s)
    for true in (1.03, 0.97):
        b = load_run(_write(tmp_path / f"b{true}.json", [_row(f"op{i}", _lognormal(rng, true * x * shift(), 0.004))
                                                        for i, x in enumerate(scales)]))
        got = cmp.counts(cmp.compare_runs(a, b, model=m))
        # 5% by design, plus two binomial sd of 400 rows (2000 rows gave 4.8% and 5.3%; the 95% interval
        # alone 2.9% and 2.4%)
        assert got[cmp.SAME] <= 0.072 * n, (true, got)
    aa = load_run(_write(tmp_path / "aa.json", [_row(f"op{i}", _lognormal(rng, x * shift(), 0.004))
                                                for i, x in enumerate(scales)]))
    changes = cmp.compare_runs(a, aa, model=m)
    tost = sum(c.verdict == cmp.SAME for c in changes)
    both = sum(cmp.classify(c.lo, c.hi) == cmp.SAME for c in changes)
    assert all(c.verdict == cmp.SAME for c in changes if cmp.classify(c.lo, c.hi) == cmp.SAME)
    assert tost > both and tost >= 0.7 * n, (tost, both)
    assert all(c.same_lo >= c.lo and c.same_hi <= c.hi for c in changes)  # the 90% interval inside the 95%
    assert changes[0].to_dict()["same_interval_90"] == [changes[0].same_lo, changes[0].same_hi]


def test_the_t95_quantile_and_the_noise_fits_90pct_scale():
    from gapbench.core import noise

    assert noise.t95(1) == 6.314 and noise.t95(30) == 1.697
    assert noise.t95(31) < 1.697 and noise.t95(1e6) == pytest.approx(noise.Z90, abs=1e-4)
    assert noise.t_quantile(5, 0.95) == noise.t975(5) and noise.t_quantile(5, 0.90) == noise.t95(5)
    with pytest.raises(ValueError):
        noise.t_quantile(5, 0.8)
    rng = np.random.default_rng(24)
    cls = ("blas", "time", "native", "gated", "many", "e-5.0")
    f = noise.fit([(cls, float(d), i % 40) for i, d in enumerate(rng.normal(0, 0.01, 800))])[noise.key(cls)]
    assert f["scale90"] == pytest.approx(max(f["rms"] * noise.t95(f["df"]), f["q90"]) / noise.Z90, abs=1e-6)
    assert noise.Z90 * f["scale90"] < noise.Z95 * f["scale"]
    host = ("launch", "submit", "cupy", "host", "many", "e-5.0")
    h = noise.fit([(host, float(d), i % 2) for i, d in enumerate(rng.normal(0, 0.01, 400))])[noise.key(host)]
    assert h["scale90"] == h["scale"]  # heavy tails: "same" keeps the 95% bound
    m = noise.NoiseModel({"devices": {"h200": {"across": {noise.key(cls): f}}}})
    assert m.scale("h200", cls, confidence=0.90)[0] == f["scale90"] and m.scale("h200", cls)[0] == f["scale"]
    old = {k: v for k, v in f.items() if k != "scale90"}  # a model fitted before scale90: its 95% scale
    assert noise.NoiseModel({"devices": {"h200": {"across": {noise.key(cls): old}}}}).scale(
        "h200", cls, confidence=0.90)[0] == f["scale"]


def test_the_repeat_interval_keeps_its_coverage_with_three_runs_a_side():
    """Simulated: three process medians a side, log-normal between processes. The t interval covers
    the true ratio in ~95% of trials, with or without a correct prior from the noise model; the old
    percentile bootstrap over three medians covered far less."""
    rng = np.random.default_rng(15)
    trials, sigma, true = 2000, 0.02, 1.03
    hit = hit_prior = hit_boot = hit90 = 0
    for i in range(trials):
        a = np.exp(rng.normal(0, sigma, 3))
        b = true * np.exp(rng.normal(0, sigma, 3))
        _, lo, hi = cmp.process_ratio_ci(a, b)
        hit += lo <= true <= hi
        _, lo90, hi90 = cmp.process_ratio_ci(a, b, confidence=0.90)
        hit90 += lo90 <= true <= hi90 and lo <= lo90 and hi90 <= hi
        _, lo, hi = cmp.process_ratio_ci(a, b, prior_scale=sigma * np.sqrt(2))
        hit_prior += lo <= true <= hi
        if i < 300:
            _, lo, hi = cmp.median_ratio_ci(a, b, n=300, seed=i)
            hit_boot += lo <= true <= hi
    assert 0.93 <= hit / trials <= 0.97 and 0.93 <= hit_prior / trials <= 0.97, (hit, hit_prior)
    assert 0.88 <= hit90 / trials <= 0.92, hit90  # the 90% interval "same" is judged by, inside the 95%
    assert hit_boot / 300 < 0.92  # under-covers: the medians of three processes are too few to resample


def test_the_noise_fit_splits_the_common_move_of_a_pair_from_the_rows_own():
    """Rows of one pair of runs share a common move: where it dominates and the pairs are few, the
    class's scale widens (few degrees of freedom); rows that move on their own are known from
    their many rows. Host-clocked classes (heavy tails) take the upper bound for their groups."""
    from gapbench.core import noise

    rng = np.random.default_rng(16)
    cls = ("blas", "time", "native", "gated", "many", "e-5.0")
    k = noise.key(cls)
    own = noise.fit([(cls, float(d), i % 2) for i, d in enumerate(rng.normal(0, 0.01, 400))])[k]
    assert own["rms"] == pytest.approx(0.01, rel=0.1) and own["df"] > 100 and own["scale"] < 0.012

    def common(groups, n=400):
        c = [0.01, -0.012] if groups == 2 else rng.normal(0, 0.01, groups)
        return [(cls, float(c[i % groups] + rng.normal(0, 0.002)), i % groups) for i in range(n)]

    few, many = noise.fit(common(2))[k], noise.fit(common(40))[k]
    assert few["df"] < 3 and many["df"] > 20 and few["scale"] > 2 * few["rms"]
    assert many["scale"] == pytest.approx(max(many["rms"] * noise.t975(many["df"]), many["q95"]) / noise.Z95, abs=1e-6)
    host = ("launch", "submit", "cupy", "host", "many", "e-5.0")
    h = noise.fit([(host, float(d), i % 2) for i, d in enumerate(rng.normal(0, 0.01, 400))])[noise.key(host)]
    assert h["scale"] > 3 * own["scale"]  # 2 groups: the upper bound, whatever the rows say
    assert noise.key(("blas", "time", "*", "gated", "many", "e-5.0")) in noise.fit(common(40))  # coarser levels too
    assert noise.fit(common(40)[:5]) == {}  # too few pairs: no class
    m = noise.NoiseModel({"devices": {"h200": {"across": noise.fit(common(40))}}})
    assert m.scale("h200", ("blas", "time", "cupy", "gated", "many", "e-5.0"))[1].endswith("blas/time/*/gated/many/e-5.0")
    assert m.scale("h100-80gb-hbm3", cls)[0] is None and "uncalibrated" in m.scale("h100-80gb-hbm3", cls)[1]


def test_the_fitted_scale_predicts_the_next_pair_of_runs():
    """Coverage by simulation: fitted on three pairs of runs (a common move per pair plus each
    row's own), +-1.96 x scale holds 95% of the rows of a new pair, on average over fits."""
    from gapbench.core import noise

    rng = np.random.default_rng(17)
    cls = ("blas", "time", "native", "gated", "many", "e-5.0")
    cover = []
    for _ in range(300):
        c = rng.normal(0, 0.004, 4)
        ds = [(cls, float(c[g] + rng.normal(0, 0.006)), g) for g in range(3) for _ in range(60)]
        s = noise.fit(ds)[noise.key(cls)]["scale"]
        new = c[3] + rng.normal(0, 0.006, 60)
        cover.append(float(np.mean(np.abs(new) <= noise.Z95 * s)))
    assert 0.93 <= np.mean(cover) <= 0.995, np.mean(cover)


def test_a_row_seen_on_enough_pairs_gets_its_own_scale_before_its_class():
    """One class, 3.2-10 us torch rows on an H200: most move 0.5% between two processes, two (the
    16384x1024 GEMVs) 3.5%. The class's scale, set by the loud rows' tail, left every row of it
    without a verdict; each row seen on at least ROW_MIN_PAIRS pairs now gets its own, the quiet
    rows a narrow one and the loud rows a wide one, and a row seen on fewer keeps the class's."""
    from gapbench.core import noise
    from gapbench.core.noise import NoiseModel

    rng = np.random.default_rng(5)
    base = ("blas", "time", "torch", "gated", "many", "e-5.0")
    rows = {f"torch-cuda|torch|gemv fp16 {i}": (0.035 if i < 2 else 0.005) for i in range(10)}
    shifts = [(base + (row,), float(rng.normal(0, sd)), g) for g in range(30) for row, sd in rows.items()]
    shifts += [(base + ("torch-cuda|torch|rare",), float(rng.normal(0, 0.005)), g) for g in range(noise.ROW_MIN_PAIRS - 1)]
    m = NoiseModel({"devices": {"h200": {"within": noise.fit(shifts)}}})
    cls_scale, where = m.scale("h200", base + ("nothing fitted",), True)
    assert where == f"one start: {noise.key(base)}"
    quiet, where_q = m.scale("h200", base + ("torch-cuda|torch|gemv fp16 5",), True)
    loud, _ = m.scale("h200", base + ("torch-cuda|torch|gemv fp16 0",), True)
    assert where_q.endswith("/*/torch-cuda|torch|gemv fp16 5")  # any time scale: the row's own level
    assert quiet < 0.01 < 0.02 < cls_scale < loud
    assert m.scale("h200", base + ("torch-cuda|torch|rare",), True) == (cls_scale, where)


def test_within_a_start_a_rows_own_scale_across_starts_comes_before_a_class_but_not_for_host_rows():
    """A row of one start: its own scale across starts (which bounds what it does within one) is
    used before its class's within-start scale, where too few pairs of one start saw the row (a
    held-out H200 start left its class fitted on four pairs of runs: +-5.1% for every row of it).
    Host-bound rows are judged across starts as gaps to the host floor, another quantity: for
    them every within-start level comes first."""
    from gapbench.core import noise
    from gapbench.core.noise import NoiseModel

    dev, host = ("blas", "time", "torch", "gated", "many", "e-5.0", "r"), ("launch", "submit", "torch", "host", "many", "e-5.5", "r")
    fitted = {"n": 50, "groups": 50, "rms": 0.004, "scale": 0.005}
    m = NoiseModel({"devices": {"h200": {
        "within": {noise.key(dev[:6]): dict(fitted, scale=0.026), noise.key(host[:6]): dict(fitted, scale=0.3)},
        "across": {noise.key(noise.levels(dev)[0]): fitted, noise.key(noise.levels(host)[0]): fitted}}}})
    assert m.scale("h200", dev, True) == (0.005, f"across starts: {noise.key(noise.levels(dev)[0])}")
    assert m.scale("h200", host, True) == (0.3, f"one start: {noise.key(host[:6])}")
    assert m.scale("h200", host, False)[0] == 0.005  # across starts: the gap's own scale


def test_the_shipped_noise_model_is_what_the_committed_runs_give():
    """compare_noise.json regenerates from the committed A/A runs the calibration script names; a
    change to the method or to the runs without regenerating it fails here."""
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("calibrate_compare", root / "docs/results/calibrate_compare.py")
    cal = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cal)
    try:
        files = cal.load()
    except cal.HistoryUnavailable as e:  # a shallow clone: the runs kept in git history are not here
        pytest.skip(str(e))
    doc = json.loads(json.dumps(cal.fit_model(cal.pairs(files)), sort_keys=True))
    from gapbench.core.noise import MODEL_FILE

    shipped = json.loads(MODEL_FILE.read_text())
    assert doc == {k: v for k, v in shipped.items() if k != "floor"}  # the floor's section: the next test


def test_the_shipped_floor_section_is_what_the_committed_launch_floor_runs_give():
    """compare_noise.json's launch-floor section (shares and floor classes per GPU model) regenerates
    from the committed --launch-floor runs floor_model.py names."""
    import importlib.util
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root / "docs/results"))
    try:
        spec = importlib.util.spec_from_file_location("floor_model", root / "docs/results/floor_model.py")
        fm = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(fm)
        try:
            floors = fm.load()
        except fm.cc.HistoryUnavailable as e:
            pytest.skip(str(e))
        doc = json.loads(json.dumps(fm.fit_all(floors), sort_keys=True))
    finally:
        sys.path.remove(str(root / "docs/results"))
    from gapbench.core.noise import MODEL_FILE

    assert doc == json.loads(MODEL_FILE.read_text())["floor"]
    assert set(doc) == {"h100-80gb-hbm3", "h200"} and all(0 < d["share"]["native"] <= 1.5 for d in doc.values())


def _floored(op, samples_us, floor_us, backend="native-cuda"):
    r = _row(op, [x * 1e-6 for x in samples_us], backend=backend)
    r.params["launch_floor"] = {"median_s": floor_us * 1e-6, "what": "an empty kernel", "rounds": 10}
    return r


def _floor_model(share=1.0, scale=0.002):
    """A model whose only classes are floor classes (every level of a native gated 3.2-10 us row)."""
    from gapbench.core import noise

    cls = ("blas", "time", "native", "gated" + noise.FLOORED, "many", "e-6.5")
    fitted = {"n": 100, "groups": 20, "rms": scale, "scale": scale, "scale90": scale}
    return noise.NoiseModel({"devices": {"h100-80gb-hbm3": {"within": {}, "across": {}}},
                             "floor": {"h100-80gb-hbm3": {"share": {"native": share},
                                                          "within": {noise.key(lv): fitted for lv in noise.levels(cls)},
                                                          "across": {}}}})


def test_a_short_rows_launch_floor_move_is_taken_off_and_a_real_change_is_still_found(tmp_path):
    """Two --launch-floor runs: a 5 us row whose empty kernel beside it moved by 0.1 us moves with
    it (B/A 1.02); less the model's share (here all) of the floor's move it is the same, judged by
    its floor class, with the absolute B/A beside. A row that got 0.25 us slower while its floor
    did not move is still slower. Without a floor fit the rows are judged as they are (the model
    has no class for them: can't tell), and a row with a floor on one side only is not adjusted."""
    rng = np.random.default_rng(3)
    base = lambda us: list(us * rng.lognormal(0, 0.002, 60))  # noqa: E731
    a = _write(tmp_path / "a.json", [_floored("moved", base(5.0), 2.8), _floored("slower", base(5.0), 2.8),
                                     _floored("one side", base(5.0), 2.8)])
    b = _write(tmp_path / "b.json", [_floored("moved", base(5.1), 2.9), _floored("slower", base(5.25), 2.8),
                                     _row("one side", [x * 1e-6 for x in base(5.1)])])
    changes = cmp.compare_runs(load_run(a), load_run(b), model=_floor_model(), one_start=True)
    by = {c.key[4].split()[0]: c for c in changes}
    moved = by["moved"]
    (said,) = [n for n in cmp.notes(load_run(a), load_run(b), changes) if "judged less" in n]
    assert said.startswith("2 short rows judged less") and "+0.0% to +2.0%" in said
    assert not any("host-timed rows" in n for n in cmp.notes(load_run(a), load_run(b), changes))
    assert moved.verdict == cmp.SAME and moved.ratio == pytest.approx(1.0, abs=0.003)
    assert moved.absolute == pytest.approx(1.02, abs=0.003) and "launch floor" in moved.note
    assert moved.noise_class[3] == "gated-floor"
    assert by["slower"].verdict == cmp.SLOWER and by["slower"].ratio == pytest.approx(1.05, abs=0.003)
    assert by["one"].absolute is None and by["one"].noise_class[3] == "gated" and by["one"].verdict == cmp.CANT_TELL
    # compare says which run timed the floor where only one did (an older run, --quick, --no-launch-floor)
    for x, y, side in ((a, b, "A"), (b, a, "B")):
        x, y = load_run(x), load_run(y)
        said = [n for n in cmp.notes(x, y, cmp.compare_runs(x, y, model=_floor_model(), one_start=True))
                if "timed in" in n]
        assert len(said) == 1 and said[0].startswith(f"short rows with their launch floor timed in {side} only: 1 ")
    assert not any("timed in" in n for n in cmp.notes(load_run(a), load_run(a), cmp.compare_runs(
        load_run(a), load_run(a), model=_floor_model(), one_start=True)))
    # half the move taken off: B/A 1.01
    half = {c.key[4].split()[0]: c for c in cmp.compare_runs(load_run(a), load_run(b), model=_floor_model(0.5),
                                                              one_start=True)}
    assert half["moved"].ratio == pytest.approx(1.01, abs=0.003)
    # no floor section: judged as they are
    from gapbench.core import noise

    bare = noise.NoiseModel({"devices": {"h100-80gb-hbm3": {"within": {}, "across": {}}}})
    plain = {c.key[4].split()[0]: c for c in cmp.compare_runs(load_run(a), load_run(b), model=bare, one_start=True)}
    assert plain["moved"].ratio == pytest.approx(1.02, abs=0.003) and plain["moved"].absolute is None
    # another GPU model on one side: no adjustment (a share is per GPU model)
    c = _write(tmp_path / "c.json", [_floored("moved", base(5.1), 2.9)], device="NVIDIA H200")
    (other,) = cmp.compare_runs(load_run(a), load_run(c), model=_floor_model())
    assert other.absolute is None and other.noise_class[3] == "gated"


def test_the_calibration_sees_floored_rows_as_compare_judges_them(tmp_path):
    """judged_shifts with floor shares: each floored row's shift is its B less the share of the
    floor's move, in its floor class; without shares the same rows are plain gated rows."""
    rng = np.random.default_rng(4)
    base = lambda us: list(us * rng.lognormal(0, 0.002, 60))  # noqa: E731
    a = load_run(_write(tmp_path / "a.json", [_floored("x", base(5.0), 2.8)]))
    b = load_run(_write(tmp_path / "b.json", [_floored("x", base(5.1), 2.9)]))
    ((cls, d),) = judged_shifts(a, b, one_start=True, floor_shares={"native": 1.0})
    assert cls[3] == "gated-floor" and abs(d) < 0.003
    ((cls0, d0),) = judged_shifts(a, b, one_start=True)
    assert cls0[3] == "gated" and d0 == pytest.approx(np.log(1.02), abs=0.003)


def test_the_calibration_counts_how_often_an_interval_holds_the_true_ratio_by_row_size():
    """The calibration report says how often compare's 95% interval held 1 on A/A pairs (the true
    ratio there), by row size: a row left without a verdict for a reason is not counted, an interval
    that misses 1 is counted as a miss, and each row lands in the size of its A median."""
    import importlib.util
    from pathlib import Path
    from types import SimpleNamespace as NS

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("calibrate_compare", root / "docs/results/calibrate_compare.py")
    cal = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cal)
    cover = cal.new_cover()
    rows = [NS(why="", lo=0.98, hi=1.02, same_lo=0.985, same_hi=1.015, quantiles={"A": [5e-6]}),  # short, holds 1
            NS(why="", lo=1.01, hi=1.05, same_lo=1.015, same_hi=1.045, quantiles={"A": [6e-6]}),  # short, misses
            NS(why="", lo=0.99, hi=1.01, same_lo=0.992, same_hi=1.008, quantiles={"A": [2e-4]}),  # long, holds 1
            NS(why="a floor moved", lo=1.2, hi=1.3, same_lo=1.21, same_hi=1.29, quantiles={"A": [2e-4]}),  # no verdict
            NS(why="", lo=None, hi=None, same_lo=None, same_hi=None, quantiles={"A": [5e-5]})]  # no interval
    for c in rows:
        cal.covered(cover, c)
    assert {k: cover[k] for k in ("< 10 us", "10-100 us", ">= 100 us")} == \
        {"< 10 us": [1, 2], "10-100 us": [0, 0], ">= 100 us": [1, 1]}
    assert cal.cover_cell(cover) == "2/3 (66.7%) (< 10 us 50.0%, >= 100 us 100.0%)"
    # "same" by the 95% interval alone: rows 1 and 3 of all 5; the 90% interval held 1 on rows 1 and 3
    # of the 3 judged; moved by exactly 3%, only row 2 moved x0.97 lands inside the band (of 3 x 2)
    assert cover["same95"] == [2, 5] and cover["held90"] == [2, 3] and cover["at_bound"] == [1, 6]
    assert "called same in 1/6 (16.7%)" in cal.tost_cell(cover)


def test_the_calibration_keeps_balanced_runs_a_mode_of_their_own():
    """calibrate_compare.py: a bench.blas --parity balanced run is its own mode (its gated rows have
    classes of their own), so it is never paired with a default or --quick run, and --repeat groups
    are cut from the runs of one mode."""
    import importlib.util
    from pathlib import Path
    from types import SimpleNamespace as NS

    from gapbench.core.names import Parity

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("calibrate_compare", root / "docs/results/calibrate_compare.py")
    cal = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cal)
    run = lambda cmd, **cfg: NS(run={"command": cmd, "config": cfg})  # noqa: E731
    assert cal.mode_of(run("python -m bench.blas")) == "default"
    assert cal.mode_of(run("python -m bench.blas --quick", quick=True)) == "quick"
    assert cal.mode_of(run("python -m bench.blas --parity balanced", parity=Parity.balanced.value)) == "balanced"
    assert cal.mode_of(run("python -m bench.blas", parity=Parity.as_drawn.value)) == "default"
    files = [NS(gpu="h200", probe="blas", mode=m, injected=0.0, run=NS(run={"started": f"2026-11-28T17:0{i}"}), rel=str(i))
             for i, m in enumerate(("default", "balanced", "default", "balanced", "balanced", "quick", "balanced"))]
    assert all(a.mode == b.mode for a, b in cal.pairs(files)) and len(cal.pairs(files)) == 1 + 6
    assert [[f.rel for f in g] for g in cal.triples(files, mode="balanced")] == [["1", "3", "4"]]
    assert cal.triples(files) == []  # two default runs: no group of three


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


def test_a_graph_replay_is_judged_as_device_work_not_as_the_hosts(tmp_path):
    """One graph launch queues every node with one host call: its rows move with the device (at
    most 3% between runs of the committed H100 starts), not with the host's issue rate (tens of
    percent). They get the graph clock, a normal (not heavy-tailed) noise class, and no host-floor
    gap, even where the host floor moved; files written before the clock existed read the same."""
    from gapbench.core import noise
    from gapbench.core.conditions import Clock, clock_of

    assert clock_of("device_events", graph=True) == Clock.GRAPH
    assert clock_of("host_wall", graph=True) == Clock.HOST and clock_of("device_events") == Clock.ISSUED

    def run(path, host_f, graph_f, clock=Clock.GRAPH):
        rng = np.random.default_rng(7 if graph_f == 1 else 8)
        rows = [Record(probe="launch", backend=b, variant="null", metric=m, status=OK,
                       samples_s=list(t * 1e-6 * rng.lognormal(0, 0.002, 200)),
                       conditions={"clock": c, "process": "standalone", "data": "uniform"})
                for b, m, t, c in (("native-cuda", "graph_node", 0.8 * graph_f, clock),
                                   ("plain-cuda", "graph_node", 0.8, clock),
                                   ("plain-cuda", "stream_b2b", 3 * host_f, Clock.ISSUED))]
        w = RunWriter(path, env={"nvidia_smi": [{"name": "NVIDIA H100 80GB HBM3"}]}, run={"probe": "launch"},
                      overhead=None)
        for r in rows:
            w.add(r)
        w.finish()
        return load_run(path)

    a, b = run(tmp_path / "a.json", 1.0, 1.0), run(tmp_path / "b.json", 1.5, 1.0)
    old = run(tmp_path / "old.json", 1.0, 1.0, clock=Clock.ISSUED)  # as files before the graph clock
    g = {r.backend: r for r in old.records if r.metric == "graph_node"}
    assert {r.conditions["clock"] for r in g.values()} == {Clock.GRAPH}
    assert noise.clock_kind(g["native-cuda"]) == noise.clock_kind(g["plain-cuda"]) == "graph"
    assert noise.clock_kind(next(r for r in old.records if r.metric == "stream_b2b")) == "plain"
    cls = noise.row_class(g["native-cuda"], 0.8e-6)
    fitted = noise.fit([(cls, d, i // 4) for i, d in enumerate(np.random.default_rng(3).normal(0, 0.004, 40))])
    assert fitted[noise.key(cls[:6])]["scale"] < 0.01  # a normal prediction, not the heavy-tailed bound
    m = noise.NoiseModel({"devices": {"h100-80gb-hbm3": {"within": fitted, "across": fitted}}})
    by = {x.key[1]: x for x in cmp.compare_runs(a, b, model=m, one_start=True) if x.key[3] == "graph_node"}
    assert by["native-cuda"].verdict == cmp.SAME and "host floor" not in by["native-cuda"].note
    slow = run(tmp_path / "c.json", 1.5, 1.05)
    by = {x.key[1]: x for x in cmp.compare_runs(a, slow, model=m, one_start=True) if x.key[3] == "graph_node"}
    assert by["native-cuda"].verdict == cmp.SLOWER and by["native-cuda"].absolute is None


def test_a_single_sample_row_across_a_cold_compile_cache_gets_no_verdict(tmp_path):
    """A bundle's first benchmark after a machine start is not the boot's first gapbench process
    (the bundle's own is), but its compile caches were still empty: its single-sample rows (import,
    cold) took 4-8x longer (H100, 2026-11-26). compare says why instead of calling them faster."""
    from gapbench.core import floors

    rng = np.random.default_rng(21)
    cold = {"boot_id": "b1", "machine_id": "m1", "runs_this_boot": 1,
            "caches": {"cupy_kernel_cache": 0, "torch_bytecode": 0}}
    warm = dict(cold, runs_this_boot=3, caches={"cupy_kernel_cache": 15, "torch_bytecode": 0})

    def rows(t):
        single = _row("import", [t * 1e-3])
        many = _row("x", _lognormal(rng, 1.0, 0.002))
        return [single, many]

    a = load_run(_write(tmp_path / "a.json", rows(4.0), host=cold))
    b = load_run(_write(tmp_path / "b.json", rows(1.0), host=warm))
    assert not floors.first_run(a) and floors.cold_caches(a) == {"cupy_kernel_cache", "torch_bytecode"}
    assert floors.cold_start_differs(a, b) == "compile caches cold in one run only (cupy_kernel_cache)"
    by = {c.key[4].split()[0]: c for c in cmp.compare_runs(a, b, model=_model(0.003, scope="within"))}
    assert by["import"].verdict == cmp.CANT_TELL and "cupy_kernel_cache" in by["import"].why
    assert by["x"].verdict == cmp.SAME  # rows of many samples are judged as before
    b2 = load_run(_write(tmp_path / "b2.json", rows(1.0), host=dict(warm, caches=cold["caches"])))
    assert floors.cold_start_differs(a, b2) == ""


def test_the_host_record_counts_torch_bytecode(monkeypatch, tmp_path):
    """env's caches say whether torch's bytecode was there (0: compiled from source every process)."""
    import sys
    import types

    from gapbench.core import env

    pkg = tmp_path / "site" / "torch"
    (pkg / "__pycache__").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    spec = types.SimpleNamespace(origin=str(pkg / "__init__.py"))
    monkeypatch.setattr(env.importlib.util, "find_spec", lambda name: spec if name == "torch" else None)
    monkeypatch.setattr(sys, "pycache_prefix", None)
    assert env._torch_bytecode() == 0
    (pkg / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"")
    assert env._torch_bytecode() == 1
    prefix = tmp_path / "pyc"
    monkeypatch.setattr(sys, "pycache_prefix", str(prefix))
    assert env._torch_bytecode() == 0
    mirror = prefix / pkg.resolve().relative_to(pkg.resolve().anchor)
    mirror.mkdir(parents=True)
    (mirror / "a.cpython-311.pyc").write_bytes(b"")
    (mirror / "b.cpython-311.pyc").write_bytes(b"")
    assert env._torch_bytecode() == 2
    monkeypatch.setattr(env.importlib.util, "find_spec", lambda name: None)
    assert env._torch_bytecode() is None


def test_a_class_with_one_row_per_pair_of_runs_keeps_its_degrees_of_freedom():
    """launch gives one row of a metric per backend and run, so a within-start class often has
    one shift per pair of runs. Its mean square then has as many degrees of freedom as pairs (each
    shift an independent draw around zero), and the prediction keeps its 95% coverage without the
    6x widening that df = 1 gave (by simulation: fitted on 16 pairs, judged on a new one)."""
    from gapbench.core import noise

    rng = np.random.default_rng(21)
    cls = ("launch", "graph_node", "native", "graph", "many", "e-7.5")
    k = noise.key(cls)
    cover, scales = [], []
    for _ in range(2000):
        fitted = noise.fit([(cls, float(d), g) for g, d in enumerate(rng.normal(0, 0.005, 16))])[k]
        assert fitted["df"] == 16 and fitted["common"] == 0
        scales.append(fitted["scale"])
        cover.append(abs(rng.normal(0, 0.005)) <= noise.Z95 * fitted["scale"])
    assert 0.94 <= np.mean(cover) <= 0.99, np.mean(cover)
    assert np.median(scales) < 2 * 0.005  # about the rows' own rms, not t975(1) = 12.7 times it


def test_runs_timed_on_different_numbers_of_streams_are_said_to_be(tmp_path):
    """A run whose native cases took 8 streams by round against one from before (one stream a
    case): compare says so in its notes, and is silent when both runs timed alike."""
    rng = np.random.default_rng(7)

    def rows(streams, torch_streams=None):
        out = []
        for op in ("copy", "gemv"):
            for backend, n in (("native-cuda", streams), ("torch-cuda", torch_streams)):
                r = _row(op, _lognormal(rng, 1), backend=backend)
                r.conditions = {**r.conditions, **({"streams": n} if n else {})}
                out.append(r)
        return out

    old = load_run(_write(tmp_path / "old.json", rows(None)))
    new = load_run(_write(tmp_path / "new.json", rows(8)))
    again = load_run(_write(tmp_path / "again.json", rows(8)))
    note = cmp.streams_note(old, new)
    assert "native-cuda rows on 1 stream in A and on 8 streams, one a round in B" in note and "torch" not in note
    assert note in cmp.notes(old, new, [])
    assert cmp.streams_note(new, again) is None and cmp.streams_note(old, old) is None
    assert not any("stream" in n for n in cmp.notes(new, again, []))
    # torch's rows too, once they take the streams (a --streams 1 run records none: one stream)
    both = load_run(_write(tmp_path / "both.json", rows(8, 8)))
    assert "torch-cuda rows on 1 stream in A and on 8 streams" in cmp.streams_note(new, both)
    assert cmp.streams_note(load_run(_write(tmp_path / "one.json", rows(None, 1))), old) is None


def test_runs_of_different_sequences_of_cases_are_said_to_be(tmp_path):
    """What ran before a row moves it (1-2.5% on an H100 between bench.blas and the API at the same
    GEMV shapes, within 1% once both ran the same sequence), so compare says when A and B measured
    different sequences of cases, and is silent when they measured the same."""
    rng = np.random.default_rng(5)
    ops_a = ["copy", "gemv", "gemm"]
    a = _write(tmp_path / "a.json", [_row(op, _lognormal(rng, 1)) for op in ops_a])
    same = _write(tmp_path / "same.json", [_row(op, _lognormal(rng, 1)) for op in ops_a])
    fewer = _write(tmp_path / "fewer.json", [_row(op, _lognormal(rng, 1)) for op in ["gemv", "gemm"]])
    shuffled = _write(tmp_path / "shuffled.json", [_row(op, _lognormal(rng, 1)) for op in ["gemm", "copy", "gemv"]])
    A = load_run(a)
    assert cmp.sequence_note(A, load_run(same)) is None
    assert not any("sequences of cases" in n for n in cmp.notes(A, load_run(same), []))
    few = cmp.sequence_note(A, load_run(fewer))
    assert "A 3, B 2, 2 in common, in the same order" in few and "2.5%" in few
    assert "another order" in cmp.sequence_note(A, load_run(shuffled))
    assert cmp.notes(A, load_run(fewer), [])[0] == few


def test_rows_timed_on_several_streams_are_their_own_noise_class():
    """A native case timed on 8 streams (one a paired round) moves less between processes than the
    same row timed on one stream: the noise model keeps them apart, so one-stream runs in the
    calibration neither widen nor narrow the current rows' scale."""
    from gapbench.core import noise

    one, eight = _row("gemv", [4e-6] * 50), _row("gemv", [4e-6] * 50)
    eight.conditions = {**eight.conditions, "streams": 8}
    a, b = noise.row_class(one, 4e-6), noise.row_class(eight, 4e-6)
    assert a[2] == "native" and b[2] == "native-streams8" and a[:2] + a[3:] == b[:2] + b[3:]
    torch_row = _row("gemv", [4e-6] * 50, backend="torch-cuda")
    assert noise.row_class(torch_row, 4e-6)[2] == "torch"


def test_compare_says_when_the_runs_measured_two_units_of_one_gpu_model(tmp_path):
    """Two H200s of one model ran a 16384^2 GEMV 4.7% apart at the same copy bandwidth (2026-11-26):
    the unit is part of what tells two machine starts apart, so compare names it."""
    from gapbench.core.floors import host_differences

    def run(path, uuid, t=4e-6):
        w = RunWriter(path, env={"nvidia_smi": [{"name": "NVIDIA H200"}], "gpu": {"uuid": uuid, "name": "NVIDIA H200"}},
                      run={"probe": "blas"}, overhead=None)
        w.add(_row("gemv", [t] * 20))
        w.finish()
        return load_run(path)

    a, b, c = (run(tmp_path / f"{k}.json", u) for k, u in (("a", "GPU-1-f35303"), ("b", "GPU-2-9c1b15"), ("c", "GPU-1-f35303")))
    assert "another GPU (uuid ...f35303 -> ...9c1b15)" in host_differences(a, b)
    assert not any(x.startswith("another GPU") for x in host_differences(a, c))
    # a verdict across two units is qualified in its row; on one unit it is not
    slow_b, slow_c = run(tmp_path / "sb.json", "GPU-2-9c1b15", 4.4e-6), run(tmp_path / "sc.json", "GPU-1-f35303", 4.4e-6)
    (x,) = cmp.compare_runs(a, slow_b, margin=0.01)
    (y,) = cmp.compare_runs(a, slow_c, margin=0.01)
    assert x.verdict == y.verdict == cmp.SLOWER
    assert "units of one model differ" in x.note and "...9c1b15" in x.note and "units" not in y.note


def test_a_repeat_interval_across_starts_adds_what_a_start_shares():
    """Simulated --repeat 3 across machine starts: each start offsets its processes by its own
    amount (sd 2%: another host, another GPU unit), the processes spread by 1% around it. The
    processes' t interval alone sees none of the start's term and covers the true ratio far less
    than 95%; with the model's start term (rms across starts^2 - rms within one^2) it keeps ~95%.
    Within one start nothing is added."""
    from gapbench.core.noise import NoiseModel

    sp, ss, cls = 0.01, 0.02, ("blas", "time", "native", "gated", "many", "e-5.0")
    within = {"blas/*/*/gated/many/*": {"n": 900, "groups": 30, "rms": sp * np.sqrt(2), "scale": sp * np.sqrt(2)}}
    across = {"blas/*/*/gated/many/*": {"n": 900, "groups": 30, "rms": np.sqrt(2 * sp ** 2 + 2 * ss ** 2),
                                        "scale": np.sqrt(2 * sp ** 2 + 2 * ss ** 2)}}
    m = NoiseModel({"devices": {"h100-80gb-hbm3": {"within": within, "across": across}}})
    assert m.start_term("h100-80gb-hbm3", cls) == pytest.approx(ss * np.sqrt(2))
    rng = np.random.default_rng(21)
    trials, true, plain, widened = 2000, 1.02, 0, 0
    for _ in range(trials):
        a = np.exp(rng.normal(0, ss) + rng.normal(0, sp, 3))
        b = true * np.exp(rng.normal(0, ss) + rng.normal(0, sp, 3))
        r, lo, hi = cmp.process_ratio_ci(a, b, prior_scale=sp * np.sqrt(2))
        plain += lo <= true <= hi
        lo, hi, covers = cmp.beyond_processes(m, "h100-80gb-hbm3", cls, False, None, r, lo, hi, "p")
        widened += lo <= true <= hi
    assert plain / trials < 0.80 and 0.93 <= widened / trials <= 0.99, (plain, widened)
    assert "machine starts" in covers
    assert cmp.beyond_processes(m, "h100-80gb-hbm3", cls, True, None, 1.0, 0.99, 1.01, "p") == (0.99, 1.01, "p")


def test_a_heavy_tailed_class_keeps_one_run_a_sides_half_width_under_repeat():
    """Host-bound rows of processes started one after another move together: three processes a
    side never narrow such a row below what one run a side gets from the noise model."""
    from gapbench.core.noise import NoiseModel

    m = NoiseModel({"devices": {}})
    host = ("launch", "submit", "torch", "host", "many", "e-6.0")
    lo, hi, covers = cmp.beyond_processes(m, "gpu", host, True, 0.2, 1.0, 0.95, 1.05, "p")
    assert lo == pytest.approx(np.exp(-cmp.Z95 * 0.2)) and hi == pytest.approx(np.exp(cmp.Z95 * 0.2))
    assert "heavy-tailed" in covers
    device = ("launch", "graph_node", "torch", "graph", "many", "e-6.0")
    assert cmp.beyond_processes(m, "gpu", device, True, 0.2, 1.0, 0.95, 1.05, "p") == (0.95, 1.05, "p")


def test_rows_with_their_own_processes_medians_are_judged_between_processes(tmp_path):
    """bench.blas --processes K: a row carries the medians of its run's K processes
    (params.process_medians_s). With them on both sides the interval is the spread between those
    processes, as for separate runs (compare_groups), the same interval from the same medians; a
    row with one side's medians only is judged as one run a side."""
    rng = np.random.default_rng(8)
    factors_a, factors_b = [1.0, 1.05, 0.95], [1.04, 0.97, 1.01]

    def run_of(name, factors, own=True):
        samples = [_lognormal(rng, f, 0.005) for f in factors]
        r = _row("x", samples[0])
        if own:
            r.params["process_medians_s"] = [float(np.median(s)) for s in samples]
        sep = [load_run(_write(tmp_path / f"{name}{i}.json", [_row("x", s)])) for i, s in enumerate(samples)]
        return load_run(_write(tmp_path / f"{name}.json", [r])), sep

    a, a_sep = run_of("a", factors_a)
    b, b_sep = run_of("b", factors_b)
    (own,) = cmp.compare_runs(a, b)
    (sep,) = cmp.compare_groups(a_sep, b_sep)
    assert own.covers == sep.covers == "between processes (3 + 3)"
    assert (own.ratio, own.lo, own.hi) == pytest.approx((sep.ratio, sep.lo, sep.hi), rel=1e-12)
    assert own.lo < 1 < own.hi and own.verdict != cmp.SLOWER
    one, _ = run_of("c", factors_b, own=False)
    (single,) = cmp.compare_runs(a, one)
    assert single.covers == "within-run" and single.verdict == cmp.SLOWER


def test_three_processes_a_side_call_more_rows_same_and_find_a_slowdown(tmp_path):
    """200 short rows whose medians move 1.7% rms between two processes (the H100's rows under
    10 us, findings/between-runs.md: 1.2% sd a process), three processes a side in one run each:
    A/A rows are `same` far more often than judged one process a side by the model (which must
    allow the whole 1.7%), with at most 1% faster or slower, and an 8% slowdown of every row is
    found on >= 95% of them."""
    rng = np.random.default_rng(12)
    scales = rng.uniform(0.3, 1.0, 200)

    def run_of(name, factor, own=True):
        rows = []
        for i, s in enumerate(scales):
            meds = [s * 1e-5 * factor * np.exp(rng.normal(0, 0.012)) for _ in range(3)]
            r = _row(f"op{i}", meds[0] * rng.lognormal(0, 0.002, 60))
            if own:
                r.params["process_medians_s"] = meds
            rows.append(r)
        return load_run(_write(tmp_path / f"{name}.json", rows))

    m = _model(0.017, scope="within", rms=0.017)

    def judged(a, b):
        return cmp.counts(cmp.compare_runs(a, b, model=m, one_start=True))

    a, aa, slow = run_of("a", 1.0), run_of("aa", 1.0), run_of("s", 1.08)
    n_aa, n_slow = judged(a, aa), judged(a, slow)
    n_one = judged(run_of("a1", 1.0, own=False), run_of("aa1", 1.0, own=False))
    assert n_aa[cmp.FASTER] + n_aa[cmp.SLOWER] <= 2 and n_one[cmp.FASTER] + n_one[cmp.SLOWER] <= 2, (n_aa, n_one)
    assert n_aa[cmp.SAME] >= 0.4 * 200 and n_aa[cmp.SAME] >= 2 * n_one[cmp.SAME], (n_aa, n_one)
    assert n_slow[cmp.SLOWER] >= 0.95 * 200, n_slow


def test_one_runs_processes_a_side_allow_for_what_the_run_shares():
    """The processes of one bench.blas --processes run start within a minute of each other and
    share what moves the whole run: here 0.8% rms a run beside 1.0% a process, so a single process
    moves by s = sqrt(2 (0.8^2 + 1.0^2)) between two runs (the model's within-start rms). Their
    spread shows only the 1.0%: the interval on it alone holds 1 in too few A/A pairs, with the
    run term taken from the model (ratio_ci.run_term) about 95%, and the term it finds is the
    0.8% put in."""
    from gapbench.core.ratio_ci import run_term

    rng = np.random.default_rng(21)
    d, p, n = 0.008, 0.010, 400
    s = np.sqrt(2 * (d * d + p * p))
    m = _model(s, scope="within", rms=s, groups=200)

    def run_of(path):
        rows = []
        for i in range(n):
            shared = rng.normal(0, d)
            meds = [5e-6 * np.exp(shared + rng.normal(0, p)) for _ in range(3)]
            r = _row(f"op{i}", meds[0] * rng.lognormal(0, 0.001, 40))
            r.params["process_medians_s"] = meds
            rows.append(r)
        return load_run(_write(path, rows))

    def held(changes):
        return np.mean([c.lo <= 1 <= c.hi for c in changes])

    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        pairs = [(run_of(Path(tmp) / f"a{k}.json"), run_of(Path(tmp) / f"b{k}.json")) for k in range(3)]
        with_term = np.mean([held(cmp.compare_runs(a, b, model=m, one_start=True)) for a, b in pairs])
        spread = cmp.process_spread(*pairs[0])
        (cls,) = set(spread)
        found = run_term(m, "h100-80gb-hbm3", cls + ("",), spread[cls])
        plain = []
        for a, b in pairs:
            for r in b.records:
                ra = next(x for x in a.records if x.params["op"] == r.params["op"])
                _, lo, hi = cmp.process_ratio_ci(ra.params["process_medians_s"], r.params["process_medians_s"],
                                                 prior_scale=s, k0=4)
                plain.append(lo <= 1 <= hi)
    assert with_term >= 0.93 and np.mean(plain) < 0.90, (with_term, np.mean(plain))
    assert found == pytest.approx(d, rel=0.35)


def test_the_calibration_sees_one_process_a_side_of_a_processes_run(tmp_path):
    """judged_shifts (what the noise model is fitted on) takes each run's first process, so runs
    of bench.blas --processes keep the model a model of one process a side."""
    rows_a, rows_b = _row("x", [1e-5] * 20), _row("x", [1.02e-5] * 20)
    rows_a.params["process_medians_s"] = [1e-5, 1.04e-5, 0.98e-5]
    rows_b.params["process_medians_s"] = [1.02e-5, 0.97e-5, 1.0e-5]
    a, b = load_run(_write(tmp_path / "a.json", [rows_a])), load_run(_write(tmp_path / "b.json", [rows_b]))
    ((_, shift),) = judged_shifts(a, b, one_start=True)
    assert shift == pytest.approx(np.log(1.02))
    (judged,) = cmp.compare_runs(a, b, intervals=False)
    assert judged.ratio != pytest.approx(1.02)  # compare itself takes the processes' means


def test_the_bootstrap_medians_are_numpys_medians_of_the_same_resamples():
    """compare's bootstrap finds each resample's median from how often each rank was drawn instead
    of sorting the resample (ratio_ci.resampled_medians): the numbers must be numpy's, to the bit,
    for odd and even sizes, ties (event timers tick in 32 ns) and a single sample, and the interval
    median_ratio_ci gives must be the one the plain resampling gives for the same seed."""
    from gapbench.core import ratio_ci

    rng = np.random.default_rng(21)
    for size in (1, 2, 3, 10, 21, 40):
        for ties in (False, True):
            x = rng.normal(5e-6, 1e-7, size)
            if ties:
                x = np.round(x / 3.2e-8) * 3.2e-8
            idx = rng.integers(0, size, (257, size))
            assert np.array_equal(ratio_ci.resampled_medians(x, ratio_ci.draw_counts(idx)), np.median(x[idx], axis=1))
    a, b = rng.normal(5e-6, 1e-7, 12), rng.normal(5.2e-6, 1e-7, 17)
    draw = np.random.default_rng(3)
    ma = np.median(a[draw.integers(0, a.size, (ratio_ci.BOOTSTRAP, a.size))], axis=1)
    mb = np.median(b[draw.integers(0, b.size, (ratio_ci.BOOTSTRAP, b.size))], axis=1)
    plain = (float(np.median(b) / np.median(a)), float(np.quantile(mb / ma, 0.025)), float(np.quantile(mb / ma, 0.975)))
    assert ratio_ci.median_ratio_ci(a, b, seed=3) == plain
    assert ratio_ci.median_ratio_ci(a, b, seed=3) == plain  # again, from the remembered draws


def _state_rows(rng, score_pct, backends=(("torch-cuda", "torch"), ("cupy", "cupy"))):
    """torch's and CuPy's 16 Mi-element fp16 GEMV and VJP dx rows whose state score is `score_pct`."""
    out = []
    for be, variant in backends:
        for op, shape, scale in (("gemv", "16384x1024", math.exp(score_pct / 100)), ("vjp_dx", "1024x16384", 1.0)):
            r = _row(op, _lognormal(rng, 1.3 * scale, 0.001), backend=be)
            r.variant, r.params = variant, {"op": op, "dtype": "fp16", "shape_text": shape}
            out.append(r)
    return out


def test_runs_in_different_process_states_are_said_to_be_and_no_verdict_changes(tmp_path, capsys):
    """bench.blas's runs whose torch/CuPy state scores lie a level apart (states.GAP) get one note naming
    both scores, in the CLI's notes too; runs of one level, of two GPU models, or without the two cases
    get none; the rows' verdicts are compare's own either way."""
    from gapbench.benchmarks.blas import states

    rng = np.random.default_rng(11)
    a = _write(tmp_path / "a.json", _state_rows(rng, +5.0))
    b = _write(tmp_path / "b.json", _state_rows(rng, -5.5))
    near = _write(tmp_path / "near.json", _state_rows(rng, +5.0 - 0.8 * states.GAP))
    other_gpu = _write(tmp_path / "h200.json", _state_rows(rng, -5.5), device="NVIDIA H200")
    torch_only = _write(tmp_path / "t.json", _state_rows(rng, -5.5, backends=(("torch-cuda", "torch"),)))
    none = _write(tmp_path / "none.json", [_row("x", _lognormal(rng, 1))])
    A = load_run(a)
    sa, sb = states.scores(A), states.scores(load_run(b))
    assert sa == pytest.approx({"torch-cuda": 5.0, "cupy": 5.0}, abs=0.1)
    assert sb == pytest.approx({"torch-cuda": -5.5, "cupy": -5.5}, abs=0.1)
    note = states.state_note(A, load_run(b))
    assert "different process states" in note and "torch-cuda A +5.0, B -5.5; cupy A +5.0, B -5.5" in note
    only = states.state_note(A, load_run(torch_only))  # a backend one run did not time is left out
    assert "torch-cuda A +5.0, B -5.5" in only and "cupy A" not in only
    for other in (near, other_gpu, none):
        assert states.state_note(A, load_run(other)) == ""
    assert command.main([str(a), str(b)]) == 0
    assert "different process states" in capsys.readouterr().out
    assert command.main([str(a), str(near)]) == 0
    assert "process states" not in capsys.readouterr().out
    # a note, never a verdict: the GEMV's 10% move between the states is still called as it is
    by = {c.key: c.verdict for c in cmp.compare_runs(A, load_run(b), model=_model())}
    assert by[("blas", "torch-cuda", "torch", "time", "gemv fp16 16384x1024")] == cmp.FASTER


def test_a_benchmark_this_install_cannot_load_adds_no_notes(monkeypatch):
    """compare asks the benchmark whose records it judges for notes; an unknown probe, or a benchmark
    whose optional dependencies are missing here, adds none and compare goes on."""
    from gapbench import benchmarks

    def missing(name):
        raise ImportError(f"No module named 'optional_dep' (needed by {name})")

    assert command._benchmark_notes("no-such-probe", None, None) == []
    monkeypatch.setattr(benchmarks, "get", missing)
    assert command._benchmark_notes("blas", None, None) == []


def test_the_model_describes_its_sources_in_words():
    from gapbench.core.noise import NoiseModel

    doc = {"generator": "g", "devices": {"a": {"starts": ["s"], "pairs": 1}, "b": {"starts": ["s", "t"], "pairs": 30}},
           "floor": {"a": {"starts": ["s"]}}}
    assert NoiseModel(doc).describe() == ("per-row noise model of a (1 machine start, 1 A/A row pair), b (2 machine "
                                          "starts, 30 A/A row pairs) (g); launch floors of a (1 start)")
    assert NoiseModel({}).describe() == "no noise model"
