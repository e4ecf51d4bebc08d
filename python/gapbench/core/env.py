"""Environment metadata stored with every run: machine, OS, libraries, devices, build, and the
provenance of the sources built (commit, content hash, dirty flag), readable without git."""
from __future__ import annotations

import os
import importlib.util
import platform
import shutil
import sys
from importlib import metadata
from pathlib import Path

from gapbench import __version__
from gapbench.core import process
from gapbench.core.native import build_info
from gapbench.core.result import now_iso

LIBRARIES = ("numpy", "torch", "mlx", "mlx-metal", "mlx-cuda-13", "mlx-cpu", "cupy-cuda13x",
             "cupy-cuda12x", "rich", "psutil", "transformers", "nvidia-ml-py", "pybind11")
ENV_VARS = ("CUDA_VISIBLE_DEVICES", "CUDA_MODULE_LOADING", "CUDA_LAUNCH_BLOCKING",
            "PYTORCH_ENABLE_MPS_FALLBACK", "MLX_METAL_DEBUG", "OMP_NUM_THREADS")


def library_versions() -> dict[str, str]:
    out = {}
    for name in LIBRARIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def cpu_model() -> str:
    if sys.platform == "darwin":
        p = process.query(["sysctl", "-n", "machdep.cpu.brand_string"], timeout=5)
        if p is not None and p.stdout.strip():
            return p.stdout.strip()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def nvidia_smi() -> list[dict]:
    """GPUs as nvidia-smi reports them (name, driver, memory, clocks); [] where it is absent."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return []
    fields = ["name", "driver_version", "memory.total", "clocks.max.sm", "clocks.sm",
              "temperature.gpu", "power.limit", "pci.bus_id"]
    p = process.query([exe, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"], timeout=20)
    if p is None or p.returncode != 0:
        return []
    gpus = []
    for line in p.stdout.strip().splitlines():
        vals = [v.strip() for v in line.split(",")]
        gpus.append(dict(zip(fields, vals)))
    return gpus


def git_sha() -> str | None:
    """The checkout's commit when run from a gapbench checkout (bench/), else None."""
    here = Path.cwd()
    if not (here / "bench").is_dir() or not (here / ".git").exists():
        return None
    p = process.query(["git", "rev-parse", "HEAD"], timeout=5)
    dirty = process.query(["git", "status", "--porcelain", "--untracked-files=no"], timeout=5)
    if p is None or p.returncode != 0 or dirty is None:
        return None
    return p.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def provenance() -> dict:
    """source_commit, source_hash and dirty of the sources this package was built from, as
    cmake/provenance.py recorded them at build time (gapbench/_provenance.py). Run from a source
    checkout with no build, they are computed now, and `provenance_from` says so."""
    try:
        from gapbench import _provenance as p

        info = {"source_commit": p.SOURCE_COMMIT, "source_hash": p.SOURCE_HASH, "dirty": bool(p.DIRTY),
                "provenance_from": "build"}
    except ImportError:
        script = Path(__file__).resolve().parents[2] / "cmake" / "provenance.py"
        if not script.is_file():
            return {"source_commit": "unknown", "source_hash": "unknown", "dirty": True,
                    "provenance_from": "none: no gapbench/_provenance.py (not built by CMake) and no source checkout"}
        spec = importlib.util.spec_from_file_location("gapbench_provenance", script)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        info = dict(mod.provenance(script.parents[1]), provenance_from="source checkout, at run time (not a build)")
    native = build_info().get("source_hash")
    if native is not None and native != info["source_hash"]:
        info["native_source_hash"] = native  # the extension was built from other sources than the Python part
    return info


def cpu_frequency() -> dict:
    """The CPU frequency policy (Linux cpufreq: governor, and the current/min/max kHz of CPU 0), or
    {} where the kernel does not expose it. Host-side latencies move with it between runs."""
    base = "/sys/devices/system/cpu/cpu0/cpufreq/"
    out = {}
    for key, name in (("governor", "scaling_governor"), ("cur_khz", "scaling_cur_freq"),
                      ("min_khz", "scaling_min_freq"), ("max_khz", "scaling_max_freq")):
        try:
            with open(base + name) as f:
                v = f.read().strip()
            out[key] = int(v) if v.isdigit() else v
        except OSError:
            pass
    return out


def collect() -> dict:
    mem = None
    try:
        import psutil

        mem = psutil.virtual_memory().total
    except ImportError:
        pass
    return {
        "time": now_iso(),
        "gapbench": __version__,
        **provenance(),
        "git_sha_checkout": git_sha(),
        "build": build_info(),
        "python": sys.version.split()[0],
        "python_executable": sys.executable,
        "os": platform.platform(),
        "machine": platform.machine(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_frequency": cpu_frequency(),
        "memory_bytes": mem,
        "libraries": library_versions(),
        "nvidia_smi": nvidia_smi(),
        "env_vars": {k: os.environ[k] for k in ENV_VARS if k in os.environ},
    }
