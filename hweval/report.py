"""The procurement report: rendering only. :func:`hweval.analysis.analyze` computes; this writes HTML.

:func:`build_report` runs the analysis for a plan (its declared ``job``, its
stored measurements, the catalog directory and a buyer's price file) and
:func:`render` writes one self-contained ``report.html`` (vega, vega-lite and
vega-embed inlined from vl-convert's bundle: no network, no http(s) script
source) plus ``charts/<name>.svg``/``.png`` and ``options.csv``. Every number
shown comes from the :class:`~hweval.analysis.Analysis` object; human units
throughout (:func:`hweval.analysis.fmt_usd` and friends), one time unit per
table and chart, one caption per chart, and the interval level stated.
"""

from __future__ import annotations

import html as _html
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from hwcore.store import Store
from hweval import analysis as A
from hweval.job import COUNT_LADDER, LADDER_REFERENCE


@dataclass(frozen=True)
class ReportOutput:
    html: Path
    analysis: A.Analysis
    charts: dict[str, list[Path]] = field(default_factory=dict)
    recommendation: str = ""

    @property
    def ranking(self) -> pd.DataFrame:
        return pd.DataFrame([o.to_dict() for o in self.analysis.options])


_CSS = """
body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222;line-height:1.4}
h1{border-bottom:2px solid #444}h2{margin-top:2em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;font-size:13px;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f0f0f0;text-align:center;vertical-align:bottom}td{text-align:left}td.num{text-align:right}
.rec{background:#eef6ee;border-left:4px solid #3a3;padding:0.8em 1em;font-size:16px}
.note{color:#555;font-size:13px}.warn{color:#a50}.caption{color:#444;font-size:13px;margin:0.2em 0 1.5em 0;max-width:900px}
.chart{margin-top:0.5em}details{margin:1em 0}
"""


def _esc(x: Any) -> str:
    return _html.escape(str(x))


def _table(rows: Sequence[Mapping[str, Any]], cols: Sequence[str] | None = None) -> str:
    if not rows:
        return "<p class='note'>none</p>"
    cols = list(cols or rows[0].keys())
    head = "".join(f"<th>{_esc(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(_td(r.get(c, ""), i) for i, c in enumerate(cols)) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_NUMERIC = re.compile(r"^[-+$<]?\s?[\d.,]+")


def _td(v: Any, col: int = 1) -> str:
    text = str(v)
    num = col > 0 and _NUMERIC.match(text) and len(text) < 28
    return f"<td class='num'>{_esc(text)}</td>" if num else f"<td>{_esc(text)}</td>"


def _layout(lay: Mapping[str, Any]) -> str:
    parts = [f"DP {lay.get('dp')}"]
    if lay.get("tp", 1) > 1:
        parts.append(f"TP {lay['tp']}")
    if lay.get("pp", 1) > 1:
        parts.append(f"PP {lay['pp']}" + (f"x{lay['interleave']}" if lay.get("interleave", 1) > 1 else ""))
    if lay.get("cp", 1) > 1:
        parts.append(f"CP {lay['cp']}")
    parts.append(str(lay.get("sharding")))
    parts.append(f"micro-batch {lay.get('micro_batch')}")
    rc = lay.get("activation_checkpointing") or lay.get("recompute")
    if rc and rc != "none":
        share = lay.get("recompute_layers", 1.0)
        parts.append(f"{rc} recompute" + (f" of {share:.0%} of the layers" if share < 1.0 else ""))
    return ", ".join(parts)


def _instance(text: str) -> str:
    return text.split(" (")[0].split(",")[0]


def _headroom(o: A.JobOption) -> str:
    """Whether the layout fits with the memory model's held-out error as headroom (analysis.JobOption)."""
    if o.memory_margin is None:
        return "n/a"
    if o.memory_safe_slowdown == 0.0:
        return f"yes (+{o.memory_margin:.0%})"
    if o.memory_safe_slowdown is None:
        return "no: fit not settled"
    return f"no: +{o.memory_safe_slowdown:.0%} time for a layout with it"


def option_row(o: A.JobOption, unit: tuple[str, float], level: float) -> dict[str, str]:
    return {
        "Option": o.label,
        "Best layout (predictor)": _layout(o.layout),
        "Step time": A.fmt_duration(o.step_time_s, ("s", 1.0)),
        "Tokens/s per accelerator": f"{o.tokens_per_s / o.accelerators:,.0f}",
        "Predicted MFU": f"{o.mfu:.0%}",
        f"Time to train ({unit[0]})": f"{o.time_s / unit[1]:,.1f}",
        "Cost": A.fmt_usd(o.cost_usd),
        f"Cost, {level:.0%} interval": f"{A.fmt_usd(o.cost_lo_usd)} to {A.fmt_usd(o.cost_hi_usd)}",
        "Energy (MWh)": f"{o.energy_mwh:,.1f}",
        "Price per accelerator-hour (source, as of)": (
            f"${o.price.usd_per_accelerator_hour:,.2f} ({o.price.provider}"
            + (f" {_instance(o.price.instance)}" if o.price.instance else "")
            + f", {o.price.as_of}{', stale' if o.price.stale else ''})"),
        "Memory headroom": _headroom(o),
        "Pareto front": "yes" if o.pareto else "",
        "Meets deadline": "yes" if o.meets_deadline else "no",
    }


def write_html(path: Path, *, title: str, blocks: list[tuple[str, str]], specs: dict[str, dict]) -> None:
    """One file: inline CSS, vl-convert's JS bundle inline, one ``vegaEmbed`` per chart spec."""
    import vl_convert as vlc

    bundle = vlc.javascript_bundle()
    assert "</script" not in bundle.lower()
    body = [f"<div id='chart-{c}' class='chart' data-chart='{c}'></div>" if k == "chart" else c for k, c in blocks]
    embeds = "\n".join(
        f"vegaEmbed('#chart-{name}', {json.dumps(spec)}, {{renderer: 'svg', actions: false}})"
        f".catch(e => {{document.getElementById('chart-{name}').innerText = 'chart failed: ' + e;}});"
        for name, spec in specs.items())
    doc = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{_esc(title)}</title>"
           f"<style>{_CSS}</style><script>{bundle}</script></head><body>"
           + "\n".join(body) + f"<script>{embeds}</script></body></html>")
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(doc)
    os.replace(tmp, path)


