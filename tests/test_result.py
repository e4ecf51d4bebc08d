"""The measurement core: statistics, the record, atomic run files, CSV, schema checks."""
import json

import numpy as np
import pytest

from gapbench.core import stats
from gapbench.core.result import ERROR, OK, SCHEMA_VERSION, Record, RunWriter, SchemaError, atomic_write_text, load_run, records_to_csv


def test_summarize_matches_numpy():
    rng = np.random.default_rng(1)
    v = rng.lognormal(-12, 0.2, 1001)
    s = stats.summarize(v)
    assert s.n == 1001
    assert s.median == pytest.approx(np.median(v))
    assert s.p10 == pytest.approx(np.percentile(v, 10))
    assert s.iqr == pytest.approx(np.percentile(v, 75) - np.percentile(v, 25))
    assert s.min == v.min() and s.max == v.max()
    assert s.noise == pytest.approx(s.iqr / s.median)


def test_noise_flag():
    steady = stats.summarize([1.0, 1.01, 0.99, 1.0, 1.0])
    noisy = stats.summarize([1.0, 2.0, 0.5, 1.5, 3.0])
    assert not steady.noisy and noisy.noisy


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")], [float("inf")]])
def test_summarize_refuses_bad_samples(bad):
    with pytest.raises(ValueError):
        stats.summarize(bad)


def test_rates_derived_from_declared_work():
    r = Record(probe="p", backend="b", metric="m", clock="host_wall", samples_s=[2e-3, 2e-3, 2e-3], inner=2,
               work={"flops": 1e6, "bytes": 4e3})
    # per op: 1e-3 s -> 1e9 FLOP/s and 4e6 B/s
    assert r.rates()["flops_per_s"] == pytest.approx(1e9)
    assert r.rates()["bytes_per_s"] == pytest.approx(4e6)
    assert r.summary().median == pytest.approx(1e-3)


def test_kept_values_follow_the_samples_and_conditions_they_were_made_of():
    # compare reads a record once per pair of runs it is in, so its median, quantiles and
    # conditions are kept on it; a change to what they were made of is seen, not served stale
    from gapbench.core.conditions import Conditions

    r = Record(probe="p", backend="b", metric="m", clock="host_wall", samples_s=[3.0, 1.0, 2.0, 4.0], inner=2,
               conditions={"cache": "rotated", "seed": 1})
    assert r.median() == float(np.median(np.array([3.0, 1.0, 2.0, 4.0]) / 2))
    assert r.quantiles((0.5,)) == [float(np.quantile(np.array([3.0, 1.0, 2.0, 4.0]) / 2, 0.5))]
    c = Conditions.of(r)
    assert c.cache == "rotated" and Conditions.of(r) is c
    r.samples_s = [8.0, 8.0, 9.0]
    r.inner = 1
    assert r.median() == 8.0 and r.quantiles((0.5,)) == [8.0]
    r.conditions["cache"] = "l2-resident"  # changed in place: a new parse
    assert Conditions.of(r).cache == "l2-resident"
    r.conditions = {}
    assert Conditions.of(r).cache is None


def test_record_validation():
    with pytest.raises(ValueError, match="needs samples"):
        Record(probe="p", backend="b", metric="m", status=OK)
    with pytest.raises(ValueError, match="status"):
        Record(probe="p", backend="b", metric="m", status="fine", samples_s=[1.0])
    with pytest.raises(ValueError, match="clock"):
        Record(probe="p", backend="b", metric="m", clock="sundial", samples_s=[1.0])
    # an error row needs no samples and has no summary
    e = Record(probe="p", backend="b", metric="m", status=ERROR, reason="boom")
    assert e.summary() is None and e.rates() == {}


