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
# # 01 Node characterization: kernel sweeps -> fitted roofline
#
# GEMM shape/dtype sweeps and STREAM working-set sweeps on this node, each
# checked against a higher-precision reference before timing
# (`kernels.registry`), then a roofline fitted to the measured points
# (`hwmodels.roofline`) and compared with the node's datasheet peak from the
# catalog. On a CPU the host-dispatch probes (`kernels/dispatch.py`: per
# differentiable op, per optimizer phase) are measured too: the step-time
# predictor charges them where ops run one after another on the host. Every
# measurement and the fit go to the results store.

# %% tags=["parameters"]
device: str = "cpu"  # device the kernels run on (cpu, cuda, cuda:N)
gemm_sizes: list[int] = [256, 512, 1024]  # square GEMM sizes (M, N and K all equal this)
gemm_dtypes: list[str] = ["fp32", "bf16"]  # GEMM dtypes (unsupported ones are skipped with a reason)
stream_ops: list[str] = ["copy", "triad"]  # STREAM kernels: copy, scale, add, triad
stream_sizes: list[int] = [65536, 1048576, 16777216]  # STREAM elements per array (L2 .. >4x LLC for fp64)
dispatch_tensors: list[int] = [4, 16, 32]  # host-dispatch probes: optimizer phase at these tensor counts (empty: skip the probes)
warmup_ms: float = 20.0  # warm-up budget per measurement
measure_ms: float = 200.0  # measurement budget per measurement
node: str = ""  # catalog node id for datasheet ceilings (empty: match this machine)
catalog_dir: str = ""  # catalog directory or file for the datasheet ceilings (empty: data/catalog)

# %%
from IPython.display import display

from hweval import analysis, charts
from kernels import registry

charts.enable_inline()  # offline inline SVG (no CDN): JupyterLab, executed notebooks, nbconvert

gemm = registry.sweep(
    "gemm",
    [{"m": s, "n": s, "k": s, "dtype": d} for d in gemm_dtypes for s in gemm_sizes],
    device=device, warmup_ms=warmup_ms, measure_ms=measure_ms,
)
stream = [
    r
    for op in stream_ops
    for r in registry.sweep(f"stream_{op}", [{"n": n} for n in stream_sizes], device=device,
                            warmup_ms=warmup_ms, measure_ms=measure_ms)
]
# host cost per differentiable op (forward + backward) and per optimizer phase: what a small model's step
# spends on the host, which the step-time predictor charges on a CPU (kernels/dispatch.py)
dispatch = registry.sweep(
    "dispatch",
    ([{"mode": "forward"}, {"mode": "train"}] + [{"mode": "optimizer", "tensors": t} for t in dispatch_tensors])
    if dispatch_tensors else [],
    device=device, warmup_ms=warmup_ms, measure_ms=measure_ms,
) if device == "cpu" and dispatch_tensors else []
results = [r.to_json() for r in gemm + stream]  # the roofline's points; the probes are not rates
analysis.kernel_table(results + [r.to_json() for r in dispatch])

# %% [markdown]
# ## Roofline: fitted ceilings and measured points

# %%
catalog = analysis.load_catalog(catalog_dir or None)
roof = analysis.roofline_section(results, node=analysis.resolve_measured_node(node or None, catalog))
print(roof["summary"])
display(charts.roofline(roof["points"], roof["ceilings"]))
