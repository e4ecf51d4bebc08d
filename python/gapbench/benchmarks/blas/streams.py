"""Which stream each paired round of a bench.blas case runs on (--streams, config.StreamPlan): the
native case's own streams or the process's timing streams (core.native.timing_streams), and a
framework's rows on the process's streams where the plan shares them (Adapter.timing_streams). A
round's arms share one stream; the rounds take the streams in turn."""
from __future__ import annotations

from typing import Any, Callable

from gapbench.backends.base import Adapter
from gapbench.core import native


def native_rounds(case, n: int, shared: bool) -> Callable[[int], None]:
    """The round hook of a native case timed on `n` streams: round i on stream i mod n, of the
    process's timing streams where `shared` (the frameworks' rows of the case take them too), else
    of the case's own (cuda/blas.h; also where the process's cannot be made: a stand-in CUDA part)."""
    handles: list[int] = []
    if shared:
        try:
            handles = native.timing_streams(0, n)  # run.py makes every native case on device 0
        except (RuntimeError, ValueError, AttributeError):
            handles = []

    def on_round(i: int) -> None:
        if handles:
            case.use_stream_handle(handles[i % n])
        else:
            case.use_stream(i % n)
    return on_round


class StreamRotation:
    """The streams a framework's arms of one case time on: `n` of the adapter's (1: its current
    stream), and the one round hook (`on_round`) all of them share, so a round's arms run on one
    stream, as the native arms of the case do on theirs."""

    def __init__(self, ad: Adapter, streams: int):
        self.ad = ad
        self.n = ad.timing_streams(streams) if streams > 1 else 1
        self.on_round = self._on_round if self.n > 1 else None

    def _on_round(self, i: int) -> None:
        self.ad.use_stream(i % self.n)

    def warm(self, run: Callable[[], Any], times: int = 2) -> None:
        """`run` called `times` times on each stream, outside any timed region: what a framework
        sets up per stream on first use (a library workspace, its allocator's first blocks there)
        is set up here, never behind the gate. Leaves the adapter on stream 0."""
        for i in range(self.n):
            self.ad.use_stream(i)
            for _ in range(times):
                run()
        if self.n > 1:
            self.ad.sync()
            self.ad.use_stream(0)
