"""Compute rates under a power limit below the accelerator's default TDP.

A power limit (``nvidia-smi -pl``, a facility cap, a vendor's "power limited" configuration) is enforced by the
firmware as a clock throttle: when a kernel's projected draw would cross the limit, the SM clock drops. Tensor-core
GEMMs and fused attention, which drive the whole die, run at the throttled clock; HBM traffic, collectives and
launches keep their rates (the memory rail draws a small, nearly constant share). So a limit scales the
calibration's compute rates (matmul and attention efficiency) by the sustained-clock ratio at that limit, and
nothing else.

The curve is data (``data/calibration/power_limit.csv``): the node's own "average SM clock" rows where it has them,
as a function of the limit's fraction of TDP, interpolated linearly between published points (1.0 at TDP); a node
without its own rows takes the curve of the node that has them at the same fraction of its TDP, with a wider
uncertainty, labelled. No curve is extrapolated below its lowest published point. The end-to-end training rows of
the same file are the curve's cross-checks (:func:`cross_checks`), not inputs.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from hwmodels.errors import ModelInputError

POWER_FILE = Path(__file__).resolve().parents[2] / "data" / "calibration" / "power_limit.csv"
#: the rows that make the compute-rate curve: SM clock sustained under the limit with a compute-bound load
CLOCK_METRIC = "average SM clock"
#: relative uncertainty (1 sigma) of the factor on the node the curve was measured on: the compute factor the
#: clock curve gives at 500 W on H100 (0.879) and the one its end-to-end Llama 3 8B training curve implies with a
#: 75-80% compute share (0.89-0.90) differ by 2-3%
OWN_SIGMA = 0.03
#: ... and on a node that borrows it at the same fraction of TDP: A100 80GB PCIe training (Perseus) at 0.83 of TDP
#: ran 0.90-0.94 of its TDP throughput where the H100 clock curve reads 0.946
CARRIED_SIGMA = 0.06


@dataclass(frozen=True)
class PowerFactor:
    """The compute-rate multiplier at a power limit, where it came from, and its relative uncertainty."""

    value: float
    rel_sigma: float
    source: str


@lru_cache(maxsize=4)
def _read_csv(path: str) -> tuple[dict[str, str], ...]:
    """The rows of a '#'-commented data CSV, read once per path (this module sits below calibration, which prices
    with it, so it keeps its own reader)."""
    with open(path, newline="") as f:
        return tuple(csv.DictReader(line for line in f if not line.startswith("#")))


@lru_cache(maxsize=4)
def _curves(path: str) -> dict[str, tuple[tuple[tuple[float, float], ...], str]]:
    """node id -> (((fraction of TDP, clock ratio), ...) ascending with (1, 1), source text) from the clock rows."""
    if not Path(path).exists():
        return {}
    pts: dict[str, dict[float, float]] = {}
    src: dict[str, str] = {}
    for r in _read_csv(path):
        if r.get("metric") != CLOCK_METRIC or not r.get("power_limit_W") or not r.get("relative_to_tdp"):
            continue
        node = r["node_id"].split(" ")[0]
        frac = float(r["power_limit_W"]) / float(r["tdp_W"])
        pts.setdefault(node, {})[round(frac, 6)] = float(r["relative_to_tdp"])
        src.setdefault(node, f"{r['measured_on']}: {r['workload']} ({r['source']})")
    out = {}
    for node, d in pts.items():
        d.setdefault(1.0, 1.0)
        out[node] = (tuple(sorted(d.items())), src[node])
    return out


def compute_factor(node_id: str, tdp_watts: float, power_limit_watts: float,
                   path: Path | None = None) -> PowerFactor:
    """The factor a power limit of ``power_limit_watts`` puts on ``node_id``'s compute rates (TDP ``tdp_watts``):
    1.0 at or above TDP; else the published clock curve at ``limit / tdp`` (the node's own, else one measured on
    another node at the same fraction of its TDP). A limit that is not a positive number, or below the curve's
    lowest published point, is an error naming the range."""
    w = power_limit_watts
    if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w <= 0:
        raise ModelInputError(f"power_limit_w: must be a positive number of watts per accelerator, got {w!r}")
    if not tdp_watts or tdp_watts <= 0:
        raise ModelInputError(f"power_limit_w: {node_id} has no TDP in the catalog ([power] tdp_watts), so a "
                              "power limit cannot be priced")
    frac = w / tdp_watts
    if frac >= 1.0:
        return PowerFactor(1.0, 0.0, f"power limit {w:g} W at or above the {tdp_watts:g} W TDP: no throttle")
    curves = _curves(str(path or POWER_FILE))
    if not curves:
        raise ModelInputError("power_limit_w: no published clock-under-power-limit curve (data/calibration/"
                              "power_limit.csv), so a power limit below TDP cannot be priced")
    own = node_id in curves
    key = node_id if own else sorted(curves)[0]
    pts, src = curves[key]
    lo = pts[0][0]
    if frac < lo - 1e-9:
        raise ModelInputError(f"power_limit_w: {w:g} W is {frac:.0%} of {node_id}'s {tdp_watts:g} W TDP, below the "
                              f"lowest published point of the curve ({lo:.0%} of TDP, measured on {key}); valid: "
                              f"{math.ceil(lo * tdp_watts):g} W to {tdp_watts:g} W")
    for (x0, y0), (x1, y1) in zip(pts[:-1], pts[1:], strict=True):
        if x0 <= frac <= x1:
            v = y0 + (y1 - y0) * (frac - x0) / (x1 - x0) if x1 > x0 else y1
            break
    else:  # frac == the lowest point
        v = pts[0][1]
    how = (f"power limit {w:g} W = {frac:.0%} of the {tdp_watts:g} W TDP: compute rates x {v:.3f}, the sustained "
           f"SM-clock ratio at that fraction of TDP, interpolated in {src} (data/calibration/power_limit.csv)")
    if not own:
        how += f"; measured on {key}, carried to {node_id} at the same fraction of its TDP"
    return PowerFactor(v, OWN_SIGMA if own else CARRIED_SIGMA, how)


def cross_checks(path: Path | None = None) -> list[dict[str, str]]:
    """The end-to-end training rows of the power-limit file (throughput at each limit relative to TDP): what the
    clock curve is checked against, listed for the benchmark's record."""
    p = path or POWER_FILE
    if not p.exists():
        return []
    return [r for r in _read_csv(str(p)) if r.get("metric") != CLOCK_METRIC]
