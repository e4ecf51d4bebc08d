"""A plain training loop, as a user would write it: forward, backward, optimizer step, and one
synchronisation at the end of each step (so each step's wall time is the device's time for it).
No per-phase synchronisation, no sampler, no records. The harness (probes/train.py) times the
same model, optimizer and batches with these loops in the same session."""
from __future__ import annotations

import contextlib
import time


def torch_steps(model, loss_fn, batches, opt, sync, steps, autocast=contextlib.nullcontext, scaler=None):
    """Seconds of each of `steps` training steps of a torch model."""
    out = []
    for i in range(steps):
        b = batches[i % len(batches)]
        t0 = time.perf_counter()
        with autocast():
            loss = loss_fn(model, b)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        out.append(time.perf_counter() - t0)
    return out


def mlx_steps(model, loss_and_grad, batches, opt, steps):
    """Seconds of each of `steps` training steps of an MLX model (mx.eval waits for the device)."""
    import mlx.core as mx

    out = []
    for i in range(steps):
        x, y = batches[i % len(batches)]
        t0 = time.perf_counter()
        loss, grads = loss_and_grad(x, y)
        opt.update(model, grads)
        mx.eval(loss, model.parameters(), opt.state)
        out.append(time.perf_counter() - t0)
    return out
