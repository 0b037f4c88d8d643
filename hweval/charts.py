"""Altair charts of the report (and of the notebooks that show the same views).

Every function takes plain rows (lists of dicts or DataFrames) and returns an
``alt.Chart`` or ``None`` when there is nothing to draw. Charts only draw;
the numbers come from the models in :mod:`hwmodels` via :mod:`hweval.report`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import altair as alt
import pandas as pd

WIDTH = 520
HEIGHT = 300


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


def roofline(points, ceilings, *, title: str = "Roofline (measured)") -> alt.Chart | None:
    """Log-log roofline: ``ceilings`` rows {intensity, flops_per_s, ceiling} as lines, ``points``
    rows {intensity, flops_per_s, kernel, efficiency} as measured points."""
    pts = _finite(_df(points), ["intensity", "flops_per_s"])
    ceil = _finite(_df(ceilings), ["intensity", "flops_per_s"])
    if pts.empty and ceil.empty:
        return None
    x = alt.X("intensity:Q", scale=alt.Scale(type="log"), title="arithmetic intensity (FLOP/byte)")
    y = alt.Y("flops_per_s:Q", scale=alt.Scale(type="log"), title="FLOP/s")
    layers = []
    if not ceil.empty:
        layers.append(
            alt.Chart(ceil).mark_line(strokeWidth=2).encode(
                x=x, y=y, color=alt.Color("ceiling:N", title="ceiling"), strokeDash="ceiling:N"
            )
        )
    if not pts.empty:
        tips = [c for c in ("kernel", "params", "intensity", "flops_per_s", "efficiency") if c in pts.columns]
        layers.append(
            alt.Chart(pts).mark_point(filled=True, size=60).encode(
                x=x, y=y, shape=alt.Shape("kernel:N", title="kernel"), tooltip=tips
            )
        )
    return alt.layer(*layers).properties(title=title, width=WIDTH, height=HEIGHT)


def band_curve(points, curve, *, x: str, y: str, x_title: str, y_title: str, title: str,
               series: str | None = None, log_x: bool = False, log_y: bool = False,
               target: float | None = None) -> alt.Chart | None:
    """Measured ``points`` {x, y[, series]}, a fitted ``curve`` {x, y, lo, hi[, series]} with its interval band."""
    pts = _df(points)
    cur = _df(curve)
    if pts.empty and cur.empty:
        return None
    xs = alt.Scale(type="log") if log_x else alt.Scale(zero=False)
    ys = alt.Scale(type="log") if log_y else alt.Scale(zero=False)
    X = alt.X(f"{x}:Q", title=x_title, scale=xs)
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
                        x=X, y=alt.Y("lo:Q", title=y_title, scale=ys), y2="hi:Q", color=color
                    )
                )
        layers.append(alt.Chart(cur).mark_line(strokeDash=[6, 3]).encode(
            x=X, y=alt.Y(f"{y}:Q", title=y_title, scale=ys), color=color))
    if not pts.empty:
        layers.append(alt.Chart(pts).mark_point(filled=True, size=50).encode(
            x=X, y=alt.Y(f"{y}:Q", title=y_title, scale=ys), color=color,
            tooltip=[c for c in pts.columns if c in (x, y, series or "")]))
    if target is not None:
        layers.append(alt.Chart(pd.DataFrame({"target": [target]})).mark_rule(color="red").encode(y="target:Q"))
    return alt.layer(*layers).properties(title=title, width=WIDTH, height=HEIGHT)


def cost_bars(rows, *, title: str = "Cost per convergence (USD, interval)") -> alt.Chart | None:
    """Horizontal bars of ``cost_usd`` per ``label`` with ``lo``..``hi`` error bars; colour = measured/projected."""
    df = _df(rows)
    if df.empty:
        return None
    df = df[pd.to_numeric(df["cost_usd"], errors="coerce").notna()]
    if df.empty:
        return None
    order = list(df.sort_values("cost_usd")["label"])
    y = alt.Y("label:N", sort=order, title=None)
    # costs span orders of magnitude (log axis), and a log axis has no zero: bars start at a floor
    # a factor 3 below the smallest value shown
    lows = pd.to_numeric(df.get("lo", df["cost_usd"]), errors="coerce").fillna(df["cost_usd"])
    df = df.assign(floor=float(min(lows.min(), df["cost_usd"].min())) / 3.0)
    bars = alt.Chart(df).mark_bar().encode(
        x=alt.X("floor:Q", title="USD to reach the target", scale=alt.Scale(type="log")),
        x2="cost_usd:Q",
        y=y,
        color=alt.Color("basis:N", title="basis"),
        tooltip=[c for c in ("node", "pricing", "basis", "time_to_target_s", "cost_usd", "lo", "hi") if c in df],
    )
    layers = [bars]
    if {"lo", "hi"} <= set(df.columns):
        err = df.dropna(subset=["lo", "hi"])
        if not err.empty:
            layers.append(alt.Chart(err).mark_rule(color="black").encode(x="lo:Q", x2="hi:Q", y=y))
    return alt.layer(*layers).properties(title=title, width=WIDTH, height=max(120, 22 * len(df)))


def pareto(rows, *, title: str = "Time vs cost (Pareto front)") -> alt.Chart | None:
    """Scatter of time-to-target vs cost; rows with ``pareto`` True joined by the front line."""
    df = _finite(_df(rows), ["time_to_target_s", "cost_usd"])
    if df.empty:
        return None
    df = df.assign(hours=df["time_to_target_s"] / 3600.0)
    x = alt.X("hours:Q", title="time to target (h)", scale=alt.Scale(type="log"))
    y = alt.Y("cost_usd:Q", title="cost (USD)", scale=alt.Scale(type="log"))
    pts = alt.Chart(df).mark_point(filled=True, size=70).encode(
        x=x, y=y, color=alt.Color("pareto:N", title="on front"), shape=alt.Shape("basis:N", title="basis"),
        tooltip=[c for c in ("label", "hours", "cost_usd", "basis") if c in df],
    )
    layers = [pts]
    front = df[df["pareto"] == True].sort_values("hours")  # noqa: E712 - pandas mask
    if len(front) > 1:
        layers.append(alt.Chart(front).mark_line(color="black").encode(x=x, y=y))
    layers.append(alt.Chart(df).mark_text(dx=6, dy=-6, align="left", fontSize=9).encode(x=x, y=y, text="label:N"))
    return alt.layer(*layers).properties(title=title, width=WIDTH, height=HEIGHT)


def sensitivity(rows, *, title: str = "Sensitivity of the best option's cost") -> alt.Chart | None:
    """Tornado bars: rows {input, low_usd, high_usd}."""
    df = _df(rows)
    if df.empty:
        return None
    return alt.Chart(df).mark_bar().encode(
        x=alt.X("low_usd:Q", title="cost (USD) with the input at its low / high value"),
        x2="high_usd:Q",
        y=alt.Y("input:N", sort="-x", title=None),
    ).properties(title=title, width=WIDTH, height=max(100, 24 * len(df)))


def breakdown(rows, *, title: str = "Step-time breakdown (s per step)") -> alt.Chart | None:
    """Stacked bars: rows {workload, phase, seconds}."""
    df = _df(rows)
    if df.empty:
        return None
    return alt.Chart(df).mark_bar().encode(
        x=alt.X("seconds:Q", title="seconds"), y=alt.Y("workload:N", title=None),
        color=alt.Color("phase:N", title="phase"), tooltip=["workload", "phase", "seconds"],
    ).properties(title=title, width=WIDTH, height=max(80, 30 * df["workload"].nunique()))
