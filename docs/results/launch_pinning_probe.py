"""Why is torch's launch+sync slower when paired with the native floor? One process, step by step (run on the lent
H100 2026-11-25; output: launch-h100-2026-11-25-pinning-probe.txt). Usage: python launch_pinning_probe.py torch-cuda|cupy"""
import json, os, sys, time
import numpy as np
from gapbench.benchmarks.launch.worker import _FrameworkAdd, _timed_loop, _each
from gapbench.benchmarks.launch.pairing import Floor
from gapbench.benchmarks.launch.config import Config, random_inputs
from gapbench.backends import registry
from gapbench.core.names import Backend

which = Backend(sys.argv[1] if len(sys.argv) > 1 else "torch-cuda")
cfg = Config()
ad = registry.make_adapter(which); ad.setup_context()
a, b = random_inputs(cfg); op = _FrameworkAdd(ad, a, b)
one = _each(_timed_loop(op.run_sync, 1))
res = {}
def med(f, n=3000):
    f(200)
    return float(np.median(f(n)) * 1e6)
res["A standalone"] = med(one)
floor = Floor(Backend.native_cuda, cfg)
res["B after floor created"] = med(one)
fs, _ = floor.sample["roundtrip"]
res["floor alone"] = med(fs)
res["A again after floor ran"] = med(one)
for k in (1, 10, 100, 1000):
    t, f = [], []
    for r in range(max(20, 4000 // k)):
        t += list(one(k)); f += list(fs(k))
    res[f"interleaved k={k}: fw"] = float(np.median(t) * 1e6)
    res[f"interleaved k={k}: floor"] = float(np.median(f) * 1e6)
res["C standalone at end"] = med(one)
# the torch arm with a busy-wait between (no other code) for the same time as the floor's k runs
for k in (10, 100):
    t = []
    for r in range(max(20, 4000 // k)):
        t += list(one(k)); s = time.perf_counter() + k * res["floor alone"] * 1e-6
        while time.perf_counter() < s: pass
    res[f"fw with idle gaps k={k}"] = float(np.median(t) * 1e6)
print(json.dumps({"backend": which.value, **{k: round(v, 2) for k, v in res.items()}}, indent=1))
