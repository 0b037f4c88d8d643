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
# # 03 Scaling: collectives (alpha-beta) and N-process training (Amdahl / USL)
#
# Collective sweeps over message sizes with torch.distributed (gloo on CPU,
# NCCL on GPU) fitted with the alpha-beta model (`hwmodels.comms`), and
# data-parallel training over 1..N processes fitted with Amdahl and the
# Universal Scalability Law (`hwmodels.scaling`, model picked by AICc).

# %% tags=["parameters"]
collectives: list[str] = ["all_reduce"]  # collectives: all_reduce, all_gather, reduce_scatter, broadcast
world_size: int = 2  # processes for the collective sweeps
sizes_bytes: list[int] = [1024, 65536, 1048576, 8388608]  # message sizes
workload: str = "mlp_regressor"  # workload trained at each process count
preset: str = "tiny"  # workload preset (tiny, small, medium; empty: the defaults)
workload_params: dict = {}  # extra workload parameters
nprocs_list: list[int] = [1, 2]  # data-parallel process counts
max_steps: int = 20  # optimizer steps per scaling run
repeats: int = 2  # runs per process count (the fit needs 3+ points; repeats also show the noise)
warmup_ms: float = 20.0  # warm-up budget per collective measurement
measure_ms: float = 150.0  # measurement budget per collective measurement

# %%
from IPython.display import display

from hweval import analysis, charts
from kernels import registry
import workloads as wl

charts.enable_inline()  # offline inline SVG (no CDN): JupyterLab, executed notebooks, nbconvert

coll = [
    r.to_json()
    for c in collectives
    for r in registry.sweep(c, [{"size_bytes": s, "world_size": world_size} for s in sizes_bytes],
                            warmup_ms=warmup_ms, measure_ms=measure_ms)
]
comms = analysis.comms_section(coll)
print(comms["summary"])
display(charts.band_curve(comms["points"], comms["curve"], x="size_bytes", y="busbw_bytes_per_s",
                          x_title="message size (B)", y_title="bus bandwidth (B/s)", series="collective",
                          title="Collectives: measured busbw and alpha-beta fit", log_x=True, log_y=True))

# %%
base = {**({"preset": preset} if preset else {}), **workload_params}
runs = [wl.run(workload, {**base, "nprocs": n, "seed": rep}, max_steps=max_steps).to_json()
        for n in nprocs_list for rep in range(repeats)]
scaling = analysis.scaling_section(runs)
print(scaling["summary"])
display(charts.band_curve(scaling["points"], scaling["curve"], x="nprocs", y="samples_per_s",
                          x_title="processes", y_title="samples/s", title="Data-parallel scaling (fit with interval)"))
