"""One device identity (gapbench.core.gpu): CUDA's device N of a process mapped to the physical GPU
NVML reads, through CUDA_VISIBLE_DEVICES as CUDA reads it, or through CUDA's own bus id; --gpu
narrows the process to one GPU. NVML is stubbed: a 4-GPU machine whose NVML order is PCI order."""
import sys
import types

import pytest

from gapbench.core import gpu

BUSES = ["0000:18:00.0", "0000:2a:00.0", "0000:9a:00.0", "0000:ab:00.0"]
UUIDS = ["GPU-aaaa0000-0000", "GPU-bbbb1111-1111", "GPU-cccc2222-2222", "GPU-cccc3333-3333"]


class FakeNVML(types.ModuleType):
    """pynvml with four GPUs; every call a benchmark makes of a handle answers for that GPU alone
    (GPU 2 runs at 1980 MHz, the others idle at 345 MHz), so reading the wrong one shows."""
    NVML_CLOCK_SM = 1

    def __init__(self):
        super().__init__("pynvml")

    def nvmlInit(self):
        pass

    def nvmlDeviceGetCount(self):
        return 4

    def nvmlDeviceGetHandleByIndex(self, i):
        if not 0 <= i < 4:
            raise RuntimeError("Invalid Argument")
        return ("handle", i)

    def nvmlDeviceGetUUID(self, h):
        return UUIDS[h[1]]

    def nvmlDeviceGetName(self, h):
        return b"NVIDIA H200"

    def nvmlDeviceGetPciInfo(self, h):
        return types.SimpleNamespace(busId=("0000" + BUSES[h[1]]).upper().encode())

    def nvmlDeviceGetClockInfo(self, h, which):
        return 1980 if h[1] == 2 else 345

    def nvmlDeviceGetMaxClockInfo(self, h, which):
        return 1980


@pytest.fixture
def nvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", FakeNVML())
    monkeypatch.setattr(gpu, "_listed", None)
    monkeypatch.delenv(gpu.VISIBLE, raising=False)
    monkeypatch.delenv(gpu.ORDER, raising=False)
    monkeypatch.delenv(gpu.SELECTED, raising=False)
    yield
    gpu._listed = None


def test_bus_ids_take_one_form():
    assert gpu.bus_id("00000000:9A:00.0") == gpu.bus_id(b"0000:9a:00.0") == gpu.bus_id("9a:00.0") == "0000:9a:00.0"
    assert gpu.bus_id("N/A") == gpu.bus_id(None) == ""


def test_nvml_lists_every_gpu_in_its_order(nvml):
    gpus, why = gpu.physical()
    assert why == "" and [g.nvml_index for g in gpus] == [0, 1, 2, 3]
    assert [g.pci_bus_id for g in gpus] == BUSES and gpus[2].uuid == UUIDS[2] and gpus[2].name == "NVIDIA H200"


@pytest.mark.parametrize("spec, want", [
    (None, [0, 1, 2, 3]),
    ("2,0", [2, 0]),
    ("1", [1]),
    (" 3 , 1", [3, 1]),
    ("GPU-bbbb,0", [1, 0]),            # an abbreviated UUID, then an index
    ("GPU-cccc,0", []),                # ambiguous prefix: CUDA stops there
    ("2,7,0", [2]),                    # an invalid index ends the list
    ("1,1", [1]),                      # a repeat ends it too
    ("-1", []),
    ("", []),
])
def test_visible_devices_map_as_cuda_reads_them(nvml, spec, want):
    seen, _ = gpu.visible(gpu.physical()[0], spec)
    assert [g.nvml_index for g in seen] == want


def test_identity_follows_visible_devices_and_the_cuda_bus_id_decides(nvml, monkeypatch):
    monkeypatch.setenv(gpu.VISIBLE, "2,0")
    ident, why = gpu.identify(0)
    assert why == "" and (ident.nvml_index, ident.uuid, ident.pci_bus_id) == (2, UUIDS[2], BUSES[2])
    assert gpu.identify(1)[0].nvml_index == 0
    none, why = gpu.identify(2)
    assert none is None and "2 GPU(s) visible" in why and "CUDA_VISIBLE_DEVICES=2,0" in why
    # CUDA's own bus id wins over the mapping (and a bus NVML does not list is refused)
    assert gpu.identify(0, cuda_bus_id="0000:AB:00.0")[0].nvml_index == 3
    assert gpu.identify(0, cuda_bus_id="0000:01:00.0")[0] is None


def test_mixed_models_say_the_default_order_may_differ(nvml):
    gpus = [gpu.Gpu(0, "GPU-a", BUSES[0], "NVIDIA A100"), gpu.Gpu(1, "GPU-b", BUSES[1], "NVIDIA H100")]
    assert "fastest first" in gpu.visible(gpus, "1,0")[1]
    assert gpu.visible(gpus, "1,0", "PCI_BUS_ID")[1] == ""


def test_the_clock_watch_reads_the_gpu_the_process_uses(nvml, monkeypatch):
    """The defect this fixes: with CUDA_VISIBLE_DEVICES=2 NVML device 0 (idle) was watched and
    every paired round was dropped at a 'low clock'."""
    from gapbench.backends import monitor

    monkeypatch.setattr(monitor, "cuda_bus_id", lambda i=0: None)  # no native CUDA here
    monkeypatch.setenv(gpu.VISIBLE, "2,0")
    nv = monitor.NVML(0)
    assert nv.ok and nv.identity.nvml_index == 2 and nv.sm_clock_mhz() == 1980
    assert monitor.NVML(1).sm_clock_mhz() == 345
    assert "not visible" in monitor.NVML(2).reason


