"""docs/results/mode_history.py, mode_native.py and overhead_probe.py, the probes of modes-2026-11-28/
and issue 35's next measurement: the tables say which rows were slow, where the mode cases' buffers
lay and what a sample holds beside its kernel, from the files as they are; the probes' one timing
helper rotates the sets and keeps the GPU activities."""
import gzip
import importlib.util
import json
from pathlib import Path

import pytest

from conftest import ROOT
from gapbench import ops
from gapbench.benchmarks.blas.params import BlasParams
from gapbench.benchmarks.blas.run import record
from gapbench.core.names import Backend, DType
from gapbench.core.result import OK, RunWriter

MiB = 1 << 20


def _module(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / "results" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _history_doc(slow_last: bool) -> dict:
    """One process: a full run, two steps on the same buffers (the second slow where asked), a probe."""
    gemv, vjp = "gemv 16384x1024 torch-cuda/torch", "vjp_dx 1024x16384 torch-cuda/torch"
    buffers = []
    for st in (-1, 0, 1):
        base = 0x7E00_0000_0000 if st == -1 else 0x7F00_0000_0000  # the first full run's own buffers
        buffers += [[st, "torch", 32 * MiB, base], [st, "torch", 2048, base + 0x10_0000_0000],
                    [st, "torch", 4096, base + 0x20_0000_0000]]  # an array of another case: not a mode buffer
    return {"device": {"name": "GPU X"}, "seed": 7, "plan": "context",
            "full": {gemv: 16.7e-6, vjp: 15.6e-6},
            "steps": [{"step": "again", "medians": {gemv: 16.1e-6, vjp: 15.6e-6}},
                      {"step": "full", "medians": {gemv: (16.7e-6 if slow_last else 16.1e-6), vjp: 15.6e-6}},
                      {"step": "probe", "gated_us": {"gemv": [16.0, 16.67, 17.0]},
                       "kernels": {"gemv": [{"name": "nvjet_k", "us": 13.6, "grid": [2, 64, 1], "block": [384, 1, 1],
                                             "registers per thread": 168}]}}],
            "buffers": buffers}


def test_history_table_gives_each_step_its_medians_and_the_probe_its_kernel(tmp_path):
    mh = _module("mode_history")
    path = tmp_path / "history-context-x-1.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump(_history_doc(slow_last=True), f)
    text = mh.table([str(path)])
    row = next(line for line in text.splitlines() if line.startswith("| gemv 16384x1024 torch-cuda/torch |"))
    assert row == "| gemv 16384x1024 torch-cuda/torch | 16.70 | 16.10 | 16.70 |"  # full, again, full: the probe is no column
    assert "plan context" in text and "history-context-x-1.json.gz" in text
    probe = next(line for line in text.splitlines() if line.startswith("| full (2) | gemv |"))
    assert "16.00 / 16.67 / 17.00" in probe and "`nvjet_k` grid [2, 64, 1] block [384, 1, 1] regs 168" in probe
    assert "(median 13.60 us)" in probe


def test_history_groups_the_steps_by_where_the_mode_buffers_lay():
    mh = _module("mode_history")
    doc = _history_doc(slow_last=False)
    where = mh.mode_buffers(doc)
    # the 32 MiB array beside a 2 KiB one is a mode buffer; the 4 KiB array is not
    assert where == {-1: (("torch", 0x7E00_0000_0000),), 0: (("torch", 0x7F00_0000_0000),),
                     1: (("torch", 0x7F00_0000_0000),)}


def test_history_table_says_which_steps_shared_the_buffers(tmp_path):
    mh = _module("mode_history")
    path = tmp_path / "h.json"
    path.write_text(json.dumps(_history_doc(slow_last=False)))
    line = next(x for x in mh.table([str(path)]).splitlines() if x.startswith("The mode cases'"))
    assert line.endswith("same device addresses: full (first); again (1), full (2).")


def test_history_without_small_arrays_logged_claims_nothing_about_buffers():
    mh = _module("mode_history")
    doc = _history_doc(slow_last=False)
    doc["buffers"] = [b for b in doc["buffers"] if b[2] >= 16 * MiB]  # the first probe's files logged only these
    assert mh.mode_buffers(doc) == {}


def _run(path, gemv_us, vjp_us, native: bool):
    w = RunWriter(path, env={"source_hash": "0" * 64}, run={"probe": "blas", "wall_s": {"total": 40.0}},
                  overhead=None)
    for op, shape, us in (("gemv", {"m": 16384, "k": 1024}, gemv_us), ("vjp_dx", {"m": 1024, "k": 16384}, vjp_us)):
        for b, v in ((Backend.torch_cuda, "torch"), (Backend.cupy, "cupy")):
            w.add(record(ops.get(op), DType.fp16, shape, b, v, BlasParams(), status=OK, samples_s=[us * 1e-6] * 5))
        if native:
            w.add(record(ops.get(op), DType.fp16, shape, Backend.native_cuda, "cublas", BlasParams(), status=OK,
                         samples_s=[us * 1e-6] * 5))
    w.finish()
    return str(path)


def test_native_table_marks_rows_over_the_fastest_and_says_which_runs_had_native_rows(tmp_path):
    mn = _module("mode_native")
    a = _run(tmp_path / "A1.json", 16.0, 16.3, native=True)
    f = _run(tmp_path / "F2.json", 16.7, 15.5, native=False)
    lines = mn.table([a, f]).splitlines()
    row_a = next(x for x in lines if x.startswith("| A1.json |"))
    row_f = next(x for x in lines if x.startswith("| F2.json |"))
    assert row_a == "| A1.json | yes | 40.0 | 16.00 | 16.00 | 16.30* | 16.30* |"
    assert row_f == "| F2.json | no | 40.0 | 16.70* | 16.70* | 15.50 | 15.50 |"


def test_overhead_table_splits_each_process_median_into_kernel_and_the_rest(tmp_path):
    """Three processes of one row: the kernel steady, the sample moving by what lies beside it; the
    table's rest is sample - kernel per process, and its sd across processes is in ns."""
    op = _module("overhead_probe")
    paths = []
    for i, (sample, kernel, batch) in enumerate(((5.00, 3.00, 3.96), (5.10, 3.00, 4.00), (4.90, 3.00, 4.04))):
        p = tmp_path / f"o{i}.json"
        p.write_text(json.dumps({"device": "GPU X", "rows": {"gemv 1024x1024 torch-cuda": {
            "sample_us": [sample - 0.1, sample, sample + 0.1], "kernel_us": [kernel] * 24, "kernels": ["k"],
            "kernels_per_call": 1.0, "batch_us": [batch - 0.1, batch, batch + 0.1], "batch": 8}}}))
        paths.append(str(p))
    line = next(x for x in op.table(paths).splitlines() if x.startswith("| gemv 1024x1024 torch-cuda |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[1] == "5.000 (2.00%)"      # the sample's medians 4.9, 5.0, 5.1: sd 0.1
    assert cells[2] == "3.000 (0.00%)"      # the kernel did not move
    assert cells[3] == "2.000 (5.00%)"      # so all of the move is beside it
    assert cells[4] == "100" and cells[5] == "1"
    assert cells[6] == "4.000 (1.00%), n=8"  # the batch arm's per-call medians 3.96, 4.00, 4.04


def test_overhead_table_leaves_the_split_out_where_a_process_saw_no_kernel(tmp_path):
    op = _module("overhead_probe")
    p = tmp_path / "o.json"
    p.write_text(json.dumps({"device": "GPU X", "rows": {"gemv 16384x1024 cupy": {
        "sample_us": [15.9, 16.0, 16.2], "kernel_us": [], "kernels": [], "kernels_per_call": 0.0}}}))
    line = next(x for x in op.table([str(p)]).splitlines() if x.startswith("| gemv 16384x1024 cupy |"))
    assert line == "| gemv 16384x1024 cupy | 16.000 (0.00%) | - | - | - | - | - |"


def test_gated_and_profiled_rotates_the_sets_and_keeps_the_gpu_activities(monkeypatch):
    """The probes' one timing helper: the input sets run in turn (two warm passes, then the gated
    samples, then the profiled calls), the percentiles are of the gated samples, and only GPU
    activities of the trace are kept, with their launch configuration."""
    import torch.profiler

    mh = _module("mode_history")
    ran = []
    fns = [(lambda i=i: ran.append(i)) for i in range(4)]

    class Ad:
        def time_device_each(self, fn, n):
            out = []
            for i in range(n):
                fn()
                out.append((i + 1) * 1e-6)  # 1..n us
            return out

    trace = {"traceEvents": [
        {"cat": "kernel", "name": "k", "dur": 13.5, "args": {"grid": [2, 64, 1], "block": [384, 1, 1]}},
        {"cat": "gpu_memset", "name": "Memset", "dur": 0.5},
        {"cat": "cpu_op", "name": "aten::mv", "dur": 40.0}]}

    class Prof:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def export_chrome_trace(self, path):
            with open(path, "w") as f:
                json.dump(trace, f)

    monkeypatch.setattr(torch.profiler, "profile", lambda **kw: Prof())
    syncs = []
    q, acts = mh.gated_and_profiled(Ad(), fns, 100, 8, lambda: syncs.append(len(ran)))
    assert ran == [i % 4 for i in range(8 + 100 + 8)]  # warm, gated, profiled: always the next set
    assert syncs == [8, 116]
    assert q == pytest.approx([11.0, 51.0, 91.0])  # the 10th, 50th and 90th of 1..100 us
    assert [(a["cat"], a["name"], a["us"]) for a in acts] == [("kernel", "k", 13.5), ("gpu_memset", "Memset", 0.5)]
    assert acts[0]["grid"] == [2, 64, 1] and acts[0]["block"] == [384, 1, 1] and acts[1]["grid"] is None


def test_floor_table_sets_each_process_floor_beside_its_short_rows(tmp_path):
    """One line a process: the current stream's floors, the range over the timing streams, the mean of
    its short rows' sample medians; and the correlation of the floor with that mean across processes
    (here the floor and the rows rise together by construction: +1.00)."""
    op = _module("overhead_probe")
    paths = []
    for i, lift in enumerate((0.0, 0.1, 0.3)):
        p = tmp_path / f"p{i}.json"
        floors = [{"stream": "current", "empty_us": 2.0 + lift, "empty_median_us": 2.0, "gemv_us": 5.0 + lift,
                   "gemv_median_us": 5.0, "empty_batch_us": 1.0 + lift}] + [
            {"stream": s, "empty_us": 2.1 + s / 10, "empty_median_us": 2.1, "gemv_us": 5.1 + s / 10, "gemv_median_us": 5.1,
             "empty_batch_us": 1.1} for s in range(2)]
        p.write_text(json.dumps({"device": "GPU X", "module_loading": "", "floors": floors, "rows": {
            "gemv 256x256 torch-cuda": {"sample_us": [0, 4.0 + lift, 0]},
            "gemv 1024x1024 cupy": {"sample_us": [0, 6.0 + lift, 0]},
            "gemv 4096x4096 cupy": {"sample_us": [0, 99.0, 0]}}}))
        paths.append(str(p))
    text = op.floor_table(paths)
    line = next(x for x in text.splitlines() if x.startswith("| p1.json |"))
    assert line == "| p1.json | driver default | 2.100 | 1.100 | 5.100 | 2.100-2.200 | 5.100-5.200 | 5.100 |"
    assert "Across 3 processes, the current stream's empty kernel against the short rows' mean: correlation 1.00." in text
    assert "stream to stream" in text and text.rstrip().endswith("correlation 1.00.")  # streams' GEMV rises with its floor
    # every GEMV moved exactly as its empty kernel: nothing is left once the empty kernel's move is off
    assert "Over every stream of every process (9), the empty kernel interleaved with the GEMV: correlation 1.00" in text
    assert "0.00% after the empty kernel's move (us) is taken off." in text


def test_offsets_splits_the_moves_into_one_offset_per_process_and_takes_the_floor_off(tmp_path):
    """Rows that move only by their process's offset, which the empty kernel also moves by (in us):
    nothing is left after the floor's move, the correlation is 1, and beside the common (log) offset
    only what an offset in us does to rows of other lengths is left."""
    op = _module("overhead_probe")
    paths = []
    for i, lift in enumerate((0.0, 0.1, -0.1, 0.2)):
        p = tmp_path / f"p{i}.json"
        floors = [{"stream": "current", "empty_us": 3.0 + lift, "empty_batch_us": 2.0 + lift, "gemv_us": 0,
                   "empty_median_us": 0, "gemv_median_us": 0}]
        rows = {k: {"sample_us": [0, base + lift, 0], "batch_us": [0, base - 1 + lift, 0]}
                for k, base in zip(op.SHORT, (5.0, 4.8, 4.8, 5.9, 5.9))}
        p.write_text(json.dumps({"device": "GPU X", "floors": floors, "rows": rows}))
        paths.append(str(p))
    text = op.offsets(paths)
    one = next(x for x in text.splitlines() if x.startswith("| one call each |"))
    cells = [c.strip() for c in one.strip("|").split("|")]
    assert cells[3] == "0.00%" and cells[4] == "1.00"
    moved, beside = float(cells[1].rstrip("%")), float(cells[2].rstrip("%"))
    assert moved > 1.0 and beside < moved / 5  # the rows did move, by their process's offset
    assert op.offsets(paths[:2]).startswith("fewer than 3 processes")
    for path in paths:  # files from before the probe measured floors: the offsets, no floor columns
        doc = json.loads(Path(path).read_text())
        del doc["floors"]
        Path(path).write_text(json.dumps(doc))
    one = next(x for x in op.offsets(paths).splitlines() if x.startswith("| one call each |"))
    assert [c.strip() for c in one.strip("|").split("|")][3:5] == ["-", "-"]


def test_floor_runs_takes_each_rows_floor_move_off_its_own(tmp_path):
    """Three runs whose short rows move only by their stream's launch floor (in us): d moves, d' is
    0, native and framework rows apart; rows without a floor are left out."""
    from gapbench.benchmarks.blas.params import LaunchFloor

    fr = _module("floor_runs")
    paths = []
    for i, lift in enumerate((0.0, 0.1e-6, -0.1e-6)):
        w = RunWriter(tmp_path / f"r{i}.json.gz", env={"source_hash": "0" * 64}, run={"probe": "blas"}, overhead=None)
        for b, v, base, floor in ((Backend.native_cuda, "cublas", 4e-6, 3e-6), (Backend.torch_cuda, "torch", 5e-6, 3.2e-6)):
            p = BlasParams(launch_floor=LaunchFloor(median_s=floor + lift, what="empty", rounds=10))
            w.add(record(ops.get("gemv"), DType.fp16, {"m": 256, "k": 256}, b, v, p, status=OK,
                         samples_s=[base + lift] * 5))
        w.add(record(ops.get("gemv"), DType.fp16, {"m": 16384, "k": 16384}, Backend.cupy, "cupy", BlasParams(),
                     status=OK, samples_s=[1e-3 * (1 + i / 10)] * 5))  # no floor: not a row of the table
        w.finish()
        paths.append(str(tmp_path / f"r{i}.json.gz"))
    lines = fr.table(paths).splitlines()
    native = next(x for x in lines if x.startswith("| native rows |"))
    cells = [c.strip() for c in native.strip("|").split("|")]
    assert cells[1] == "3" and float(cells[2].rstrip("%")) > 1.0 and cells[3] == "0.00%" and cells[5] == "0.00%"
    fw = next(x for x in lines if x.startswith("| framework rows |"))
    assert [c.strip() for c in fw.strip("|").split("|")][3] == "0.00%"
    assert "| r1.json.gz | 2 | 3.200 |" in lines