def _save_chart(chart, name: str, charts_dir: Path) -> tuple[dict, list[Path]]:
    import vl_convert as vlc

    spec = chart.to_dict()
    svg, png = charts_dir / f"{name}.svg", charts_dir / f"{name}.png"
    svg.write_text(vlc.vegalite_to_svg(spec))
    png.write_bytes(vlc.vegalite_to_png(spec, scale=2))
    return spec, [svg, png]


def charts_of(an: A.Analysis) -> dict[str, tuple[Any, str]]:
    """name -> (altair chart or None, its one caption). Notebook 05 displays these too."""
    from hweval import charts

    lvl = f"{an.level:.0%}"
    unit = A.time_unit([o.time_s for o in an.options])
    rows = []
    for o in an.options:
        d = o.to_dict()
        d.update(time=A.fmt_duration(o.time_s, unit), cost=A.fmt_usd(o.cost_usd),
                 interval=f"{A.fmt_usd(o.cost_lo_usd)} to {A.fmt_usd(o.cost_hi_usd)}")
        rows.append(d)
    best = [r for r in rows if any(r["label"] == b.label for b in an.best_per_node())]
    sec = an.sections
    conv = sec.get("convergence", {})
    out = {
        "pareto": (charts.pareto(rows, unit=unit),
                   f"Every priced option of the job: time to train against cost, both on log scales. The black line "
                   f"joins the Pareto front (no other option is both faster and cheaper); only front points are "
                   f"labelled. Points are predictions (hwmodels.predict), not measurements; their {lvl} intervals "
                   "are in the table."),
        "cost": (charts.cost_bars(best),
                 f"Cost to train per node and pricing mode, at the accelerator count that is cheapest within the "
                 f"deadline; black rules: {lvl} interval (scaling law, predictor validation error, price range, "
                 "measured noise where measured)."),
        "interval": (charts.interval_parts([p.to_dict() for p in an.recommended.parts]) if an.recommended else None,
                     f"The recommended option's cost interval taken apart: each part at {lvl}, combined in quadrature "
                     "on the log scale."),
        "roofline": (charts.roofline(sec.get("roofline", {}).get("points"), sec.get("roofline", {}).get("ceilings")),
                     "This machine's kernels: each dtype against the fitted ceiling and the same dtype's datasheet "
                     "peak; STREAM points with working sets that fit in cache are drawn apart from DRAM ones."),
        "scaling": (charts.band_curve(sec.get("scaling", {}).get("points"), sec.get("scaling", {}).get("curve"),
                                      x="nprocs", y="samples_per_s", x_title="processes", y_title="samples/s",
                                      title="Data-parallel scaling on this machine"),
                    f"Measured throughput per process count and the fitted scaling law with its {lvl} band (drawn "
                    "only when the fit is identified)."),
        "comms": (charts.band_curve(sec.get("comms", {}).get("points"), sec.get("comms", {}).get("curve"),
                                    x="size_bytes", y="busbw_bytes_per_s", x_title="message size (bytes)",
                                    y_title="bus bandwidth (bytes/s)", series="collective",
                                    title="Collectives on this machine", log_x=True, log_y=True, x_format="~s",
                                    y_format="~s"),
                  "Bus bandwidth of each collective against message size, with the alpha-beta fit."),
        "loss": (charts.band_curve(conv.get("points"), conv.get("curve"), x="step", y="loss", x_title="step",
                                   y_title="eval loss", title="Local convergence run: eval loss",
                                   target=conv.get("target")),
                 f"The local workload's eval loss, the fitted curve and its {lvl} band; red: the local target. This "
                 "is the measured run on this machine, not the job being bought for."),
    }
    return out