def test_ranks_and_launch_workers_bind_near_their_own_gpu(nvml, monkeypatch):
    near = {BUSES[0]: "0-7,16-23", BUSES[1]: "0-7,16-23", BUSES[2]: "8-15,24-31", BUSES[3]: "8-15,24-31"}
    monkeypatch.setattr(gpu, "_sysfs", lambda bus, name: near.get(bus) if name == "local_cpulist" else "1")
    far = set(range(8, 16)) | set(range(24, 32))
    monkeypatch.setenv(gpu.VISIBLE, "2,0")
    assert gpu.rank_local_cpus(2) == {0: far, 1: set(range(0, 8)) | set(range(16, 24))}
    monkeypatch.setenv(gpu.VISIBLE, "GPU-cccc3,GPU-cccc2")  # UUIDs map too
    assert gpu.rank_local_cpus(2) == {0: far, 1: far}
    assert gpu.identify(0)[0].numa_node == 1


def test_topo_table_is_the_fallback_keyed_by_nvml_index(nvml, monkeypatch):
    monkeypatch.setattr(gpu, "_sysfs", lambda bus, name: None)
    topo = ("\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\n"
            "GPU0\t X \tNV4\tSYS\tSYS\t0-7\t0\nGPU1\tNV4\t X \tSYS\tSYS\t0-7\t0\n"
            "GPU2\tSYS\tSYS\t X \tNV4\t8-15\t1\nGPU3\tSYS\tSYS\tNV4\t X \t8-15\t1\n")
    monkeypatch.setenv(gpu.VISIBLE, "3")
    assert gpu.rank_local_cpus(1, topo) == {0: set(range(8, 16))}


def test_select_narrows_to_one_gpu_by_uuid(nvml, monkeypatch):
    env = {gpu.VISIBLE: "2,0"}
    g = gpu.select(1, env)
    assert g.nvml_index == 0 and env[gpu.VISIBLE] == UUIDS[0]
    assert env[gpu.SELECTED] == "--gpu 1 of CUDA_VISIBLE_DEVICES=2,0"
    assert [x.nvml_index for x in gpu.visible(gpu.physical()[0], env[gpu.VISIBLE])[0]] == [0]
    env = {}
    assert gpu.select(3, env).nvml_index == 3 and env[gpu.VISIBLE] == UUIDS[3]


def test_a_bad_gpu_index_says_what_there_is(nvml):
    with pytest.raises(gpu.GpuChoiceError, match=r"sees 2 GPU\(s\) under CUDA_VISIBLE_DEVICES=2,0 \(indices 0..1\)"):
        gpu.select(2, {gpu.VISIBLE: "2,0"})
    with pytest.raises(gpu.GpuChoiceError, match="sees 4 GPU"):
        gpu.select(4, {})


def test_no_gpu_at_all_is_one_line(monkeypatch):
    monkeypatch.setattr(gpu, "_listed", ([], "NVML unavailable: Driver Not Loaded; no nvidia-smi"))
    with pytest.raises(gpu.GpuChoiceError, match="no NVIDIA GPU is visible here .*leave --gpu out"):
        gpu.select(0, {})


@pytest.mark.parametrize("bench", ["blas", "launch", "train"])
def test_every_single_gpu_benchmark_takes_gpu_and_refuses_a_bad_one(bench, monkeypatch, tmp_path, capsys):
    import importlib

    monkeypatch.setattr(gpu, "_listed", ([], "NVML unavailable: no driver"))
    mod = importlib.import_module(f"gapbench.benchmarks.{bench}.command")
    assert mod.BENCHMARK.main(["--gpu", "1", "--out", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --gpu 1: no NVIDIA GPU is visible here (NVML unavailable: no driver); leave --gpu out"]
    assert not (tmp_path / "r.json").exists()
    assert mod.BENCHMARK.main(["--gpu", "x"]) == 2  # not an index: argparse's one error


_CHILD = """
import json
from gapbench.core import gpu
from gapbench.core.native import load
from gapbench.backends.monitor import NVML
cuda = load().cuda
n = cuda.status(0)["device_count"]
out = []
for i in range(n):
    ident, why = gpu.identify(i)  # the mapping alone, no bus id from CUDA
    out.append({"cuda": cuda.status(i)["pci_bus_id"], "mapped": ident.pci_bus_id if ident else why,
                "nvml": NVML(i).identity.pci_bus_id})
print(json.dumps(out))
"""


def _native_cuda():
    from gapbench.backends import registry
    from gapbench.core.names import Backend

    return registry.info(Backend.native_cuda)


@pytest.mark.cuda
@pytest.mark.skipif(not _native_cuda().available, reason="needs an NVIDIA GPU and driver: " + _native_cuda().reason)
@pytest.mark.parametrize("order", ["natural", "reversed"])
def test_identity_agrees_with_cuda_on_this_machine(order):
    """On the GPU machine: for every GPU CUDA shows, under CUDA_VISIBLE_DEVICES unset and reversed
    (e.g. "1,0"), the mapping names the bus id CUDA itself reports, and so does the NVML handle."""
    import json
    import os
    import subprocess

    gpus, why = gpu.physical(refresh=True)
    assert gpus, why
    env = dict(os.environ)
    env.pop(gpu.VISIBLE, None)
    if order == "reversed":
        if len(gpus) < 2:
            pytest.skip("one GPU: nothing to reverse")
        env[gpu.VISIBLE] = ",".join(str(i) for i in reversed(range(len(gpus))))
    p = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    rows = json.loads(p.stdout.strip().splitlines()[-1])
    assert len(rows) == len(gpus)
    for r in rows:
        assert gpu.bus_id(r["cuda"]) == r["mapped"] == r["nvml"], r
    if order == "reversed":
        assert rows[0]["mapped"] == gpus[-1].pci_bus_id