def test_run_file_roundtrip_and_atomic_rewrites(tmp_path):
    path = tmp_path / "run.json"
    w = RunWriter(path, env={"os": "test"}, run={"probe": "p"}, csv_path=tmp_path / "run.csv", overhead=None)
    assert load_run(path).records == []  # valid from the start
    for i in range(3):
        w.add(Record(probe="p", backend=f"b{i}", metric="m", clock="host_wall", samples_s=[1e-6 * (i + 1)] * 5))
        run = load_run(path)  # after every record the file is complete and readable
        assert [r.backend for r in run.records] == [f"b{k}" for k in range(i + 1)]
    w.finish()
    doc = json.loads(path.read_text())
    assert doc["schema_version"] == SCHEMA_VERSION and "finished" in doc["run"]
    assert doc["records"][2]["derived"]["summary"]["median"] == pytest.approx(3e-6)
    csv_lines = (tmp_path / "run.csv").read_text().splitlines()
    assert csv_lines[0].startswith("probe,backend") and len(csv_lines) == 4
    assert not list(tmp_path.glob(".*.tmp"))  # no temp files left behind


def test_rewrites_are_spaced_by_their_cost_and_nothing_pending_is_lost(tmp_path, monkeypatch):
    """Each rewrite took 1 s on the fake clock; at 5% overhead the next one waits 20 s."""
    import gapbench.core.result as result

    now = [0.0]
    real = result.write_document

    def slow_write(path, doc):
        now[0] += 1.0
        real(path, doc)

    monkeypatch.setattr(result, "write_document", slow_write)
    path = tmp_path / "run.json"
    w = RunWriter(path, env={"os": "test"}, run={"probe": "p"}, overhead=0.05, clock=lambda: now[0])
    rec = lambda i: Record(probe="p", backend=f"b{i}", metric="m", clock="host_wall", samples_s=[1e-6])
    w.add(rec(0))  # 0 s since the last rewrite, which took 1 s: not yet
    assert load_run(path).records == [] and w.pending
    now[0] += 19.0
    w.add(rec(1))
    assert load_run(path).records == [] and w.pending
    now[0] += 1.0
    w.add(rec(2))  # 20 s: rewritten, with everything so far
    assert [r.backend for r in load_run(path).records] == ["b0", "b1", "b2"] and not w.pending
    w.add(rec(3))
    w.finish()
    run = load_run(path)
    assert [r.backend for r in run.records] == ["b0", "b1", "b2", "b3"] and "finished" in run.run


def test_atomic_write_failure_leaves_old_file(tmp_path, monkeypatch):
    p = tmp_path / "f.json"
    atomic_write_text(p, "old")

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr("os.replace", boom)
    with pytest.raises(OSError):
        atomic_write_text(p, "new")
    assert p.read_text() == "old"
    assert not list(tmp_path.glob(".*.tmp"))


def test_schema_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(SchemaError, match="bad.json"):
        load_run(bad)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"schema": "something-else"}))
    with pytest.raises(SchemaError, match="not a gapbench run"):
        load_run(other)
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({"schema": "gapbench.run", "schema_version": SCHEMA_VERSION + 1, "records": []}))
    with pytest.raises(SchemaError, match="schema version"):
        load_run(newer)


def test_csv_of_failed_rows_has_reason():
    text = records_to_csv([Record(probe="p", backend="b", metric="m", status=ERROR, reason="it broke")])
    assert "it broke" in text and "error" in text


# ---- compact results (.json.gz)

def _written_run(path, n_records=3):
    w = RunWriter(path, env={"os": "test", "cpu": "Test CPU"}, run={"probe": "p", "command": "python -m bench.p --x"})
    rng = np.random.default_rng(7)
    for i in range(n_records):
        # samples with all their digits: a lossy store (float32, rounding) would change them
        w.add(Record(probe="p", backend=f"b{i}", metric="m", clock="device_events",
                     samples_s=list(rng.lognormal(-11, 0.3, 50)), work={"bytes": 4096.0},
                     device={"name": "GPU Q"}))
    w.add(Record(probe="p", backend="bx", metric="m", status=ERROR, reason="it broke"))
    w.finish()
    return w


def test_run_writer_writes_gzip_when_the_name_says_so_and_load_run_reads_it(tmp_path):
    import gzip

    w = _written_run(tmp_path / "run.json.gz")
    raw = (tmp_path / "run.json.gz").read_bytes()
    assert raw[:2] == b"\x1f\x8b"  # really gzip, not text with a .gz name
    doc = json.loads(gzip.decompress(raw))
    assert doc["schema"] == "gapbench.run" and len(doc["records"]) == 4
    run = load_run(tmp_path / "run.json.gz")
    assert [r.samples_s for r in run.records] == [r.samples_s for r in w.records]
    assert run.records[-1].reason == "it broke" and run.run["command"] == "python -m bench.p --x"


