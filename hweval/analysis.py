"""One analysis pipeline: store -> fits -> predictor -> cost, as typed immutable results.

The report (:mod:`hweval.report`, rendering only), ``hweval cost --plan`` and
notebook 05 all call :func:`analyze`; notebooks 01-04 call the section
functions for the same views. Nothing here renders HTML and nothing here is
computed twice: a number in the report, in ``hweval cost`` and in
``hweval predict --tokens`` for the same job comes from the same call
(:func:`hwmodels.predict.predict_job`; tested in ``tests/test_analysis.py``).

Pipeline (statsmodels-style: ``analyze(...) -> Analysis``, frozen)::

    store rows (hwcore.records)  -> Measurements
    Measurements                 -> fits: roofline, comms, scaling, convergence (local evidence)
    job (hweval.job)             -> tokens (declared, or scaling law from a target loss, with interval)
    catalog x count x mode       -> predictor: best layout, step time, tokens/s (hwmodels.predict)
                                 -> time, cost, energy, an itemized interval   (JobOption)
    options                      -> Pareto front and a recommendation in plain words
    measured node                -> measured step time beside the predictor's (MeasuredCheck)

**Cost** = max(job accelerator-hours, a committed term's hours) x price per
accelerator-hour: a 1-year commitment is billed for the year
(:func:`hwmodels.catalog.term_hours`); on-demand and spot for the job's hours only (the same
figure ``hweval predict --tokens --pricing`` gives).

**Interval** (level stated, default 90%): multiplicative parts, each at the
level, combined in quadrature on the log scale (independent parts; a part's
factor ``f`` means ``x / f .. x * f``):

* scaling law / convergence: the tokens interval of :func:`hweval.job.job_tokens` (1 when tokens are declared);
* predictor validation error: ``Prediction.interval["relative"]`` (held-out |error| at 90% of
  ``data/reference/predictor_error.json`` combined with the calibration's uncertainty);
* price range (stated assumptions, not measurements): a dated catalog list price +/-10% (regional and
  list-vs-negotiated spread), spot +/-30% (spot prices move), on-prem +/-20% (capex, utilization,
  energy), a price older than 12 months +/-25%, a buyer's quote 0;
* measured throughput noise: on the measured node type only, the repeats of its measured step
  (:func:`hwmodels.cost.mean_interval`: 3+ repeats: Student t on logs; fewer: the harness's measured
  noise floor); elsewhere the predictor's validation error stands for it.

Fit records: the notebooks do **not** write ``kind="fit"`` records; fits are
computed once, here, from the measurements (one source of truth).
"""

from __future__ import annotations

import json
import math
import statistics
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import pandas as pd

from hwcore.errors import InputError
from hwcore.store import Store
from hwmodels.dtypes import predict_precision
from hwmodels.predict.calibration import CACHE_RESIDENT_BYTES  # STREAM points under it: cache-resident
from hweval.job import LADDER_REFERENCE, Job, TokenBudget, job_tokens, parse_job

LEVEL = 0.9
#: price-range half-widths (fractions) per pricing mode: stated assumptions (module docstring)
PRICE_RANGE = {"on_demand": 0.10, "reserved": 0.10, "reserved_3y": 0.10, "spot": 0.30, "on_prem": 0.20}
STALE_PRICE_RANGE = 0.25
NOISY_STEPS = 0.25  # step IQR / median above which a measured-vs-predicted check is flagged as disturbed
HOST_PROBES = ("dispatch",)  # kernels/dispatch.py: calibrate the predictor's host cost, kept off the roofline
MODE_WORDS = {"on_demand": "on-demand", "reserved": "reserved", "reserved_3y": "3-year reserved",
              "spot": "spot", "on_prem": "on-prem (owned, amortized)"}


# ----------------------------------------------------------------------------- human units
def fmt_usd(x: float | None) -> str:
    """$1,234 / $12.3k / $1.62M (thousands separators; never scientific notation)."""
    if x is None or not math.isfinite(x):
        return "n/a"
    a = abs(x)
    if a >= 1e9:
        return f"${x / 1e9:,.2f}B"
    if a >= 1e6:
        return f"${x / 1e6:,.2f}M"
    if a >= 1e4:
        return f"${x / 1e3:,.1f}k"
    if a >= 10:
        return f"${x:,.0f}"
    if a >= 0.01:
        return f"${x:,.2f}"
    return "< $0.01" if a > 0 else "$0"


