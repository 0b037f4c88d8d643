"""Per-step phase timing with host clock reads.

Each phase boundary costs one ``time.perf_counter()`` read (~50-100 ns) and a
dict update; nothing else is added to the step unless ``sync`` is given (on
GPU, ``torch.cuda.synchronize`` per boundary, on by default via ``sync_phases``,
since it removes the overlap of host dispatch with device work and so changes
what is measured). ``benchmarks/workload_overhead.py`` measures the total
instrumentation overhead against a bare loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable

PHASES = ("data", "forward", "backward", "optimizer", "communication")


class PhaseTimer:
    __slots__ = ("acc", "_t", "_sync", "clock")

    def __init__(self, sync: Callable[[], None] | None = None) -> None:
        self.acc: dict[str, float] = {}
        self._sync = sync
        self._t = 0.0
        self.clock = time.perf_counter

    def start(self) -> None:
        if self._sync is not None:
            self._sync()
        self._t = self.clock()

    def lap(self, phase: str) -> None:
        """Charge the time since the last boundary to ``phase``; start the next."""
        if self._sync is not None:
            self._sync()
        t = self.clock()
        self.acc[phase] = self.acc.get(phase, 0.0) + (t - self._t)
        self._t = t

    def take(self) -> dict[str, float]:
        out, self.acc = self.acc, {}
        return out
