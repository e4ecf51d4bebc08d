"""What NCCL said about its path (parsed from NCCL_DEBUG=INFO, subsystems INIT,ENV,TUNING of
rank 0) and the machine's GPU topology (nvidia-smi topo -m, NVML NVLink counts, datasheet rates)."""
from __future__ import annotations

import re
import shutil
from collections import Counter
from pathlib import Path

from gapbench.core import process
from gapbench.core.affinity import topo_rows

ALGOS = {0: "TREE", 1: "RING", 2: "COLLNET_DIRECT", 3: "COLLNET_CHAIN", 4: "NVLS", 5: "NVLS_TREE", 6: "PAT"}
PROTOS = {0: "LL", 1: "LL128", 2: "SIMPLE"}
NCCL_OPS = {"AllReduce": "all_reduce", "AllGather": "all_gather", "ReduceScatter": "reduce_scatter",
            "Broadcast": "broadcast"}
_VERSION = re.compile(r"NCCL version ([0-9][\w.+-]*)")
_CHANNEL = re.compile(r"Channel \d+/\d+ : \d+\[\w+\] -> \d+\[\w+\] (?:\[\w+\] )?via (\S+)")
_TUNING = re.compile(r"\b(AllReduce|AllGather|ReduceScatter|Broadcast)\s*:\s*(?:opCount \w+ )?(\d+) Bytes -> Algo (\w+) proto (\w+)")
_ENVSET = re.compile(r"(NCCL_\w+) set by environment to (\S*)")
#: NVLink per-direction rate per link, GB/s, by NVML's NVLink version code (nvml.h:
#: NVML_NVLINK_VERSION_1_0 = 1, 2_0 = 2, 2_2 = 3, 3_0 = 4, 3_1 = 5, 4_0 = 6, 5_0 = 7)
NVLINK_GBPS = {1: 20.0, 2: 25.0, 3: 25.0, 4: 25.0, 5: 25.0, 6: 25.0, 7: 50.0}
NVLINK_NAME = {1: "NVLink 1.0", 2: "NVLink 2.0", 3: "NVLink 2.2", 4: "NVLink 3.0", 5: "NVLink 3.1", 6: "NVLink 4.0",
               7: "NVLink 5.0"}
PCIE_GBPS_PER_LANE = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.877}


def _name(v: str, table: dict) -> str:
    return table.get(int(v), v) if v.isdigit() else v.upper()


def parse_nccl_log(text: str) -> dict:
    """{"version", "transports": [...], "tuning": {"op bytes": "ALGO/PROTO"}, "env": {...}}."""
    out: dict = {"version": None, "transports": [], "tuning": {}, "env": {}}
    m = _VERSION.search(text)
    if m:
        out["version"] = m.group(1)
    out["transports"] = sorted({t.split("/")[0] + ("/" + t.split("/")[1] if "/" in t else "") for t in _CHANNEL.findall(text)})
    tun: dict[str, Counter] = {}
    for op, nbytes, algo, proto in _TUNING.findall(text):
        tun.setdefault(f"{NCCL_OPS[op]} {nbytes}", Counter())[f"{_name(algo, ALGOS)}/{_name(proto, PROTOS)}"] += 1
    out["tuning"] = {k: c.most_common(1)[0][0] for k, c in tun.items()}
    out["env"] = dict(_ENVSET.findall(text))
    return out


def read_logs(paths: list[Path]) -> dict:
    text = ""
    for p in paths:
        try:
            text += Path(p).read_text(encoding="utf-8", errors="replace")
        except OSError:
            pass
    return parse_nccl_log(text) if text else {}