def time_unit(seconds: Iterable[float]) -> tuple[str, float]:
    """One unit for a whole table or chart: (name, seconds per unit), chosen from the median."""
    v = sorted(s for s in seconds if s is not None and math.isfinite(s))
    med = v[len(v) // 2] if v else 0.0
    if med >= 2 * 86400:
        return "days", 86400.0
    if med >= 2 * 3600:
        return "h", 3600.0
    if med >= 120:
        return "min", 60.0
    return "s", 1.0


def fmt_duration(seconds: float | None, unit: tuple[str, float] | None = None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "n/a"
    name, f = unit or time_unit([seconds])
    v = seconds / f
    if name == "days" and v >= 3650:
        return f"{v / 365.25:,.0f} years"
    if name == "s" and abs(v) < 1:  # sub-second: milliseconds / microseconds, 3 significant digits
        return f"{v * 1e3:.3g} ms" if abs(v) >= 1e-3 else f"{v * 1e6:.3g} µs"
    if name == "s":
        return f"{v:,.3g} s" if v < 100 else f"{v:,.0f} s"
    digits = 1 if v < 100 else 0
    return f"{v:,.{digits}f} {name}"


def fmt_rate(x: float | None, unit: str) -> str:
    """TFLOP/s, GB/s ...: SI prefix chosen for the value (G, T, P), 3 significant digits."""
    if x is None or not math.isfinite(x):
        return "n/a"
    for f, p in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= f:
            return f"{x / f:,.3g} {p}{unit}"
    return f"{x:,.3g} {unit}"


def fmt_count(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return "n/a"
    for f, s in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= f:
            return f"{x / f:,.3g}{s}"
    return f"{x:,.3g}"


def _pct(x: float) -> str:
    return f"{x:.0%}" if x >= 0.1 else f"{x * 100:.2g}%"


def _num(x: Any) -> float | None:
    """A finite float or None (for in-process result dicts handed in by notebooks)."""
    if isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


# ----------------------------------------------------------------------------- measurements
@dataclass(frozen=True, kw_only=True)
class Measurements:
    """This plan's stored measurements, read once through :mod:`hwcore.records`."""

    kernels: tuple[dict[str, Any], ...] = ()
    collectives: tuple[dict[str, Any], ...] = ()
    workloads: tuple[dict[str, Any], ...] = ()
    noise_warnings: tuple[str, ...] = ()
    noise_floor_cv: float = 0.05
    noise_floor_source: str = "default 5% (no kernel measurements in the store)"
    #: records of cell attempts that do not count (killed or failed, superseded: hwcore.records.Attempts)
    set_aside: int = 0


def _flat(rec: Any, name: str) -> dict[str, Any]:
    d = dict(rec.metrics or {})
    d.update({"kernel": name, "name": name, "workload": name, "params": dict(rec.params or {}), "status": rec.status,
              "node_id": rec.node_id, "run_id": rec.run_id, "notebook": rec.notebook, "finished_at": rec.finished_at})
    return d


def _latest_runs(recs: list[Any], cells: list[Any]) -> tuple[list[Any], int]:
    """The records that count, and how many were set aside.

    A plan cell's records (``cell_id`` set): those of its one counted attempt
    (:class:`hwcore.records.Attempts`: the latest that ended ok), so a killed
    attempt's rows are not counted beside its ``--resume``'s, and a plan run
    again (``--force``) is analysed from its new measurements. Records without
    a cell (older stores): per notebook, those of its latest run only (run ids
    start with a UTC timestamp).
    """
    from hwcore.records import current

    kept, aside = current(recs, cells)
    latest: dict[str, str] = {}
    for r in kept:
        if r.notebook and r.run_id and r.run_id > latest.get(r.notebook, ""):
            latest[r.notebook] = r.run_id
    out = [r for r in kept if r.cell_id or not r.notebook or not r.run_id or r.run_id == latest.get(r.notebook)]
    return out, len(aside)


def load_measurements(store: Store, plan: str | None) -> Measurements:
    """Kernel, collective and workload records of ``plan`` (all plans when None), with noise figures.

    ``noise_floor_cv``: the harness's measured CV, the median over ok kernel measurements of
    IQR/median / 1.349 (the IQR of a normal is 1.349 sigma).
    """
    from hwcore.records import CellRecord, KernelRecord, WorkloadRecord, read

    cells = read(store, CellRecord, plan=plan)
    kr, k_aside = _latest_runs(read(store, KernelRecord, plan=plan), cells)
    wr, w_aside = _latest_runs(read(store, WorkloadRecord, plan=plan), cells)
    kernels = [_flat(r, r.kernel) for r in kr if r.kind == "kernel"]
    colls = [_flat(r, r.kernel) for r in kr if r.kind == "collective"]
    colls += [k for k in kernels if (k.get("params") or {}).get("world_size")]
    works = [_flat(r, r.workload) for r in wr]
    warns, ratios = [], []
    for k in kernels:
        meas = k.get("measurement") if isinstance(k.get("measurement"), dict) else {}
        nr = _num(k.get("noise_ratio")) if _num(k.get("noise_ratio")) is not None else _num(meas.get("noise_ratio"))
        if nr is not None and k.get("status") == "ok":
            ratios.append(nr)
        if k.get("noise_warning"):
            p = ", ".join(f"{a}={b}" for a, b in (k.get("params") or {}).items() if a not in ("seed", "device"))
            n = _num(k.get("n") or meas.get("n"))
            why = (f"only {n:.0f} timed samples" if n is not None and n < 3 else
                   f"IQR/median {nr:.0%}" if nr is not None and nr > 0.1 else
                   f"timing stopped by its {meas.get('stop_reason', 'budget')} before the median converged"
                   + (f" (IQR/median {nr:.0%})" if nr is not None else ""))
            warns.append(f"noisy measurement: {k['kernel']} ({p}): {why}")
    for w in works:
        for msg in (w.get("warnings") or []) if isinstance(w.get("warnings"), list) else []:
            warns.append(f"{w['workload']}: {msg}")
    cv, src = 0.05, "default 5% (no kernel noise figures in the store)"
    if ratios:
        ratios.sort()
        cv = max(ratios[len(ratios) // 2] / 1.349, 0.005)
        src = f"harness's measured CV: median IQR/median / 1.349 over {len(ratios)} kernel measurements"
    return Measurements(kernels=tuple(kernels), collectives=tuple(colls), workloads=tuple(works),
                        noise_warnings=tuple(dict.fromkeys(warns)), noise_floor_cv=cv, noise_floor_source=src,
                        set_aside=k_aside + w_aside)


def _flat_result(r: dict[str, Any]) -> dict[str, Any]:
    """An in-process ``to_json()`` dict (metrics nested) or an already flat row, flattened to one level."""
    if "metrics" in r and isinstance(r.get("metrics"), dict):
        out = dict(r["metrics"])
        out.update({k: v for k, v in r.items() if k not in ("metrics",)})
        return out
    return dict(r)


# ----------------------------------------------------------------------------- catalog
def load_catalog(catalog_dir: str | Path | None = None, prices: str | Path | None = None):
    """The catalog (``catalog_dir`` or the default), priced with a buyer's quotes CSV when given."""
    from hwmodels.catalog import load_catalog as _load

    cat = _load(catalog_dir or None)
    if prices:
        from hwmodels.prices import apply_quotes, load_quotes

        cat = apply_quotes(cat, load_quotes(prices, cat))
    return cat


def resolve_measured_node(node: str | None = None, catalog: Any = None):
    """Catalog entry of the measured machine: the given id, else the one matching this fingerprint."""
    from hwmodels.catalog import default_catalog, match_node

    from hwcore.fingerprint import fingerprint

    cat = catalog or default_catalog()
    if node:
        return cat.get(node)
    return match_node(fingerprint(), cat)


# ----------------------------------------------------------------------------- sections (fits)
def kernel_table(results: Iterable[dict[str, Any]]) -> pd.DataFrame:
    rows = []
    for r in map(_flat_result, results):
        p = r.get("params") or {}
        rows.append({
            "kernel": r.get("kernel") or r.get("name"),
            "parameters": ", ".join(f"{k}={v}" for k, v in p.items() if k not in ("seed", "framework", "device")),
            "status": r.get("status", "ok"),
            "median time": fmt_duration(_num(r.get("median_s")), ("s", 1.0)),
            "compute": fmt_rate(_num(r.get("flops_per_s")), "FLOP/s") if _num(r.get("flops_per_s")) else "",
            "bandwidth": fmt_rate(_num(r.get("bytes_per_s")), "B/s") if _num(r.get("bytes_per_s")) else "",
            "noisy": "yes" if r.get("noise_warning") else "",
        })
    return pd.DataFrame(rows)


def _is_cache_resident(kernel: str, params: Mapping[str, Any], nbytes: float) -> bool:
    return str(kernel).startswith("stream") and nbytes < CACHE_RESIDENT_BYTES


def roofline_section(results: Iterable[dict[str, Any]], *, node: Any = None) -> dict[str, Any]:
    """Fitted compute and DRAM ceilings; each measured dtype against the same dtype's datasheet peak.

    STREAM points whose working set is under :data:`CACHE_RESIDENT_BYTES` are labelled cache-resident
    and kept out of the DRAM-bandwidth fit (their bandwidth is drawn as its own line).
    ``node``: a catalog ``NodeType`` or id (None: match this machine).
    """
    from hwmodels.roofline import Roofline

    rows = []
    for r in map(_flat_result, results):
        if r.get("status", "ok") != "ok":
            continue
        fl, by, s = _num(r.get("flops")), _num(r.get("bytes")), _num(r.get("median_s"))
        if not (by and s):
            continue
        p = r.get("params") or {}
        kern = r.get("kernel") or r.get("name")
        if kern in HOST_PROBES:
            continue  # host-overhead probes: their time is dispatch, not a compute or memory rate
        cache = _is_cache_resident(kern, p, by)
        rows.append({"kernel": kern, "dtype": str(p.get("dtype", "")), "params": json.dumps(p, sort_keys=True),
                     "flops": fl or 0.0, "bytes": by, "seconds": s, "intensity": (fl or 0.0) / by,
                     "flops_per_s": (fl or 0.0) / s, "bytes_per_s": by / s,
                     "memory": "cache-resident" if cache else "DRAM"})
    if len(rows) < 2:
        return {"ok": False, "summary": "roofline: fewer than 2 kernel measurements; run 01_node_characterization",
                "points": [], "ceilings": [], "fit": {}}
    df = pd.DataFrame(rows)
    dram = df[df["memory"] == "DRAM"]
    fit_df = dram if len(dram) >= 2 and (dram["flops"] > 0).any() else df
    res = Roofline().fit(fit_df[["flops", "bytes", "seconds", "dtype"]])
    peak, bw = float(res.peak_flops_per_s), float(res.peak_bytes_per_s)
    cache_bw = float(df.loc[df["memory"] == "cache-resident", "bytes_per_s"].max()) \
        if (df["memory"] == "cache-resident").any() else None
    pos = df[df["intensity"] > 0]
    lo, hi = (pos["intensity"].min() / 4, pos["intensity"].max() * 4) if not pos.empty else (0.01, 100.0)
    grid = [lo * (hi / lo) ** (i / 60) for i in range(61)]
    ceilings, per_dtype = [], {}
    for d in sorted(set(df["dtype"])):
        sub = df[df["dtype"] == d]
        if not (sub["intensity"] > 1).any():
            continue  # memory-only dtypes (STREAM fp64) have no compute ceiling worth drawing
        ys = res.attainable(grid, dtype=d)
        per_dtype[d] = float(sub["flops_per_s"].max())
        ceilings += [{"intensity": i, "flops_per_s": float(y), "ceiling": f"fitted {d}, DRAM (measured)"}
                     for i, y in zip(grid, ys, strict=True)]
    if cache_bw:
        ceilings += [{"intensity": i, "flops_per_s": i * cache_bw, "ceiling": "cache-resident bandwidth (measured)"}
                     for i in grid if i * cache_bw <= max(per_dtype.values() or [peak]) * 1.5]
    datasheet = {}
    try:
        nt = node if (node is not None and not isinstance(node, str)) else resolve_measured_node(node)
    except (ValueError, KeyError, OSError) as exc:
        warnings.warn(f"roofline: no catalog entry for the measured node ({exc}); no datasheet lines", stacklevel=2)
        nt = None
    if nt is not None:
        dbw = nt.memory_bandwidth_bytes_per_s
        for d in per_dtype:
            if d in nt.peaks:  # the same dtype's datasheet peak, never another's
                dpk = nt.peak_flops_per_s(d, per="node")
                datasheet[d] = {"node": nt.id, "peak_flops_per_s": dpk, "bytes_per_s": dbw,
                                "measured_over_datasheet": per_dtype[d] / dpk}
                ceilings += [{"intensity": i, "flops_per_s": min(dpk, i * dbw),
                              "ceiling": f"datasheet {nt.id} {d} (DRAM)"} for i in grid]
    parts = [f"fitted DRAM bandwidth {fmt_rate(bw, 'B/s')}"]
    if cache_bw:
        parts.append(f"cache-resident bandwidth {fmt_rate(cache_bw, 'B/s')} (working sets < "
                     f"{CACHE_RESIDENT_BYTES / 2**20:.0f} MiB, labelled apart)")
    for d, v in per_dtype.items():
        t = f"{d}: best measured {fmt_rate(v, 'FLOP/s')}"
        if d in datasheet:
            t += (f" vs datasheet {d} {fmt_rate(datasheet[d]['peak_flops_per_s'], 'FLOP/s')} "
                  f"({_pct(datasheet[d]['measured_over_datasheet'])} of peak)")
        parts.append(t)
    summary = f"roofline from {len(df)} measurements: " + "; ".join(parts)
    return {"ok": True, "summary": summary, "points": df.to_dict("records"), "ceilings": ceilings,
            "fit": {"peak_flops_per_s": peak, "peak_bytes_per_s": bw, "cache_bytes_per_s": cache_bw,
                    "ridge_intensity": peak / bw, "n": len(df), "per_dtype_flops_per_s": per_dtype,
                    "datasheet": datasheet}}


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
        return {"ok": False, "summary": "communication: fewer than 2 collective measurements; run 03_scaling",
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
        lines.append(f"{coll} on {ranks} ranks: latency {fmt_duration(a, ('s', 1.0))}, "
                     f"bandwidth {fmt_rate(b, 'B/s')}")
    return {"ok": bool(fits), "summary": "communication (alpha-beta fit): " + ("; ".join(lines) or
                                                                              "no sweep with 2+ sizes"),
            "points": pts, "curve": curve, "fit": fits}


def scaling_section(results: Iterable[dict[str, Any]], *, max_n: int | None = None, alpha: float = 0.1) -> dict[str, Any]:
    """Amdahl/USL fit of throughput vs process count; "not enough data" when not identifiable."""
    from hwmodels.scaling import Scaling

    pts = []
    for r in map(_flat_result, results):
        if r.get("status", "ok") != "ok":
            continue
        p = r.get("params") or {}
        n, thr = _num(p.get("nprocs", 1)), _num(r.get("samples_per_s"))
        if n and thr:
            pts.append({"nprocs": n, "samples_per_s": thr, "workload": r.get("workload") or r.get("name")})
    if pts:
        main = pd.Series([p["workload"] for p in pts]).value_counts().index[0]
        pts = [p for p in pts if p["workload"] == main]
    ns = sorted({p["nprocs"] for p in pts})
    if len(ns) < 2:
        return {"ok": False, "summary": "scaling: not enough data (throughput at fewer than 2 process counts; "
                                        "run 03_scaling)", "points": pts, "curve": [], "fit": {}}
    df = pd.DataFrame(pts)
    try:
        res = Scaling(model="auto").fit(df["nprocs"].to_numpy(), df["samples_per_s"].to_numpy())
    except ValueError as exc:  # hwmodels.errors.ModelInputError: e.g. too few points for any model
        return {"ok": False, "summary": f"scaling: not enough data ({exc})", "points": pts, "curve": [], "fit": {}}
    if not getattr(res, "identifiable", True):  # runs at n in {1, 2}: said, never drawn as a prediction
        return {"ok": False, "summary": f"scaling: not enough data: runs at {len(ns)} process counts "
                                        f"({', '.join(f'{n:g}' for n in ns)}); {res.message}",
                "points": pts, "curve": [], "fit": {}}
    top = max_n or int(max(8, 4 * max(ns)))
    xs = list(range(1, top + 1))
    pred = res.predict(xs, alpha=alpha)
    curve = []
    for i, x in enumerate(xs):
        y = pred["y"][i] if isinstance(pred, dict) else pred[i]
        lo = _num(pred["lo"][i]) if isinstance(pred, dict) and "lo" in pred else None
        hi = _num(pred["hi"][i]) if isinstance(pred, dict) and "hi" in pred else None
        curve.append({"nprocs": x, "samples_per_s": _num(y), "lo": max(lo, 0.0) if lo is not None else None,
                      "hi": hi})
    model = getattr(res, "model", "scaling")
    summary = (f"scaling ({model}): " + ", ".join(f"{k} = {v:.3g}" for k, v in res.params.items())
               + f"; {len(df)} runs at n = {', '.join(f'{n:g}' for n in ns)}; predicted at n = {top}: "
               f"{curve[-1]['samples_per_s']:,.0f} samples/s")
    return {"ok": True, "summary": summary, "points": pts, "curve": curve,
            "fit": {"model": model, "params": dict(res.params),
                    "conf_int": {k: list(v) for k, v in res.conf_int(alpha).items()}}}


def workload_table(results: Iterable[dict[str, Any]]) -> pd.DataFrame:
    rows = []
    for r in map(_flat_result, results):
        thr = _num(r.get("samples_per_s"))
        rows.append({
            "workload": r.get("workload") or r.get("name"),
            "status": r.get("status"),
            "steps": r.get("steps"),
            "time to target": fmt_duration(_num(r.get("time_to_target_s"))),
            "samples/s": f"{thr:,.1f}" if thr else "n/a",
            "tokens/s": f"{_num(r.get('tokens_per_s')):,.0f}" if _num(r.get("tokens_per_s")) else "n/a",
            "measured MFU": f"{_num(r.get('mfu')):.1%}" if _num(r.get("mfu")) is not None else "n/a",
            "peak memory": f"{(_num(r.get('peak_mem_bytes')) or 0) / 2**20:,.0f} MiB" if _num(
                r.get("peak_mem_bytes")) else "n/a",
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


def convergence_section(results: Iterable[dict[str, Any]], *, level: float = LEVEL,
                        target: float | None = None) -> dict[str, Any]:
    """Fit the longest ok loss curve (samples seen -> eval loss); steps to target with an interval."""
    import numpy as np

    from hwmodels.convergence import Convergence

    best = None
    for r in map(_flat_result, results):
        if r.get("status") not in ("ok", "timeout") or len(r.get("loss_curve") or []) < 4:
            continue
        if best is None or len(r["loss_curve"]) > len(best["loss_curve"]):
            best = r
    if best is None:
        return {"ok": False, "summary": "convergence: no loss curve with 4 or more points; run 04_convergence",
                "points": [], "curve": [], "fit": {}}
    pts = [p for p in best["loss_curve"] if _num(p.get("loss")) is not None and p.get("step")]
    df = pd.DataFrame(pts)
    tgt = target if target is not None else _num(best.get("target_loss") or (best.get("params") or {}).get("target_loss"))
    batch = _num((best.get("params") or {}).get("batch_size")) or 1.0
    try:
        res = Convergence().fit(df["step"].to_numpy(dtype=float) * batch, df["loss"].to_numpy(dtype=float))
    except ValueError as exc:  # hwmodels.errors.ModelInputError: too few / too flat points for any family
        return {"ok": False, "summary": f"convergence: not enough data ({exc})",
                "points": [{"step": p["step"], "loss": p["loss"]} for p in pts], "curve": [], "fit": {}}
    tt = res.x_to_target(tgt, level=level) if tgt is not None else {}
    steps_done = float(df["step"].max())
    reach, lo, hi = (None if v is None else v / batch for v in
                     (_num(tt.get("x_to_target")), _num(tt.get("lo")), _num(tt.get("hi"))))
    reachable = bool(tt.get("reachable"))
    problems = [str(p) for p in tt.get("problems") or []]
    measured_steps = _num(best.get("steps_to_target"))
    end = max(steps_done * 3, min((hi or reach or steps_done) * 1.2, steps_done * 20))
    xs = [steps_done * 0.05 + (end - steps_done * 0.05) * i / 80 for i in range(81)]
    curve = _loss_band(res, xs, level, scale=batch)
    wl = best.get("workload") or best.get("name")
    if measured_steps:
        how = f"reached the target {tgt:.3g} at step {measured_steps:,.0f} (measured)"
    elif reachable and reach:
        how = (f"predicted to reach {tgt:.3g} at step {reach:,.0f} ({level:.0%} interval {lo or 0:,.0f} to "
               f"{hi:,.0f} steps; extrapolated beyond step {steps_done:,.0f})" if hi and math.isfinite(hi) else
               f"predicted to reach {tgt:.3g} at step {reach:,.0f} (upper bound not identified)")
    else:
        how = f"the target {tgt} is not supported by the fit: " + ("; ".join(problems) or "unreachable")
    if problems and (measured_steps or reachable):
        how += " (caution: " + "; ".join(problems) + ")"
    fit = {"model": getattr(res, "model", None), "params": dict(res.params), "target": tgt,
           "steps_to_target": measured_steps or reach, "lo": lo, "hi": hi, "level": level,
           "reachable": bool(measured_steps) or reachable, "measured": bool(measured_steps), "workload": wl,
           "batch_size": batch, "samples_per_s": _num(best.get("samples_per_s")), "mfu": _num(best.get("mfu"))}
    return {"ok": True, "summary": f"convergence ({getattr(res, 'family', 'fit')} fit of {wl}'s eval loss): {how}",
            "points": [{"step": p["step"], "loss": p["loss"]} for p in pts], "curve": curve, "fit": fit,
            "target": tgt, "result": res, "n_points": int(np.size(df["step"]))}


def _loss_band(res, xs: Sequence[float], level: float, n_draws: int = 400, scale: float = 1.0) -> list[dict[str, Any]]:
    """Fitted curve with a ``level`` band from parameter draws (multivariate normal on the fit's covariance)."""
    import numpy as np

    from hwmodels import convergence as hc

    x = np.asarray(xs, dtype=float) * scale
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
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns far out: no band there
            lo = np.nanquantile(Y, (1 - level) / 2, axis=0)
            hi = np.nanquantile(Y, (1 + level) / 2, axis=0)
    return [{"step": float(xs[i]), "loss": _num(mid[i]), "lo": _num(lo[i]), "hi": _num(hi[i])} for i in range(len(xs))]


# ----------------------------------------------------------------------------- measured evidence
@dataclass(frozen=True, kw_only=True)
class MeasuredCheck:
    """The measured node's step time beside the predictor's prediction for the same configuration."""

    node: str
    workload: str
    config: str
    repeats: int
    measured_step_s: float
    measured_lo_s: float
    measured_hi_s: float
    measured_how: str
    measured_mfu: float | None
    predicted_step_s: float | None
    predicted_lo_s: float | None
    predicted_hi_s: float | None
    calibration: str
    error: float | None  # predicted / measured - 1
    #: step-to-step spread inside the runs: the median over runs of the step timer's IQR / median; above
    #: NOISY_STEPS the steps were disturbed (a loaded machine) and the comparison says so
    step_noise: float | None = None

    @property
    def noisy(self) -> bool:
        return self.step_noise is not None and self.step_noise > NOISY_STEPS

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _kernel_points(kernels: Sequence[dict[str, Any]]):
    from hwmodels.predict import KernelPoint

    out = []
    for k in kernels:
        if k.get("status") != "ok":
            continue
        name = str(k.get("kernel"))  # calibrate() leaves cache-resident STREAM records out itself
        metrics = {a: b for a, b in k.items() if a not in ("params", "kernel", "name", "workload")}
        out.append(KernelPoint(kernel=name, params=dict(k.get("params") or {}), metrics=metrics, origin="measured",
                               where=f"run {k.get('run_id') or ''}".strip()))
    return out


def measured_checks(node: Any, m: Measurements, *, level: float = LEVEL) -> list[MeasuredCheck]:
    """Each measured single-process workload configuration vs the predictor calibrated from this node's kernels."""
    from hwmodels.cost import mean_interval
    from hwmodels.predict import calibrate, from_workload, predict_job
    from hwmodels.predict.predictor import generic_step_time
    from hwmodels.predict.spec import ModelSpec

    if node is None:
        return []
    cal = calibrate(node, _kernel_points(m.kernels))
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for w in m.workloads:
        p = w.get("params") or {}
        if w.get("status") != "ok" or int(p.get("nprocs") or 1) != 1 or not _num(w.get("samples_per_s")):
            continue
        key = {k: v for k, v in p.items() if k not in ("seed", "max_steps", "max_time_s", "target_loss",
                                                       "stop_at_target", "checkpoint_dir", "resume_from")}
        groups.setdefault((w["workload"], json.dumps(key, sort_keys=True, default=str)), []).append(w)
    out = []
    for (name, _), runs in groups.items():
        p = runs[0].get("params") or {}
        batch = int(p.get("batch_size") or 1)
        # the median step of each run (steady state: what the step model predicts); else batch / throughput
        steps = [float(r["step_time_s"]["median_s"]) if isinstance(r.get("step_time_s"), dict)
                 and _num(r["step_time_s"].get("median_s")) else batch / float(r["samples_per_s"]) for r in runs]
        mi = mean_interval(steps, level, noise_floor_cv=m.noise_floor_cv)
        pred_s = plo = phi = prec = None
        calib = "; ".join(f"{k}: {v}" for k, v in list(cal.sources().items())[:3])
        try:
            prec = predict_precision(str(p.get("precision") or "") or None)  # bf16_autocast -> bf16
            spec = from_workload(name, p)
            if isinstance(spec, ModelSpec):
                pr = predict_job(hardware=node, accelerators=1, model=spec, global_batch=batch, micro_batch=batch,
                                 tp=1, pp=1, sharding="none", activation_checkpointing="none", precision=prec,
                                 calibration=cal)
                pred_s = pr.step_time_s
                plo, phi = pr.interval["step_time_s"]
            else:
                pred_s = sum(generic_step_time(spec, cal, batch=batch, precision=prec).values())
                rel = math.sqrt(0.25 ** 2 + cal.rel_sigma() ** 2)
                plo, phi = pred_s / (1 + rel), pred_s * (1 + rel)
        except ValueError as exc:  # a workload the predictor does not describe: said, not dropped
            calib = f"not predicted: {exc}"
        cfg = ", ".join(f"{k}={p[k]}" for k in ("layers", "width", "heads", "seq_len", "hidden", "depth",
                                               "batch_size", "precision") if k in p)
        mfus = [x for x in (_num(r.get("mfu")) for r in runs) if x is not None]
        fps = _num(runs[0].get("flops_per_step"))
        if not mfus and fps and prec in node.peaks:  # MFU against the catalog node's datasheet peak (PaLM app. B)
            mfus = [fps / mi["mean"] / node.peak_flops_per_s(prec, per="node")]
        noise = [float(r["step_time_s"]["noise_ratio"]) for r in runs if isinstance(r.get("step_time_s"), dict)
                 and _num(r["step_time_s"].get("noise_ratio")) is not None]
        out.append(MeasuredCheck(node=node.id, workload=name, config=cfg, repeats=len(runs),
                                 step_noise=sorted(noise)[len(noise) // 2] if noise else None,
                                 measured_step_s=mi["mean"], measured_lo_s=mi["lo"], measured_hi_s=mi["hi"],
                                 measured_how=mi["how"], measured_mfu=sum(mfus) / len(mfus) if mfus else None,
                                 predicted_step_s=pred_s, predicted_lo_s=plo, predicted_hi_s=phi, calibration=calib,
                                 error=(pred_s / mi["mean"] - 1) if pred_s else None))
    return out


# ----------------------------------------------------------------------------- the job's options
@dataclass(frozen=True, kw_only=True)
class IntervalPart:
    name: str
    lo_factor: float  # x / lo_factor is this part's low end
    hi_factor: float
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "lo_factor": self.lo_factor, "hi_factor": self.hi_factor, "source": self.source,
                "minus_pct": (1 - 1 / self.lo_factor) * 100, "plus_pct": (self.hi_factor - 1) * 100}


def combine(parts: Sequence[IntervalPart]) -> tuple[float, float]:
    """Combined (lo_factor, hi_factor): quadrature on the log scale (independent parts at the same level)."""
    lo = math.exp(math.sqrt(sum(math.log(p.lo_factor) ** 2 for p in parts)))
    hi = math.exp(math.sqrt(sum(math.log(p.hi_factor) ** 2 for p in parts)))
    return lo, hi


@dataclass(frozen=True, kw_only=True)
class PriceInfo:
    mode: str
    usd_per_accelerator_hour: float
    provider: str
    instance: str
    region: str
    as_of: str
    stale: bool
    source: str
    term: str = ""
    min_billed_hours: float = 0.0  # per accelerator: a committed term is billed in full

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True, kw_only=True)
class JobOption:
    """One (node, accelerator count, pricing mode): best layout, time, cost, energy and the itemized interval."""

    node: str
    node_name: str
    accelerators: int
    pricing: str
    price: PriceInfo
    layout: Mapping[str, Any]
    step_time_s: float
    tokens_per_s: float
    mfu: float
    memory_per_accelerator_GiB: float
    time_s: float
    time_lo_s: float
    time_hi_s: float
    accelerator_hours: float
    cost_usd: float
    cost_lo_usd: float
    cost_hi_usd: float
    energy_mwh: float
    energy_lo_mwh: float
    energy_hi_mwh: float
    parts: tuple[IntervalPart, ...]
    meets_deadline: bool = True
    within_budget: bool = True
    pareto: bool = False
    calibration: str = ""
    #: memory headroom of the layout: 0.0 when it fits even with the memory model's held-out q90 error
    #: (``memory_margin``) above its estimate; else how much slower (fraction) the fastest layout that does is,
    #: by the model; None when no layout of the job fits with that headroom (or no memory validation exists)
    memory_safe_slowdown: float | None = 0.0
    memory_margin: float | None = None
    capacity_GiB: float = 0.0

    @property
    def label(self) -> str:
        return f"{self.accelerators} x {self.node} ({MODE_WORDS.get(self.pricing, self.pricing)})"

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k not in ("price", "parts", "layout")}
        out.update(price=self.price.to_dict(), parts=[p.to_dict() for p in self.parts], layout=dict(self.layout),
                   label=self.label, usd_per_accelerator_hour=self.price.usd_per_accelerator_hour)
        return out


@dataclass(frozen=True, kw_only=True)
class Unavailable:
    node: str
    accelerators: int | None
    pricing: str | None
    reason: str


def _price_part(node: Any, mode: str, today: date | str | None) -> tuple[PriceInfo, IntervalPart]:
    p = node.price(mode)
    stale = p.stale(today)
    per_acc = node.price_per_accelerator_hour(mode)
    quote = (p.provider or "") == "buyer quote"
    if quote:
        rel, why = 0.0, "a buyer's quote (--prices): taken as exact"
    elif stale:
        rel, why = STALE_PRICE_RANGE, f"price as of {p.as_of or 'undated'} is older than 12 months: +/-25% (assumption)"
    else:
        rel = PRICE_RANGE.get(mode, 0.10)
        why = {"spot": "spot prices move: +/-30% (assumption)",
               "on_prem": "capex, utilization and energy: +/-20% (assumption)"}.get(
            mode, "regional and list-vs-negotiated spread: +/-10% (assumption)")
    info = PriceInfo(mode=mode, usd_per_accelerator_hour=per_acc, provider=p.provider or "on-prem TCO" if mode == "on_prem"
                     else (p.provider or "unknown"), instance=p.instance or "", region=p.region or "",
                     as_of=p.as_of or "undated", stale=stale, source=p.source, term=p.term or "",
                     min_billed_hours=p.min_billed_hours)
    return info, IntervalPart(name="price range", lo_factor=1 + rel, hi_factor=1 + rel, source=why)


def job_regime_notes(job: Job, counts: Sequence[int], nodes: Sequence[str] = ()) -> list[str]:
    """Where the job sits in a regime the predictor's held-out validation was biased in (sequence length, model
    size, precision, each accelerator count priced, each node type priced): :func:`hwmodels.predict.predictor.
    regime_bias_notes`, once per note; and each node type's memory-verdict record where the memory model rejected
    many of its published runs (:func:`~hwmodels.predict.predictor.memory_record_note`). A job-wide bias moves
    every candidate alike (ranking unchanged), the level of time and cost with it; a node type's bias moves that
    node's rows only, and its note says so."""
    from hwmodels.predict.predictor import memory_record_note, regime_bias_notes

    spec = job.spec()
    out = regime_bias_notes({"seq_len": spec.seq_len, "params_B": spec.n_params() / 1e9,
                             "precision": job.precision})
    for n in counts:
        out += regime_bias_notes({"accelerators": n})
    for node in nodes:
        out += [f"{n}: this node's rows only, so read its place in the ranking with it"
                for n in regime_bias_notes({"hardware": node})]
        record = memory_record_note(node)
        if record:
            out.append(record)
    return [f"predictor: {n}" for n in dict.fromkeys(out)]


def ladder_reference_flops(catalog: Any) -> float | None:
    """Dense bf16 peak per accelerator of the ladder's reference type (:data:`hweval.job.LADDER_REFERENCE`), or
    None when the catalog lacks it (then every type is priced at the ladder's counts as they are)."""
    if LADDER_REFERENCE not in catalog:
        return None
    peak = catalog.get(LADDER_REFERENCE).peaks.get("bf16")
    return peak.dense_flops_per_s if peak is not None else None


def job_options(job: Job, tokens: TokenBudget, catalog: Any, *, candidates: Sequence[str] | None = None,
                today: date | str | None = None, measured_node: str | None = None,
                throughput_noise: IntervalPart | None = None) -> tuple[list[JobOption], list[Unavailable]]:
    """Every (candidate node, count, mode) of the job through :func:`hwmodels.predict.predict_job`."""
    from hwmodels.predict import predict_job
    from hwmodels.predict.predictor import memory_record_note

    spec = job.spec()
    ids = list(candidates) if candidates else [n.id for n in catalog if n.kind != "cpu"]
    ref_flops = ladder_reference_flops(catalog)
    opts: list[JobOption] = []
    missing: list[Unavailable] = []
    tok_part = IntervalPart(name="scaling law (tokens to target)", lo_factor=tokens.rel_lo, hi_factor=tokens.rel_hi,
                            source=tokens.source)
    for nid in ids:
        node = catalog.get(nid)
        for mode in job.pricing:
            if mode not in node.modes:
                p = node.pricing.get(mode)
                why = p.source if p is not None else "no such price in the catalog"
                missing.append(Unavailable(node=nid, accelerators=None, pricing=mode,
                                           reason=f"{MODE_WORDS.get(mode, mode)} price not available ({why})"))
        modes = [m for m in job.pricing if m in node.modes]
        if not modes and node.modes:
            continue  # priced, only not in the modes asked for: its missing modes say so above
        if job.precision not in node.peaks:
            missing.append(Unavailable(node=nid, accelerators=None, pricing=None,
                                       reason=f"no {job.precision} support in the catalog (has {', '.join(node.peaks)})"))
            continue
        for count in job.counts_for(node, ref_flops):
            try:
                res = predict_job(hardware=node, accelerators=count, model=spec, global_batch=job.global_batch,
                                  precision=job.precision, tokens=tokens.tokens, catalog=catalog,
                                  framework=job.framework)
            except ValueError as exc:
                missing.append(Unavailable(node=nid, accelerators=count, pricing=None, reason=str(exc)))
                continue
            pred = res.best
            if pred is None:
                mem = res.smallest_memory[1].total / 2**30 if res.smallest_memory else float("nan")
                record = memory_record_note(nid)
                missing.append(Unavailable(node=nid, accelerators=count, pricing=None,
                                           reason=f"no layout fits in memory (smallest {mem:,.0f} GiB per accelerator, "
                                                  f"{node.memory_capacity_bytes / 2**30:,.0f} GiB available)"
                                                  + (f"; {record.removeprefix('memory: ')}" if record else "")))
                continue
            rel = float(pred.interval.get("relative", 0.0))
            pred_part = IntervalPart(name="predictor validation error", lo_factor=1 + rel, hi_factor=1 + rel,
                                     source=str(pred.interval.get("method", "")))
            time_parts = [tok_part, pred_part]
            if throughput_noise is not None and nid == measured_node:
                time_parts.append(throughput_noise)
            t_lo, t_hi = combine(time_parts)
            t = float(pred.time_to_train_s)
            if not modes:  # a type with no public price: its time, not its cost (nothing to rank it by)
                unit = time_unit([t])
                missing.append(Unavailable(
                    node=nid, accelerators=count, pricing=None,
                    reason=(f"not priced (no public price in the catalog); predicted time "
                            f"{fmt_duration(t, unit)} ({LEVEL:.0%}: {fmt_duration(t / t_lo, unit)} to "
                            f"{fmt_duration(t * t_hi, unit)}), {float(pred.accelerator_hours):,.0f} accelerator-hours, "
                            f"{pred.tokens_per_s / count:,.0f} tokens/s per accelerator")))
                continue
            watts = node.node_watts / node.accelerators_per_node * count * node.pue()
            mwh = watts * t / 3600 / 1e6
            for mode in modes:
                info, ppart = _price_part(node, mode, today)
                parts = (*time_parts, ppart)
                c_lo, c_hi = combine(parts)
                # job hours, or the whole committed term when it is longer (billed in full)
                billed_h = max(float(pred.accelerator_hours), info.min_billed_hours * count)
                cost = billed_h * info.usd_per_accelerator_hour
                opts.append(JobOption(
                    node=nid, node_name=node.name, accelerators=count, pricing=mode, price=info,
                    layout=pred.layout.to_dict(), step_time_s=pred.step_time_s, tokens_per_s=pred.tokens_per_s,
                    mfu=pred.mfu, memory_per_accelerator_GiB=pred.memory_per_accelerator_GiB, time_s=t,
                    time_lo_s=t / t_lo, time_hi_s=t * t_hi, accelerator_hours=float(pred.accelerator_hours),
                    cost_usd=cost, cost_lo_usd=cost / c_lo, cost_hi_usd=cost * c_hi, energy_mwh=mwh,
                    energy_lo_mwh=mwh / t_lo, energy_hi_mwh=mwh * t_hi, parts=parts,
                    meets_deadline=job.deadline_days is None or t <= job.deadline_days * 86400,
                    within_budget=job.budget_usd is None or cost <= job.budget_usd,
                    calibration="; ".join(f"{k}: {v}" for k, v in pred.calibration.items()),
                    memory_safe_slowdown=res.memory_safe_slowdown, memory_margin=res.memory_margin,
                    capacity_GiB=node.memory_capacity_bytes / 2**30))
    front = pareto_front(opts)
    opts = [o if o not in front else _with(o, pareto=True) for o in opts]
    opts.sort(key=lambda o: (o.cost_usd, o.time_s))
    return opts, missing


def _with(o: JobOption, **kw: Any) -> JobOption:
    from dataclasses import replace

    return replace(o, **kw)


def pareto_front(opts: Sequence[JobOption]) -> list[JobOption]:
    """Options no other option beats on both time and cost."""
    out = []
    for o in opts:
        if not any(q.time_s <= o.time_s and q.cost_usd <= o.cost_usd and (q.time_s < o.time_s or q.cost_usd < o.cost_usd)
                   for q in opts if q is not o):
            out.append(o)
    return out


# ----------------------------------------------------------------------------- the answer
@dataclass(frozen=True, kw_only=True)
class Analysis:
    """Everything the report shows; built by :func:`analyze`, never modified."""

    job: Job | None
    tokens: TokenBudget | None
    options: tuple[JobOption, ...]
    unavailable: tuple[Unavailable, ...]
    recommended: JobOption | None
    cheapest: JobOption | None
    fastest: JobOption | None
    recommendation: str
    sections: Mapping[str, Mapping[str, Any]]
    checks: tuple[MeasuredCheck, ...]
    measurements: Measurements
    measured_node: str | None
    level: float
    notes: tuple[str, ...]
    stale_prices: tuple[str, ...]
    validation: str
    catalog_dir: str
    prices_file: str | None
    break_even: tuple[Mapping[str, Any], ...] = ()  # buy vs rent per node (hwmodels.cost.break_even_utilization)
    #: the recommended option priced per fitted framework family (:func:`by_framework`), when the job states none
    by_framework: tuple[Mapping[str, Any], ...] = ()

    @property
    def pareto(self) -> list[JobOption]:
        return sorted((o for o in self.options if o.pareto), key=lambda o: o.time_s)

    def option(self, node: str, accelerators: int, pricing: str) -> JobOption:
        for o in self.options:
            if (o.node, o.accelerators, o.pricing) == (node, accelerators, pricing):
                return o
        raise InputError(f"no option {accelerators} x {node} ({pricing}); valid: "
                         + ", ".join(f"{o.accelerators} x {o.node} ({o.pricing})" for o in self.options[:20]))

    def best_per_node(self) -> list[JobOption]:
        """Per (node, mode): the cheapest option meeting the deadline (else the fastest), cheapest first."""
        by: dict[tuple[str, str], list[JobOption]] = {}
        for o in self.options:
            by.setdefault((o.node, o.pricing), []).append(o)
        out = []
        for group in by.values():
            ok = [o for o in group if o.meets_deadline]
            out.append(min(ok, key=lambda o: (o.cost_usd, o.time_s)) if ok else min(group, key=lambda o: o.time_s))
        return sorted(out, key=lambda o: (o.cost_usd, o.time_s))

    def summary(self) -> str:
        """The recommendation and the best option per node and pricing mode, as plain text."""
        unit = time_unit([o.time_s for o in self.options])
        lines = [self.recommendation, "",
                 f"best count per node and pricing mode ({self.level:.0%} intervals; {self.validation}):",
                 f"{'option':<48} {'time (' + unit[0] + ')':>11} {'cost':>10} {'interval':>22} {'MWh':>9} "
                 f"{'price as of':>12}"]
        for o in self.best_per_node():
            lines.append(f"{o.label:<48} {o.time_s / unit[1]:>11,.1f} {fmt_usd(o.cost_usd):>10} "
                         f"{fmt_usd(o.cost_lo_usd) + ' to ' + fmt_usd(o.cost_hi_usd):>22} {o.energy_mwh:>9,.1f} "
                         f"{o.price.as_of + ('*' if o.price.stale else ''):>12}")
        if self.stale_prices:
            lines.append("* price older than 12 months")
        if self.by_framework and self.recommended is not None:
            r0 = self.recommended
            lines += ["", f"{r0.label} by framework family (the job states none; each with its family's factors and "
                          f"band):"]
            lines += [f"  {r['framework']:<16} eta {r['eta']:.2f}  {r['time_s'] / unit[1]:>9,.1f} {unit[0]}  "
                      f"{fmt_usd(r['cost_usd']):>10} ({fmt_usd(r['cost_lo_usd'])} to {fmt_usd(r['cost_hi_usd'])})"
                      for r in self.by_framework]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"job": self.job.to_dict() if self.job else None,
                "tokens": self.tokens.to_dict() if self.tokens else None, "level": self.level,
                "recommendation": self.recommendation,
                "recommended": self.recommended.to_dict() if self.recommended else None,
                "cheapest": self.cheapest.to_dict() if self.cheapest else None,
                "fastest": self.fastest.to_dict() if self.fastest else None,
                "options": [o.to_dict() for o in self.options],
                "unavailable": [u.__dict__ for u in self.unavailable],
                "measured_checks": [c.to_dict() for c in self.checks], "notes": list(self.notes),
                "stale_prices": list(self.stale_prices), "validation": self.validation,
                "by_framework": [dict(r) for r in self.by_framework],
                "noise_warnings": list(self.measurements.noise_warnings)}


def _phrase(o: JobOption, unit: tuple[str, float], level: float) -> str:
    return (f"{fmt_duration(o.time_s, unit)}, {fmt_usd(o.cost_usd)} ({level:.0%}: {fmt_usd(o.cost_lo_usd)} to "
            f"{fmt_usd(o.cost_hi_usd)})")


def memory_headroom_sentence(o: JobOption) -> str | None:
    """What the recommendation should say when its layout fits only by the memory model's point estimate."""
    if o.memory_margin is None or o.memory_safe_slowdown == 0.0:
        return None
    head = (f"Its layout uses {o.memory_per_accelerator_GiB:,.1f} of {o.capacity_GiB:,.1f} GiB per accelerator by the "
            f"memory model, whose held-out error on published peak memory is up to {o.memory_margin:.0%} (q90): "
            "whether it fits is not settled")
    if o.memory_safe_slowdown is None:
        return head + "; no layout of this job fits with that headroom."
    return head + (f"; the fastest layout with that headroom is {o.memory_safe_slowdown:.0%} slower, which raises "
                   "the time and the cost by as much.")


def recommend(job: Job, opts: Sequence[JobOption], level: float) -> tuple[JobOption | None, JobOption | None,
                                                                          JobOption | None, str]:
    """(recommended, cheapest, fastest within budget, sentence).

    Recommended: the cheapest option that meets the deadline and the budget, preferring modes that
    cannot be preempted (spot only when nothing else qualifies).
    """
    if not opts:
        return None, None, None, (f"No recommendation for {job.describe()}: no catalog node has a priced option that "
                                  "fits (see 'not available').")
    unit = time_unit([o.time_s for o in opts])
    ok = [o for o in opts if o.meets_deadline and o.within_budget]
    firm = [o for o in ok if o.pricing != "spot"]
    pool = firm or ok
    cheapest = min(opts, key=lambda o: (o.cost_usd, o.time_s))
    in_budget = [o for o in opts if o.within_budget]
    fastest = min(in_budget or opts, key=lambda o: (o.time_s, o.cost_usd))
    if not pool:
        limits = []
        if job.deadline_days is not None:
            limits.append(f"the {job.deadline_days:g}-day deadline")
        if job.budget_usd is not None:
            limits.append(f"the {fmt_usd(job.budget_usd)} budget")
        txt = (f"No option trains {job.describe()} within {' and '.join(limits)}. Fastest: {fastest.label}: "
               f"{_phrase(fastest, unit, level)}. Cheapest: {cheapest.label}: {_phrase(cheapest, unit, level)}.")
        return None, cheapest, fastest, txt
    rec = min(pool, key=lambda o: (o.cost_usd, o.time_s))
    p = rec.price
    where = ", ".join(x for x in (p.provider, p.instance.split(" (")[0].split(",")[0] if p.instance else "") if x)
    txt = (f"Train {job.describe()} on {rec.accelerators} x {rec.node} ({MODE_WORDS.get(rec.pricing, rec.pricing)}, "
           f"{where}, ${p.usd_per_accelerator_hour:,.2f} per accelerator-hour as of {p.as_of}"
           f"{', price older than 12 months' if p.stale else ''}): {_phrase(rec, unit, level)}")
    conds = []
    if job.deadline_days is not None:
        conds.append(f"within the {job.deadline_days:g}-day deadline")
    if job.budget_usd is not None:
        conds.append(f"within the {fmt_usd(job.budget_usd)} budget")
    firm_word = "non-preemptible option" if firm and len(firm) < len(ok) else "option"
    txt += (f", the cheapest {firm_word} {' and '.join(conds)}" if conds
            else (", the cheapest non-preemptible option" if firm_word != "option" else "")) + "."
    if cheapest is not rec:
        txt += f" Cheapest: {cheapest.label}: {_phrase(cheapest, unit, level)}"
        txt += " (spot: may be preempted)." if cheapest.pricing == "spot" else "."
    if fastest is not rec:
        txt += (f" Fastest{' within budget' if job.budget_usd is not None else ''}: {fastest.label}: "
                f"{_phrase(fastest, unit, level)}.")
    mem = memory_headroom_sentence(rec)
    if mem:
        txt += " " + mem
    others = [o for o in pool if o is not rec and o.node != rec.node]
    if others:
        txt += runner_up_sentence(rec, min(others, key=lambda x: x.cost_usd), level)
    return rec, cheapest, fastest, txt


def by_framework(job: Job, rec: JobOption, tokens: TokenBudget, catalog: Any, *,
                 today: date | str | None = None) -> list[dict[str, Any]]:
    """The recommended option (its node, count and pricing mode) priced once per framework family the validation
    fitted with published runs on the node's software stack (:func:`hwmodels.predict.predictor.families_on_stack`):
    each with its family's factors and the band a stated family carries, through :func:`job_options` as every other
    row. For a job that states no framework: how far its time and cost depend on the one it will run. Fastest
    first."""
    from dataclasses import replace

    from hwmodels.predict.predictor import families_on_stack, framework_efficiency_of

    out = []
    for fam in families_on_stack(catalog.get(rec.node).software_stack or ""):
        opts, _ = job_options(replace(job, framework=fam, accelerators=(rec.accelerators,), pricing=(rec.pricing,)),
                              tokens, catalog, candidates=[rec.node], today=today)
        o = next((x for x in opts if x.accelerators == rec.accelerators and x.pricing == rec.pricing), None)
        if o is None:
            continue
        eta, rows = framework_efficiency_of(fam)
        out.append({"framework": fam, "eta": eta, "published_runs": rows, "time_s": o.time_s,
                    "time_lo_s": o.time_lo_s, "time_hi_s": o.time_hi_s, "cost_usd": o.cost_usd,
                    "cost_lo_usd": o.cost_lo_usd, "cost_hi_usd": o.cost_hi_usd, "layout": dict(o.layout),
                    "meets_deadline": o.meets_deadline, "within_budget": o.within_budget})
    return sorted(out, key=lambda r: r["time_s"])


#: The predicted gap the report's validation sentence splits the held-out order record at (a round figure,
#: one of the validation's GAP_BINS edges).
RANK_NEAR_GAP = 0.10


def runner_up_sentence(rec: JobOption, o: JobOption, level: float, error_path: Any = None) -> str:
    """Whether the predictor's held-out record separates the recommended option from the cheapest option on
    another node type (``o``).

    Two options' own intervals overlapping says little about their order: the token budget's part is the same for
    both and cancels in the ratio, and the predictor's errors on two types are not independent. What decides it is
    how often, held out, two hardware types predicted as far apart were ordered right
    (:func:`hwmodels.predict.predictor.order_record`), at the quoted prices. Without that record in the validation
    file: the overlap of the two cost intervals, as before."""
    from hwmodels.predict.predictor import MIN_RANKING_PAIRS, has_validation_rows, order_record

    gap = o.cost_usd / rec.cost_usd - 1.0
    new = not (has_validation_rows(rec.node, error_path) and has_validation_rows(o.node, error_path))
    r = order_record(gap, new_type=new, path=error_path)
    if r is None:
        if o.cost_lo_usd <= rec.cost_hi_usd:
            return (f" The runner-up {o.label} ({fmt_usd(o.cost_usd)}) overlaps within the {level:.0%} intervals: "
                    "the data do not separate them.")
        return ""
    scope = "leave-one-hardware-out: one of the two has no published training runs" if new else "leave-one-out"
    record = (f"held out ({scope}), {r.ordered_right} of {r.pairs} pairs of hardware types predicted "
              f"{r.bin_label()} apart at the same model and scale were ordered right")
    if r.holds(level):
        return (f" Runner-up: {o.label}, {fmt_usd(o.cost_usd)}, predicted {gap:.0%} dearer; {record} "
                f"({r.rate:.0%}), so at the quoted prices the order stands.")
    few = f"; fewer than {MIN_RANKING_PAIRS} pairs are too few to say" if r.pairs < MIN_RANKING_PAIRS else ""
    return (f" The runner-up {o.label} ({fmt_usd(o.cost_usd)}) is predicted only {gap:.0%} dearer; {record} "
            f"({r.rate:.0%} against the {level:.0%} asked{few}): the data do not separate them.")


def _scaling_runs(m: Measurements) -> list[tuple[float, float, float]]:
    """(n_params, tokens, final eval loss) of the plan's own transformer runs, for a fitted scaling law."""
    from hwmodels.predict import from_workload
    from hwmodels.predict.spec import ModelSpec

    out = []
    for w in m.workloads:
        curve = w.get("loss_curve") or []
        if w.get("workload") != "transformer_lm" or w.get("status") not in ("ok", "timeout") or not curve:
            continue
        last = curve[-1]
        tok, loss = _num(last.get("tokens")), _num(last.get("loss"))
        try:
            spec = from_workload("transformer_lm", w.get("params") or {})
        except ValueError:
            continue
        if tok and loss and isinstance(spec, ModelSpec):
            out.append((float(spec.n_params()), tok, loss))
    return out


def analyze(*, store: Store | str | Path | None = None, plan: str | None = None, job: Job | Mapping | None = None,
            catalog_dir: str | Path | None = None, prices: str | Path | None = None,
            candidates: Sequence[str] | None = None, measured_node: str | None = None,
            today: date | str | None = None, level: float | None = None) -> Analysis:
    """The whole pipeline (module docstring). ``job`` may be a mapping (a plan's ``job:`` section)."""
    st = store if isinstance(store, Store) else Store(store)
    jb = parse_job(job) if job is not None and not isinstance(job, Job) and job else (job or None)
    lvl = level if level is not None else (jb.level if jb else LEVEL)
    cat = load_catalog(catalog_dir, prices)
    m = load_measurements(st, plan)
    notes: list[str] = []
    try:
        mnode = resolve_measured_node(measured_node, cat)
    except (KeyError, ValueError, OSError) as exc:
        notes.append(f"measured node: {exc}")
        mnode = None
    if mnode is None:  # the fingerprint matches no catalog entry: the node the plan's cells ran as
        from collections import Counter

        from hwcore.records import CellRecord, read

        ran = Counter(c.node for c in read(st, CellRecord, plan=plan) if c.node in cat and not c.is_report)
        if ran:
            mnode = cat.get(ran.most_common(1)[0][0])
            notes.append(f"measured node: {mnode.id}, the plan's node its cells ran as (this machine's fingerprint "
                         "matches no catalog entry)")

    def prefer(rows: Sequence[dict[str, Any]], notebook: str) -> list[dict[str, Any]]:
        mine = [r for r in rows if r.get("notebook") == notebook]
        return mine or list(rows)

    sections: dict[str, dict[str, Any]] = {}
    for key, fn in (("roofline", lambda: roofline_section(m.kernels, node=mnode)),
                    ("comms", lambda: comms_section(m.collectives)),
                    ("scaling", lambda: scaling_section(prefer(m.workloads, "03_scaling"))),
                    ("convergence", lambda: convergence_section(prefer(m.workloads, "04_convergence"), level=lvl))):
        try:
            sections[key] = fn()
        except (ValueError, ArithmeticError, KeyError) as exc:  # one failing fit must not lose the others; said
            warnings.warn(f"{key}: fit failed: {type(exc).__name__}: {exc}", stacklevel=2)
            sections[key] = {"ok": False, "summary": f"{key}: fit failed: {type(exc).__name__}: {exc}",
                             "points": [], "curve": [], "ceilings": [], "fit": {}}
    checks = measured_checks(mnode, m, level=lvl) if mnode is not None else []
    noise_part = None
    if checks:
        c = max(checks, key=lambda c: c.repeats)
        noise_part = IntervalPart(name="measured throughput noise", lo_factor=c.measured_step_s / c.measured_lo_s,
                                  hi_factor=c.measured_hi_s / c.measured_step_s, source=c.measured_how)
    opts: list[JobOption] = []
    missing: list[Unavailable] = []
    tokens = None
    if jb is not None:
        tokens = job_tokens(jb, _scaling_runs(m))
        notes.extend(tokens.notes)
        opts, missing = job_options(jb, tokens, cat, candidates=candidates, today=today,
                                    measured_node=mnode.id if mnode else None, throughput_noise=noise_part)
        notes.extend(job_regime_notes(jb, sorted({o.accelerators for o in opts}), sorted({o.node for o in opts})))
        if jb.framework is None:
            from hwmodels.predict.predictor import framework_spread_note
            spread = framework_spread_note()
            if spread:
                notes.append(f"predictor: {spread}")
        rec, cheapest, fastest, sentence = recommend(jb, opts, lvl)
    else:
        rec = cheapest = fastest = None
        sentence = ("No recommendation: the plan declares no training job (add a 'job:' section: model, tokens or "
                    "target_loss, accelerators or deadline_days, pricing).")
    used = {(o.node, o.pricing) for o in opts}
    stale = tuple(f"{n} {md}: as of {cat.get(n).pricing[md].as_of or 'undated'}" for n, md in sorted(used)
                  if cat.get(n).pricing[md].stale(today))
    from hwmodels.predict.predictor import ERROR_FILE, family_band_ratio, loho_section, stated_prior_band

    err = {}
    try:
        err = json.loads(Path(ERROR_FILE).read_text())
    except (OSError, ValueError):
        notes.append(f"predictor validation: {ERROR_FILE.name} not readable; the predictor's default +/-25% applies")
    how, sec = loho_section(err)
    ov = (sec or err.get("cross_validation") or {}).get("overall") or {}
    how = how or "leave-one-hardware-out"
    validation = (f"predictor held-out error ({how}, {ERROR_FILE.name}): median "
                  f"{ov.get('median', float('nan')):.0%}, 90th percentile {ov.get('q90', float('nan')):.0%}"
                  if ov else "predictor validation error: not available")
    band = err.get("never_seen_band") or {}
    kb = err.get("known_hardware_band") or {}
    if ov and isinstance(kb.get("prior_band_rel"), (int, float)):
        cov = (kb.get("held_out_source_coverage") or {}).get("mean_group_covered")
        bands = [v["band_rel"] for v in (kb.get("per_hardware") or {}).values()
                 if isinstance(v.get("band_rel"), (int, float))]
        validation += (f"; each projected row carries its hardware's 90% band, "
                       + (f"+/-{min(bands):.0%} to +/-{max(bands):.0%} " if bands else "")
                       + f"(a hardware type without published rows: +/-{kb['prior_band_rel']:.0%}), sized so that "
                       f"rows of one publication count once"
                       + (f"; with each publication held out in turn, such bands held {cov:.0%} of its rows"
                          if isinstance(cov, (int, float)) else ""))
    elif ov and isinstance(band.get("band_rel"), (int, float)):
        cov = (band.get("coverage") or {}).get("mean_hardware_covered")
        validation += (f"; a hardware type without published rows carries +/-{band['band_rel']:.0%} "
                       f"(q{band.get('quantile', 0) * 100:g}"
                       + (f", which held {cov:.0%} of a held-out type's rows" if isinstance(cov, (int, float)) else "")
                       + ")")
    # each prospective set scored as the predictor was when its rows were read (``scored_with``)
    scored = [(st.get("scored_with") or "framework_unknown", r) for k, st in (err.get("prospective") or {}).items()
              if k != "method" for r in (st.get("rows") or {}).values()]
    pro = [abs(r[w]) for w, r in scored if isinstance(r.get(w), (int, float))]
    n_stack = sum(1 for w, r in scored if w == "framework_unknown_stack" and isinstance(r.get(w), (int, float)))
    if ov and pro:
        how_scored = ("scored without the software-stack factor, added after they were read" if not n_stack else
                      f"the {n_stack} read after the software-stack factor was added scored with it, the others "
                      "without")
        validation += (f"; on {len(pro)} published runs read after the step model that predicts them was committed "
                       f"({how_scored}): median {statistics.median(pro):.0%}, worst {max(pro):.0%}")
        pc = err.get("prospective_coverage") or {}
        if isinstance(pc.get("inside"), int) and pc.get("n"):
            validation += (f", {pc['inside']} of {pc['n']} inside the {pc.get('level', LEVEL):.0%} band they "
                           f"carried when read")
    fs = (err.get("framework_stated_band") or {}).get("known") or {}
    if jb is not None and jb.framework and isinstance(fs.get("prior_band_rel"), (int, float)):
        fam = ((err.get("framework_efficiency") or {}).get("per_family") or {}).get(jb.framework) or {}
        ratio, _ = family_band_ratio(err, jb.framework)
        bands = [v["band_rel"] * ratio for v in (fs.get("per_hardware") or {}).values()
                 if isinstance(v.get("band_rel"), (int, float))]
        cov = (fs.get("held_out_source_coverage") or {}).get("mean_group_covered")
        eta = fam.get("eta", float("nan"))
        validation += (f"; the job states its framework ({jb.framework}): every row is priced with that family's "
                       f"factors fitted on its {fam.get('rows', '?')} published runs (eta {eta:.2f}) "
                       f"and no software-stack factor, and carries the bands validated that way, "
                       + (f"+/-{min(bands):.0%} to +/-{max(bands):.0%} " if bands else "")
                       + (f"(x{ratio:.2f}: {jb.framework}'s factors carried worse to other hardware than those bands "
                          f"allow; " if ratio > 1 else "(")
                       + f"a hardware type without published rows: +/-{stated_prior_band(err, jb.framework):.0%}, no "
                         f"narrower than with the framework unknown)"
                       + (f", which held {cov:.0%} of a held-out publication's rows" if isinstance(cov, (int, float))
                          else ""))
        pfs = (err.get("prospective_coverage") or {}).get("framework_stated") or {}
        if isinstance(pfs.get("inside"), int) and pfs.get("n"):
            validation += (f"; of {pfs['n']} published runs predicted with their framework stated before they were "
                           f"read, {pfs['inside']} ({pfs['inside'] / pfs['n']:.0%}) fell inside that band, which claims "
                           f"{fs.get('level', LEVEL):.0%}")
        validation += " (the figures above are those of a framework-unknown prediction)"
    rr = ((err.get("ranking_reliability") or {}).get("new") or {}).get("bins") or []
    if ov and rr:
        near = [b for b in rr if b["gap_lo"] < RANK_NEAR_GAP]
        far = [b for b in rr if b["gap_lo"] >= RANK_NEAR_GAP]
        n_near, r_near = sum(b["pairs"] for b in near), sum(b["ordered_right"] for b in near)
        n_far, r_far = sum(b["pairs"] for b in far), sum(b["ordered_right"] for b in far)
        if n_near and n_far:
            validation += (f"; which of two hardware types is faster at the same model and scale, held out with the "
                           f"hardware unseen: right in {r_far} of {n_far} published pairs predicted "
                           f"{RANK_NEAR_GAP:.0%} or more apart, {r_near} of {n_near} closer than that (the runner-up "
                           "sentence reads the record of its own gap)")
    spread = err.get("published_spread") or {}
    if ov and spread.get("pairs"):
        top = spread["pairs"][0]
        validation += (f"; published runs the predictor's inputs cannot tell apart differ by up to "
                       f"{top['ratio']:.2f}x (software release, compiler, slices), so no prediction from these "
                       f"inputs has a worst error under {spread['floor']:.0%}")
    from hwmodels.catalog import default_dir
    from hwmodels.cost import break_even_utilization

    be = []
    for nid in dict.fromkeys(o.node for o in opts):
        be.extend(break_even_utilization(cat.get(nid)))
    fw = by_framework(jb, rec, tokens, cat, today=today) if jb is not None and rec is not None and not jb.framework \
        else []
    return Analysis(break_even=tuple(be), by_framework=tuple(fw), job=jb, tokens=tokens, options=tuple(opts), unavailable=tuple(missing), recommended=rec,
                    cheapest=cheapest, fastest=fastest, recommendation=sentence, sections=sections,
                    checks=tuple(checks), measurements=m, measured_node=mnode.id if mnode else None, level=lvl,
                    notes=tuple(notes), stale_prices=stale, validation=validation,
                    catalog_dir=str(catalog_dir or default_dir()), prices_file=str(prices) if prices else None)


__all__ = ["analyze", "Analysis", "JobOption", "IntervalPart", "PriceInfo", "Unavailable", "MeasuredCheck",
           "Measurements", "load_measurements", "load_catalog", "job_options", "recommend", "pareto_front", "by_framework",
           "combine", "measured_checks", "roofline_section", "comms_section", "scaling_section",
           "convergence_section", "kernel_table", "workload_table", "breakdown_rows", "loss_rows",
           "resolve_measured_node", "fmt_usd", "fmt_duration", "fmt_rate", "fmt_count", "time_unit", "LEVEL"]
