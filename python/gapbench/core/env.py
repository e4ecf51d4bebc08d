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
ENV_VARS = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_MODULE_LOADING", "CUDA_LAUNCH_BLOCKING",
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
    fields = ["index", "uuid", "name", "driver_version", "memory.total", "clocks.max.sm", "clocks.sm",
              "temperature.gpu", "power.limit", "pci.bus_id"]
    p = process.query([exe, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"], timeout=20)
    if p is None or p.returncode != 0:
        return []
    gpus = []
    for line in p.stdout.strip().splitlines():
        vals = [v.strip() for v in line.split(",")]
        gpus.append(dict(zip(fields, vals)))
    return gpus


def gpu_in_use() -> dict | None:
    """The GPU this process's CUDA device 0 is (gapbench.core.gpu, without starting CUDA): what the
    benchmarks measure unless a record names another; None on a machine with no NVIDIA GPU."""
    from gapbench.core import gpu

    ident, why = gpu.identify(0)
    if ident is None:
        return None if not gpu.physical()[0] else {"cuda_index": 0, "unidentified": why}
    rec = ident.record()
    if os.environ.get(gpu.SELECTED):
        rec["selected_by"] = os.environ[gpu.SELECTED]
    return rec


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


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _digest(text: str | None) -> str | None:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()[:12] if text else None


def cpu_identity() -> dict:
    """The CPU's family, model, stepping and microcode (Linux /proc/cpuinfo; the brand string
    elsewhere): two hosts with one model name can differ in stepping or microcode."""
    out = {}
    text = _read("/proc/cpuinfo") or ""
    for line in text.split("\n\n", 1)[0].splitlines():
        key, _, val = (x.strip() for x in line.partition(":"))
        if key in ("vendor_id", "cpu family", "model", "stepping", "microcode"):
            out[key.replace(" ", "_")] = val
    return out


def host_speed_ns(loops: int = 5, n: int = 200_000) -> float:
    """This host's speed on a fixed loop: the fastest of `loops` timings of one interpreted loop of
    `n` integer additions, in ns per addition. Host-bound rows (launch round trips, framework
    dispatch) move with it between machines and boots; compare divides them by it (a few ms)."""
    import time

    best = float("inf")
    for _ in range(loops):
        t0 = time.perf_counter_ns()
        acc = 0
        for i in range(n):
            acc += i
        best = min(best, time.perf_counter_ns() - t0)
    return best / n


#: the folder where runs of one boot leave a mark (RAM-backed where there is one: gone at reboot)
MARK_DIR = "/dev/shm" if os.path.isdir("/dev/shm") else None


def runs_this_boot(boot_id: str | None) -> int | None:
    """How many gapbench runs this boot of the host saw before this one (0: the first run after a
    machine start, with cold page and kernel caches), counted by files in /dev/shm; None where
    that cannot be told."""
    if not boot_id or not MARK_DIR:
        return None
    mark = Path(MARK_DIR) / f"gapbench-runs-{boot_id[:12]}"
    try:
        with open(mark, "a+") as f:
            f.seek(0)
            before = len(f.read())
            f.write("x")
        return before
    except OSError:
        return None


def framework_caches() -> dict:
    """Whether the compile caches a first run fills are there yet (CuPy's kernel cache, torch
    inductor's and triton's): {name: number of entries}, 0 for absent. A first run on a fresh
    machine compiles what later runs load."""
    import getpass
    import tempfile

    home = Path.home()
    try:
        user = getpass.getuser()
    except Exception:
        user = "user"
    where = {"cupy_kernel_cache": Path(os.environ.get("CUPY_CACHE_DIR", home / ".cupy" / "kernel_cache")),
             "triton_cache": Path(os.environ.get("TRITON_CACHE_DIR", home / ".triton" / "cache")),
             "torchinductor_cache": Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR",
                                                        Path(tempfile.gettempdir()) / f"torchinductor_{user}"))}
    out = {}
    for name, path in where.items():
        try:
            out[name] = sum(1 for _ in path.iterdir()) if path.is_dir() else 0
        except OSError:
            out[name] = None
    out["torch_bytecode"] = _torch_bytecode()
    return out


def _torch_bytecode() -> int | None:
    """Compiled bytecode files of torch's top package where this interpreter reads them (its
    __pycache__, or the mirror under PYTHONPYCACHEPREFIX), without importing torch: 0 where every
    process compiles torch from source (a lent machine sets PYTHONDONTWRITEBYTECODE=1 and ships
    none: seconds of import), None without torch."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    pkg = Path(spec.origin).resolve().parent
    cache = Path(sys.pycache_prefix) / pkg.relative_to(pkg.anchor) if sys.pycache_prefix else pkg / "__pycache__"
    try:
        return sum(1 for p in cache.iterdir() if p.suffix == ".pyc") if cache.is_dir() else 0
    except OSError:
        return None


def host() -> dict:
    """What tells hosts, machine starts and first runs apart (issue: host-bound rows move with the
    host): the kernel, the CPU's identity, a digest of the machine id and of this boot's id, the
    number of gapbench runs this boot saw before, the compile caches, and the speed on a fixed loop."""
    boot = _read("/proc/sys/kernel/random/boot_id")
    return {"kernel": platform.release(), "cpu_id": cpu_identity(),
            "machine_id": _digest(_read("/etc/machine-id")), "boot_id": _digest(boot),
            "runs_this_boot": runs_this_boot(boot), "caches": framework_caches(),
            "speed_ns_per_op": round(host_speed_ns(), 3)}


def collect() -> dict:
    """The run's environment. The questions to other tools (nvidia-smi, git) and to NVML wait on
    those, not on this process: they are asked at once, on threads, while the rest is read here;
    the host's speed on a fixed loop (host(), a timing) is taken only once they have all answered,
    with nothing else running in this process."""
    from concurrent.futures import ThreadPoolExecutor

    started = now_iso()
    mem = None
    try:
        import psutil

        mem = psutil.virtual_memory().total
    except ImportError:
        pass
    with ThreadPoolExecutor(max_workers=3, thread_name_prefix="gapbench-env") as pool:
        asked = {"git_sha_checkout": pool.submit(git_sha), "nvidia_smi": pool.submit(nvidia_smi),
                 "gpu": pool.submit(gpu_in_use)}
        here = {"provenance": provenance(), "build": build_info(), "os": platform.platform(),
                "cpu": cpu_model(), "cpu_frequency": cpu_frequency(), "libraries": library_versions()}
        answers = {k: f.result() for k, f in asked.items()}
    return {
        "time": started,
        "gapbench": __version__,
        **here["provenance"],
        "git_sha_checkout": answers["git_sha_checkout"],
        "build": here["build"],
        "python": sys.version.split()[0],
        "python_executable": sys.executable,
        "os": here["os"],
        "machine": platform.machine(),
        "cpu": here["cpu"],
        "cpu_count": os.cpu_count(),
        "cpu_frequency": here["cpu_frequency"],
        "host_id": host(),  # after every thread above has ended: the speed loop runs alone
        "memory_bytes": mem,
        "libraries": here["libraries"],
        "nvidia_smi": answers["nvidia_smi"],
        "gpu": answers["gpu"],
        "env_vars": {k: os.environ[k] for k in ENV_VARS if k in os.environ},
    }
