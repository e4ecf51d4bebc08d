"""One device identity: which physical NVIDIA GPU a process's CUDA device N is, used everywhere a
benchmark asks the driver about "its" GPU (the clock watch, throttle reasons, energy, the CPUs a
worker is bound to, the environment record).

NVML and nvidia-smi number GPUs their own way (PCI order) and ignore CUDA_VISIBLE_DEVICES; CUDA
numbers the GPUs a process sees in the order of that variable. Reading NVML device 0 for a process
given `CUDA_VISIBLE_DEVICES=1` watches an idle GPU (every BLAS case then "dropped at a low clock").
Here CUDA's device N is mapped to NVML's device through the variable, entry by entry as CUDA reads
it (indices, full or abbreviated UUIDs, the list ending at the first invalid entry), and, where the
process already has CUDA's own PCI bus id for the device, through that bus id, which decides.

`select(index)` is `--gpu INDEX`: it narrows CUDA_VISIBLE_DEVICES to that one GPU's UUID before any
framework starts, so every backend and every child process sees it as CUDA device 0.

Nothing here starts CUDA (a process whose CUDA is up can no longer change what it sees)."""
from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path

VISIBLE = "CUDA_VISIBLE_DEVICES"
ORDER = "CUDA_DEVICE_ORDER"
#: set by select(): what --gpu chose, so the record can say how this GPU was picked
SELECTED = "GAPBENCH_GPU_SELECTED"


class GpuChoiceError(ValueError):
    """--gpu named no GPU this process can use: one line saying what there is (the CLI's exit 2)."""


@dataclass(frozen=True)
class Gpu:
    """One physical GPU as NVML (or nvidia-smi) lists it."""
    nvml_index: int
    uuid: str
    pci_bus_id: str  # canonical form: 0000:18:00.0
    name: str = ""


def bus_id(text: str | bytes | None) -> str:
    """A PCI bus id in one form ("00000000:18:00.0" from NVML, "0000:18:00.0" from CUDA, either
    case) -> "0000:18:00.0"; "" when it is not one."""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    m = re.fullmatch(r"\s*(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])\s*", text or "")
    if not m:
        return ""
    dom, bus, dev, fn = (int(g, 16) if g else 0 for g in m.groups())
    return f"{dom:04x}:{bus:02x}:{dev:02x}.{fn:x}"


# ---------------------------------------------------------------------------- listing


def _nvml_list() -> tuple[list[Gpu], str]:
    try:
        import pynvml as nv
    except ImportError:
        return [], "nvidia-ml-py is not installed (pip install 'gapbench[nvml]')"
    try:
        nv.nvmlInit()
        out = []
        for i in range(nv.nvmlDeviceGetCount()):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            uuid, name = nv.nvmlDeviceGetUUID(h), nv.nvmlDeviceGetName(h)
            pci = nv.nvmlDeviceGetPciInfo(h)
            out.append(Gpu(i, uuid.decode() if isinstance(uuid, bytes) else str(uuid),
                           bus_id(getattr(pci, "busId", b"")),
                           name.decode() if isinstance(name, bytes) else str(name)))
        return out, ""
    except Exception as e:  # no driver, no GPU
        return [], f"NVML unavailable: {e}"


def _smi_list() -> tuple[list[Gpu], str]:
    import shutil

    from gapbench.core import process

    exe = shutil.which("nvidia-smi")
    if not exe:
        return [], "no nvidia-smi"
    p = process.query([exe, "--query-gpu=index,uuid,pci.bus_id,name", "--format=csv,noheader"], timeout=20)
    if p is None or p.returncode != 0:
        return [], "nvidia-smi failed"
    out = []
    for line in p.stdout.strip().splitlines():
        cells = [c.strip() for c in line.split(",", 3)]
        if len(cells) == 4 and cells[0].isdigit():
            out.append(Gpu(int(cells[0]), cells[1], bus_id(cells[2]), cells[3]))
    return out, "" if out else "nvidia-smi lists no GPU"


