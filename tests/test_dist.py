"""bench.dist and data-parallel training, run for real on the CPU (gloo, MLX ring, a two-node
torchrun rendezvous on localhost, a killed rank); GPU parts are marked cuda."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from gapbench.benchmarks.collectives import pattern
from gapbench.core.cli import UsageError
from gapbench.benchmarks.collectives.config import bus_factor, elements, parse_bytes, sweep
from gapbench.benchmarks.collectives.ncclinfo import algo_for, parse_nccl_log
from gapbench.core.result import ERROR, OK, load_run

ROOT = Path(__file__).resolve().parents[1]


def _env():
    env = dict(os.environ)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


def run(*args, timeout=240):
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=_env(), capture_output=True, text=True,
                          timeout=timeout)


def _torch_ok():
    try:
        import torch.distributed as d

        return d.is_available() and d.is_gloo_available()
    except ImportError:
        return False


def _mlx_ok():
    try:
        import mlx.core as mx

        return mx.distributed.is_available()
    except ImportError:
        return False


needs_gloo = pytest.mark.skipif(not _torch_ok(), reason="torch with gloo is not installed")
needs_mlx = pytest.mark.skipif(not _mlx_ok(), reason="MLX distributed is not installed")
SMALL = ["--samples", "2", "--warmup", "1", "--iters", "2"]


# ---------------------------------------------------------------- pure parts
def test_bus_factors_are_nccl_tests_values():
    assert bus_factor("all_reduce", 8) == 1.75
    assert bus_factor("all_reduce", 2) == 1.0
    assert bus_factor("all_gather", 4) == 0.75
    assert bus_factor("reduce_scatter", 8) == 0.875
    assert bus_factor("all_to_all", 2) == 0.5
    assert bus_factor("broadcast", 8) == 1.0 and bus_factor("sendrecv", 8) == 1.0


def test_sweep_and_sizes():
    assert sweep(1024, 1 << 20, 4) == [1024, 4096, 16384, 65536, 262144, 1048576]
    assert parse_bytes("256M") == 256 << 20 and parse_bytes("1G") == 1 << 30 and parse_bytes("8") == 8
    with pytest.raises(UsageError):
        parse_bytes("12 parsecs")
    with pytest.raises(UsageError):
        sweep(1024, 2048, 1.0)
    # per-rank chunks: rounded down to a multiple of the world size; too small -> 0
    assert elements("all_gather", 1000, "bf16", 3) == 498
    assert elements("all_reduce", 1000, "bf16", 3) == 500
    assert elements("reduce_scatter", 4, "fp32", 2) == 0


@pytest.mark.parametrize("world", [1, 2, 3, 8])
@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "sendrecv"])
def test_expected_values_match_a_simulated_collective(op, world):
    """The closed-form expected outputs equal the collective's definition applied to every
    rank's inputs (simulated with NumPy), and are exact in bf16 (small integers)."""
    count, root = 12 * world, world - 1
    chunk = count // world
    n_in = chunk if op == "all_gather" else count
    ins = [pattern.input_values(op, r, root, np.arange(n_in)) for r in range(world)]
    for r in range(world):
        if op == "all_reduce":
            want = sum(ins)
        elif op == "reduce_scatter":
            want = sum(ins)[r * chunk:(r + 1) * chunk]
        elif op == "all_gather":
            want = np.concatenate(ins)
        elif op == "broadcast":
            want = ins[root]
        elif op == "all_to_all":
            want = np.concatenate([ins[s][r * chunk:(r + 1) * chunk] for s in range(world)])
        else:
            want = ins[(r - 1) % world]
        got = pattern.expected_values(op, r, world, root, chunk, np.arange(len(want)))
        assert np.array_equal(got, want), (op, world, r)
        assert np.abs(got).max() <= 256  # exact in bf16's 8-bit significand


