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
# # 04 Convergence: loss curves -> steps and time to target with intervals
#
# Trains a workload until it reaches its eval-loss target (or runs out of
# steps), fits the eval-loss curve (`hwmodels.convergence`: power law with
# offset and an alternative family), and predicts steps / tokens / wall time
# to the target with an interval, saying so plainly when the data cannot
# support the extrapolation.

# %% tags=["parameters"]
workload: str = "transformer_lm"  # workload to train
preset: str = "tiny"  # workload preset (tiny, small, medium; empty: the defaults)
workload_params: dict = {}  # extra workload parameters
target_loss: float = 0.0  # eval-loss target (0: the workload's default)
max_steps: int = 120  # optimizer steps (the fit extrapolates beyond them)
max_time_s: float = 240.0  # wall-time limit
level: float = 0.9  # confidence level of the time-to-target interval

# %%
from IPython.display import display

from hweval import analysis, charts
import workloads as wl

charts.enable_inline()  # offline inline SVG (no CDN): JupyterLab, executed notebooks, nbconvert

res = wl.run(workload, {**({"preset": preset} if preset else {}), "stop_at_target": False, **workload_params}, target_loss=target_loss or None,
             max_steps=max_steps, max_time_s=max_time_s).to_json()
conv = analysis.convergence_section([res], level=level)
print(conv["summary"])
display(charts.band_curve(conv["points"], conv["curve"], x="step", y="loss", x_title="step", y_title="eval loss",
                          title="Eval loss with fitted extrapolation band", target=conv.get("target")))
