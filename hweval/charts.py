"""Altair charts of the report (and of the notebooks that show the same views).

Every function takes plain rows (lists of dicts or DataFrames) and returns an
``alt.Chart`` or ``None`` when there is nothing to draw. Charts only draw;
the numbers come from :mod:`hweval.analysis`. Axis units are human (TFLOP/s,
GB/s, days, USD); each chart's caption is written by the report, once.

:func:`enable_inline` makes notebooks show charts offline: altair's default
``html`` renderer loads vega from a CDN and shows a blank cell without a
network; the ``hweval`` renderer registered here renders each chart to SVG
with vl-convert (no JavaScript, no network) and also carries the Vega-Lite
spec, so JupyterLab, executed notebooks (papermill) and nbconvert all show it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import altair as alt
import pandas as pd

WIDTH = 520
HEIGHT = 300


def _inline_renderer(spec: dict, **_: Any) -> dict[str, str]:
    import vl_convert as vlc

    return {"image/svg+xml": vlc.vegalite_to_svg(spec), "text/plain": f"<chart: {spec.get('title', '')}>"}


def enable_inline() -> None:
    """Render charts in notebooks as inline SVG (vl-convert: offline, works in executed notebooks)."""
    if "hweval" not in alt.renderers.names():
        alt.renderers.register("hweval", _inline_renderer)
    alt.renderers.enable("hweval")


def _df(rows: Sequence[dict[str, Any]] | pd.DataFrame | None) -> pd.DataFrame:
    if rows is None:
        return pd.DataFrame()
    df = rows.copy() if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    return df


def _finite(df: pd.DataFrame, cols: Sequence[str]) -> pd.DataFrame:
    if df.empty:
        return df
    keep = pd.Series(True, index=df.index)
    for c in cols:
        v = pd.to_numeric(df[c], errors="coerce")
        keep &= v.map(lambda x: x is not None and math.isfinite(x) and x > 0)
    return df[keep]


def roofline(points, ceilings, *, title: str = "Roofline: measured kernels vs fitted and datasheet ceilings") -> alt.Chart | None:
    """Log-log roofline: ``ceilings`` rows {intensity, flops_per_s, ceiling} as lines, ``points``
    rows {intensity, flops_per_s, kernel, memory} as measured points (cache-resident vs DRAM by shape)."""
    pts = _finite(_df(points), ["intensity", "flops_per_s"])
    ceil = _finite(_df(ceilings), ["intensity", "flops_per_s"])
    if pts.empty and ceil.empty:
        return None
    x = alt.X("intensity:Q", scale=alt.Scale(type="log"), title="arithmetic intensity (FLOP per byte)")
    y = alt.Y("flops_per_s:Q", scale=alt.Scale(type="log"), title="FLOP/s (G = 10^9, T = 10^12)",
              axis=alt.Axis(format="~s"))
    layers = []
    if not ceil.empty:
        layers.append(alt.Chart(ceil).mark_line(strokeWidth=2).encode(
            x=x, y=y, color=alt.Color("ceiling:N", title="ceiling", legend=alt.Legend(labelLimit=320)),
            strokeDash=alt.StrokeDash("ceiling:N", legend=None)))
    if not pts.empty:
        if "memory" not in pts.columns:
            pts = pts.assign(memory="DRAM")
        tips = [c for c in ("kernel", "dtype", "memory", "params", "intensity", "flops_per_s") if c in pts.columns]
        layers.append(alt.Chart(pts).mark_point(filled=True, size=60).encode(
            x=x, y=y, shape=alt.Shape("memory:N", title="working set"),
            fill=alt.Fill("kernel:N", title="kernel"), tooltip=tips))
    return alt.layer(*layers).resolve_scale(color="independent").properties(title=title, width=WIDTH, height=HEIGHT)


def band_curve(points, curve, *, x: str, y: str, x_title: str, y_title: str, title: str,
               series: str | None = None, log_x: bool = False, log_y: bool = False,
               target: float | None = None, x_format: str | None = None,
               y_format: str | None = None) -> alt.Chart | None:
    """Measured ``points`` {x, y[, series]}, a fitted ``curve`` {x, y, lo, hi[, series]} with its interval band."""
    pts = _df(points)
    cur = _df(curve)
    if pts.empty and cur.empty:
        return None
    xs = alt.Scale(type="log") if log_x else alt.Scale(zero=False)
    ys = alt.Scale(type="log") if log_y else alt.Scale(zero=False)
    X = alt.X(f"{x}:Q", title=x_title, scale=xs, axis=alt.Axis(format=x_format) if x_format else alt.Undefined)
    yax = alt.Axis(format=y_format) if y_format else alt.Undefined
    color = alt.Color(f"{series}:N", title=series) if series else alt.value("#1f77b4")
    layers = []
    if not cur.empty:
        if {"lo", "hi"} <= set(cur.columns):
            band = cur.dropna(subset=["lo", "hi"])
            if log_y:  # a log axis cannot show a band reaching 0 or below
                band = band[(band["lo"] > 0) & (band["hi"] > 0)]
            if not band.empty:
                layers.append(
                    alt.Chart(band).mark_area(opacity=0.25).encode(
                        x=X, y=alt.Y("lo:Q", title=y_title, scale=ys, axis=yax), y2="hi:Q", color=color
                    )
                )
        layers.append(alt.Chart(cur).mark_line(strokeDash=[6, 3]).encode(
            x=X, y=alt.Y(f"{y}:Q", title=y_title, scale=ys, axis=yax), color=color))
    if not pts.empty:
        layers.append(alt.Chart(pts).mark_point(filled=True, size=50).encode(
            x=X, y=alt.Y(f"{y}:Q", title=y_title, scale=ys, axis=yax), color=color,
            tooltip=[c for c in pts.columns if c in (x, y, series or "")]))
    if target is not None:
        layers.append(alt.Chart(pd.DataFrame({"target": [target]})).mark_rule(color="red").encode(y="target:Q"))
    return alt.layer(*layers).properties(title=title, width=WIDTH, height=HEIGHT)


def cost_bars(rows, *, title: str = "Cost to train, best count per node and pricing mode") -> alt.Chart | None:
    """Horizontal bars of ``cost_usd`` per ``label`` with ``cost_lo_usd``..``cost_hi_usd`` interval rules."""
    df = _finite(_df(rows), ["cost_usd"])
    if df.empty:
        return None
    order = list(df.sort_values("cost_usd")["label"])
    y = alt.Y("label:N", sort=order, title=None, axis=alt.Axis(labelLimit=320))
    # costs span orders of magnitude (log axis, no zero): bars start a factor 3 below the smallest value shown
    lows = pd.to_numeric(df["cost_lo_usd"], errors="coerce") if "cost_lo_usd" in df else df["cost_usd"]
    df = df.assign(floor=float(min(lows.min(), df["cost_usd"].min())) / 3.0)
    bars = alt.Chart(df).mark_bar().encode(
        x=alt.X("floor:Q", title="USD (log scale)", scale=alt.Scale(type="log"), axis=alt.Axis(format="$,.0f")),
        x2="cost_usd:Q", y=y, color=alt.Color("pricing:N", title="pricing"),
        tooltip=[c for c in ("label", "cost", "interval", "time") if c in df])
    layers = [bars]
    if {"cost_lo_usd", "cost_hi_usd"} <= set(df.columns):
        layers.append(alt.Chart(df).mark_rule(color="black").encode(x="cost_lo_usd:Q", x2="cost_hi_usd:Q", y=y))
    return alt.layer(*layers).properties(title=title, width=WIDTH, height=max(120, 20 * len(df)))


def pareto(rows, *, unit: tuple[str, float] = ("days", 86400.0),
           title: str = "Time vs cost of every option (Pareto front joined)") -> alt.Chart | None:
    """Scatter of time to train vs cost; the front joined and labelled (labels alternate above/below so
    neighbours do not overlap); other options unlabelled (their names are in the tooltip and the table)."""
    df = _finite(_df(rows), ["time_s", "cost_usd"])
    if df.empty:
        return None
    name, f = unit
    df = df.assign(t=df["time_s"] / f)
    x = alt.X("t:Q", title=f"time to train ({name}, log scale)", scale=alt.Scale(type="log"))
    y = alt.Y("cost_usd:Q", title="cost (USD, log scale)", scale=alt.Scale(type="log"),
              axis=alt.Axis(format="$,.0f"))
    pts = alt.Chart(df).mark_point(filled=True, size=50, opacity=0.6).encode(
        x=x, y=y, color=alt.Color("node:N", title="node"), shape=alt.Shape("pricing:N", title="pricing"),
        tooltip=[c for c in ("label", "time", "cost") if c in df])
    layers = [pts]
    front = df[df["pareto"] == True].sort_values("t").reset_index(drop=True)  # noqa: E712 - pandas mask
    if len(front) > 1:
        layers.append(alt.Chart(front).mark_line(color="black").encode(x=x, y=y))
    if not front.empty:
        front = front.assign(short=[f"{a} x {n}" + (f" {p}" if p != "on_demand" else "")
                                    for a, n, p in zip(front["accelerators"], front["node"], front["pricing"],
                                                       strict=True)])
        up, down = front.iloc[::2], front.iloc[1::2]
        for part, dy, base in ((up, -9, "bottom"), (down, 12, "top")):
            if not part.empty:
                layers.append(alt.Chart(part).mark_text(dx=4, dy=dy, align="left", baseline=base,
                                                        fontSize=10).encode(x=x, y=y, text="short:N"))
    return alt.layer(*layers).properties(title=title, width=WIDTH, height=HEIGHT + 40)


def interval_parts(rows, *, title: str = "What the recommended option's cost interval is made of") -> alt.Chart | None:
    """Bars from -minus_pct to +plus_pct per interval part (rows {name, minus_pct, plus_pct})."""
    df = _df(rows)
    if df.empty:
        return None
    df = df.assign(lo=-df["minus_pct"], hi=df["plus_pct"])
    return alt.Chart(df).mark_bar().encode(
        x=alt.X("lo:Q", title="percent of the point cost (at the stated level)"), x2="hi:Q",
        y=alt.Y("name:N", title=None, axis=alt.Axis(labelLimit=320)), tooltip=["name", "source"],
    ).properties(title=title, width=WIDTH, height=max(100, 26 * len(df)))


def breakdown(rows, *, title: str = "Step-time breakdown (s per step)") -> alt.Chart | None:
    """Stacked bars: rows {workload, phase, seconds}."""
    df = _df(rows)
    if df.empty:
        return None
    return alt.Chart(df).mark_bar().encode(
        x=alt.X("seconds:Q", title="seconds"), y=alt.Y("workload:N", title=None),
        color=alt.Color("phase:N", title="phase"), tooltip=["workload", "phase", "seconds"],
    ).properties(title=title, width=WIDTH, height=max(80, 30 * df["workload"].nunique()))
