"""Holding a CUDA stream while the host queues a timed region, for framework rows (torch, cupy).

Events around a few microseconds of GPU work time the host's submission gap too unless the device
is busy while the host queues the start event, the work and the stop event. `StreamHold` uses the
native release gate (gapbench._native.cuda.Gate, cuda/gate.h): a kernel that waits until the host
says it has queued everything, with a 1 s timeout that marks the sample invalid. Invalid samples
are dropped and taken again (`invalid_samples` counts them), never returned as valid.

`timing_streams` hands a framework the process's timing streams (core.native.timing_streams: blocking
streams of the native part, cuda/gate.h Streams) to time its rows on under bench.blas --streams
shared, one a paired round in turn, the native rows of the case on the same stream in that round
(by default the frameworks time on their current stream: findings/between-runs.md says why).

Without the native CUDA part, a documented fallback: a fixed spin kernel of SPIN_CYCLES clocks,
and the host's queuing time is compared with the shortest the spin can last (SPIN_CYCLES at
MAX_CLOCK_HZ, above any current GPU's boost clock): a sample whose queuing outlasted it may have
timed host time, so it is invalid too."""
from __future__ import annotations

import time
from typing import Callable

from gapbench.core.native import cache as native_cache

SPIN_CYCLES = 2_000_000  # ~1 ms at a 2 GHz SM clock
MAX_CLOCK_HZ = 3.0e9
MAX_RETRIES = 5


class GateTimeout(RuntimeError):
    """Every try of one sample outlasted the hold: the host cannot queue this work in time."""


class StreamHold:
    def __init__(self, device: int, spin: Callable[[int], None]):
        """`spin(cycles)` enqueues the fallback spin kernel on the current stream."""
        self.gate = None
        self.method = f"fixed spin of {SPIN_CYCLES} clocks, host queuing checked against it"
        self.invalid_samples = 0
        self._spin = spin
        self._device = device
        try:
            from gapbench import _native

            if _native.cuda.built and _native.cuda.status(device).get("available"):
                self.gate = _native.cuda.Gate(device, 1.0)
                self.method = "release gate (held until the host has queued the timed region)"
        except (ImportError, RuntimeError) as e:
            self.method += f" (no native gate: {e})"

    @property
    def can_scrub(self) -> bool:
        return self.gate is not None and hasattr(self.gate, "scrub")

    def set_parity_pads(self, on: bool) -> bool:
        """Each held sample followed by one or two empty kernels after the gate, in turn (cuda/gate.h
        parity pads: both launch parities of the stream in every four samples); returns whether the
        samples are now padded (never without the native gate)."""
        if self.gate is None or not hasattr(self.gate, "parity_pads"):
            return False
        self.gate.parity_pads = bool(on)
        return bool(on)

    @property
    def parity_pads(self) -> bool:
        return self.gate is not None and bool(getattr(self.gate, "parity_pads", False))

    def timing_streams(self, n: int) -> list[int]:
        """The cudaStream_t (as ints) of the process's n timing streams of the gate's device
        (core.native.timing_streams: the native rows' too); [] without the native gate (the
        framework's current stream is then the only one)."""
        if self.gate is None or n <= 1:
            return []
        from gapbench.core.native import timing_streams

        return timing_streams(self._device, n)

    def sample(self, stream: int, enqueue: Callable[[], None], finish: Callable[[], float], scrub=None) -> float:
        """Device seconds of one sample: hold `stream` (a cudaStream_t as int), `enqueue()` the
        start event, the work and the stop event, release, then `finish()` (sync and read the
        events). `scrub` (a cold CacheMode): the gate's L2 scrub is queued first, before the hold,
        so the events see the work alone on an L2 left as the native cold rows leave it. Retried
        while invalid; raises GateTimeout after MAX_RETRIES tries."""
        if scrub is not None and not self.can_scrub:
            raise ValueError(f"no L2 scrub on this stream ({self.method})")
        scrub_mode = native_cache(scrub) if scrub is not None else None
        for _ in range(MAX_RETRIES):
            if scrub_mode is not None:
                self.gate.scrub(stream, scrub_mode)
            if self.gate is not None:
                self.gate.hold(stream)
                try:
                    enqueue()
                finally:
                    self.gate.release()
                seconds = finish()
                valid = not self.gate.timed_out()
            else:
                t0 = time.perf_counter()
                self._spin(SPIN_CYCLES)
                enqueue()
                queued = time.perf_counter() - t0
                seconds = finish()
                valid = queued < SPIN_CYCLES / MAX_CLOCK_HZ
            if valid:
                return seconds
            self.invalid_samples += 1
        raise GateTimeout(f"the host could not queue one timed region within the hold ({self.method}) "
                          f"in {MAX_RETRIES} tries")

    def time_events_each(self, handle: int, stream, start, stop, fn: Callable[[], None], n: int,
                         elapsed_ms: Callable[[object, object], float], scrub=None) -> list[float]:
        """n samples of one call of fn each, every one held behind the gate as `time_events` holds
        it (the same conditions as n calls of it), with the stream, the events and their methods
        looked up once: a framework row's per-sample host cost is most of a 5 us case's wall time."""
        record_start, record_stop, wait = start.record, stop.record, stop.synchronize

        def enqueue():
            record_start(stream)
            fn()
            record_stop(stream)

        def finish():
            wait()
            return elapsed_ms(start, stop) * 1e-3

        sample = self.sample
        return [sample(handle, enqueue, finish, scrub) for _ in range(n)]

    def time_events(self, handle: int, stream, start, stop, fn: Callable[[], None], inner: int,
                    elapsed_ms: Callable[[object, object], float], held: bool = True, scrub=None) -> float:
        """Device seconds of `inner` calls of fn between a framework's two events (torch and CuPy
        events share record(stream) and synchronize(); `elapsed_ms(start, stop)` reads them) on
        `stream` (`handle`: its cudaStream_t as int): behind the hold (`sample`), or, with
        held=False, as the host issues them."""

        def enqueue():
            start.record(stream)
            for _ in range(inner):
                fn()
            stop.record(stream)

        def finish():
            stop.synchronize()
            return elapsed_ms(start, stop) * 1e-3

        if not held:
            if scrub is not None:
                raise ValueError("a scrubbed sample is held: the scrub must end before the timed region")
            enqueue()
            return finish()
        return self.sample(handle, enqueue, finish, scrub)
