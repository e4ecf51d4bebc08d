"""The release gate on torch's streams, first hold included (a diagnostic for the lent GPU)."""
import time

import torch

from gapbench import _native

for trial in range(2):
    g = _native.cuda.Gate(0, 0.5)
    for label, s in (("torch side stream", torch.cuda.Stream()), ("torch current", torch.cuda.current_stream())):
        x = torch.ones(1024, device="cuda")
        torch.cuda.synchronize()
        g.hold(s.cuda_stream)
        with torch.cuda.stream(s):
            y = x * 2
        time.sleep(0.05)
        idle = s.query()
        g.release()
        s.synchronize()
        print(f"gate {trial}: {label}: idle while held {idle}, timed out {g.timed_out()}, y ok {float(y.sum()) == 2048.0}",
              flush=True)