def test_nccl_log_parsing():
    log = """host:1:1 [0] NCCL INFO NCCL version 2.28.9+cuda12.9
host:1:1 [0] NCCL INFO NCCL_NVLS_ENABLE set by environment to 0
host:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
host:1:2 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM/read
host:1:2 [0] NCCL INFO AllReduce: 1048576 Bytes -> Algo RING proto LL128 channel{Lo..Hi}={0..15}
host:1:2 [0] NCCL INFO AllReduce: 1024 Bytes -> Algo 1 proto 0 time 9.5
host:1:2 [0] NCCL INFO AllGather: 524288 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..7}
"""
    info = parse_nccl_log(log)
    assert info["version"] == "2.28.9+cuda12.9"
    assert info["transports"] == ["P2P/CUMEM"]
    assert info["env"] == {"NCCL_NVLS_ENABLE": "0"}
    assert algo_for(info, "all_reduce", 1048576, 2) == "RING/LL128"
    assert algo_for(info, "all_reduce", 1024, 2) == "RING/LL"
    assert algo_for(info, "all_gather", 1048576, 2) == "RING/SIMPLE"  # logged per rank's chunk
    assert algo_for(info, "broadcast", 1024, 2) is None


def test_bad_input_is_one_line_exit_2():
    p = run("-m", "bench.dist", "--device", "cpu", "--ops", "all_reduce,frobnicate")
    assert p.returncode == 2 and "unknown collective op 'frobnicate'; choose from all_reduce" in p.stderr
    p = run("-m", "bench.dist", "--device", "cpu", "--plain-rounds", "-1")
    assert p.returncode == 2 and "--plain-rounds" in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_benchmark_interface(tmp_path):
    from gapbench.benchmarks.collectives.command import BENCHMARK
    from gapbench.core.result import Record

    assert BENCHMARK.name == "dist" and BENCHMARK.title
    recs = [Record(probe="dist", backend=b, metric="all_reduce", variant="bf16/out/1024", samples_s=[t * 5] * 3, inner=5,
                   work={"bytes": 1024.0}, params={"size": 1024, "dtype": "bf16", "placement": "out", "bus_factor": 1.0,
                                                   "world": 2, "rank_median_s": [t, t]})
            for b, t in (("nccl", 10e-6), ("torch", 30e-6))]
    md = BENCHMARK.markdown(recs)
    assert "| all_reduce bf16 | out | 1K | 10.0 |" in md and "3.00x" in md
    assert BENCHMARK.tables(recs)
    pytest.importorskip("matplotlib")
    paths = BENCHMARK.figures(recs, tmp_path / "x")
    assert paths and paths[0].exists()


# ---------------------------------------------------------------- real CPU runs
def _records_ok(path, backend, world, ops):
    recs = [r for r in load_run(path).records if r.backend == backend and r.metric in ops]
    ok = [r for r in recs if r.status == OK]
    assert ok and all(r.verified for r in ok), [(r.variant, r.status, r.reason) for r in recs if r.status != OK]
    assert {r.params["world"] for r in ok} == {world}
    assert {r.metric for r in ok} == set(ops)
    for r in ok:
        assert len(r.params["rank_median_s"]) == world and r.inner >= 1
    return ok


@needs_gloo
@pytest.mark.parametrize("nproc", [2, 4])
def test_gloo_collectives(tmp_path, nproc):
    ops = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "sendrecv"]
    if nproc == 4:
        ops = ["all_reduce", "all_gather", "sendrecv"]
    out = tmp_path / "r.json"
    p = run("-m", "bench.dist", "--device", "cpu", "--nproc", str(nproc), "--rungs", "torch", "-b", "1K", "-e", "4K",
            "--ops", ",".join(ops), "--placements", "out,in", "--out", str(out), *SMALL)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    ok = _records_ok(out, "torch", nproc, ops)
    assert {r.params["size"] for r in ok} == {1024, 4096}
    assert load_run(out).run["env_shaping"]["NCCL_NVLS_ENABLE"] == "0"
    assert "Collective gap" in p.stdout
    # torch's all_reduce is in place only: the out-of-place row says so
    na = [r for r in load_run(out).records if r.status == "n/a" and r.metric == "all_reduce"]
    assert na and "in place only" in na[0].reason


