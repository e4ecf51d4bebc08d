"""Every GPU of one host (issue 36 item 2): `gapbench run --gpus` plans one process per GPU for the
single-GPU benchmarks, and gapbench.core.pergpu sets the GPUs side by side, marking one outside the
others' spread. Runs are synthetic: four GPUs of one host, one of them with a slower GEMM."""
import json

import numpy as np
import pytest

from gapbench.core import gpu as gp
from gapbench.core import pergpu
from gapbench.core.cli import UsageError
from gapbench.core.noise import NoiseModel
from gapbench.core.result import OK, Record, Run

GPUS = [gp.Gpu(i, f"GPU-{i}{i}{i}{i}-0000", f"0000:{0x18 + 16 * i:02x}:00.0", "NVIDIA H200") for i in range(4)]
#: a model whose every blas row moves by 0.5% (rms) between two processes on one start
MODEL = NoiseModel({"devices": {"h200": {"within": {"blas/*/*/gated/many/*": {
    "n": 500, "groups": 10, "rms": 0.005, "q99": 0.01, "scale": 0.005}}}}})


def _run(i: int, slow: dict[str, float], boot: str = "b1", seed: int = 0, probe: str = "blas") -> Run:
    """A blas run on GPU i: 6 GEMM and 6 copy rows, each GPU's rows within 0.3% of each other,
    the ops in `slow` slowed by that factor."""
    rng = np.random.default_rng(seed + 17 * i)
    g = GPUS[i]
    ident = {"cuda_index": 0, "nvml_index": g.nvml_index, "uuid": g.uuid, "pci_bus_id": g.pci_bus_id, "name": g.name}
    recs = []
    for op, base in (("gemm", 50e-6), ("copy", 20e-6)):
        for n in range(6):
            t = base * (1 + n) * slow.get(op, 1.0) * (1 + rng.normal(0, 0.003))
            recs.append(Record(probe=probe, backend="native-cuda", metric="time", variant="cublas", status=OK,
                               samples_s=list(t * rng.lognormal(0, 0.002, 50)),
                               params={"op": op, "dtype": "fp16", "shape_text": f"n={n}"},
                               conditions={"clock": "device events, gated"}, device={"gpu": ident}))
    env = {"nvidia_smi": [{"name": "NVIDIA H200"}], "gpu": ident, "host_id": {"boot_id": boot, "machine_id": "m"}}
    return Run(path=None, run={"probe": probe, "command": "gapbench blas"}, env=env, records=recs)


def test_families_name_what_a_row_measures():
    r = Record(probe="blas", backend="cupy", metric="time", status=OK, samples_s=[1.0], params={"op": "vjp_dw"})
    assert pergpu.family(r) == "blas vjp_dw"
    r = Record(probe="launch", backend="cupy", metric="submit", status=OK, samples_s=[1.0])
    assert pergpu.family(r) == "launch submit"


def test_a_gpu_with_a_slower_gemm_is_marked_and_no_other():
    runs = [_run(i, {"gemm": 1.10} if i == 2 else {}) for i in range(4)]
    (c,) = pergpu.comparisons(runs, MODEL)
    assert c.gpus == [pergpu.gpu_label(_gpu(i)) for i in range(4)]
    fams = {f.name: f for f in c.families}
    assert set(fams) == {"blas gemm", "blas copy"} and fams["blas gemm"].rows == 6
    gemm = fams["blas gemm"]
    assert list(gemm.marked) == [c.gpus[2]] and "below the other GPUs'" in gemm.marked[c.gpus[2]]
    assert 0.88 < gemm.scores[c.gpus[2]] < 0.93 and min(gemm.scores[g] for g in c.gpus if g != c.gpus[2]) > 0.99
    assert not fams["blas copy"].marked
    assert gemm.tol == pytest.approx(max(pergpu.MIN_TOL, np.expm1(1.959964 * 0.005)))
    assert "GPU 2 (0000:38:00.0): blas gemm" in pergpu.text(c)
    row = next(r for r in pergpu.rows_of(c) if r[0] == "blas gemm")
    assert [cell.endswith(" !") for cell in row[2:6]] == [False, False, True, False]


def test_alike_gpus_are_not_marked_and_an_uncalibrated_model_says_so():
    runs = [_run(i, {}) for i in range(4)]
    (c,) = pergpu.comparisons(runs, MODEL)
    assert not c.marks() and "no GPU outside" in pergpu.text(c)
    (c,) = pergpu.comparisons(runs, NoiseModel({}))
    assert all(f.tol == pergpu.FALLBACK_TOL and "uncalibrated" in f.tol_note for f in c.families)


def test_only_runs_of_one_start_benchmark_and_several_gpus_are_set_side_by_side():
    runs = [_run(0, {}), _run(1, {}, boot="b2"), _run(2, {}, boot="b2")]
    (c,) = pergpu.comparisons(runs, MODEL)  # GPU 0 ran on another machine start
    assert len(c.gpus) == 2
    lone = _run(3, {})
    lone.env.pop("gpu")
    for r in lone.records:
        r.device = {}
    assert pergpu.comparisons([lone, _run(0, {})], MODEL) == []


