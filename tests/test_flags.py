"""The flags every benchmark shares, from one place (issue 36 item 3): --out, --quick and
--no-progress mean the same in every measuring benchmark (gapbench.core.cli.add_common_arguments),
--gpu in blas, launch, train and bench (a user's cases); a bad argument is one line, exit 2; and the newcomer fixes:
--quick checks what the user names, `gapbench run --backends nope` refuses before any folder, a
.json.gz result's CSV is <name>.csv."""
from __future__ import annotations

from pathlib import Path

import pytest

from gapbench import benchmarks
from gapbench.benchmarks.train import dp
from gapbench.core import cli

from conftest import run_module

GPU_BENCHMARKS = {"blas", "launch", "train", "bench"}
#: the positional arguments a benchmark needs before its flags parse
POSITIONAL = {"bench": ["examples/softmax_torch.py"]}


def _options(ap) -> dict:
    return {opt: a for a in ap._actions for opt in a.option_strings}


def _parsers() -> dict:
    """name -> (probe, parser) of every measuring benchmark, and bench.train's --nproc parser."""
    out = {}
    for name in benchmarks.available():
        bench = benchmarks.get(name)
        if bench.measures:
            out[name] = (bench.name, bench.parser(f"gapbench {name}"))
    out["train --nproc"] = (dp.PROBE, dp.parser("gapbench train"))
    return out


def test_the_measuring_benchmarks_are_all_checked():
    assert {"launch", "blas", "train", "suite"} <= set(_parsers())


@pytest.mark.parametrize("name", list(_parsers()))
def test_common_flags_mean_the_same_everywhere(name):
    probe, ap = _parsers()[name]
    opts = _options(ap)
    assert opts["--out"].help == cli.OUT_HELP.format(probe=probe)
    assert f"results/{probe}-<time>.json" in opts["--out"].help and "CSV" in opts["--out"].help
    assert opts["--out"].default is None
    assert opts["--quick"].help.startswith(cli.QUICK_HELP) and opts["--quick"].default is False
    assert opts["--no-progress"].help == cli.NO_PROGRESS_HELP and opts["--no-progress"].default is False
    argv = POSITIONAL.get(name, []) + ["--out", "x.json", "--quick", "--no-progress"] + (
        ["--nproc", "2"] if name == "train --nproc" else [])
    args = ap.parse_args(argv)
    assert args.out == "x.json" and args.quick is True and args.no_progress is True


def test_gpu_is_in_blas_launch_and_train_only_and_the_same():
    ref = cli.ArgumentParser()
    cli.add_gpu_argument(ref)
    want = _options(ref)["--gpu"]
    have = {name for name, (_, ap) in _parsers().items() if "--gpu" in _options(ap)}
    assert have == GPU_BENCHMARKS
    for name in GPU_BENCHMARKS:
        got = _options(_parsers()[name][1])["--gpu"]
        assert (got.help, got.type, got.metavar, got.default) == (want.help, want.type, want.metavar, want.default)


def test_gapbench_run_takes_out_and_quick():
    opts = _options(benchmarks.get("run").parser("gapbench run"))
    assert opts["--quick"].help.startswith(cli.QUICK_HELP) and "folder" in opts["--out"].help


# ------------------------------------------------------------------ one line on a bad argument
def test_a_bad_flag_to_blas_is_one_stderr_line():
    p = run_module("bench.blas", "--no-such-flag", timeout=120)
    assert p.returncode == 2
    lines = p.stderr.splitlines()
    assert lines == ["error: unrecognized arguments: --no-such-flag (see --help)"], p.stderr
    assert "usage:" not in p.stdout + p.stderr


@pytest.mark.parametrize("name", benchmarks.available())
def test_every_command_says_a_bad_argument_in_one_line(name, capsys):
    assert benchmarks.get(name).main(["--no-such-flag"], prog=f"gapbench {name}") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and err.endswith("(see --help)\n"), err


def test_train_nproc_and_compact_say_a_bad_argument_in_one_line(capsys):
    assert benchmarks.get("train").main(["--nproc", "2", "--no-such-flag"]) == 2
    err = capsys.readouterr().err
    assert err == "error: unrecognized arguments: --no-such-flag (see --help)\n"
    from gapbench.core.compact import main as compact_main

    with pytest.raises(SystemExit) as e:
        compact_main([])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ")