@needs_mlx
def test_mlx_ring_two_ranks_local(tmp_path):
    out = tmp_path / "r.json"
    p = run("-m", "bench.dist", "--device", "cpu", "--nproc", "2", "--rungs", "mlx", "-b", "1K", "-e", "1K",
            "--ops", "all_reduce,all_gather,sendrecv,broadcast", "--out", str(out), *SMALL)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    _records_ok(out, "mlx", 2, ["all_reduce", "all_gather", "sendrecv"])
    na = [r for r in load_run(out).records if r.backend == "mlx" and r.metric == "broadcast"]
    assert na and na[0].status == "n/a" and "no broadcast" in na[0].reason


@needs_mlx
def test_mlx_launch_ring_two_ranks(tmp_path):
    """The real `mlx.launch --backend ring -n 2` on 127.0.0.1; rank 0 merges through MLX."""
    out = tmp_path / "r.json"
    p = run("-m", "bench.dist", "--launcher", "mlx", "--device", "cpu", "--nproc", "2", "-b", "1K", "-e", "1K",
            "--ops", "all_reduce,all_gather", "--out", str(out), *SMALL)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    _records_ok(out, "mlx", 2, ["all_reduce", "all_gather"])


@needs_gloo
def test_torchrun_two_nodes_on_localhost(tmp_path):
    from gapbench.core.process import free_ports

    port = free_ports(1)[0]
    out = tmp_path / "r.json"
    common = ["-m", "bench.dist", "--launcher", "torchrun", "--nnodes", "2", "--nproc", "1", "--device", "cpu",
              "--rdzv-endpoint", f"127.0.0.1:{port}", "--rungs", "torch", "--ops", "all_reduce,all_gather",
              "-b", "1K", "-e", "1K", "--timeout", "200", *SMALL]
    procs = [subprocess.Popen([sys.executable, *common, "--node-rank", str(k),
                               "--out", str(out if k == 0 else tmp_path / "n1.json")],
                              cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for k in (0, 1)]
    outs = [p.communicate(timeout=240)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs[0][-2000:] + outs[1][-2000:]
    _records_ok(out, "torch", 2, ["all_reduce", "all_gather"])
    assert load_run(out).run["launcher"] == "torchrun"


@needs_gloo
def test_killed_rank_becomes_error_row_and_nothing_is_left(tmp_path):
    psutil = pytest.importorskip("psutil")
    out, ranks = tmp_path / "r.json", tmp_path / "ranks"
    p = subprocess.Popen([sys.executable, "-m", "bench.dist", "--device", "cpu", "--nproc", "2", "--rungs", "torch",
                          "--ops", "all_reduce", "-b", "1K", "-e", "1G", "-f", "2", "--samples", "50", "--iters", "20",
                          "--out", str(out), "--rank-dir", str(ranks)],
                         cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log0, log1 = ranks / "torch" / "rank0.jsonl", ranks / "torch" / "rank1.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (log0.exists() and '"result"' in log0.read_text()):
        time.sleep(0.2)
    assert '"result"' in log0.read_text(), "rank 0 never finished a measurement"
    pids = [json.loads(line)["pid"] for f in (log0, log1) for line in f.read_text().splitlines() if '"start"' in line]
    os.kill(pids[1], signal.SIGKILL)
    text = p.communicate(timeout=120)[0]
    assert p.returncode == 0, text[-2000:]
    recs = load_run(out).records
    dead = [r for r in recs if r.status == ERROR and r.metric == "rank" and r.variant == "rank1"]
    assert dead and "signal 9" in dead[0].reason and "all_reduce" in dead[0].reason, [r.reason for r in recs]
    assert any(r.status == OK for r in recs)  # what finished before the kill is kept
    alive = [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    assert not alive, f"ranks left behind: {alive}"


@needs_gloo
def test_data_parallel_training_cpu(tmp_path):
    out = tmp_path / "dp.json"
    strategies = "ddp,fsdp2,mlx" if _mlx_ok() else "ddp,fsdp2"
    p = run("-m", "gapbench.benchmarks.train.dp", "--nproc", "2", "--device", "cpu", "--models", "tiny", "--strategies",
            strategies, "--batch", "2", "--seq", "32", "--steps", "3", "--warmup", "1", "--bucket-mb", "1",
            "--out", str(out), timeout=400)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    recs = load_run(out).records
    for s in strategies.split(","):
        n2 = next(r for r in recs if r.variant == f"{s}/tiny/n2")
        assert n2.status == OK and n2.verified, (s, n2.reason)
        pr = n2.params
        assert pr["world"] == 2 and pr["tokens_per_s_total"] == pytest.approx(2 * pr["tokens_per_s_per_device"])
        assert pr["efficiency"] > 0 and 0 < pr["predicted_efficiency"] <= 1
        assert pr["busbw_Bps"] > 0 and len(pr["peak_bytes_per_rank"]) == 2
        assert next(r for r in recs if r.variant == f"{s}/tiny/n1").status == OK
        # which model: the data-parallel path trains gapbench's minimal GPT-2, and every record says so
        assert pr["impl"] == "gapbench's minimal GPT-2" and "(gapbench's minimal GPT-2)" in n2.op


@needs_gloo
def test_data_parallel_trains_transformers_gpt2_too(tmp_path):
    """--impl hf: transformers' GPT2LMHeadModel of the same size (bench.train's model) under DDP and
    FSDP2, checked (identical parameters on every rank, finite loss) and named in every record."""
    pytest.importorskip("transformers")
    out = tmp_path / "dp-hf.json"
    p = run("-m", "gapbench.benchmarks.train.dp", "--nproc", "2", "--device", "cpu", "--models", "tiny", "--impl", "hf",
            "--batch", "2", "--seq", "32", "--steps", "2", "--warmup", "1", "--bucket-mb", "1", "--no-progress",
            "--profile-steps", "1", "--out", str(out), timeout=400)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    recs = load_run(out).records
    # --profile-steps reads the device's kernels: on the CPU every run says why there is no profile
    assert all("CUDA" in r.params["profile"]["reason"] for r in recs if r.status == OK), [r.params for r in recs]
    assert "Where the step went" in p.stdout
    for s in ("ddp", "fsdp2"):
        n2 = next(r for r in recs if r.variant == f"{s}/tiny-hf/n2")
        assert n2.status == OK and n2.verified, (s, n2.reason)
        assert n2.params["impl"] == "transformers' GPT2LMHeadModel" and "GPT2LMHeadModel" in n2.op
        assert n2.params["n_params"] == next(r for r in recs if r.variant == f"{s}/tiny-hf/n1").params["n_params"]
    assert "transformers' GPT2LMHeadModel" in p.stdout
    bad = run("-m", "gapbench.benchmarks.train.dp", "--nproc", "2", "--device", "cpu", "--impl", "hf", "--strategies",
              "mlx", "--out", str(tmp_path / "x.json"), timeout=60)
    assert bad.returncode == 2 and "use --strategies ddp,fsdp2" in bad.stderr


def test_the_step_profile_counts_overlap_once_and_exposes_only_unhidden_communication():
    """stepprofile.breakdown on intervals with a known answer: 2 steps over 10 ms of host wall; a
    compute kernel 0-4 ms and another 3-5 ms (union 5 ms), an NCCL kernel 4-7 ms (1 ms of it under
    compute, 2 ms exposed), so busy 7 ms, idle 3 ms; per step half of each. Dropping a kernel from
    the list moves the figures, so a lost interval is seen."""
    from gapbench.benchmarks.train.stepprofile import breakdown, union_ns

    ms = 1_000_000
    iv = [("gemm", 0, 4 * ms), ("softmax", 3 * ms, 5 * ms), ("ncclDevKernel_AllGather", 4 * ms, 7 * ms)]
    b = breakdown(iv, steps=2, wall_s=0.010)
    assert b["busy_s"] == pytest.approx(0.0035) and b["compute_s"] == pytest.approx(0.0025)
    assert b["comm_s"] == pytest.approx(0.0015) and b["exposed_comm_s"] == pytest.approx(0.001)
    assert b["idle_s"] == pytest.approx(0.0015) and b["wall_s"] == pytest.approx(0.005)
    assert b["kernels_per_step"] == 1.5 and b["top_comm"][0]["kernel"].startswith("nccl")
    assert [k["kernel"] for k in b["top_compute"]] == ["gemm", "softmax"]
    assert breakdown(iv[:2], 2, 0.010)["exposed_comm_s"] == 0 and breakdown(iv[1:], 2, 0.010)["compute_s"] == pytest.approx(0.001)
    assert union_ns([(0, 2), (1, 3), (5, 6), (6, 6)]) == 4
    with pytest.raises(ValueError):
        breakdown(iv, 0, 1.0)


@pytest.mark.cuda
def test_gpu_step_profile_sees_compute_and_nccl(tmp_path):
    """On GPUs the profile of an FSDP2 step reads real kernels: busy = compute + exposed, NCCL's
    all-gathers and reduce-scatters among them on 2 ranks."""
    import torch

    n = min(torch.cuda.device_count(), 2)
    if n < 1:
        pytest.skip("needs a GPU")
    out = tmp_path / "prof.json"
    p = run("-m", "gapbench.benchmarks.train.dp", "--nproc", str(n), "--models", "tiny", "--strategies", "fsdp2",
            "--batch", "2", "--seq", "64", "--steps", "3", "--warmup", "1", "--profile-steps", "2", "--no-progress",
            "--out", str(out), timeout=400)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    for r in load_run(out).records:
        pr = r.params["profile"]
        assert pr["busy_s"] > 0 and pr["compute_s"] > 0, pr
        assert pr["busy_s"] == pytest.approx(pr["compute_s"] + pr["exposed_comm_s"])
        if r.params["world"] > 1:
            assert pr["comm_s"] > 0 and pr["top_comm"], pr


# ---------------------------------------------------------------- GPU (the 2-GPU machine)
@pytest.mark.cuda
def test_gpu_all_rungs_checked(tmp_path):
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    out = tmp_path / "r.json"
    p = run("-m", "bench.dist", "-b", "1K", "-e", "16M", "-f", "16", "--samples", "3", "--out", str(out), timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    run_ = load_run(out)
    recs = run_.records
    nccl = [r for r in recs if r.backend == "nccl" and r.status == OK]
    assert nccl and all(r.verified for r in nccl)
    bad = [r for r in recs if r.backend in ("nccl", "torch", "p2p", "nccl-plain") and r.status in ("failed", "error")]
    assert not bad, [(r.backend, r.variant, r.reason) for r in bad]
    assert any(r.backend == "p2p" and r.status == OK for r in recs)
    assert any(r.backend == "nccl-plain" and r.status == OK for r in recs)
    assert all(v.get("version") for v in run_.run["nccl"].values())  # per launch group: NCCL said its version


def test_collective_ops_are_typed_in_the_native_order():
    """gapbench.core.names.CollOp names the ops of gapbench._native.dist.CollOp, in its order."""
    from gapbench import _native
    from gapbench.core.names import CollOp

    if not hasattr(_native, "dist"):
        pytest.skip("this build has no _native.dist")
    assert [op.value for op in CollOp] == list(_native.dist.CollOp.__members__)
