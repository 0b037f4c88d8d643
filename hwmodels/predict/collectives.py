"""Time of one collective: kind, bytes, ranks, link level, calibration.

The one function boundary :func:`collective_time` is what the step model
calls; it can later delegate to :mod:`hwmodels.comms` (the bandwidth-ramp
model of the fits helper) without changing any caller.

Bus bandwidth convention (nccl-tests ``doc/PERFORMANCE.md``): for ``n``
ranks and a buffer of ``S`` bytes (the whole buffer: the all-reduce input, the
all-gather output, the reduce-scatter input)::

    all_reduce      t = 2 (n-1)/n * S / busbw
    all_gather      t =   (n-1)/n * S / busbw
    reduce_scatter  t =   (n-1)/n * S / busbw
    send_recv       t =             S / bw_p2p

``busbw`` follows the calibrated ramp of the link level (``intra``: inside the
scale-up domain; ``inter``: across it). Across nodes the scale-out NICs of a
node are shared by every group running at the same time: a group with ``r`` of
its ranks on one node gets ``r / accelerators_per_node`` of the node's
measured busbw (a DP group of one rank per node, under tp = 8, gets the
per-accelerator share). Latency grows with the ring/tree depth:
``latency * max(1, log2(n) / 3)`` (tree depth; calibrated latency is for
8-16 ranks, log2 = 3..4).
"""

from __future__ import annotations

import math
from typing import Any

from hwmodels.errors import choices_error

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "send_recv")
LEVELS = ("intra", "inter")


def bus_factor(kind: str, ranks: int) -> float:
    """nccl-tests busbw / algbw factor."""
    n = max(int(ranks), 1)
    if kind == "all_reduce":
        return 2.0 * (n - 1) / n
    if kind in ("all_gather", "reduce_scatter"):
        return (n - 1) / n
    if kind == "send_recv":
        return 1.0
    raise choices_error("collective.kind", kind, KINDS)


def collective_time(cal: Any, *, kind: str, size_bytes: float, ranks: int, level: str,
                    ranks_per_node: int | None = None) -> float:
    """Seconds for one collective of ``size_bytes`` over ``ranks`` on ``level`` (see module docstring)."""
    if level not in LEVELS:
        raise choices_error("collective.level", level, LEVELS)
    if ranks <= 1 and kind != "send_recv":
        return 0.0
    if size_bytes <= 0:
        return 0.0
    ramp = cal.ramps[level]
    bw = ramp.busbw(size_bytes)
    if level == "inter":
        apn = max(int(cal.accelerators_per_node), 1)
        share = min(max(int(ranks_per_node or apn), 1), apn) / apn
        bw *= share
        intra = cal.ramps.get("intra")
        if intra is not None:
            bw = min(bw, intra.busbw(size_bytes))
    if kind == "send_recv" and level == "intra":
        bw = ramp.busbw(size_bytes)
    lat = ramp.latency_s * max(1.0, math.log2(max(ranks, 2)) / 3.0)
    return lat + bus_factor(kind, ranks) * size_bytes / max(bw, 1.0)


__all__ = ["collective_time", "bus_factor", "KINDS", "LEVELS"]
