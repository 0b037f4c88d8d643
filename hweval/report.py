"""The procurement report: measurements + models -> one self-contained HTML file.

Sections (each a function the notebooks call too, so a notebook and the
report show the same numbers):

* :func:`roofline_section`: kernel measurements -> fitted ceilings
  (``hwmodels.roofline``) and the datasheet ceiling of the measured node;
* :func:`comms_section`: collective busbw vs size -> alpha-beta fit
  (``hwmodels.comms``);
* :func:`scaling_section`: throughput vs process count -> Amdahl / USL
  (``hwmodels.scaling``) with prediction intervals;
* :func:`convergence_section`: eval-loss curve -> steps to target with an
  interval (``hwmodels.convergence``);
* :func:`cost_rows`: time to target x price for every candidate node and
  pricing mode. The measured node uses its *measured* step time; every other
  node is *projected* from its catalog peak x an assumed utilization (MFU),
  and each row says which (``basis``);
* :func:`build_report`: all of it from the store, written as
  ``report.html`` (vega, vega-lite and vega-embed inlined from vl-convert's
  bundle: no network, no http(s) script source) plus ``charts/<name>.png`` and
  ``.svg`` via vl-convert.
"""

from __future__ import annotations

import html as _html
import json
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from hwcore.store import Record, Store, decode


