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
# # 05 Procurement report: cost per convergence across catalog nodes
#
# Reads this plan's measurements from the store, fits the models again
# (roofline, scaling, comms, convergence), projects time to target on each
# catalog node (measured where the node was measured, otherwise from catalog
# peak x assumed utilization, stated as *projected*), prices it per pricing
# mode, ranks, draws the time-cost Pareto front and the sensitivity, and
# writes one self-contained HTML report with PNG/SVG charts.

# %% tags=["parameters"]
plan_name: str = ""  # plan whose results are reported (empty: every result in the store)
report_dir: str = "out/report"  # where report.html and charts/ are written
candidates: list[str] = []  # catalog node ids to compare (empty list: the whole catalog)
pricing: list[str] = ["on_demand", "reserved", "spot", "on_prem"]  # pricing modes compared
dtype: str = "bf16"  # dtype whose datasheet peak the projections use
utilization: float = 0.35  # assumed MFU on nodes that were not measured (projection)
utilization_range: list[float] = [0.2, 0.5]  # low/high MFU for the projection interval
measured_node: str = ""  # catalog id of the measured machine (empty: match the fingerprint)
title: str = "hweval procurement report"  # report title

# %%
from IPython.display import HTML, display

from hweval import report

out = report.build_report(plan=plan_name or None, report_dir=report_dir, candidates=candidates or None,
                          pricing=pricing, dtype=dtype, utilization=utilization,
                          utilization_range=tuple(utilization_range), measured_node=measured_node or None,
                          title=title)
print(out.html)
print(out.recommendation)
out.ranking
