"""Time of one collective: kind, bytes, ranks, link level, calibration.

Every collective the step model prices goes through :func:`collective_time`,
which evaluates the communication model of :mod:`hwmodels.comms` held by the
calibration for that link level (:class:`hwmodels.predict.calibration.LevelComms`):

* a fitted bandwidth ramp (:class:`hwmodels.comms.CommsResult`: latency +
  square-root pipelining ramp + saturation, per NCCL algorithm/protocol
  regime) from the node's measured, imported or published curve; or
* where the node has no curve, the hierarchical link model from the catalog's
  link figures (:class:`hwmodels.comms.LinkModel`).

Bus bandwidth convention (nccl-tests ``doc/PERFORMANCE.md``): for ``n``
ranks and a buffer of ``S`` bytes (the whole buffer: the all-reduce input, the
all-gather output, the reduce-scatter input) the bus carries ``F(n) S`` bytes,
``F`` = ``2(n-1)/n`` (all_reduce), ``(n-1)/n`` (all_gather, reduce_scatter),
``1`` (send_recv). A ramp fitted on one collective prices another in those
bus bytes, its busbw scaled by the link model's ratio of the two (1 for
all_gather/reduce_scatter vs all_reduce in one domain: busbw is comparable
across collectives; NVLS all-reduce runs above ring all-gather, so an
all-reduce curve is optimistic for the other two, as the source label says;
a send/recv across domains meets one NIC where an all-reduce uses all of a
node's NICs).

**Placement.** The step model says the level (``intra``: inside the scale-up
domain; ``inter``: across it) and how many of the group's ranks share one node
(``ranks_per_node``). The geometry of the group is then ``k`` ranks per domain
on ``N = ceil(n / k)`` domains (``k = n``, ``N = 1`` inside the domain); a
DP group of one rank per node under tp = 8 crosses the network on each rank's
own NIC, as :class:`~hwmodels.comms.LinkModel` computes for ``k = 1``.

**Projection.** A curve fitted at ``n0`` ranks in geometry ``(k0, N0)`` is
moved to the group's geometry through the link model. The curve calibrates
the stage that binds at its own geometry: the efficiency of that stage
(intra-domain links, or the NICs) is set so that the link model reproduces the
curve's asymptotic busbw, and the link model so calibrated gives the busbw of
the group's geometry. (A plain ratio ``busbw_inf(q) / busbw_inf(fit)`` would
carry, say, the NVLS gain of a 2-node H100 curve, which is bound by NVLink, onto
a one-rank-per-node group bound by its NIC, above the NIC's line rate.) Latency
and pipeline fill scale by ``latency(q) / latency(fit)`` (1 inside a domain;
tree depth ``log2 N`` across domains). At the fitted geometry the time is the
fitted result's ``predict_time`` (``tests/test_predict.py`` holds that).
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache
from typing import Any

from hwmodels.comms import LinkModel, busbw_factor
from hwmodels.errors import choices_error

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "send_recv")
LEVELS = ("intra", "inter")
#: the step model's names -> hwmodels.comms' (nccl-tests binary names)
COMMS_NAME = {"all_reduce": "all_reduce", "all_gather": "all_gather", "reduce_scatter": "reduce_scatter",
              "send_recv": "sendrecv"}


def bus_factor(kind: str, ranks: int) -> float:
    """nccl-tests busbw / algbw factor."""
    if kind not in COMMS_NAME:
        raise choices_error("collective.kind", kind, KINDS)
    return busbw_factor(COMMS_NAME[kind], max(int(ranks), 1))


def geometry(level: str, ranks: int, ranks_per_node: int | None, accelerators_per_node: int) -> tuple[int, int]:
    """(ranks per domain k, domains N) of a group on ``level`` (module docstring, "Placement")."""
    n = max(int(ranks), 1)
    if level == "intra":
        return n, 1
    k = min(max(int(ranks_per_node or accelerators_per_node), 1), n)
    return k, -(-n // k)


@lru_cache(maxsize=4096)
def _link_at(link: LinkModel, k: int) -> LinkModel:
    """``link`` with a domain of ``k`` ranks (the group's own ranks per domain)."""
    return replace(link, accelerators_per_node=k, scale_up_size=k)


@lru_cache(maxsize=65536)
def _link_figures(link: LinkModel, kind: str, k: int, domains: int) -> tuple[float, float, float]:
    """(busbw_inf, alpha_s, fill_s) of the link model for ``kind`` in geometry (k, domains)."""
    n = k * domains
    lk = _link_at(link, k if domains > 1 else n)
    a, fill = lk.latency(n)
    return lk.busbw_inf(kind, n), a, fill


def ramp_time(alpha_s: float, fill_s: float, busbw_inf: float, bus_bytes: float) -> float:
    """``t = alpha + (sqrt(fill) + sqrt(X / B_inf))^2`` (:mod:`hwmodels.comms`, "Bandwidth ramp")."""
    return alpha_s + (math.sqrt(fill_s) + math.sqrt(bus_bytes / busbw_inf)) ** 2


def collective_time(cal: Any, *, kind: str, size_bytes: float, ranks: int, level: str,
                    ranks_per_node: int | None = None) -> float:
    """Seconds for one collective of ``size_bytes`` over ``ranks`` on ``level`` (see module docstring)."""
    if level not in LEVELS:
        raise choices_error("collective.level", level, LEVELS)
    if kind not in COMMS_NAME:
        raise choices_error("collective.kind", kind, KINDS)
    if (ranks <= 1 and kind != "send_recv") or size_bytes <= 0:
        return 0.0
    if kind == "send_recv":  # one pair: inside a domain, or across two on one NIC each
        geo = (2, 1) if level == "intra" else (1, 2)
    else:
        geo = geometry(level, ranks, ranks_per_node, cal.accelerators_per_node)
    return _time(cal.comms[level], COMMS_NAME[kind], float(size_bytes), int(ranks), *geo)


def _time(lc: Any, kind: str, size: float, ranks: int, k: int, domains: int) -> float:
    n = k * domains if kind == "sendrecv" else ranks
    for hi, a, fill, b in _params(lc, kind, k, domains):
        if size <= hi:
            break
    return ramp_time(a, fill, b, busbw_factor(kind, n) * size)


@lru_cache(maxsize=65536)
def _params(lc: Any, kind: str, k: int, domains: int) -> tuple[tuple[float, float, float, float], ...]:
    """Per regime (top size, alpha_s, fill_s, busbw_inf) of ``kind`` in geometry (k, domains); the last is open."""
    b_q, a_q, fill_q = _link_figures(lc.link, kind, k, domains)
    fit, geo = lc.fit_for(kind)
    if fit is None:
        return ((math.inf, a_q, fill_q, b_q),)
    out = []
    for i, reg in enumerate(fit.regimes):  # the fitted regimes, moved to the group's geometry
        a, fill, inv = (math.exp(float(x)) for x in reg.theta)
        if kind != fit.collective or (k, domains) != geo:
            _, a0, fill0 = _link_figures(lc.link, fit.collective, *geo)
            link = _stage_calibrated(lc.link, fit.collective, geo, 1.0 / inv)
            a, fill, inv = a * a_q / a0, fill * fill_q / fill0, 1.0 / _link_figures(link, kind, k, domains)[0]
        out.append((math.inf if i == len(fit.regimes) - 1 else reg.hi_bytes, a, fill, 1.0 / inv))
    return tuple(out)


def _stage_calibrated(link: LinkModel, collective: str, geo: tuple[int, int], busbw_fit: float) -> LinkModel:
    """``link`` with the efficiency of the stage that binds at the curve's geometry set so that it reproduces
    the curve's asymptotic busbw (module docstring, "Projection"); capped at LinkModel's 1.5."""
    b_link = _link_figures(link, collective, *geo)[0]
    k0, n_dom = geo
    bi = link.intra_efficiency * link.intra_bytes_per_s
    bn = link.inter_efficiency * link.inter_bytes_per_s
    intra_binds = n_dom == 1 or (k0 > 1 and busbw_factor(collective, k0) / bi
                                 >= busbw_factor(collective, n_dom) / k0 / bn)
    name = "intra_efficiency" if intra_binds else "inter_efficiency"
    return replace(link, **{name: min(getattr(link, name) * busbw_fit / b_link, 1.5)})


__all__ = ["collective_time", "bus_factor", "geometry", "ramp_time", "KINDS", "LEVELS", "COMMS_NAME"]