def render(an: A.Analysis, report_dir: str | Path, *, title: str = "hweval procurement report",
           plan: str | None = None) -> ReportOutput:
    """Write ``report.html``, ``charts/`` and ``options.csv`` for an analysis."""
    rdir = Path(report_dir)
    cdir = rdir / "charts"
    cdir.mkdir(parents=True, exist_ok=True)
    lvl = f"{an.level:.0%}"
    unit = A.time_unit([o.time_s for o in an.options])
    specs, files, captions = {}, {}, {}
    for name, (ch, cap) in charts_of(an).items():
        if ch is not None:
            specs[name], files[name] = _save_chart(ch, name, cdir)
            captions[name] = cap

    def chart(name: str) -> list[tuple[str, str]]:
        if name not in specs:
            return [("html", "<p class='note'>no chart: not enough data</p>")]
        return [("chart", name), ("html", f"<p class='caption'>{_esc(captions[name])}</p>")]

    b: list[tuple[str, str]] = [
        ("html", f"<h1>{_esc(title)}</h1>"),
        ("html", f"<p class='note'>plan: {_esc(plan or '(all results)')} &middot; generated "
                 f"{datetime.now(UTC):%Y-%m-%d %H:%M UTC} &middot; measured node: {_esc(an.measured_node or 'unknown')}"
                 f" &middot; catalog: {_esc(an.catalog_dir)}"
                 + (f" &middot; buyer's prices: {_esc(an.prices_file)}" if an.prices_file else "")
                 + f" &middot; intervals are {lvl} intervals throughout</p>"),
        ("html", f"<h2>Recommendation</h2><div class='rec' id='recommendation'>{_esc(an.recommendation)}</div>"),
        ("html", f"<p class='note'>{_esc(an.validation)}. Step times come from the calibrated predictor "
                 "(hwmodels.predict); its calibration sources are listed per option under 'Calibration'. Every "
                 f"interval is {lvl}: its parts are itemized below.</p>"),
    ]
    job = an.job
    if job is not None:
        spec = job.spec()
        tok = an.tokens
        tok_txt = (f"{A.fmt_count(tok.tokens)} ({tok.source})" if tok.lo == tok.hi else
                   f"{A.fmt_count(tok.tokens)} ({lvl}: {A.fmt_count(tok.lo)} to {A.fmt_count(tok.hi)}; {tok.source})")
        jrows = [{"": "model", "value": f"{job.model} ({A.fmt_count(spec.n_params())} parameters, sequence length "
                                         f"{spec.seq_len:,})"},
                 {"": "training tokens", "value": tok_txt},
                 {"": "target loss", "value": f"{job.target_loss:g} nats/token" if job.target_loss else "not given"},
                 {"": "global batch", "value": f"{job.global_batch:,} sequences" if job.global_batch else
                  "default (about 4M tokens per step)"},
                 {"": "precision", "value": job.precision},
                 {"": "accelerator counts", "value": ", ".join(f"{c:,}" for c in job.accelerators) if job.accelerators
                  else (f"not given: each node type at the counts with the aggregate dense bf16 peak of "
                        f"{', '.join(f'{c:,}' for c in COUNT_LADDER)} x {LADDER_REFERENCE}, in whole nodes "
                        f"(hweval.job.ladder_counts)")},
                 {"": "deadline", "value": f"{job.deadline_days:g} days" if job.deadline_days else "none"},
                 {"": "budget", "value": A.fmt_usd(job.budget_usd) if job.budget_usd else "none"},
                 {"": "pricing modes asked for", "value": ", ".join(A.MODE_WORDS.get(m, m) for m in job.pricing)}]
        b.append(("html", "<h2>The job</h2>" + _table(jrows)))
        b.append(("html", f"<h2>Options (best accelerator count per node and pricing mode)</h2>"
                          f"<p class='note'>Times in {unit[0]} throughout this table and the charts. "
                          f"Measured MFU on this machine is in 'Predictor vs measurement'; the MFU here is the "
                          f"predictor's for the job. (stale): price older than 12 months, re-quote before "
                          f"signing.</p>"))
        b.append(("html", _table([option_row(o, unit, an.level) for o in an.best_per_node()])))
        b += chart("pareto") + chart("cost")
        if an.recommended is not None:
            parts = [{"Part": p.name, "minus": f"-{(1 - 1 / p.lo_factor):.0%}", "plus": f"+{p.hi_factor - 1:.0%}",
                      "Source": p.source} for p in an.recommended.parts]
            b.append(("html", f"<h2>Interval of the recommended option ({lvl})</h2>" + _table(parts)
                      + f"<p class='note'>Calibration of the recommended option: {_esc(an.recommended.calibration)}</p>"))
            b += chart("interval")
        if an.by_framework:
            r0 = an.recommended
            fw = [{"Framework family": r["framework"], "Compute factor (eta)": f"{r['eta']:.2f}",
                   "Published runs fitted": f"{r['published_runs']:,}",
                   f"Time ({unit[0]})": f"{r['time_s'] / unit[1]:,.1f} ({lvl}: {r['time_lo_s'] / unit[1]:,.1f} to "
                                        f"{r['time_hi_s'] / unit[1]:,.1f})",
                   "Cost": f"{A.fmt_usd(r['cost_usd'])} ({A.fmt_usd(r['cost_lo_usd'])} to {A.fmt_usd(r['cost_hi_usd'])})",
                   "Meets the deadline": "yes" if r["meets_deadline"] else "no"} for r in an.by_framework]
            b.append(("html", f"<h2>The recommended option by framework</h2>" + _table(fw)
                      + f"<p class='note'>The job states no framework, so every option above is priced at the "
                        f"all-frameworks fit. Here {r0.accelerators} x {r0.node} ({A.MODE_WORDS.get(r0.pricing, r0.pricing)})"
                        f" is priced with each framework family the validation fitted on published runs of its "
                        f"software stack, with that family's factors and the band a stated family carries "
                        f"(predictor_error.json). State job.framework to price every option with yours.</p>"))
        miss = [{"Node": u.node, "Accelerators": u.accelerators or "any", "Pricing": A.MODE_WORDS.get(u.pricing, "any")
                 if u.pricing else "any", "Why": u.reason} for u in an.unavailable]
        b.append(("html", "<h2>Asked for but not available</h2>" + _table(miss)))
        prices = {}
        for o in an.options:
            prices[(o.node, o.pricing)] = {
                "Node": o.node, "Pricing": A.MODE_WORDS.get(o.pricing, o.pricing),
                "USD per accelerator-hour": f"${o.price.usd_per_accelerator_hour:,.2f}",
                "Provider": o.price.provider, "Instance": o.price.instance, "Region": o.price.region,
                "As of": o.price.as_of, "Older than 12 months": "yes: re-quote before signing" if o.price.stale else ""}
        b.append(("html", "<h2>Prices used</h2>" + _table(sorted(prices.values(), key=lambda r: (r["Node"], r["Pricing"])))))
        if an.break_even:
            be = [{"Node": r["node"], "Rent mode": A.MODE_WORDS.get(r["rent_mode"], r["rent_mode"]),
                   "Rent, USD per node-hour": f"${r['rent_usd_per_hour']:,.2f}",
                   "Capex per node": A.fmt_usd(r["capex_usd"]), "Amortization": f"{r['amortization_years']:g} years",
                   "Buying wins above utilization": f"{r['break_even_utilization']:.0%}"
                   if r["break_even_utilization"] <= 1 else "never (renting always cheaper)"} for r in an.break_even]
            b.append(("html", "<h2>Buy vs rent: break-even utilization</h2>" + _table(be)
                      + "<p class='note'>Owning costs capex / (years x 8,766 h x utilization) + energy per used "
                        "hour; renting costs the rent. Catalog capex and energy inputs (hwmodels.cost).</p>"))
        full = [option_row(o, unit, an.level) for o in an.options]
        b.append(("html", f"<details><summary>All {len(full)} options</summary>{_table(full)}</details>"))
    b.append(("html", "<h2>Predictor vs measurement on this machine</h2>"))
    if an.checks:
        crow = [{"Node": c.node, "Workload": c.workload, "Configuration": c.config,
                 "Measured step": A.fmt_duration(c.measured_step_s, ("s", 1.0)),
                 f"Measured, {lvl}": f"{A.fmt_duration(c.measured_lo_s, ('s', 1.0))} to "
                                     f"{A.fmt_duration(c.measured_hi_s, ('s', 1.0))}",
                 "Repeats": c.measured_how,
                 "Measured MFU": A._pct(c.measured_mfu) if c.measured_mfu is not None else "n/a",
                 "Predicted step": A.fmt_duration(c.predicted_step_s, ("s", 1.0)) if c.predicted_step_s else "n/a",
                 "Predicted / measured": (f"{c.error:+.0%}" if c.error is not None else "n/a")
                 + (f" (steps disturbed: IQR {c.step_noise:.0%} of the median)" if c.noisy else ""),
                 "Calibration": c.calibration} for c in an.checks]
        noisy = [c for c in an.checks if c.noisy]
        b.append(("html", _table(crow) + "<p class='note'>The same predictor that prices the job, calibrated from "
                  "this machine's stored kernel measurements, predicts the measured workloads' step time.</p>"
                  + (f"<p class='note'>{len(noisy)} of {len(an.checks)} measurements had steps whose spread "
                     f"(IQR) exceeded {A.NOISY_STEPS:.0%} of their median: the machine was loaded while they ran "
                     "(other processes, or several threads waiting on a busy core), so their measured step is not "
                     "a fair test of the prediction; rerun them on a quiet machine (or with threads=1).</p>"
                     if noisy else "")))
    else:
        b.append(("html", "<p class='note'>no measured single-process workload on a catalog node; run "
                          "02_workload_benchmark</p>"))
    b.append(("html", "<h2>Local measurements</h2>"))
    for name, key, heading in (("roofline", "roofline", "Roofline"), ("scaling", "scaling", "Scaling"),
                               ("comms", "comms", "Communication"), ("loss", "convergence", "Convergence")):
        sec = an.sections.get(key, {})
        b.append(("html", f"<h3>{heading}</h3><p>{_esc(sec.get('summary', 'no data'))}</p>"))
        if sec.get("ok") or name in specs:
            b += chart(name)
    warn = list(an.measurements.noise_warnings)
    b.append(("html", "<h2>Warnings and notes</h2>"))
    items = [f"<li class='warn'>{_esc(w)}</li>" for w in warn]
    items += [f"<li>{_esc(n)}</li>" for n in an.notes]
    items.append(f"<li>noise floor for single/double measurements: CV {an.measurements.noise_floor_cv:.1%} "
                 f"({_esc(an.measurements.noise_floor_source)})</li>")
    if an.measurements.set_aside:
        items.append(f"<li>{an.measurements.set_aside} measurement row(s) of superseded cell attempts (a cell killed "
                     "or failed, then re-run) are kept in the store but not counted here: one attempt per cell "
                     "counts (hweval results --all-attempts shows them)</li>")
    if an.stale_prices:
        items.append(f"<li class='warn'>{len(an.stale_prices)} price(s) used are older than 12 months: "
                     + _esc("; ".join(an.stale_prices)) + "</li>")
    b.append(("html", "<ul>" + "".join(items) + "</ul>"))
    html = rdir / "report.html"
    write_html(html, title=title, blocks=b, specs=specs)
    if an.options:
        pd.DataFrame([{k: v for k, v in o.to_dict().items() if k not in ("parts", "price", "layout")}
                      for o in an.options]).to_csv(rdir / "options.csv", index=False)
    return ReportOutput(html=html, analysis=an, charts=files, recommendation=an.recommendation)


def build_report(*, store: Store | str | Path | None = None, plan: str | None = None,
                 report_dir: str | Path = "out/report", job: Any = None, catalog_dir: str | Path | None = None,
                 prices: str | Path | None = None, candidates: Sequence[str] | None = None,
                 measured_node: str | None = None, today: Any = None,
                 title: str = "hweval procurement report") -> ReportOutput:
    """Analyze the plan's results for its job (:func:`hweval.analysis.analyze`), render, record the report."""
    from hwcore.records import ReportRecord

    st = store if isinstance(store, Store) else Store(store)
    an = A.analyze(store=st, plan=plan, job=job, catalog_dir=catalog_dir, prices=prices, candidates=candidates,
                   measured_node=measured_node, today=today)
    out = render(an, report_dir, title=title, plan=plan)
    st.append(ReportRecord(path=str(out.html.resolve()), recommendation=out.recommendation, charts=tuple(sorted(out.charts)),
                           rows=len(an.options), candidates=tuple(candidates or ()), plan=plan).to_record())
    return out


__all__ = ["build_report", "render", "charts_of", "option_row", "write_html", "ReportOutput"]