_listed: tuple[list[Gpu], str] | None = None


def physical(refresh: bool = False) -> tuple[list[Gpu], str]:
    """(every NVIDIA GPU of the machine in NVML's order, "") or ([], why none): NVML, else
    nvidia-smi. Cached for the process."""
    global _listed
    if _listed is None or refresh:
        gpus, why = _nvml_list()
        if not gpus:
            alt, why2 = _smi_list()
            gpus, why = (alt, "") if alt else ([], f"{why}; {why2}")
        _listed = (gpus, why)
    return _listed


# ---------------------------------------------------------------------------- CUDA's view


def visible(gpus: list[Gpu], spec: str | None, order: str | None = None) -> tuple[list[Gpu], str]:
    """(the GPUs CUDA shows a process, in CUDA's order, a note) for CUDA_VISIBLE_DEVICES `spec`.
    As CUDA reads the variable: entries are indices into its enumeration, or GPU UUIDs, whole or
    abbreviated to a unique prefix; the list ends at the first entry that names no GPU, names one
    twice, or cannot be mapped (MIG instances: the note says so). Unset: every GPU. CUDA's own
    enumeration is PCI order under CUDA_DEVICE_ORDER=PCI_BUS_ID; by default it is fastest first,
    which is PCI order where the GPUs are all of one model (the note says where it may not be)."""
    pci = sorted(gpus, key=lambda g: g.pci_bus_id or f"~{g.nvml_index:08d}")
    note = ""
    if (order or "FASTEST_FIRST").upper() != "PCI_BUS_ID" and len({g.name for g in gpus}) > 1:
        note = ("mixed GPU models: CUDA's default order (fastest first) may differ from PCI order; "
                "set CUDA_DEVICE_ORDER=PCI_BUS_ID or confirm by the bus id")
    if spec is None:
        return pci, note
    out: list[Gpu] = []
    for entry in (e.strip() for e in spec.split(",")):
        if re.fullmatch(r"[+-]?\d+", entry):
            i = int(entry)
            g = pci[i] if 0 <= i < len(pci) else None
        elif entry.upper().startswith("GPU-"):
            hits = [x for x in gpus if x.uuid.lower().startswith(entry.lower())]
            g = hits[0] if len(hits) == 1 else None
        else:
            if entry.upper().startswith("MIG-"):
                note = (note + "; " if note else "") + f"{entry}: a MIG instance, not mapped to a GPU"
            g = None
        if g is None or g in out:
            break
        out.append(g)
    return out, note


# ---------------------------------------------------------------------------- identity


def _sysfs(bus: str, name: str) -> str | None:
    try:
        return Path(f"/sys/bus/pci/devices/{bus}/{name}").read_text().strip()
    except OSError:
        return None


def numa_node(bus: str) -> int | None:
    v = _sysfs(bus, "numa_node")
    return int(v) if v is not None and re.fullmatch(r"\d+", v) else None


def local_cpus(bus: str) -> set[int]:
    """The CPUs local to the GPU at PCI `bus` (the kernel's local_cpulist); empty where unknown."""
    from gapbench.core.affinity import parse_cpu_list

    v = _sysfs(bus, "local_cpulist")
    return parse_cpu_list(v) if v else set()


@dataclass(frozen=True)
class Identity:
    """CUDA device `cuda_index` of this process, as the physical GPU it is."""
    cuda_index: int
    nvml_index: int
    uuid: str
    pci_bus_id: str
    name: str
    how: str  # "bus id from CUDA" or "CUDA_VISIBLE_DEVICES=..." (the mapping that decided)
    numa_node: int | None = None

    def record(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}