def test_one_line_even_for_a_multi_line_message(capsys):
    with pytest.raises(SystemExit) as e:
        cli.ArgumentParser(prog="x").error("first\nsecond")
    assert e.value.code == 2 and capsys.readouterr().err == "error: first second (see --help)\n"


# ------------------------------------------------------------------ --quick checks what the user names
@pytest.mark.parametrize("args,bad", [(["--model", "gpt5"], "gpt5"), (["--batch-size", "-2"], "-2"),
                                      (["--batch-size", "0"], "0")])
def test_train_quick_checks_the_model_and_batch_size(args, bad, capsys):
    assert benchmarks.get("train").main(["--quick", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and bad in err, err


def _train_plan(monkeypatch, *argv) -> tuple[dict, dict]:
    """The sweep and the case settings bench.train would run, stopped before any work."""
    from gapbench.benchmarks.train import command

    seen = {}

    def stop(sweep, base):
        seen.update(sweep=sweep, base=base)
        raise cli.UsageError("stop here")

    monkeypatch.setattr(command, "expand", stop)
    assert command.BENCHMARK.main(["--backend", "torch-cpu", *argv]) == 2
    return seen["sweep"], seen["base"]


def test_train_quick_keeps_what_the_user_names_and_fills_the_rest(monkeypatch, capsys):
    sweep, base = _train_plan(monkeypatch, "--quick")
    assert base["model"] == "tiny-gpt2" and sweep["batch_size"] == [2] and sweep["seq_len"] == [64]
    assert (base["steps"], base["warmup"], base["rounds"]) == (4, 1, 2)
    sweep, base = _train_plan(monkeypatch, "--quick", "--model", "gpt2", "--batch-size", "3", "--steps", "6")
    assert base["model"] == "gpt2" and sweep["batch_size"] == [3] and base["steps"] == 6
    sweep, base = _train_plan(monkeypatch)
    assert base["model"] == "gpt2" and sweep["batch_size"] == [8] and base["steps"] == 20
    capsys.readouterr()


def test_dist_quick_is_a_short_all_reduce_sweep(monkeypatch):
    from gapbench.benchmarks.collectives import command
    from gapbench.core.names import CollOp

    monkeypatch.setattr(command, "gpu_count", lambda: 0)
    bench = command.BENCHMARK
    cfg, _, _ = bench.config(bench.parser("gapbench dist").parse_args(["--quick"]))
    assert cfg.ops == [CollOp.all_reduce] and max(cfg.sizes) == 64 << 10
    cfg, _, _ = bench.config(bench.parser("gapbench dist").parse_args(["--quick", "--ops", "broadcast", "-e", "4K"]))
    assert cfg.ops == [CollOp.broadcast] and max(cfg.sizes) == 4 << 10
    cfg, _, _ = bench.config(bench.parser("gapbench dist").parse_args([]))
    assert len(cfg.ops) > 1 and max(cfg.sizes) == 1 << 20
    assert "--quick" in bench.bundle_args(Path("d.json.gz"), True)


# ------------------------------------------------------------------ gapbench run --backends
def test_run_refuses_an_unknown_backend_before_any_folder(tmp_path, capsys):
    out = tmp_path / "bundles"
    assert benchmarks.get("run").main(["--backends", "nope", "--out", str(out)], "gapbench run") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "'nope'" in err, err
    assert not out.exists()
    args = benchmarks.get("run").parser("gapbench run").parse_args(["--backends", "native-cpu,torch-cpu"])
    assert args.backends == "native-cpu,torch-cpu"  # passed through as given


# ------------------------------------------------------------------ the CSV beside a result file
@pytest.mark.parametrize("given,csv", [("a.json.gz", "a.csv"), ("a.json", "a.csv"), ("d/x.y.json", "d/x.y.csv"),
                                       ("a", "a.csv"), ("a.txt", "a.csv"), ("x.csv", "x.csv.csv")])
def test_csv_path_strips_json_and_json_gz(given, csv):
    assert cli.csv_path_for(Path(given)) == Path(csv)
    assert cli.csv_path_for(given) == Path(csv)


def test_open_run_writes_a_json_gz_results_csv_as_name_csv(tmp_path):
    w = cli.open_run("blas", str(tmp_path / "a.json.gz"), "prog", [], {}, [])
    try:
        assert w.csv_path == tmp_path / "a.csv" and (tmp_path / "a.csv").is_file()
        assert not (tmp_path / "a.json.csv").exists()
    finally:
        cli.current_run.clear()