# -- helpers ------------------------------------------------------------------------
def _num(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _fmt(x: Any, unit: str = "", digits: int = 3) -> str:
    v = _num(x)
    if v is None:
        return "n/a"
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= factor and unit:
            return f"{v / factor:.{digits}g} {prefix}{unit}"
    return f"{v:.{digits}g} {unit}".strip()


def _hours(seconds: Any) -> str:
    v = _num(seconds)
    if v is None:
        return "n/a"
    if v < 120:
        return f"{v:.3g} s"
    if v < 7200:
        return f"{v / 60:.3g} min"
    if v < 3 * 86400:
        return f"{v / 3600:.3g} h"
    return f"{v / 86400:.3g} days"


def _flat_result(r: dict[str, Any]) -> dict[str, Any]:
    """A stored row (params/metrics JSON) or a ``to_json()`` dict, flattened to one level."""
    if "metrics" in r and isinstance(r.get("metrics"), dict):
        out = dict(r["metrics"])
        out.update({k: v for k, v in r.items() if k not in ("metrics",)})
        return out
    return dict(r)


def record_fit(name: str, section: dict[str, Any], store: Store | None = None) -> None:
    """Store a section's fit as ``Record(kind="fit", name=...)`` (the summary, params and intervals)."""
    st = store or Store()
    metrics = {k: v for k, v in section.get("fit", {}).items()}
    st.append(Record(kind="fit", name=name, params={"summary": section.get("summary", "")}, metrics=metrics,
                     status="ok" if section.get("ok", True) else "failed",
                     error=None if section.get("ok", True) else section.get("summary")))


# -- catalog ----------------------------------------------------------------------------
def _catalog():
    from hwmodels.catalog import default_catalog

    return default_catalog()


def resolve_measured_node(node: str | None = None):
    """Catalog entry of the measured machine: the given id, else the one matching this fingerprint."""
    from hwmodels.catalog import match_node

    from hwcore.fingerprint import fingerprint

    cat = _catalog()
    if node:
        return cat.get(node)
    return match_node(fingerprint(), cat)


# -- kernels / roofline -----------------------------------------------------------------
def kernel_table(results: Iterable[dict[str, Any]]) -> pd.DataFrame:
    rows = []
    for r in map(_flat_result, results):
        p = r.get("params") or {}
        rows.append({
            "kernel": r.get("kernel") or r.get("name"),
            "params": ", ".join(f"{k}={v}" for k, v in p.items() if k not in ("seed", "framework", "device")),
            "status": r.get("status", "ok"),
            "median_s": _num(r.get("median_s")),
            "GFLOP/s": (_num(r.get("flops_per_s")) or 0) / 1e9 or None,
            "GB/s": (_num(r.get("bytes_per_s")) or 0) / 1e9 or None,
            "intensity": _num(r.get("intensity")),
            "noisy": r.get("noise_warning"),
        })
    return pd.DataFrame(rows)


def roofline_section(results: Iterable[dict[str, Any]], *, node: str | None = None) -> dict[str, Any]:
    """Fit compute and memory ceilings to kernel results; points carry their efficiency vs the fitted ceiling."""
    from hwmodels.roofline import Roofline

    rows = []
    for r in map(_flat_result, results):
        if r.get("status", "ok") != "ok":
            continue
        fl, by, s = _num(r.get("flops")), _num(r.get("bytes")), _num(r.get("median_s"))
        if not (fl and by and s):
            continue
        p = r.get("params") or {}
        rows.append({"kernel": r.get("kernel") or r.get("name"), "dtype": p.get("dtype", ""),
                     "params": json.dumps(p, sort_keys=True), "flops": fl, "bytes": by, "seconds": s,
                     "intensity": fl / by, "flops_per_s": fl / s})
    if len(rows) < 2:
        return {"ok": False, "summary": "roofline: fewer than 2 kernel measurements; run 01_node_characterization",
                "points": [], "ceilings": [], "fit": {}}
    df = pd.DataFrame(rows)
    res = Roofline().fit(df[["flops", "bytes", "seconds", "dtype"]])
    peak, bw = float(res.peak_flops_per_s), float(res.peak_bytes_per_s)
    att = [float(res.attainable([i], dtype=d)[0]) for i, d in zip(df["intensity"], df["dtype"], strict=True)]
    df["efficiency"] = [fps / a for fps, a in zip(df["flops_per_s"], att, strict=True)]
    lo, hi = df["intensity"].min() / 4, df["intensity"].max() * 4
    grid = [lo * (hi / lo) ** (i / 60) for i in range(61)]
    ceilings = []
    for d in sorted(set(df["dtype"])):
        if not (df[df["dtype"] == d]["intensity"] > 1).any():
            continue  # memory-only dtypes (STREAM fp64) have no compute ceiling worth drawing
        ys = res.attainable(grid, dtype=d)
        ceilings += [{"intensity": i, "flops_per_s": float(y), "ceiling": f"fitted {d} (measured)"}
                     for i, y in zip(grid, ys, strict=True)]
    datasheet = None
    try:
        nt = resolve_measured_node(node)
    except Exception:  # noqa: BLE001 - no catalog entry for this machine: no datasheet line
        nt = None
    if nt is not None:
        dts = [d for d in ("fp32", "bf16") if d in nt.peaks]
        if dts:
            dpk = nt.peak_flops_per_s(dts[0], per="node")
            dbw = nt.memory_bandwidth_bytes_per_s
            datasheet = {"node": nt.id, "dtype": dts[0], "peak_flops_per_s": dpk, "bytes_per_s": dbw}
            ceilings += [{"intensity": i, "flops_per_s": min(dpk, i * dbw), "ceiling": f"datasheet {nt.id} {dts[0]}"}
                         for i in grid]
    summary = (f"roofline: fitted peak {_fmt(peak, 'FLOP/s')}, bandwidth {_fmt(bw, 'B/s')}, "
               f"ridge {peak / bw:.3g} FLOP/B from {len(df)} measurements")
    if datasheet:
        summary += (f"; datasheet {datasheet['node']} {datasheet['dtype']} {_fmt(datasheet['peak_flops_per_s'], 'FLOP/s')}"
                    f" (measured/datasheet = {peak / datasheet['peak_flops_per_s']:.2f})")
    return {"ok": True, "summary": summary, "points": df.to_dict("records"), "ceilings": ceilings,
            "fit": {"peak_flops_per_s": peak, "peak_bytes_per_s": bw, "ridge_intensity": peak / bw,
                    "n": len(df), "datasheet": datasheet}}


# -- collectives / comms ----------------------------------------------------------------------
def comms_section(results: Iterable[dict[str, Any]], *, alpha: float = 0.1) -> dict[str, Any]:
    """Alpha-beta fit (``hwmodels.comms.AlphaBeta``) per collective and rank count from busbw-vs-size sweeps."""
    from hwmodels.comms import AlphaBeta

    pts = []
    for r in map(_flat_result, results):
        if r.get("status", "ok") != "ok":
            continue
        p = r.get("params") or {}
        size = _num(p.get("size_bytes") or r.get("size_bytes"))
        busbw = _num(r.get("busbw_Bps") or r.get("busbw_bytes_per_s") or r.get("busbw"))
        if size and busbw:
            pts.append({"collective": r.get("kernel") or r.get("name"), "size_bytes": size,
                        "busbw_bytes_per_s": busbw, "ranks": int(p.get("world_size") or 2)})
    if len(pts) < 2:
        return {"ok": False, "summary": "comms: fewer than 2 collective measurements; run 03_scaling",
                "points": pts, "curve": [], "fit": {}}
    df = pd.DataFrame(pts)
    curve, fits, lines = [], {}, []
    for (coll, ranks), g in df.groupby(["collective", "ranks"]):
        if g["size_bytes"].nunique() < 2:
            continue
        res = AlphaBeta(collective=coll).fit(g["size_bytes"].to_numpy(), g["busbw_bytes_per_s"].to_numpy(),
                                             ranks=int(ranks))
        a, b = float(res.alpha_s), float(res.beta_bytes_per_s)
        fits[f"{coll}@{ranks}"] = {"alpha_s": a, "beta_bytes_per_s": b,
                                   "conf_int": {k: list(v) for k, v in res.conf_int(alpha).items()}}
        lo, hi = g["size_bytes"].min(), g["size_bytes"].max()
        sizes = [lo * (hi / lo) ** (i / 40) for i in range(41)]
        pred = res.predict(sizes, int(ranks), alpha=alpha)
        for i, sz in enumerate(sizes):
            bw, t = float(pred["busbw"][i]), float(pred["time_s"][i])
            t_lo, t_hi = _num(pred["time_lo"][i]), _num(pred["time_hi"][i])
            curve.append({"collective": coll, "size_bytes": sz, "busbw_bytes_per_s": bw,
                          "lo": bw * t / t_hi if t_hi else None, "hi": bw * t / t_lo if t_lo else None})
        lines.append(f"{coll} on {ranks} ranks: alpha {_fmt(a, 's')}, beta {_fmt(b, 'B/s')}")
    return {"ok": bool(fits), "summary": "comms (alpha-beta): " + ("; ".join(lines) or "no sweep with 2+ sizes"),
            "points": pts, "curve": curve, "fit": fits}


# -- scaling ----------------------------------------------------------------------------------
def scaling_section(results: Iterable[dict[str, Any]], *, max_n: int | None = None, alpha: float = 0.1) -> dict[str, Any]:
    from hwmodels.scaling import Scaling

    pts = []
    for r in map(_flat_result, results):
        if r.get("status", "ok") not in ("ok",):
            continue
        p = r.get("params") or {}
        n = _num(p.get("nprocs", 1))
        thr = _num(r.get("samples_per_s"))
        if n and thr:
            pts.append({"nprocs": n, "samples_per_s": thr, "workload": r.get("workload") or r.get("name")})
    if pts:
        main = pd.Series([p["workload"] for p in pts]).value_counts().index[0]
        pts = [p for p in pts if p["workload"] == main]
    ns = {p["nprocs"] for p in pts}
    if len(ns) < 2:
        return {"ok": False, "summary": "scaling: throughput at fewer than 2 process counts; run 03_scaling",
                "points": pts, "curve": [], "fit": {}}
    df = pd.DataFrame(pts)
    try:
        res = Scaling(model="auto").fit(df["nprocs"].to_numpy(), df["samples_per_s"].to_numpy())
    except ValueError as exc:  # hwmodels.errors.ModelInputError: e.g. too few points for any model
        return {"ok": False, "summary": f"scaling: no fit: {exc}", "points": pts, "curve": [], "fit": {}}
    if not getattr(res, "identifiable", True):  # e.g. runs at n in {1, 2}: said, never drawn as a prediction
        return {"ok": False, "summary": f"scaling: not enough data: {res.message}", "points": pts, "curve": [], "fit": {}}
    top = max_n or int(max(8, 4 * max(ns)))
    xs = list(range(1, top + 1))
    pred = res.predict(xs, alpha=alpha) if _accepts(res.predict, "alpha") else res.predict(xs)
    curve = _pred_rows(pred, xs, "nprocs", "samples_per_s")
    for row in curve:  # throughput is >= 0: a symmetric (delta-method) band below zero is truncated
        if row["lo"] is not None and row["lo"] < 0:
            row["lo"] = 0.0
    ci = {k: list(v) for k, v in res.conf_int(alpha).items()}
    model = getattr(res, "model", "scaling")
    summary = (f"scaling ({model}): " + ", ".join(f"{k}={v:.3g}" for k, v in res.params.items())
               + f"; {len(df)} runs at n={sorted(ns)}; predicted n={top}: {curve[-1]['samples_per_s']:.3g} samples/s")
    return {"ok": True, "summary": summary, "points": pts, "curve": curve,
            "fit": {"model": model, "params": dict(res.params), "conf_int": ci}}


def _accepts(fn, name: str) -> bool:
    import inspect

    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _pred_rows(pred: Any, xs: Sequence[float], xname: str, yname: str) -> list[dict[str, Any]]:
    """Normalize a model's prediction (array, DataFrame with y/lo/hi, or list of dicts) into rows."""
    if isinstance(pred, dict):
        recs = [{k: (v[i] if hasattr(v, "__len__") else v) for k, v in pred.items() if k in ("y", "lo", "hi")}
                for i in range(len(xs))]
    elif isinstance(pred, pd.DataFrame):
        recs = pred.to_dict("records")
    elif isinstance(pred, list) and pred and isinstance(pred[0], dict):
        recs = pred
    else:
        recs = [{"y": float(v)} for v in list(pred)]
    out = []
    for x, rec in zip(xs, recs, strict=False):
        y = rec.get("y", rec.get("mean", rec.get(yname)))
        out.append({xname: x, yname: _num(y), "lo": _num(rec.get("lo")), "hi": _num(rec.get("hi"))})
    return out


# -- workloads / convergence ------------------------------------------------------------------
def workload_table(results: Iterable[dict[str, Any]]) -> pd.DataFrame:
    rows = []
    for r in map(_flat_result, results):
        rows.append({
            "workload": r.get("workload") or r.get("name"),
            "status": r.get("status"),
            "steps": r.get("steps"),
            "steps_to_target": r.get("steps_to_target"),
            "time_to_target_s": _num(r.get("time_to_target_s")),
            "samples/s": _num(r.get("samples_per_s")),
            "tokens/s": _num(r.get("tokens_per_s")),
            "MFU": _num(r.get("mfu")),
            "peak_mem_MiB": (_num(r.get("peak_mem_bytes")) or 0) / 2**20 or None,
        })
    return pd.DataFrame(rows)


def breakdown_rows(results: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in map(_flat_result, results):
        for phase, secs in (r.get("breakdown_s") or {}).items():
            if _num(secs) is not None:
                out.append({"workload": r.get("workload") or r.get("name"), "phase": phase, "seconds": _num(secs)})
    return out


def loss_rows(results: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in map(_flat_result, results):
        for pt in r.get("loss_curve") or []:
            out.append({"workload": r.get("workload") or r.get("name"), **pt})
    return out


def convergence_section(results: Iterable[dict[str, Any]], *, level: float = 0.9,
                        target: float | None = None) -> dict[str, Any]:
    """Fit the longest ok loss curve; steps/time to target with an interval; says when unreachable."""
    from hwmodels.convergence import Convergence

    best = None
    for r in map(_flat_result, results):
        if r.get("status") not in ("ok", "timeout") or len(r.get("loss_curve") or []) < 4:
            continue
        if best is None or len(r["loss_curve"]) > len(best["loss_curve"]):
            best = r
    if best is None:
        return {"ok": False, "summary": "convergence: no loss curve with >= 4 points; run 04_convergence",
                "points": [], "curve": [], "fit": {}}
    curve_pts = [p for p in best["loss_curve"] if _num(p.get("loss")) is not None and p.get("step")]
    df = pd.DataFrame(curve_pts)
    tgt = target if target is not None else _num(best.get("target_loss") or (best.get("params") or {}).get("target_loss"))
    batch = _num((best.get("params") or {}).get("batch_size")) or 1.0
    # fit on samples seen (step x global batch): work to target is a property of the workload, not the node
    res = Convergence().fit(df["step"].to_numpy(dtype=float) * batch, df["loss"].to_numpy(dtype=float))
    tt = res.x_to_target(tgt, level=level) if tgt is not None else {}
    steps_done = float(df["step"].max())
    thr = _num(best.get("samples_per_s"))
    sec_per_step = batch / thr if thr else None
    reach, lo, hi = (None if v is None else v / batch for v in
                     (_num(tt.get("x_to_target")), _num(tt.get("lo")), _num(tt.get("hi"))))
    reachable, reliable = bool(tt.get("reachable")), bool(tt.get("reliable"))
    problems = tt.get("problems") or []
    measured_steps = _num(best.get("steps_to_target"))
    end = max(steps_done * 3, min((hi or reach or steps_done) * 1.2, steps_done * 20))
    xs = [steps_done * 0.05 + (end - steps_done * 0.05) * i / 80 for i in range(81)]
    curve = _loss_band(res, xs, level, scale=batch)
    wl = best.get("workload") or best.get("name")
    if measured_steps:
        how = f"reached the target {tgt:.3g} at step {measured_steps:.0f} (measured)"
    elif reachable and reach:
        how = (f"predicted to reach {tgt:.3g} at step {_num(reach):.0f} "
               f"({level:.0%} interval {_fmt(lo)}..{_fmt(hi)} steps; extrapolated beyond step {steps_done:.0f})")
    else:
        how = f"the target {tgt} is not supported by the fit: " + ("; ".join(problems) or "unreachable")
    if problems and (measured_steps or reachable):
        how += " (caution: " + "; ".join(str(p) for p in problems) + ")"
    summary = f"convergence ({getattr(res, 'family', 'fit')} fit, {wl}): {how}"
    fit = {"model": getattr(res, "model", None), "params": dict(res.params), "target": tgt,
           "steps_to_target": measured_steps or _num(reach), "lo": _num(lo), "hi": _num(hi),
           "reachable": bool(measured_steps) or reachable, "reliable": reliable, "problems": problems, "measured": bool(measured_steps),
           "seconds_per_step": sec_per_step, "workload": wl, "level": level,
           "model_flops_per_step": _num(best.get("flops_per_step") or best.get("model_flops_per_step")),
           "samples_per_s": thr, "mfu": _num(best.get("mfu")), "batch_size": batch}
    return {"ok": True, "summary": summary, "points": [{"step": p["step"], "loss": p["loss"]} for p in curve_pts],
            "curve": curve, "fit": fit, "target": tgt, "result": res}


def _loss_band(res, xs: Sequence[float], level: float, n_draws: int = 400, scale: float = 1.0) -> list[dict[str, Any]]:
    """Fitted curve with a ``level`` band from parameter draws (multivariate normal on the fit's covariance)."""
    import numpy as np

    from hwmodels import convergence as hc

    x = np.asarray(xs, dtype=float) * scale  # the fit's x is samples = step x batch
    mid = np.asarray(res.predict(x), dtype=float)
    lo = hi = [None] * len(xs)
    f = getattr(hc, "f_" + str(res.family), None)
    cov = getattr(res, "cov", None)
    if f is not None and cov is not None:
        rng = np.random.default_rng(0)
        cov = np.nan_to_num(np.asarray(cov, dtype=float), nan=0.0, posinf=0.0, neginf=0.0)
        P = rng.multivariate_normal(np.asarray(res.values, dtype=float), cov, size=n_draws, method="svd",
                                    check_valid="ignore")
        with np.errstate(all="ignore"):
            Y = np.array([f(x, p) for p in P])
        Y = np.where(np.isfinite(Y), Y, np.nan)
        lo = np.nanquantile(Y, (1 - level) / 2, axis=0)
        hi = np.nanquantile(Y, (1 + level) / 2, axis=0)
    return [{"step": float(xs[i]), "loss": _num(mid[i]), "lo": _num(lo[i]), "hi": _num(hi[i])} for i in range(len(xs))]


# -- cost ------------------------------------------------------------------------------------
def cost_rows(conv: dict[str, Any], *, measured_node, candidates: Sequence[str] | None, pricing: Sequence[str],
              dtype: str, utilization: float, utilization_range: tuple[float, float],
              throughput_repeats: Sequence[float] = (), level: float = 0.9):
    """Time and cost to the target per (node, pricing mode) with intervals, via ``hwmodels.cost.CostModel``.

    Work to target (samples) comes from the convergence fit (its interval
    propagates). Throughput: the measured node uses its measured samples/s
    (every repeat of the same configuration); any other catalog node is
    *projected*: samples/s = catalog dense ``dtype`` peak per node x
    ``utilization`` / model FLOPs per sample (6N + attention accounting,
    ``workloads.flops``, PaLM appendix B). Returns (rows, CostResult | None).
    """
    from hwmodels.cost import CostModel, WorkloadInput

    fit = conv.get("fit") or {}
    res = conv.get("result")
    tgt = conv.get("target")
    if res is None or tgt is None or not fit.get("reachable"):
        return [], None
    cat = _catalog()
    fps, batch = _num(fit.get("model_flops_per_step")), _num(fit.get("batch_size")) or 1.0
    flops_per_sample = fps / batch if fps else None
    ids = list(candidates) if candidates else list(cat.ids())
    inputs, basis = [], {}
    for nid in ids:
        nt = cat.get(nid)
        if measured_node is not None and nt.id == measured_node.id and (throughput_repeats or fit.get("samples_per_s")):
            reps = tuple(x for x in (throughput_repeats or (fit["samples_per_s"],)) if x)
            inputs.append(WorkloadInput(node=nid, samples_per_s=reps))
            basis[nid] = "measured"
        elif flops_per_sample and dtype in nt.peaks:
            thr = nt.peak_flops_per_s(dtype, per="node") * utilization / flops_per_sample
            inputs.append(WorkloadInput(node=nid, samples_per_s=(thr,)))
            basis[nid] = "projected"
    if not inputs:
        return [], None
    modes = tuple(m for m in pricing)
    result = CostModel(catalog=cat, modes=modes, level=level).fit(inputs, convergence=res, target=tgt)
    rows = []
    for r in result.ranking():
        if not math.isfinite(r["cost_usd"]):
            continue
        rows.append({**r, "basis": basis[r["node"]], "label": f"{r['node']} / {r['pricing']}",
                     "usd_per_hour": r.get("price_usd_per_hour")})
    return rows, result


def sensitivity_rows(best: dict[str, Any], result, *, utilization: float,
                     utilization_range: tuple[float, float]) -> list[dict[str, Any]]:
    """Tornado for the best option: ``hwmodels.cost`` one-at-a-time swings, plus the assumed
    utilization of a projected node (cost scales as 1/utilization)."""
    out = []
    if result is not None:
        for r in result.sensitivity(best["node"], best["pricing"]):
            lo, hi = _num(r.get("cost_at_low")), _num(r.get("cost_at_high"))
            if lo is not None and hi is not None:
                out.append({"input": r["input"], "low_usd": min(lo, hi), "high_usd": max(lo, hi)})
    if best["basis"] == "projected":
        c = best["cost_usd"]
        u_lo, u_hi = sorted(utilization_range)
        out.append({"input": f"assumed MFU {u_lo:.2f}..{u_hi:.2f} (projection)", "low_usd": c * utilization / u_hi,
                    "high_usd": c * utilization / u_lo})
    return sorted(out, key=lambda r: r["high_usd"] - r["low_usd"], reverse=True)


# -- HTML ----------------------------------------------------------------------------------------
@dataclass
class ReportOutput:
    html: Path
    charts: dict[str, list[Path]] = field(default_factory=dict)
    ranking: pd.DataFrame = field(default_factory=pd.DataFrame)
    recommendation: str = ""


_CSS = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
h1{border-bottom:2px solid #444}h2{margin-top:2em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;font-size:13px;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f0f0f0}td:first-child,th:first-child{text-align:left}
.rec{background:#eef6ee;border-left:4px solid #3a3;padding:0.8em 1em}
.note{color:#555;font-size:13px}.measured{color:#060;font-weight:bold}.projected{color:#a50}
"""


def _table_html(df: pd.DataFrame) -> str:
    if df is None or df.empty:
        return "<p class='note'>no rows</p>"
    return df.to_html(index=False, escape=True, na_rep="n/a", float_format=lambda v: f"{v:.4g}")


def write_html(path: Path, *, title: str, blocks: list[tuple[str, str]], specs: dict[str, dict]) -> None:
    """One file: inline CSS, vl-convert's JS bundle inline, one ``vegaEmbed`` per chart spec."""
    import vl_convert as vlc

    bundle = vlc.javascript_bundle()
    assert "</script" not in bundle.lower()
    body = []
    for kind, content in blocks:
        if kind == "chart":
            body.append(f"<div id='chart-{content}' class='chart'></div>")
        else:
            body.append(content)
    embeds = "\n".join(
        f"vegaEmbed('#chart-{name}', {json.dumps(spec)}, {{renderer: 'svg', actions: false}})"
        f".catch(e => {{document.getElementById('chart-{name}').innerText = 'chart failed: ' + e;}});"
        for name, spec in specs.items()
    )
    doc = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{_html.escape(title)}</title>"
           f"<style>{_CSS}</style><script>{bundle}</script></head><body>"
           + "\n".join(body) + f"<script>{embeds}</script></body></html>")
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(doc)
    os.replace(tmp, path)


def _save_chart(chart, name: str, charts_dir: Path) -> tuple[dict, list[Path]]:
    import vl_convert as vlc

    spec = chart.to_dict()
    svg = charts_dir / f"{name}.svg"
    png = charts_dir / f"{name}.png"
    svg.write_text(vlc.vegalite_to_svg(spec))
    png.write_bytes(vlc.vegalite_to_png(spec, scale=2))
    return spec, [svg, png]


def _kernel_records(store: Store, plan: str | None, kind: str) -> list[dict[str, Any]]:
    df = store.records(kind=kind, plan=plan)
    if df.empty:
        return []
    df = decode(df)
    out = []
    for row in df.to_dict("records"):
        d = dict(row["metrics"] or {})
        d.update({"kernel": row["name"], "name": row["name"], "workload": row["name"], "params": row["params"] or {},
                  "status": row["status"], "node_id": row["node_id"], "run_id": row["run_id"],
                  "notebook": row["notebook"], "finished_at": row["finished_at"]})
        out.append(d)
    return out


def _throughput_repeats(workloads: list[dict[str, Any]], fit: dict[str, Any]) -> list[float]:
    """samples/s of every ok single-process run of the fitted workload at the same global batch."""
    out = []
    for r in workloads:
        p = r.get("params") or {}
        if (r.get("workload") == fit.get("workload") and r.get("status") == "ok" and int(p.get("nprocs") or 1) == 1
                and _num(p.get("batch_size")) == _num(fit.get("batch_size")) and _num(r.get("samples_per_s"))):
            out.append(float(r["samples_per_s"]))
    return out


def _prefer(rows: list[dict[str, Any]], notebook: str) -> list[dict[str, Any]]:
    """The rows written by ``notebook`` when there are any, else all rows."""
    mine = [r for r in rows if r.get("notebook") == notebook]
    return mine or rows


def build_report(*, store: Store | str | Path | None = None, plan: str | None = None,
                 report_dir: str | Path = "out/report", candidates: Sequence[str] | None = None,
                 pricing: Sequence[str] = ("on_demand", "reserved", "spot", "on_prem"), dtype: str = "bf16",
                 utilization: float = 0.35, utilization_range: tuple[float, float] = (0.2, 0.5),
                 measured_node: str | None = None, title: str = "hweval procurement report") -> ReportOutput:
    """Read the plan's results, fit, project, price, and write ``report.html`` + ``charts/``."""
    from hweval import charts

    st = store if isinstance(store, Store) else Store(store)
    rdir = Path(report_dir)
    cdir = rdir / "charts"
    cdir.mkdir(parents=True, exist_ok=True)

    kernels = _kernel_records(st, plan, "kernel")
    colls = _kernel_records(st, plan, "collective") + [k for k in kernels if (k.get("params") or {}).get("world_size")]
    workloads = _kernel_records(st, plan, "workload")
    try:
        mnode = resolve_measured_node(measured_node)
    except Exception:  # noqa: BLE001
        mnode = None

    sections: dict[str, dict[str, Any]] = {}
    for key, fn in (("roofline", lambda: roofline_section(kernels, node=measured_node)),
                    ("comms", lambda: comms_section(colls)),
                    ("scaling", lambda: scaling_section(_prefer(workloads, "03_scaling"))),
                    ("convergence", lambda: convergence_section(_prefer(workloads, "04_convergence")))):
        try:
            sections[key] = fn()
        except Exception as exc:  # noqa: BLE001 - one failing fit must not lose the other sections
            sections[key] = {"ok": False, "summary": f"{key}: fit failed: {type(exc).__name__}: {exc}",
                             "points": [], "curve": [], "ceilings": [], "fit": {}}
    conv = sections["convergence"]
    reps = _throughput_repeats(workloads, conv.get("fit") or {})
    try:
        rows, cost_result = cost_rows(conv, measured_node=mnode, candidates=candidates, pricing=pricing,
                                      dtype=dtype, utilization=utilization, utilization_range=utilization_range,
                                      throughput_repeats=reps) if conv["ok"] else ([], None)
    except ValueError as exc:  # hwmodels.errors.ModelInputError
        rows, cost_result = [], None
        conv["summary"] += f" (cost model: {exc})"
    ranking = pd.DataFrame(rows)
    sens = sensitivity_rows(rows[0], cost_result, utilization=utilization,
                            utilization_range=utilization_range) if rows else []
    breakeven = pd.DataFrame(cost_result.break_even()) if cost_result is not None else pd.DataFrame()
    cost_notes = list(cost_result.notes) if cost_result is not None else []

    chart_objs = {
        "roofline": charts.roofline(sections["roofline"]["points"], sections["roofline"].get("ceilings")),
        "scaling": charts.band_curve(sections["scaling"]["points"], sections["scaling"]["curve"], x="nprocs",
                                     y="samples_per_s", x_title="processes", y_title="samples/s",
                                     title="Data-parallel scaling: measured and fitted (interval)"),
        "comms": charts.band_curve(sections["comms"]["points"], sections["comms"]["curve"], x="size_bytes",
                                   y="busbw_bytes_per_s", x_title="message size (B)", y_title="busbw (B/s)",
                                   series="collective", title="Collectives: busbw and alpha-beta fit",
                                   log_x=True, log_y=True),
        "loss": charts.band_curve(conv["points"], conv["curve"], x="step", y="loss", x_title="step",
                                  y_title="eval loss", title="Eval loss and extrapolation band",
                                  target=conv.get("target")),
        "cost": charts.cost_bars(rows),
        "pareto": charts.pareto(rows),
        "sensitivity": charts.sensitivity(sens),
    }
    specs, files = {}, {}
    for name, ch in chart_objs.items():
        if ch is not None:
            specs[name], files[name] = _save_chart(ch, name, cdir)

    recommendation = _recommend(rows, conv)
    blocks: list[tuple[str, str]] = [
        ("html", f"<h1>{_html.escape(title)}</h1>"),
        ("html", f"<p class='note'>plan: {_html.escape(plan or '(all results)')} &middot; generated "
                 f"{datetime.now(UTC):%Y-%m-%d %H:%M UTC} &middot; measured node: "
                 f"{_html.escape(mnode.id if mnode else 'unknown')}</p>"),
        ("html", f"<h2>Recommendation</h2><div class='rec'>{_html.escape(recommendation)}</div>"),
        ("html", "<h2>Ranking (cost per convergence)</h2>"),
    ]
    if not ranking.empty:
        show = ranking[["rank", "node", "pricing", "basis", "usd_per_hour", "time_to_target_s", "cost_usd", "lo",
                        "hi", "pareto"]].rename(columns={"usd_per_hour": "USD/node-h", "time_to_target_s": "time (s)",
                                                         "cost_usd": "cost (USD)", "lo": "cost lo", "hi": "cost hi"})
        blocks.append(("html", _table_html(show)))
    else:
        blocks.append(("html", "<p class='note'>no ranking: no convergence result to price</p>"))
    if not breakeven.empty:
        blocks.append(("html", "<h2>Buy vs rent: break-even utilization</h2>" + _table_html(breakeven)))
    if cost_notes:
        blocks.append(("html", "<p class='note'>" + "<br>".join(_html.escape(n) for n in cost_notes) + "</p>"))
    blocks.append(("html", "<h2>Assumptions</h2>" + _assumptions_html(conv["fit"], mnode, dtype, utilization,
                                                                      utilization_range, pricing, candidates)))
    for name, heading in (("cost", "Cost per convergence"), ("pareto", "Time-cost Pareto front"),
                          ("sensitivity", "Sensitivity"), ("roofline", "Roofline"), ("scaling", "Scaling"), ("comms", "Communication"),
                          ("loss", "Convergence")):
        blocks.append(("html", f"<h2>{heading}</h2>"))
        key = {"cost": "convergence", "pareto": "convergence", "loss": "convergence", "sensitivity": "convergence"}.get(name, name)
        blocks.append(("html", f"<p>{_html.escape(sections[key]['summary'])}</p>"))
        if name in specs:
            blocks.append(("chart", name))
    html = rdir / "report.html"
    write_html(html, title=title, blocks=blocks, specs=specs)
    st.append(Record(kind="report", name="procurement_report", params={"plan": plan, "candidates": list(candidates or [])},
                     metrics={"path": str(html.resolve()), "charts": sorted(specs), "rows": len(rows),
                              "recommendation": recommendation}))
    return ReportOutput(html=html, charts=files, ranking=ranking, recommendation=recommendation)


def _assumptions_html(fit, mnode, dtype, utilization, urange, pricing, candidates) -> str:
    items = [
        f"<span class='measured'>measured</span>: rows of the measured node ({_html.escape(mnode.id if mnode else 'none')})"
        " use its measured training throughput (samples/s, every repeat of the same configuration).",
        f"<span class='projected'>projected</span>: every other node: samples/s = catalog dense {dtype} peak per node x "
        f"assumed MFU {utilization:.2f} / model FLOPs per sample. These are not measurements; the sensitivity chart "
        f"shows the cost for MFU {min(urange):.2f}..{max(urange):.2f}. The projection counts FLOPs only: for a model this "
        "small an accelerator step is bound by launch latency and input pipeline, which it does not model, so it "
        "flatters accelerators; decide on a workload of the size you will train.",
        "work to target: samples to the target eval loss from the convergence fit (its interval propagates into the "
        "cost interval, Monte Carlo, hwmodels.cost); the same for every node (same global batch).",
        "prices: catalog USD per node-hour per pricing mode (on_prem: capex / (amortization years x 8766 h x "
        "catalog utilization) + power x PUE x USD/kWh); modes compared: " + ", ".join(pricing) + ".",
        f"workload: {_html.escape(str(fit.get('workload')))}, target eval loss {fit.get('target')}, steps to target "
        f"{_fmt(fit.get('steps_to_target'))} ({'reached in the measured run' if fit.get('measured') else 'extrapolated'}), "
        f"model FLOPs/step {_fmt(fit.get('model_flops_per_step'), 'FLOP')}, global batch {_fmt(fit.get('batch_size'))}.",
    ]
    return "<ul>" + "".join(f"<li>{i}</li>" for i in items) + "</ul>"


def _recommend(rows: list[dict[str, Any]], conv: dict[str, Any]) -> str:
    if not rows:
        return ("No recommendation: there is no convergence result to price "
                f"({conv.get('summary', 'no data')}).")
    best = rows[0]
    fastest = min(rows, key=lambda r: r["time_to_target_s"])
    txt = (f"Cheapest way to reach the target: {best['node']} at {best['pricing']} pricing, about "
           f"${best['cost_usd']:.3g} (interval ${best['lo']:.3g}-${best['hi']:.3g}) and {_hours(best['time_to_target_s'])} "
           f"to target ({best['basis']}).")
    if fastest is not best:
        txt += (f" Fastest: {fastest['node']} ({fastest['pricing']}) in {_hours(fastest['time_to_target_s'])} for "
                f"${fastest['cost_usd']:.3g}.")
    if len(rows) > 1 and rows[1]["lo"] <= best["hi"]:
        txt += (f" The runner-up ({rows[1]['node']}, {rows[1]['pricing']}) overlaps within the intervals, so the "
                "ranking between them is not decided by these data.")
    if best["basis"] == "projected":
        txt += " The winning figure is a projection from catalog peaks and an assumed utilization, not a measurement."
    return txt