def identify(cuda_index: int = 0, cuda_bus_id: str | None = None, environ=None,
             gpus: list[Gpu] | None = None) -> tuple[Identity | None, str]:
    """(the Identity of this process's CUDA device `cuda_index`, "") or (None, why not).
    `cuda_bus_id`: the device's PCI bus id as CUDA reports it (cudaDeviceGetPCIBusId), where the
    caller has it: it decides. Otherwise CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER of `environ`
    (default: this process's) map the index."""
    env = os.environ if environ is None else environ
    if gpus is None:
        gpus, why = physical()
        if not gpus:
            return None, why
    want = bus_id(cuda_bus_id)
    if want:
        g = next((x for x in gpus if x.pci_bus_id == want), None)
        if g is None:
            return None, f"CUDA's device {cuda_index} at PCI {want} is not among NVML's GPUs"
        how = "bus id from CUDA"
    else:
        seen, note = visible(gpus, env.get(VISIBLE), env.get(ORDER))
        if not 0 <= cuda_index < len(seen):
            spec = env.get(VISIBLE)
            where = f" with {VISIBLE}={spec}" if spec is not None else ""
            return None, f"CUDA device {cuda_index} is not visible{where} ({len(seen)} GPU(s) visible{'; ' + note if note else ''})"
        g = seen[cuda_index]
        how = f"{VISIBLE}={env[VISIBLE]}" if VISIBLE in env else "no CUDA_VISIBLE_DEVICES: PCI order"
        if note:
            how += f" ({note})"
    return Identity(cuda_index, g.nvml_index, g.uuid, g.pci_bus_id, g.name, how, numa_node(g.pci_bus_id)), ""


def local_cpus_of(ident: Identity | None, topo_local: dict[int, set[int]] | None = None) -> set[int]:
    """The CPUs local to the identified GPU: the kernel's list for its bus id, else nvidia-smi
    topo's row for its NVML index (nvidia-smi numbers GPUs as NVML does)."""
    if ident is None:
        return set()
    return local_cpus(ident.pci_bus_id) or set((topo_local or {}).get(ident.nvml_index, set()))


def rank_local_cpus(nproc: int, topo_text: str | None = None, environ=None,
                    gpus: list[Gpu] | None = None) -> dict[int, set[int]]:
    """{rank: CPUs local to its GPU}: rank r drives this process's CUDA device r (the r-th GPU of
    CUDA_VISIBLE_DEVICES, indices or UUIDs alike); a rank whose GPU cannot be told gets no entry."""
    from gapbench.core.affinity import gpu_local_cpus

    topo_local = gpu_local_cpus(topo_text)
    out = {}
    for r in range(nproc):
        ident, _ = identify(r, environ=environ, gpus=gpus)
        cpus = local_cpus_of(ident, topo_local)
        if cpus:
            out[r] = cpus
    return out


# ---------------------------------------------------------------------------- --gpu


def select(index: int, environ=None) -> Gpu:
    """--gpu INDEX: the INDEX-th GPU this process sees (CUDA's numbering under the current
    CUDA_VISIBLE_DEVICES) becomes the only one, by its UUID, for this process and every child it
    starts. Call it before any framework or the native CUDA part starts. A bad index, or no GPU to
    choose from, is a GpuChoiceError saying what to do."""
    env = os.environ if environ is None else environ
    if index < 0:
        raise GpuChoiceError(f"--gpu {index}: give a GPU index, 0 or more")
    gpus, why = physical()
    if not gpus:
        raise GpuChoiceError(f"--gpu {index}: no NVIDIA GPU is visible here ({why}); leave --gpu out")
    spec = env.get(VISIBLE)
    seen, note = visible(gpus, spec, env.get(ORDER))
    if index >= len(seen):
        where = f" under {VISIBLE}={spec}" if spec is not None else ""
        rng = f"0..{len(seen) - 1}" if seen else "none"
        raise GpuChoiceError(f"--gpu {index}: this process sees {len(seen)} GPU(s){where} (indices {rng}); choose one of them"
                         + (f" ({note})" if note else ""))
    g = seen[index]
    env[SELECTED] = f"--gpu {index}" + (f" of {VISIBLE}={spec}" if spec is not None else "")
    env[VISIBLE] = g.uuid
    return g
