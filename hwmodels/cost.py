"""Cost per convergence: time to target x price, with intervals, energy, ranking and what-ifs.

For each node type ``k`` and pricing mode ``m`` (``on_demand``, ``reserved``,
``spot``, ``on_prem``; see :mod:`hwmodels.catalog` for the on-prem formula)::

    time_to_target_s = W / X                 W: work to target (samples), X: samples/s of the job
    cost_usd         = time_to_target_s / 3600 * price_per_hour(k, m) * nodes
    energy_kWh       = node_watts * nodes * time_h / 1000 * PUE
    energy_usd       = energy_kWh * usd_per_kWh        (included in rented prices; shown for comparison)

or ``time_to_target_s`` measured directly. **Intervals are Monte Carlo**
(``n_draws`` paired draws, percentile interval at ``level``): the job's mean
throughput (or mean time) is drawn from its sampling distribution over the
repeats on the log scale (:func:`mean_interval`: Student t with ``r - 1``
dof for 3+ repeats; a single or double measurement uses the stated noise
floor ``noise_floor_cv`` and is flagged, never a t with 1 dof), and the work to target is drawn from
the convergence fit's parameter distribution
(:meth:`hwmodels.convergence.ConvergenceResult.x_to_target`), or fixed.

**Break-even utilization** (buy vs rent): owning costs
``capex / (years * 8766 h * u) + e`` per used hour (``e`` the energy cost per
hour); renting costs ``p``. They are equal at ``u* = capex / (years * 8766 *
(p - e))``; above ``u*`` buying is cheaper; ``u* > 1`` means renting always wins.

**Sensitivity** (tornado): each input is moved to the ends of its range with
the others at their point values, and the swing in cost is reported, largest
first. Ranges: throughput and work to target: their ``level`` intervals (or
+/-10% when there is no noise estimate); list prices and capex +/-20%;
utilization +/-0.2; $/kWh +/-30%; PUE 1.1-2.0; amortization 3-6 years
(stated assumptions, not measurements).

Workload-results CSV (``read_workload_csv``), one measurement per row:

* ``node`` (required column): a catalog node id (may be blank on pure loss-curve rows)
* ``nodes`` (optional, default 1): how many of those nodes the job used
* at least one of ``samples_per_s`` (job throughput, one row per repeat) or
  ``time_to_target_s`` (one row per repeat)
* optional loss curve: ``samples`` (x: samples seen) and ``loss`` (eval loss).
  All nodes' curves are pooled into one convergence fit, since samples to
  target is a property of the workload and its hyperparameters, not of the
  hardware (use one batch size across nodes).

Blank cells are fine where a row does not use that column; a row with a
non-numeric value, no node, or no measurement at all is reported (count and
first line), not used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hwmodels.catalog import MODES, RENT_MODES, Catalog, NodeType
from hwmodels.csvio import BadRows, first_line, read_csv
from hwmodels.errors import ModelInputError, choices_error
from hwmodels.results import t_quantile
from hwmodels.units import HOURS_PER_YEAR

DEFAULT_REL = 0.10  # +/- range when a measured input has no noise estimate (stated assumption)


@dataclass(frozen=True, kw_only=True)
class WorkloadInput:
    """Measurements of one job on one node type."""

    node: str
    nodes: int = 1
    samples_per_s: tuple[float, ...] = ()
    time_to_target_s: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if not self.node:
            raise ModelInputError("workload.node must be a catalog node id")
        if self.nodes < 1:
            raise ModelInputError(f"workload[{self.node}].nodes must be >= 1, got {self.nodes}")
        if not self.samples_per_s and not self.time_to_target_s:
            raise ModelInputError(f"workload[{self.node}]: needs samples_per_s or time_to_target_s")
        for name in ("samples_per_s", "time_to_target_s"):
            v = getattr(self, name)
            if any((not math.isfinite(x)) or x <= 0 for x in v):
                raise ModelInputError(f"workload[{self.node}].{name}: values must be finite and > 0")


#: Relative noise (CV) assumed for a mean of fewer than 3 repeats when the caller has no measured figure:
#: ``hwcore.timing`` warns at IQR/median > 10%, i.e. CV ~ 0.10/1.349 = 0.074 for normal noise; 0.05 is the
#: typical CV of this suite's kernel medians. Callers pass the harness's measured CV instead (``noise_floor_cv``).
DEFAULT_NOISE_FLOOR_CV = 0.05
_Z = {0.8: 1.2816, 0.9: 1.6449, 0.95: 1.9600, 0.99: 2.5758}


def _z(level: float) -> float:
    from statistics import NormalDist

    return _Z.get(round(level, 6)) or NormalDist().inv_cdf((1 + level) / 2)


def mean_interval(values, level: float = 0.9, *, noise_floor_cv: float = DEFAULT_NOISE_FLOOR_CV) -> dict[str, Any]:
    """Interval for the true mean of a positive measured quantity (throughput, time) from its repeats.

    On the log scale (multiplicative noise: the lower bound never collapses toward zero):

    * 3 or more repeats: Student t with ``r - 1`` degrees of freedom on ``log(values)`` (exact for
      log-normal noise);
    * 1 or 2 repeats ("single/double measurement"): no usable spread estimate (a t with 1 dof gives a
      factor-6 interval from two points), so the stated ``noise_floor_cv`` is taken as known:
      ``mean x exp(+/- z sigma / sqrt(r))`` with ``sigma = sqrt(log(1 + cv^2))``.

    Returns ``{mean, lo, hi, sigma_log, repeats, how}``; ``mean`` is the geometric mean.
    Coverage is tested on simulated log-normal data (``tests/test_hwmodels_cost.py``).
    """
    v = np.asarray([float(x) for x in values], dtype=float)
    if v.size == 0 or not np.all(np.isfinite(v)) or np.any(v <= 0):
        raise ModelInputError("mean_interval: values must be finite and > 0 (at least one)")
    if not 0 < level < 1:
        raise ModelInputError(f"mean_interval: level must be in (0, 1), got {level}")
    lv = np.log(v)
    m = float(lv.mean())
    r = int(v.size)
    if r >= 3:
        s = float(lv.std(ddof=1))
        q = t_quantile((1 + level) / 2, r - 1)
        half = q * s / math.sqrt(r)
        how = f"{r} repeats: Student t ({r - 1} dof) on log values"
        sig = s
    else:
        sig = math.sqrt(math.log1p(noise_floor_cv ** 2))
        half = _z(level) * sig / math.sqrt(r)
        how = (f"{'single' if r == 1 else 'double'} measurement: stated noise floor CV {noise_floor_cv:.1%} "
               f"(normal on log values)")
    return {"mean": math.exp(m), "lo": math.exp(m - half), "hi": math.exp(m + half), "sigma_log": sig,
            "repeats": r, "how": how, "level": level}


def _mean_draws(values: np.ndarray, m: int, rng, noise_floor_cv: float = DEFAULT_NOISE_FLOOR_CV,
                level: float = 0.9) -> tuple[np.ndarray, float, bool]:
    """Draws of the mean (log scale, :func:`mean_interval`), the point mean, and whether repeats gave the noise.

    3+ repeats: ``exp(mean log + se_log x t_{r-1})``; 1-2 repeats: normal with the stated noise floor.
    Never a t with 1 degree of freedom; never a draw at or below zero.
    """
    mi = mean_interval(values, level, noise_floor_cv=noise_floor_cv)
    r = mi["repeats"]
    lm = math.log(mi["mean"])
    if r >= 3:
        d = np.exp(lm + mi["sigma_log"] / math.sqrt(r) * rng.standard_t(r - 1, size=m))
    else:
        d = np.exp(lm + mi["sigma_log"] / math.sqrt(r) * rng.standard_normal(m))
    return d, float(mi["mean"]), r >= 3


def _quantiles(d: np.ndarray, level: float) -> tuple[float, float]:
    d = np.sort(d)
    lo = d[min(int(math.floor((1 - level) / 2 * (d.size - 1))), d.size - 1)]
    hi = d[min(int(math.ceil((1 + level) / 2 * (d.size - 1))), d.size - 1)]
    return float(lo), float(hi)


@dataclass(frozen=True, eq=False)
class CostResult:
    """Ranked rows (one per node x pricing mode) with medians and ``level`` intervals."""

    rows: list[dict[str, Any]]
    level: float
    work: dict[str, Any]
    notes: tuple[str, ...] = ()
    _state: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def params(self) -> dict[str, float]:
        return {f"{r['node']}/{r['pricing']}": r["cost_usd"] for r in self.rows}

    def conf_int(self, alpha: float | None = None) -> dict[str, tuple[float, float]]:
        if alpha is not None and abs((1 - alpha) - self.level) > 1e-9:
            raise ModelInputError(f"cost conf_int: computed at level {self.level}; refit with CostModel(level={1 - alpha})")
        return {f"{r['node']}/{r['pricing']}": (r["lo"], r["hi"]) for r in self.rows}

    def ranking(self) -> list[dict[str, Any]]:
        return list(self.rows)

    def pareto(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["pareto"]]

    def predict(self, work_samples: float) -> list[dict[str, Any]]:
        """Point time and cost of every row for a different amount of work (samples)."""
        out = []
        for r in self.rows:
            s = self._state[(r["node"], r["pricing"])]
            if s["throughput"] is None:
                raise ModelInputError(f"{r['node']}: measured time_to_target_s only; cannot rescale to other work")
            t = work_samples / s["throughput"]
            out.append({"node": r["node"], "pricing": r["pricing"], "time_to_target_s": t,
                        "cost_usd": t / 3600 * s["price"] * s["nodes"]})
        return out

    def break_even(self) -> list[dict[str, Any]]:
        """Buy-vs-rent break-even utilization for every node with an on_prem price."""
        cat: Catalog = self._state["catalog"]
        out = []
        for nid in dict.fromkeys(r["node"] for r in self.rows):
            out.extend(break_even_utilization(cat.get(nid)))
        return out

    def sensitivity(self, node: str | None = None, pricing: str | None = None) -> list[dict[str, Any]]:
        """Tornado rows for one (node, pricing) (default: the top-ranked), largest swing first."""
        if not self.rows:
            return []
        if node is None:
            node, pricing = self.rows[0]["node"], pricing or self.rows[0]["pricing"]
        key = (node, pricing)
        if key not in self._state:
            raise choices_error("sensitivity", f"{node}/{pricing}", [f"{a}/{b}" for a, b in self._state if isinstance(a, str) and b])
        return _tornado(self._state[key], self._state["catalog"].get(node), pricing)

    def summary(self) -> str:
        lines = [f"cost to target ({self.level:.0%} intervals, Monte Carlo); work: {self.work.get('description', '')}"]
        lines.append(f"{'rank':>4} {'node':<18} {'pricing':<10} {'time_h':>10} {'cost_usd':>12} {'lo':>12} {'hi':>12} pareto")
        for r in self.rows:
            lines.append(f"{r['rank']:>4} {r['node']:<18} {r['pricing']:<10} {r['time_to_target_s'] / 3600:>10.4g} "
                         f"{r['cost_usd']:>12.4g} {r['lo']:>12.4g} {r['hi']:>12.4g} {'*' if r['pareto'] else ''}")
        lines.extend(self.notes)
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"level": self.level, "work": self.work, "rows": self.rows, "pareto": self.pareto(),
                "break_even": self.break_even(), "sensitivity": self.sensitivity(), "notes": list(self.notes)}


def break_even_utilization(node: NodeType) -> list[dict[str, Any]]:
    """``u* = capex / (years * 8766 * (p_rent - e))`` per rented mode (module docstring)."""
    if "on_prem" not in node.modes:
        return []
    op = node.price("on_prem")
    e = node.energy_usd_per_hour()
    out = []
    for mode in RENT_MODES:
        if mode not in node.modes:
            continue
        p = node.price_per_hour(mode)
        u = op.capex_usd / (op.amortization_years * HOURS_PER_YEAR * (p - e)) if p > e else math.inf
        out.append({"node": node.id, "rent_mode": mode, "rent_usd_per_hour": p, "energy_usd_per_hour": e,
                    "capex_usd": op.capex_usd, "amortization_years": op.amortization_years,
                    "break_even_utilization": u, "buying_can_win": u <= 1.0})
    return out


def _cost_point(s: dict[str, Any], node: NodeType, mode: str, **ov: float) -> float:
    thr = ov.pop("throughput", s["throughput"])
    work = ov.pop("work", s["work"])
    tdirect = ov.pop("time_s", s["time_s"])
    t = tdirect if thr is None else work / thr
    return t / 3600 * node.price_per_hour(mode, **ov) * s["nodes"]


def _tornado(s: dict[str, Any], node: NodeType, mode: str) -> list[dict[str, Any]]:
    rows = []
    base = _cost_point(s, node, mode)

    def add(name, lo, hi, kw_of):
        c_lo = _cost_point(s, node, mode, **kw_of(lo))
        c_hi = _cost_point(s, node, mode, **kw_of(hi))
        rows.append({"input": name, "low": lo, "high": hi, "cost_at_low": c_lo, "cost_at_high": c_hi,
                     "swing_usd": abs(c_hi - c_lo)})

    if s["throughput"] is not None:
        lo, hi = s["throughput_ci"]
        add("throughput_samples_per_s", lo, hi, lambda v: {"throughput": v})
        if s["work"] is not None:
            wlo, whi = s["work_ci"]
            if math.isfinite(whi):
                add("work_to_target_samples", wlo, whi, lambda v: {"work": v})
    else:
        lo, hi = s["time_ci"]
        add("time_to_target_s", lo, hi, lambda v: {"time_s": v})
    if mode == "on_prem":
        p = node.price("on_prem")
        add("capex_usd", p.capex_usd * 0.8, p.capex_usd * 1.2, lambda v: {"capex_usd": v})
        add("utilization", max(p.utilization - 0.2, 0.05), min(p.utilization + 0.2, 1.0), lambda v: {"utilization": v})
        add("usd_per_kwh", p.usd_per_kwh * 0.7, p.usd_per_kwh * 1.3, lambda v: {"usd_per_kwh": v})
        add("pue", 1.1, 2.0, lambda v: {"pue": v})
        add("amortization_years", 3.0, 6.0, lambda v: {"amortization_years": v})
    else:
        pr = node.price_per_hour(mode)
        add(f"{mode}_usd_per_hour", pr * 0.8, pr * 1.2, lambda v: {"usd_per_hour": v})
    for r in rows:
        r["base_cost_usd"] = base
    return sorted(rows, key=lambda r: -r["swing_usd"] if math.isfinite(r["swing_usd"]) else -math.inf)


@dataclass(frozen=True, kw_only=True)
class CostModel:
    """``CostModel(catalog, modes=None, level=0.9).fit(workloads, work=..., convergence=..., target=...)``."""

    catalog: Catalog
    modes: tuple[str, ...] | None = None
    level: float = 0.9
    n_draws: int = 4000
    seed: int = 0
    noise_floor_cv: float = DEFAULT_NOISE_FLOOR_CV

    def __post_init__(self) -> None:
        if self.modes is not None:
            for m in self.modes:
                if m not in MODES:
                    raise choices_error("cost.modes", m, MODES)
        if not 0 < self.level < 1:
            raise ModelInputError(f"cost.level must be in (0, 1), got {self.level}")
        if self.n_draws < 100:
            raise ModelInputError(f"cost.n_draws must be >= 100, got {self.n_draws}")

    def fit(self, workloads: list[WorkloadInput], *, work: float | None = None, convergence: Any = None,
            target: float | None = None) -> CostResult:
        """Rank every (node, mode). Work to target: ``work`` samples, or ``convergence`` + loss ``target``."""
        rng = np.random.default_rng(self.seed)
        m = self.n_draws
        notes: list[str] = []
        if not workloads:
            raise ModelInputError("cost: no workload results")
        for w in workloads:
            self.catalog.get(w.node)
        work_draws = work_point = None
        work_ci = (math.nan, math.nan)
        work_desc: dict[str, Any] = {}
        if convergence is not None:
            if target is None:
                raise ModelInputError("cost: a convergence fit needs a loss target")
            xt = convergence.x_to_target(target, level=self.level, n_draws=m, seed=self.seed)
            d = xt.pop("draws")
            work_draws = rng.permutation(d)
            work_point, work_ci = xt["x_to_target"], (xt["lo"], xt["hi"])
            work_desc = {"description": f"samples to loss {target:g} from a {xt['model']} fit", **xt}
            if not xt["reliable"]:
                notes.append(f"convergence: {xt['message']}")
        elif work is not None:
            if not (work > 0 and math.isfinite(work)):
                raise ModelInputError(f"cost: work (samples to target) must be > 0, got {work}")
            work_draws, work_point, work_ci = np.full(m, float(work)), float(work), (float(work), float(work))
            work_desc = {"description": f"{work:g} samples (given)", "x_to_target": float(work)}
        else:
            work_desc = {"description": "measured time_to_target_s"}
        rows, state = [], {"catalog": self.catalog}
        for w in workloads:
            node = self.catalog.get(w.node)
            modes = [x for x in (self.modes or MODES) if x in node.modes]
            if not modes:
                notes.append(f"{w.node}: no price for {', '.join(self.modes or MODES)}; available: {', '.join(node.modes) or 'none'}")
                continue
            s: dict[str, Any] = {"nodes": w.nodes, "work": work_point, "work_ci": work_ci, "throughput": None,
                                 "time_s": None}
            if w.samples_per_s and work_draws is not None:
                thr_d, thr, noisy = _mean_draws(np.asarray(w.samples_per_s, float), m, rng, self.noise_floor_cv, self.level)
                t_d = work_draws / thr_d
                s.update(throughput=thr, throughput_ci=_quantiles(thr_d, self.level))
                t_pt = work_point / thr
            elif w.time_to_target_s:
                t_d, t_pt, noisy = _mean_draws(np.asarray(w.time_to_target_s, float), m, rng, self.noise_floor_cv,
                                                self.level)
                s.update(time_s=t_pt, time_ci=_quantiles(t_d, self.level))
            else:
                raise ModelInputError(f"cost: {w.node} has throughput only; give work (samples to target) "
                                      f"or a loss curve and --target")
            if not noisy:
                n_rep = len(w.samples_per_s or w.time_to_target_s)
                notes.append(f"{w.node}: {'single' if n_rep == 1 else 'double'} measurement: its noise is the stated "
                             f"floor (CV {self.noise_floor_cv:.1%}), not estimated from repeats")
            t_lo, t_hi = _quantiles(t_d, self.level)
            h = t_d / 3600.0
            kwh = node.node_watts * w.nodes * h / 1000.0 * node.pue()
            try:
                e_price = node.energy_usd_per_hour() / (node.node_watts / 1000.0 * node.pue())
            except ModelInputError:
                e_price = math.nan
            for mode in modes:
                price = node.price_per_hour(mode)
                c = h * price * w.nodes
                lo, hi = _quantiles(c, self.level)
                rows.append({"node": w.node, "pricing": mode, "nodes": w.nodes,
                             "time_to_target_s": float(t_pt), "time_lo_s": t_lo, "time_hi_s": t_hi,
                             "cost_usd": float(t_pt / 3600.0 * price * w.nodes), "lo": lo, "hi": hi,
                             "price_usd_per_hour": price,
                             "energy_kwh": float(node.node_watts * w.nodes * t_pt / 3600 / 1000 * node.pue()),
                             "energy_kwh_lo": _quantiles(kwh, self.level)[0], "energy_kwh_hi": _quantiles(kwh, self.level)[1],
                             "energy_usd": float(node.node_watts * w.nodes * t_pt / 3600 / 1000 * node.pue() * e_price),
                             "noise_estimate": noisy})
                state[(w.node, mode)] = {**s, "price": price}
        rows.sort(key=lambda r: (r["cost_usd"] if math.isfinite(r["cost_usd"]) else math.inf, r["time_to_target_s"]))
        pts = [(r["time_to_target_s"], r["cost_usd"]) for r in rows]
        for i, r in enumerate(rows):
            ti, ci = pts[i]
            r["rank"] = i + 1
            r["pareto"] = bool(math.isfinite(ci) and not any(
                (tj <= ti and cj <= ci and (tj < ti or cj < ci)) for j, (tj, cj) in enumerate(pts) if j != i))
        return CostResult(rows=rows, level=self.level, work=work_desc, notes=tuple(notes), _state=state)


# ------------------------------------------------------------------ CSV input
def read_workload_csv(path: str, *, field_name: str = "--workload-results"):
    """(workloads by node, loss curve (x, loss) or None, BadRows) from the CSV format above."""
    import pandas as pd

    df = read_csv(path, field=field_name)
    cols = set(df.columns)
    if "node" not in cols:
        raise ModelInputError(f"{field_name}: no column 'node' in {path}; columns present: {', '.join(df.columns)}")
    meas = [c for c in ("samples_per_s", "time_to_target_s") if c in cols]
    curve = [c for c in ("samples", "loss") if c in cols]
    if not meas and len(curve) < 2:
        raise ModelInputError(f"{field_name}: {path} needs a 'samples_per_s' or 'time_to_target_s' column "
                              f"(or 'samples' + 'loss'); columns present: {', '.join(df.columns)}")
    num = {}
    bad = np.zeros(len(df), dtype=bool)
    for c in [*meas, *curve, *(["nodes"] if "nodes" in cols else [])]:
        s = df[c].astype(str).str.strip()
        blank = s.eq("")
        v = pd.to_numeric(s.where(~blank), errors="coerce")
        bad |= (~blank & v.isna()).to_numpy()
        if c != "nodes":
            bad |= (v.notna() & (v <= 0) & (c != "loss")).to_numpy()
        num[c] = v.to_numpy(dtype=float)
    node = df["node"].astype(str).str.strip().to_numpy()
    has_meas = np.zeros(len(df), dtype=bool)
    for c in meas:
        has_meas |= ~np.isnan(num[c])
    has_curve = np.zeros(len(df), dtype=bool)
    if len(curve) == 2:
        xs, ls = ~np.isnan(num["samples"]), ~np.isnan(num["loss"])
        bad |= xs ^ ls  # half a loss-curve point
        has_curve = xs & ls
    bad |= ~(has_meas | has_curve)
    bad |= (node == "") & has_meas  # a measurement needs its node; a pooled loss-curve point does not
    idx = np.flatnonzero(bad)
    report = BadRows(int(idx.size), first_line(df, idx),
                     tuple(["node", *meas, *curve, *(["nodes"] if "nodes" in cols else [])]))
    ok = ~bad
    nodes_col = num.get("nodes")
    workloads = []
    frame = pd.DataFrame({"node": node[ok]})
    for c in meas:
        frame[c] = num[c][ok]
    frame["nodes"] = np.where(np.isnan(nodes_col[ok]), 1, nodes_col[ok]) if nodes_col is not None else 1
    for (nid, nn), g in frame.groupby(["node", "nodes"], sort=False):
        kw = {c: tuple(g[c].dropna().tolist()) for c in meas}
        if not any(kw.values()):
            continue
        workloads.append(WorkloadInput(node=str(nid), nodes=int(nn), **kw))
    loss_curve = None
    if len(curve) == 2 and (has_curve & ok).any():
        sel = has_curve & ok
        loss_curve = (num["samples"][sel], num["loss"][sel])
    return workloads, loss_curve, report
