# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 05 Procurement report: the declared training job, priced on every catalog node
#
# Reads this plan's measurements from the store and its declared training job
# (the plan's `job:` section), runs the one analysis pipeline
# (`hweval.analysis.analyze`: fits, the calibrated predictor per node x
# accelerator count, prices per mode with itemized intervals, the Pareto front
# and a recommendation), shows the answer and the charts here, and writes one
# self-contained HTML report (`hweval.report`, rendering only).

# %% tags=["parameters"]
plan_name: str = ""  # plan whose results are reported (empty: every result in the store)
report_dir: str = "out/report"  # where report.html, charts/ and options.csv are written
job: dict = {}  # the training job (the plan's job section, injected by the runner; empty: no job)
candidates: list[str] = []  # catalog node ids to compare (empty: every accelerator node)
catalog_dir: str = ""  # catalog directory or file (empty: data/catalog)
prices_csv: str = ""  # a buyer's price quotes CSV (node, mode, usd_per_accelerator_hour, as_of, source)
measured_node: str = ""  # catalog id of the measured machine (empty: match the fingerprint)
today: str = ""  # date prices are judged stale against, YYYY-MM-DD (empty: today)
title: str = "hweval procurement report"  # report title

# %%
from IPython.display import display

from hweval import analysis, charts, report

charts.enable_inline()  # offline inline SVG (no CDN)

out = report.build_report(plan=plan_name or None, report_dir=report_dir, job=job or None,
                          catalog_dir=catalog_dir or None, prices=prices_csv or None, candidates=candidates or None,
                          measured_node=measured_node or None, today=today or None, title=title)
an = out.analysis
print(out.html)
print(an.recommendation)

# %% [markdown]
# ## Options: best accelerator count per node and pricing mode

# %%
import pandas as pd

unit = analysis.time_unit([o.time_s for o in an.options])
pd.DataFrame([report.option_row(o, unit, an.level) for o in an.best_per_node()])

# %% [markdown]
# ## Charts

# %%
for name, (chart, caption) in report.charts_of(an).items():
    if chart is not None:
        display(chart)
        print(caption)
