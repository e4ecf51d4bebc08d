"""The hardware floor: peer-to-peer copies between every ordered GPU pair of this node
(_native.dist.PeerCopy: cudaMemcpyPeerAsync and copy kernels over peer pointers, device-timed),
each checked byte for byte before timing and after the last timed copy. The full size sweep runs
for the first pair; every other pair gets the smallest (latency) and largest (bandwidth) size."""
from __future__ import annotations

METHODS = ("memcpy_peer", "kernel_pull", "kernel_push")


def cases(n: int, sizes: list[int]) -> list[tuple[int, int, str, list[int]]]:
    """(src, dst, method, sizes): the full sweep for pair 0->1, the smallest and largest size for
    every other ordered pair."""
    out = []
    for src in range(n):
        for dst in range(n):
            if src != dst:
                todo = sizes if (src, dst) == (0, 1) else sorted({sizes[0], sizes[-1]})
                out += [(src, dst, m, todo) for m in METHODS]
    return out


def run_p2p(cfg, log, only: str | None = None) -> None:
    """The probe over every case, or (`only` = "SRC,DST,METHOD") one pair and method: after a
    crash bench.dist runs each case not yet reached in its own process."""
    from gapbench.benchmarks.collectives.rungs.base import Unavailable
    from gapbench.core import native

    log.write(kind="start", rung="p2p")
    try:
        nd = native.load().dist
        if not nd.built:
            raise Unavailable(nd.reason)
        st = native.load().cuda.status(0)  # no torch in this process: nothing but the probe
        n = int(st.get("device_count") or 0) if st.get("available") else 0
        if n < 2:
            raise Unavailable(f"the p2p probe needs two GPUs in one node; this one has {n}")
    except (Unavailable, RuntimeError, ImportError, AttributeError) as e:
        log.write(kind="unavailable", rung="p2p", reason=str(e))
        log.write(kind="done", rung="p2p")
        return
    for src, dst, m, todo in cases(n, sorted(set(cfg.sizes))):
        if only and only != f"{src},{dst},{m}":
            continue
        for size in todo:
            log.write(kind="begin", rung="p2p", op=m, dtype="bytes", placement=f"{src}->{dst}", size=size,
                      src=src, dst=dst)
            log.write(kind="p2p", **_one(nd, src, dst, size, m, cfg))
    log.write(kind="done", rung="p2p")


def _one(nd, src, dst, size, method, cfg) -> dict:
    d = {"src": src, "dst": dst, "size": size, "method": method}
    try:
        pc = nd.PeerCopy(src, dst, size)
        d["peer_access"] = pc.peer_access
        if method != "memcpy_peer" and not pc.peer_access:
            return {**d, "status": "n/a", "reason": "no peer access between these GPUs: copy kernels need it"}
        M = nd.CopyMethod.__members__[method]
        wrong = pc.check(M)
        if wrong:
            return {**d, "status": "failed", "reason": f"{wrong} of {size} bytes wrong before timing"}
        iters = cfg.iters_for(size)
        samples = pc.time(M, iters, cfg.samples_for(size) * cfg.rounds, cfg.warmup)
        wrong = pc.verify()
        if wrong:
            return {**d, "status": "failed", "reason": f"{wrong} of {size} bytes wrong after timing"}
        return {**d, "status": "ok", "samples_s": list(samples), "iters": iters, "warmup": cfg.warmup,
                "verify_detail": f"{size} bytes exact before timing and after the last timed copy"}
    except Exception as e:  # noqa: BLE001 - one failing pair never loses the others
        return {**d, "status": "error", "reason": f"{type(e).__name__}: {e}"}
