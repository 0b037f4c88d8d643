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
# # 02 Workload benchmark: training throughput, MFU and step-time breakdown
#
# Trains each workload for real (`workloads.run`) on real data, recording
# samples/s, tokens/s, MFU against the node's peak, peak memory, the
# per-phase step-time breakdown and the eval-loss curve.

# %% tags=["parameters"]
workloads_list: list[str] = ["transformer_lm", "mlp_regressor"]  # workloads to train
preset: str = "tiny"  # workload preset (tiny, small, medium; empty: the defaults)
workload_params: dict = {}  # extra parameters per workload name, e.g. {"transformer_lm": {"batch_size": 8}}
max_steps: int = 40  # optimizer steps per run
max_time_s: float = 120.0  # wall-time limit per run (status timeout past it)
target_loss: float = 0.0  # eval-loss target (0: each workload's default)

# %%
from IPython.display import display

from hweval import analysis, charts
import workloads as wl

charts.enable_inline()  # offline inline SVG (no CDN): JupyterLab, executed notebooks, nbconvert

results = []
for name in workloads_list:
    res = wl.run(name, {**({"preset": preset} if preset else {}), **workload_params.get(name, {})}, target_loss=target_loss or None,
                 max_steps=max_steps, max_time_s=max_time_s)
    results.append(res.to_json())
table = analysis.workload_table(results)
table

# %% [markdown]
# ## Step-time breakdown and loss curves

# %%
display(charts.breakdown(analysis.breakdown_rows(results)))
display(charts.band_curve(analysis.loss_rows(results), None, x="step", y="loss", x_title="step",
                          y_title="eval loss", title="Eval loss", series="workload"))
