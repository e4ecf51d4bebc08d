"""Multi-node launching through the existing launchers; rank 0 of the job writes the result.

  torchrun: python -m bench.dist --launcher torchrun --nnodes 2 --node-rank K --nproc 8 \
              --rdzv-endpoint HOST0:29500 --out results/dist.json      (run on every node)
  mlx:      python -m bench.dist --launcher mlx --hostfile hosts.json  (mlx.launch; ring, jaccl or nccl
            as the hostfile says; locally: --nproc 2 runs `mlx.launch -n 2` on 127.0.0.1)
  mpirun:   python -m bench.dist --launcher mpirun --nproc 16 --hostfile hosts --rdzv-endpoint HOST0:29500
            (Open MPI starts the ranks; torch's env:// rendezvous uses the endpoint)
The rank processes get the same multicast-off environment as local ones (gapbench.core.process)."""
from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

from gapbench.core import process
from gapbench.core.result import ERROR, Record, RunWriter, load_run
from gapbench.benchmarks.collectives.config import shaping_env


def run_external_launcher(bench, args, cfg, rungs, nproc, prog, argv, console) -> int:
    from gapbench.core import env as envmod
    from gapbench.core.cli import csv_path_for, default_out

    out = Path(args.out) if args.out else default_out("dist")
    out = out.resolve()
    work = Path(args.rank_dir).resolve() if args.rank_dir else Path(tempfile.mkdtemp(prefix="gapbench-dist-"))
    work.mkdir(parents=True, exist_ok=True)
    rungs = [r for r in rungs if r != "p2p"]  # the p2p floor is a one-node probe: run it locally
    if args.launcher == "mlx":
        rungs = ["mlx"]
    elif "mlx" in rungs:
        rungs.remove("mlx")
    (work / "config.json").write_text(json.dumps(cfg.to_dict()))
    run_meta = {"probe": "dist", "command": " ".join([prog] + list(argv if argv is not None else sys.argv[1:])),
                "config": cfg.to_dict(), "backends": rungs, "launcher": args.launcher,
                "multicast_allowed_by_user": bool(args.allow_multicast),
                "env_shaping": shaping_env(process.child_env(allow_multicast=args.allow_multicast))}
    (work / "run.json").write_text(json.dumps(run_meta))
    worker = ["-m", "gapbench.benchmarks.collectives.worker", "--config", str(work / "config.json"), "--rungs", ",".join(rungs),
              "--out-dir", str(work), "--merge-to", str(out), "--run-meta", str(work / "run.json")]
    extra = {}
    if args.launcher == "torchrun":
        if args.nnodes > 1 and not args.rdzv_endpoint:
            print("error: --launcher torchrun with --nnodes > 1 needs --rdzv-endpoint HOST:PORT of node 0",
                  file=sys.stderr)
            return 2
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nnodes={args.nnodes}", f"--node-rank={args.node_rank}",
               f"--nproc-per-node={nproc}", "--max-restarts=0"]
        if args.rdzv_endpoint:
            cmd.append(f"--rdzv-endpoint={args.rdzv_endpoint}")
        else:
            cmd.append("--standalone")
        cmd += worker
    elif args.launcher == "mlx":
        # mlx.launch's entry point (its module has no __main__ guard, so not `python -m`)
        cmd = [sys.executable, "-c", "from mlx._distributed_utils.launch import main; main()", "--python", sys.executable]
        cmd += ["--hostfile", args.hostfile] if args.hostfile else ["--hosts", "127.0.0.1", "-n", str(nproc),
                                                                  "--backend", "ring" if cfg.device == "cpu" else "nccl"]
        cmd += process.launcher_env_flags("--env", with_values=True) if not args.allow_multicast else []
        cmd += ["--"] + worker
    else:
        if not shutil.which("mpirun"):
            print("error: --launcher mpirun but mpirun is not on PATH (install Open MPI)", file=sys.stderr)
            return 2
        if not args.rdzv_endpoint:
            print("error: --launcher mpirun needs --rdzv-endpoint HOST:PORT (torch's env:// rendezvous)", file=sys.stderr)
            return 2
        host, port = args.rdzv_endpoint.rsplit(":", 1)
        extra.update(MASTER_ADDR=host, MASTER_PORT=port)
        cmd = ["mpirun", "-np", str(nproc)] + (["--hostfile", args.hostfile] if args.hostfile else [])
        cmd += ["-x", "MASTER_ADDR", "-x", "MASTER_PORT"]
        cmd += ["-x", process.ALLOW_MULTICAST] if args.allow_multicast else process.launcher_env_flags("-x", with_values=False)
        cmd += [sys.executable] + worker
    console.print(f"[dim]{' '.join(cmd)}[/dim]")
    rc, how = process.run_launcher(cmd, timeout_s=args.timeout, allow_multicast=args.allow_multicast, env_extra=extra)
    is_writer = args.launcher != "torchrun" or args.node_rank == 0
    if not is_writer:
        console.print(f"node {args.node_rank}: launcher {how} with status {rc}; rank 0 on node 0 writes the results")
        return 0 if rc == 0 else 1
    if not out.exists() or rc != 0:
        w = RunWriter(out, env=envmod.collect(), csv_path=csv_path_for(out), run=run_meta) if not out.exists() else None
        if w is None:
            run = load_run(out)
            w = RunWriter(out, env=run.env, csv_path=csv_path_for(out), run=run.run)
            w.records = run.records
        w.add(Record(probe="dist", backend=args.launcher, metric="launch", status=ERROR,
                     reason=f"{args.launcher} {how} with status {rc}" + ("" if out.exists() else "; rank 0 wrote no results")))
        w.finish()
    if not args.rank_dir:
        shutil.rmtree(work, ignore_errors=True)
    recs = load_run(out).records
    for t in bench.tables(recs):
        console.print(t)
    console.print(f"results: {out}")
    return 0 if rc == 0 else 1