def _gpu(i):
    g = GPUS[i]
    return {"nvml_index": g.nvml_index, "pci_bus_id": g.pci_bus_id, "uuid": g.uuid}


@pytest.fixture
def four_gpus(monkeypatch):
    monkeypatch.setattr(gp, "_listed", (GPUS, ""))
    monkeypatch.delenv(gp.VISIBLE, raising=False)
    monkeypatch.delenv(gp.ORDER, raising=False)


def test_gpus_all_runs_each_single_gpu_benchmark_once_per_gpu(four_gpus, tmp_path, monkeypatch):
    from gapbench.tools.run import command as rc

    gpus = rc.resolve_gpus("all")
    assert [g["index"] for g in gpus] == [0, 1, 2, 3] and gpus[3]["pci_bus_id"] == "0000:48:00.0"
    plan = rc.plan_entries(["launch", "blas", "suite"], 1, gpus, tmp_path, True, None, {})
    names = [(e["name"], e.get("gpu", {}).get("index")) for e, _ in plan]
    assert names == [("launch", i) for i in range(4)] + [("blas", i) for i in range(4)] + [("suite", None)]
    entry, argv = plan[5]
    assert entry["result"] == "blas-gpu1.json.gz" and argv[-2:] == ["--gpu", "1"]
    assert "--gpu" not in plan[-1][1]
    monkeypatch.setenv(gp.VISIBLE, "3,1")
    assert [g["nvml_index"] for g in rc.resolve_gpus("1,0")] == [1, 3]


def test_gpus_refusals_are_one_line(four_gpus, tmp_path, monkeypatch, capsys):
    from gapbench.tools.run import command as rc

    with pytest.raises(UsageError, match=r"sees 4 GPU\(s\) \(indices 0..3\); 4 is none of them"):
        rc.resolve_gpus("0,4")
    with pytest.raises(UsageError, match="named twice"):
        rc.resolve_gpus("1,1")
    with pytest.raises(UsageError, match="both choose the GPU"):
        rc.plan_entries(["blas"], 1, rc.resolve_gpus("all"), tmp_path, True, None, {"blas": ["--gpu", "1"]})
    assert rc.main(["--gpus", "first", "--out", str(tmp_path)]) == 2
    assert "give all, or GPU indices" in capsys.readouterr().err
    monkeypatch.setattr(gp, "_listed", ([], "NVML unavailable: no driver"))
    assert rc.main(["--gpus", "all", "--only", "blas", "--out", str(tmp_path)]) == 2
    assert "no NVIDIA GPU is visible here" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # refused before the bundle folder is made


def test_the_bundle_and_the_report_show_the_gpus_side_by_side(tmp_path):
    from gapbench.tools.report.command import gpus_tables
    from gapbench.tools.run import command as rc
    from gapbench.core.result import RunWriter, load_run

    entries = []
    for i in range(3):
        run = _run(i, {"copy": 1.2} if i == 1 else {})
        w = RunWriter(tmp_path / f"blas-gpu{i}.json.gz", env=run.env, run=run.run, overhead=None)
        for r in run.records:
            w.add(r)
        w.finish()
        entries.append({"name": "blas", "status": "ok", "result": f"blas-gpu{i}.json.gz", "gpu": {"index": i}})
    text = rc.side_by_side(tmp_path, {"benchmarks": entries})
    assert "GPU 1 (0000:28:00.0): blas copy" in text and "below the other GPUs'" in text
    runs = [load_run(tmp_path / f"blas-gpu{i}.json.gz") for i in range(3)]
    (t,) = gpus_tables(runs)
    assert t.columns[2:5] == [pergpu.gpu_label(_gpu(i)) for i in range(3)] and "Marked: GPU 1" in t.note
    assert json.dumps(t.rows)  # plain text cells
    assert rc.side_by_side(tmp_path, {"benchmarks": entries[:1]}).startswith("GPUs side by side: fewer than two")


def test_a_row_under_other_conditions_on_one_gpu_is_left_out_and_counted():
    """As compare does: rows are set side by side only under the same compared conditions."""
    runs = [_run(i, {}) for i in range(3)]
    odd = next(r for r in runs[1].records if r.params["op"] == "gemm")
    odd.conditions = {"clock": "device events, gated", "cache": "l2-resident"}
    (c,) = pergpu.comparisons(runs, MODEL)
    assert {f.name: f.rows for f in c.families} == {"blas gemm": 5, "blas copy": 6}
    assert len(c.left_out) == 1 and "cache" in next(iter(c.left_out.values()))
    assert "1 row(s) left out: their conditions differ between GPUs" in pergpu.text(c)