def algo_for(info: dict, op: str, size: int, world: int) -> str | None:
    """NCCL's algorithm/protocol for this op at this size (its log counts bytes per rank's buffer)."""
    tun = (info or {}).get("tuning", {})
    for b in (size, size // max(world, 1)):
        if f"{op} {b}" in tun:
            return tun[f"{op} {b}"]
    return None


def smi_nvlink_pairs(text: str | None) -> dict[str, int]:
    """NVLinks per ordered GPU pair from `nvidia-smi topo -m` ("NV18" = a bonded set of 18 links).
    NVML cannot say this where the links go through NVSwitches (their far end is a switch)."""
    rows = topo_rows(text)
    head = next((r for r in rows if r and r[0] == "" and any(c.startswith("GPU") for c in r)), None)
    if head is None:
        return {}
    out = {}
    for r in rows:
        if not r or not re.fullmatch(r"GPU\d+", r[0]):
            continue
        i = int(r[0][3:])
        for c, cell in zip(head[1:], r[1:]):
            m = re.fullmatch(r"NV(\d+)", cell)
            if m and re.fullmatch(r"GPU\d+", c):
                out[f"{i}-{int(c[3:])}"] = int(m.group(1))
    return out


def nvidia_smi_topo() -> str | None:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    p = process.query([exe, "topo", "-m"], timeout=20)
    return p.stdout if p is not None and p.returncode == 0 else None


def nvlink_topology() -> dict:
    """Per GPU: active NVLinks, their version and peers (NVML); per pair: link count and the
    datasheet per-direction rate (NVLink links x per-link rate, else the PCIe link)."""
    try:
        import pynvml as nv
    except ImportError:
        return {"error": "NVML not available (pip install nvidia-ml-py)"}
    try:
        nv.nvmlInit()
    except Exception as e:  # noqa: BLE001 - NVML raises its own error types
        return {"error": f"NVML init failed: {e}"}
    try:
        n = nv.nvmlDeviceGetCount()
        handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
        bus = [nv.nvmlDeviceGetPciInfo(h).busId for h in handles]
        bus = [b.decode() if isinstance(b, bytes) else b for b in bus]
        gpus, pairs = [], {}
        for i, h in enumerate(handles):
            links, version = 0, None
            for link in range(18 if not hasattr(nv, "NVML_NVLINK_MAX_LINKS") else nv.NVML_NVLINK_MAX_LINKS):
                try:
                    if nv.nvmlDeviceGetNvLinkState(h, link) != nv.NVML_FEATURE_ENABLED:
                        continue
                except Exception:  # noqa: BLE001 - link absent
                    continue
                links += 1
                try:
                    version = version or nv.nvmlDeviceGetNvLinkVersion(h, link)
                    rb = nv.nvmlDeviceGetNvLinkRemotePciInfo_v2(h, link).busId
                    rb = rb.decode() if isinstance(rb, bytes) else rb
                    j = next((k for k, b in enumerate(bus) if b.lower().endswith(rb.lower()[-12:])), None)
                    if j is not None:
                        pairs[(i, j)] = pairs.get((i, j), 0) + 1
                except Exception:  # noqa: BLE001
                    pass
            try:
                gen, width = nv.nvmlDeviceGetMaxPcieLinkGeneration(h), nv.nvmlDeviceGetMaxPcieLinkWidth(h)
            except Exception:  # noqa: BLE001
                gen, width = None, None
            rate = NVLINK_GBPS.get(version or 0, 25.0) * links if links else None
            pcie = PCIE_GBPS_PER_LANE.get(gen or 0, 0) * (width or 0) or None
            gpus.append({"index": i, "bus_id": bus[i], "nvlinks": links, "nvlink_version": version,
                         "nvlink_generation": NVLINK_NAME.get(version or 0),
                         "nvlink_GBps_per_dir": rate, "pcie_gen": gen, "pcie_width": width, "pcie_GBps_per_dir": pcie})
        pair_rates = {}
        for (i, j), cnt in pairs.items():
            pair_rates[f"{i}-{j}"] = {"nvlinks": cnt, "GBps_per_dir": NVLINK_GBPS.get(gpus[i]["nvlink_version"] or 0, 25.0) * cnt}
        return {"gpus": gpus, "pairs": pair_rates}
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def datasheet_GBps(topology: dict) -> float | None:
    """The link rate a GPU's collectives are bounded by: its NVLink rate per direction (the
    smallest over GPUs), else its PCIe link's."""
    gpus = (topology or {}).get("gpus") or []
    rates = [g.get("nvlink_GBps_per_dir") or g.get("pcie_GBps_per_dir") for g in gpus]
    rates = [r for r in rates if r]
    return min(rates) if rates else None