def test_compact_keeps_every_sample_exactly_and_is_much_smaller(tmp_path):
    from gapbench.core.compact import compact_file

    src = tmp_path / "run.json"
    _written_run(src, n_records=20)
    dst = compact_file(src)
    assert dst == tmp_path / "run.json.gz"
    a, b = load_run(src), load_run(dst)
    assert [r.samples_s for r in a.records] == [r.samples_s for r in b.records]  # bit for bit
    assert [r.to_dict() for r in a.records] == [r.to_dict() for r in b.records]  # derived values recomputed alike
    assert b.run == a.run and b.env == a.env
    assert "derived" not in json.loads(__import__("gzip").decompress(dst.read_bytes()))["records"][0]
    assert dst.stat().st_size * 2 < src.stat().st_size
    # the same document always gives the same bytes (no timestamp in the gzip header)
    again = compact_file(src, tmp_path / "again.json.gz")
    assert again.read_bytes() == dst.read_bytes()


def test_compact_rewrites_a_runs_own_json_gz_in_place(tmp_path):
    """bench.* --out X.json.gz writes gzip with derived summaries: compacting it keeps its name."""
    import gzip

    from gapbench.core.compact import compact_file

    src = tmp_path / "run.json.gz"
    _written_run(src, n_records=20)
    before = load_run(src)
    assert "derived" in json.loads(gzip.decompress(src.read_bytes()))["records"][0]
    size = src.stat().st_size
    dst = compact_file(src)
    assert dst == src
    assert "derived" not in json.loads(gzip.decompress(dst.read_bytes()))["records"][0]
    assert dst.stat().st_size < size
    after = load_run(dst)
    assert [r.to_dict() for r in after.records] == [r.to_dict() for r in before.records]
    assert compact_file(dst, tmp_path / "out" / "x.json.gz").name == "x.json.gz"


def test_damaged_or_foreign_compact_files_are_refused_with_their_name(tmp_path):
    import gzip

    from gapbench.core.compact import compact_file

    cut = tmp_path / "cut.json.gz"
    _written_run(tmp_path / "ok.json.gz")
    cut.write_bytes((tmp_path / "ok.json.gz").read_bytes()[:40])
    with pytest.raises(SchemaError, match="cut.json.gz"):
        load_run(cut)
    foreign = tmp_path / "foreign.json.gz"
    foreign.write_bytes(gzip.compress(b'{"schema": "other"}'))
    with pytest.raises(SchemaError, match="not a gapbench run"):
        load_run(foreign)
    notrun = tmp_path / "notes.json"
    notrun.write_text('{"hello": 1}')
    with pytest.raises(SchemaError, match="not a gapbench run"):
        compact_file(notrun)
    assert not (tmp_path / "notes.json.gz").exists()


def test_compact_cli_exit_codes_and_describe(tmp_path, capsys):
    from gapbench.core.compact import main

    src = tmp_path / "run.json"
    _written_run(src)
    assert main([str(tmp_path / "nope.json")]) == 2
    assert "no such file" in capsys.readouterr().err
    (tmp_path / "junk.json").write_text("[]")
    assert main([str(tmp_path / "junk.json")]) == 2
    assert main([str(src), "--out-dir", str(tmp_path / "c"), "--remove"]) == 0
    assert not src.exists() and (tmp_path / "c" / "run.json.gz").exists()
    capsys.readouterr()
    (tmp_path / "sweep.txt").write_text("# tool X at commit abc on GPU Q, 2026-01-01\nrow 1\n")
    assert main(["--describe", str(tmp_path / "c" / "run.json.gz"), str(tmp_path / "sweep.txt")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split("\t")[1] == "gapbench run"
    assert "GPU Q" in out[0] and "python -m bench.p --x" in out[0]
    assert "tool X at commit abc" in out[1] and "\ttext\t" in out[1]
