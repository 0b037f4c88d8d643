"""Achievable rates of one node type, each with the source it came from.

The op costs of :mod:`hwmodels.predict.ops` are priced with these rates, never
with bare datasheet peaks. Sources, in the order they win (issue 11):

(a) ``measured``: this suite's own kernel records for this node
    (:class:`KernelPoint`, built by the application from the store's
    ``kind="kernel"``/``"collective"`` rows: ``gemm``, ``stream``,
    ``attention``, ``all_reduce`` ...);
(b) ``imported``: measurements imported from outside (same type);
(c) ``published``: sourced, dated public data: ``data/calibration/published.csv``
    when present, the nccl-tests logs under ``data/reference/nccl_tests/`` and
    the small table ``PUBLISHED`` below;
(d) ``datasheet``: the catalog figure with a stated derating, used only where
    nothing else exists and labelled as such.

Same-die figures: a node whose catalog entry names another built on the same
accelerator die (``[die] same_as``: H200 and H100, A100 40GB and 80GB, HGX
B300 and GB300 NVL72) takes that node's published matmul rows for the dtypes,
and attention rows for the kernels, it has none of its own for, at the same
fraction of datasheet peak (the figure x own peak / sibling peak); the rate's
source says so. Only the sibling's own rows carry (no chains), and only kernel
rates: bandwidth, collectives and launch figures belong to the system.

Every rate is a :class:`Rate` (value, source label, relative uncertainty);
``Calibration.sources()`` lists them for the output.

GEMM efficiency is a function of shape, not one constant::

    eff(m, n, k) = eff_max * tile_util(m, n) * k / (k + K_HALF)

``tile_util`` is the best over a few output-tile shapes of (tile padding
utilization x wave utilization on ``units`` SMs/CUs x the tile's own relative
speed): the tile/wave quantization of NVIDIA's "Matrix Multiplication
Background User's Guide" (docs.nvidia.com/deeplearning/performance, sections
"Tile Quantization" and "Wave Quantization"). ``k/(k+K_HALF)`` is the
small-inner-dimension falloff (a GEMM with small k is dominated by loading and
storing C; K_HALF = 64 puts k = 2048 at 97%, matching the flat top of the
mamf-finder sweeps, which peak at k = 2048..3840). The C tile's load/store and
the kernel prologue take the same time whatever the input type, while the main
loop over k runs at the type's rate: an fp8 GEMM covers each k step in
``peak_bf16 / peak_fp8`` (1/2 on H100/H200/B200/Gaudi 2) of the bf16 time, so the
fixed part weighs twice as much and fp8 uses
``K_HALF x peak_fp8 / peak_bf16`` (128 on those parts; :func:`k_half`). The
falloff scales with the kernel's time, not with its FLOPs. The time is then bounded
below by the bytes moved at the achievable memory bandwidth (roofline,
Williams et al. 2009) and by the per-kernel launch floor.

Collectives use the communication model of :mod:`hwmodels.comms`, per link
level (``intra``: inside the scale-up domain; ``inter``: across it): a
:class:`~hwmodels.comms.CommsModel` ramp (latency + square-root pipelining
ramp + saturation, per NCCL algorithm/protocol regime) fitted to the node's
busbw curve of that level, the first that exists of (a) its collective
records in the store, (b) imported ones, (c) the published curves
(``data/reference/nccl_tests/*`` through :mod:`hwmodels.nccl_tests`, the
busbw rows of ``published.csv``); else (d) the hierarchical
:class:`~hwmodels.comms.LinkModel` from the catalog's link figures. Curves are
fitted on sizes >= ``COMMS_FIT_MIN_BYTES`` (32 KiB, the range
``benchmarks/comms_validation.py`` validates). How a curve is moved to other
rank counts and placements: :mod:`hwmodels.predict.collectives`.
"""

from __future__ import annotations

import csv
import math
import statistics
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from hwmodels.comms import LINK_MODEL_REL_ERROR, CommsModel, CommsResult, LinkModel, busbw_factor, collective_time_s
from hwmodels.dtypes import NARROW_PRECISIONS, PREDICT_PRECISIONS
from hwmodels.errors import ModelInputError, choices_error
from hwmodels.nccl_tests import parse_text as parse_nccl_text

SOURCE_KINDS = ("measured", "imported", "published", "datasheet")
#: a GEMM type without a measured or published ceiling of its own, derived from the bf16 one: (fraction of the bf16
#: ceiling's share of peak, added relative sigma). fp16 runs on the bf16 units. fp8 and fp4 take the median ratio of
#: the nodes that publish both ceilings (:func:`narrow_over_bf16`: fp8 0.99 over 7 nodes, 2026-12-07); these
#: figures are the labelled fallback where fewer than MIN_RATIO_NODES do (fp4: no node publishes an fp4 ceiling),
#: 0.85 with twice fp8's added uncertainty for fp4. (The fp8 fallback, 0.85, was read from TransformerEngine's
#: ~1.3-1.6x end-to-end gains, which count the casts and the 16-bit work the op model prices apart.)
FROM_BF16_CEILING = {"fp16": (1.0, 0.0), "fp8": (0.85, 0.1), "fp4": (0.85, 0.2)}
LEVELS = ("intra", "inter")
K_HALF = 64.0  # see module docstring (16-bit inputs; fp8 scales it by the peak ratio, :func:`k_half`)
# (tile_m, tile_n, relative speed of that tile): cuBLAS/CUTLASS pick among such
# tiles by heuristics; smaller tiles waste less padding but reuse less data.
# Relative speeds: CUTLASS profiler tables show 128x128 ~5-10% and 64x64
# ~25-35% below the 256x128 kernels at large sizes on A100/H100 (approximate).
TILES = ((256, 128, 1.0), (128, 128, 0.93), (128, 64, 0.82), (64, 64, 0.68))
DATA_DIR = Path(__file__).resolve().parents[2] / "data"


@dataclass(frozen=True, kw_only=True)
class Rate:
    """One calibrated figure: value (SI or a fraction), source kind and text, relative uncertainty (1 sigma)."""

    value: float
    kind: str  # one of SOURCE_KINDS
    source: str
    rel_sigma: float = 0.1

    def __post_init__(self) -> None:
        if self.kind not in SOURCE_KINDS:
            raise choices_error("rate.kind", self.kind, SOURCE_KINDS)
        if not (self.value >= 0 and math.isfinite(self.value)):
            raise ModelInputError(f"rate.value: must be a finite number >= 0, got {self.value!r}")

    def label(self) -> str:
        return f"{self.kind}: {self.source}"


@dataclass(frozen=True, kw_only=True)
class KernelPoint:
    """One kernel measurement handed in by the application (a store row, decoded)."""

    kernel: str  # gemm | stream | attention | all_reduce | all_gather | reduce_scatter | launch | dispatch
    params: Mapping[str, Any]
    metrics: Mapping[str, Any]
    origin: str = "measured"  # measured | imported
    where: str = ""  # e.g. the run id / file


@dataclass(frozen=True, eq=False, kw_only=True)
class LevelComms:
    """The collective model of one link level: a fitted ramp per collective, or the catalog link model.

    ``fits`` maps a collective (``all_reduce``, ...) to its :class:`~hwmodels.comms.CommsResult`,
    ``geometries`` to the (ranks per domain, domains) of the curve it was fitted on;
    empty when nothing was measured or published for this node and level, and then
    ``link`` alone prices every collective. ``rel_sigma`` is the model's own
    relative uncertainty (1 sigma): from the fit's 90% prediction interval, or
    the link model's validation band (``LINK_MODEL_REL_ERROR``), both / 1.645.
    """

    level: str
    link: LinkModel
    fits: Mapping[str, CommsResult]
    geometries: Mapping[str, tuple[int, int]]  # collective -> (ranks per domain, domains) of its curve
    kind: str  # one of SOURCE_KINDS
    source: str
    rel_sigma: float

    def fit_for(self, collective: str) -> tuple[CommsResult, tuple[int, int]] | tuple[None, None]:
        """(fit, its geometry) of ``collective`` when fitted, else of all_reduce (priced in bus bytes), else any."""
        for c in (collective, "all_reduce", *self.fits):
            if c in self.fits:
                return self.fits[c], self.geometries[c]
        return None, None

    def label(self) -> str:
        return f"{self.kind}: {self.source}"


# (c) small published table used when data/calibration/published.csv has no figure for a node (or its same-die
# sibling: module docstring).
# Achievable dense bf16 matmul (mamf-finder: best of a shape sweep).
PUBLISHED_MATMUL_TFLOPS: dict[str, tuple[float, str]] = {
    "a100-80gb-sxm": (267.9, "mamf-finder results table, github.com/mag-/gpu_benchmark README 'Stats' "
                             "(NVIDIA A100 SXM 267.9 TFLOPS, 6912x16384x2048), read 2026-12"),
    "h100-sxm": (792.1, "mamf-finder results table, github.com/mag-/gpu_benchmark README 'Stats' "
                        "(NVIDIA H100 SXM 792.1 TFLOPS, 6144x17920x2816), read 2026-12"),
    "mi300x": (758.3, "mamf-finder results table, github.com/mag-/gpu_benchmark README 'Stats' "
                      "(AMD MI300X 758.3 TFLOPS, 4352x13568x3840), read 2026-12"),
}

# (d) deratings used only where nothing measured or published exists; each labelled.
DERATE_MATMUL = 0.75  # median achievable/peak of the three mamf-finder figures above (0.86, 0.80, 0.58) -> 0.75 rounded down for unknown stacks
DERATE_MEMBW = 0.85  # STREAM-style copy on HBM GPUs reaches ~85-92% of datasheet (H100/A100 babelstream reports); lower end taken
COMMS_FIT_MIN_BYTES = 32 * 2**10  # curves are fitted from 32 KiB up (module docstring)
#: A STREAM record whose working set is under this many bytes measured a cache, not the DRAM bandwidth the step
#: model needs; calibrate() leaves it out (and the report labels it). 32 MiB: the L3 of one AMD Zen 4 CCD (AMD EPYC
#: 9004 product brief), where CPU samples run warm. GPU samples flush L2 before each sample, so a one-pass STREAM
#: reads DRAM at any size there and the threshold only drops small points (conservative).
CACHE_RESIDENT_BYTES = 32 * 2**20
Z90 = 1.6449  # two-sided 90% normal quantile: a 90% band -> 1 sigma
# Flash-attention training efficiency (fwd+bwd, causal, head dim 128, long sequence) as a fraction of dense bf16 peak:
# FlashAttention-2 (Dao 2023, arXiv:2307.08691): "up to 225 TFLOPs/s per A100" end-to-end and ~190 TFLOP/s
# fwd+bwd kernels at 8k-16k (Fig. 4) -> 0.60 of 312; on H100 SXM5 "up to 335 TFLOPs/s" (Fig. 7) -> 0.34 of 989.
ATTN_EFF = {"a100-80gb-sxm": (0.60, "FlashAttention-2 on A100 (Dao 2023, arXiv:2307.08691, Fig. 4: ~190 of 312 TFLOP/s fwd+bwd)"),
            "h100-sxm": (0.34, "FlashAttention-2 on H100 SXM5 (Dao 2023, arXiv:2307.08691, Fig. 7: up to 335 of 989 TFLOP/s)")}
ATTN_EFF_DEFAULT = 0.40  # (d) no flash-attention figure for this node: 0.4 (between Hopper-FA2 0.34 and Ampere 0.60)
#: The head dimension every attention figure here is taken at (the published curves' ``head_dim=128`` and the presets'
#: 128). On a systolic-array matrix unit wider than it (``NodeType.matrix_unit_dim``: TPU v6e's 256x256 MXU) the
#: attention core's matmuls, which contract over the head dimension (Q K^T) or produce it (P V), fill
#: ``ATTENTION_HEAD_DIM / matrix_unit_dim`` of the array: the assumed default rate is scaled by that share. A measured
#: or published attention figure already includes it.
ATTENTION_HEAD_DIM = 128
ATTN_S_HALF = 384.0  # attention kernels lose efficiency at short sequences: FA2 Fig. 4, 512 tokens ~55-60% of the 16k rate
#: the attention implementation ``attention="flash"`` means unless told otherwise; published.csv rows without a
#: ``kernel=`` condition are FlashAttention-2. Other kernels (``flash_attn_1``: FlashAttention v1 CUDA;
#: ``flash_attn_triton``: the Triton kernel llm-foundry's ``attn_impl: triton`` runs) are calibrated from their own
#: published curves and selected with :meth:`Calibration.with_attention_kernel`.
DEFAULT_ATTENTION_KERNEL = "flash_attn_2"
#: accelerators whose own kernel FlashAttention-2 is (it is written for Ampere/Ada/Hopper SMs; on Blackwell it runs
#: its sm80 code path at a sixth of peak, and on AMD it is a port): elsewhere the node's default attention rate is
#: the fastest published kernel curve it has (cuDNN on B200, AITER on MI300X), named in its source
FA2_NATIVE_NODES = ("a100-40gb-sxm", "a100-80gb-sxm", "h100-sxm", "h200-sxm", "l40s")
ATTENTION_KERNEL_NAMES = {"flash_attn_2": "FlashAttention-2", "flash_attn_1": "FlashAttention (v1)",
                          "flash_attn_triton": "FlashAttention Triton", "cudnn": "cuDNN fused attention",
                          "aiter_asm_fa_v3_bwd_a32": "AMD AITER asm FlashAttention v3 (fp32 dQ accumulation)",
                          "tokamax_splash": "Splash attention (tokamax's Pallas TPU kernel)"}
LAUNCH_FLOOR_S = {"gpu": 4e-6, "tpu": 2e-6, "accelerator": 6e-6, "cpu": 2e-6}
# per-kernel floor: CUDA launch + inter-kernel gap 2.5-5 us (NVIDIA Nsight Systems traces of small kernels; PyTorch
# "CUDA graphs" blog 2021 quotes "a few microseconds"); TPU/XLA fused programs launch less often.
STEP_OVERHEAD_S = 0.010  # optimizer zero_grad/bookkeeping, data loader handoff, per step (d); fitted away in validation
OVERLAP = 0.95  # fraction of overlappable communication hidden under compute when it fits (d): NCCL kernels take SMs


#: the suite's element-wise kernels (kernels/fused.py) whose records price memory-bound ops when present
ELEMENTWISE_KERNELS = ("layernorm", "gelu", "softmax")

@dataclass(frozen=True, eq=False, kw_only=True)  # hashed by identity: the step model caches per calibration
class Calibration:
    """Achievable rates of one node type (per accelerator)."""

    node_id: str
    kind: str  # cpu | gpu | tpu | accelerator
    peak: Mapping[str, float]  # dtype -> dense flop/s per accelerator (datasheet)
    matmul_eff_max: Mapping[str, Rate]  # dtype -> achievable fraction of peak (large GEMM)
    units: int
    mem_bw: Rate  # B/s achievable per accelerator
    attention_eff: Rate  # fraction of the dtype's peak, fwd+bwd flash attention at long sequence
    launch_s: Rate
    comms: Mapping[str, LevelComms]  # level -> collective model (module docstring)
    overlap: Rate
    step_overhead_s: Rate
    accelerators_per_node: int
    scale_up_size: int
    memory_capacity_bytes: float
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: rate of the memory-bound ops (norms, activations, softmax) when this node's element-wise kernels were
    #: measured: on a CPU they work on cache-resident tensors and are bound by per-element arithmetic (erf,
    #: exp, reductions), not by DRAM bandwidth; None = priced at ``mem_bw`` (STREAM / datasheet)
    elementwise_bw: Rate | None = None
    #: host cost of one differentiable eager op in a training step (its forward dispatch with the autograd node,
    #: plus its backward node), from the ``dispatch`` kernel (``mode=train``); None = not measured. Charged per op
    #: only where ops run one after another on the host (:attr:`serial_dispatch`), replacing the per-launch floor
    host_op_s: Rate | None = None
    #: host cost of the optimizer phase (clip_grad_norm_ + AdamW(foreach).step + zero_grad) by parameter-tensor
    #: count, from the ``dispatch`` kernel (``mode=optimizer``): ((tensors, seconds), ...); empty = not measured
    optimizer_host: tuple[tuple[int, float], ...] = ()
    optimizer_host_source: str = ""
    #: the node's vendor software stack (catalog ``software_stack``): which published runs' stack factor applies
    software_stack: str = ""
    #: host <-> device copy bandwidth per accelerator, one direction, with every accelerator of the node copying at
    #: once (B/s; the slower direction): what activation offload moves over (:func:`_host_link`); None = no figure
    host_link: Rate | None = None

    # -- GEMM ----------------------------------------------------------------------
    def gemm_eff(self, m: int, n: int, k: int, dtype: str) -> float:
        """Achievable fraction of peak for this shape: interpolated from >= 3 measured GEMM shapes of this
        node (log-FLOPs axis, clamped at the ends) when the store has them, else the tile/wave model."""
        pts = self.extra.get("gemm_curve", {}).get(dtype)
        if pts:
            return _interp_eff(pts, 2.0 * m * n * k)
        return _gemm_eff(self.units, self._eff_max(dtype), int(m), int(n), int(k), k_half(self.peak, dtype))

    def _eff_max(self, dtype: str) -> float:
        r = self.matmul_eff_max.get(dtype) or self.matmul_eff_max.get("bf16")
        return r.value if r is not None else DERATE_MATMUL

    def peak_flops(self, dtype: str) -> float:
        """The catalog's dense peak of ``dtype``; fp16 and bf16 stand in for each other (one tensor-core rate), and
        a 16-bit type on hardware without 16-bit units runs at the fp32 rate. An 8- or 4-bit type needs its own
        peak: hardware without fp8 (fp4) units cannot train in it, so that is an error naming what it has."""
        if dtype in self.peak:
            return self.peak[dtype]
        if dtype in NARROW_PRECISIONS:
            here = (d for d in ("bf16", "fp16", "fp32", *NARROW_PRECISIONS) if d in self.peak)
            raise ModelInputError(f"precision: {self.node_id} has no {dtype} rate in the catalog (it has "
                                  f"{', '.join(self.peak)}); valid choices here: {', '.join(here)}")
        if dtype == "fp16" and "bf16" in self.peak:
            return self.peak["bf16"]
        if dtype == "bf16" and "fp16" in self.peak:
            return self.peak["fp16"]
        if "fp32" in self.peak:
            return self.peak["fp32"]
        raise choices_error(f"{self.node_id}.peak", dtype, self.peak)

    def gemm_time(self, m: int, n: int, k: int, dtype: str, bytes_per_el: float) -> float:
        flops = 2.0 * m * n * k
        t_c = flops / (self.peak_flops(dtype) * self.gemm_eff(m, n, k, dtype))
        t_m = bytes_per_el * (m * k + k * n + m * n) / self.mem_bw.value
        if self.serial_dispatch:
            return max(t_c, t_m) + self._serial_launch()
        return max(t_c, t_m, self.launch_s.value)

    def _serial_launch(self) -> float:
        """Per-launch host time added to an op on a serial-dispatch node: the launch floor, or nothing when the
        host cost is charged per op from the measured ``dispatch`` probe (:meth:`host_time`)."""
        return 0.0 if self.host_op_s is not None else self.launch_s.value

    def host_time(self, n_ops: float, n_tensors: int) -> float:
        """Host time of one training step on a node with a measured ``dispatch`` probe: ``n_ops`` differentiable
        ops x the per-op cost + the optimizer phase for ``n_tensors`` parameter tensors (linear in the tensor count
        between measured points, constant beyond one point). 0 without the probe. A serial-dispatch node (CPU)
        adds it to the step; an asynchronous one (GPU) pays only what exceeds the device's time
        (:func:`hwmodels.predict.predictor.host_bound_overhead`)."""
        if self.host_op_s is None:
            return 0.0
        return n_ops * self.host_op_s.value + self.optimizer_host_time(n_tensors)

    def optimizer_host_time(self, n_tensors: int) -> float:
        pts = sorted(self.optimizer_host)
        if not pts:
            return 0.0
        if len(pts) == 1:
            return pts[0][1]
        xs = [float(x) for x, _ in pts]
        ys = [y for _, y in pts]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        slope = max(sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx, 0.0) if sxx else 0.0
        return max(my + slope * (n_tensors - mx), min(ys))

    @property
    def serial_dispatch(self) -> bool:
        """Whether each op's dispatch adds to its run time (a CPU runs eager ops one after another on the
        host thread that dispatches them) rather than hiding under the previous op (a GPU queues kernels
        asynchronously, so an op costs the larger of its run time and its launch)."""
        return self.kind == "cpu"

    def attention_kernels(self) -> tuple[str, ...]:
        """Attention implementations this calibration has a rate for (the default first)."""
        return (str(self.extra.get("attention_kernel", DEFAULT_ATTENTION_KERNEL)),
                *sorted(k for k in self.extra.get("attention_curves", {})
                        if k != self.extra.get("attention_kernel", DEFAULT_ATTENTION_KERNEL)))

    def with_attention_kernel(self, kernel: str) -> Calibration:
        """This calibration with the attention rate of another implementation's published curve (e.g. a framework
        that runs FlashAttention v1 or a Triton kernel instead of FlashAttention-2); the same object when
        ``kernel`` is already the one priced. Raises a choices error naming the kernels that have a curve."""
        if kernel == self.extra.get("attention_kernel", DEFAULT_ATTENTION_KERNEL):
            return self
        curves = self.extra.get("attention_curves", {})
        if kernel not in curves:
            raise choices_error(f"{self.node_id}.attention_kernel", kernel, self.attention_kernels())
        rate, s_half = curves[kernel]
        return replace(self, attention_eff=rate,
                       extra={**self.extra, "attention_s_half": s_half, "attention_kernel": kernel})

    def with_node_size(self, accelerators_per_node: int, source: str) -> Calibration:
        """This calibration on nodes of ``accelerators_per_node`` accelerators of the type (a 4-GPU HGX board of an
        8-GPU type), as a run's source or a buyer states it: at most the catalog's node size. Where the catalog's
        scale-up domain is the node (an HGX board), the domain shrinks with it; a larger domain (a rack-scale NVLink
        or ICI slice) is kept. Each link level takes the new node size; the NIC bandwidth per accelerator is kept
        (one NIC per accelerator), unless :meth:`with_network` states the node's."""
        n = accelerators_per_node
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= self.accelerators_per_node:
            raise ModelInputError(f"accelerators_per_node: must be a whole number from 1 to {self.accelerators_per_node}"
                                  f" (the catalog's {self.node_id} node), got {n!r}")
        if n == self.accelerators_per_node:
            return self
        domain = n if self.scale_up_size <= self.accelerators_per_node else self.scale_up_size
        said = f"{n} accelerators per node, scale-up domain {domain} ({source})"
        comms = {lvl: replace(lc, source=f"{lc.source}; {said}",
                              link=replace(lc.link, accelerators_per_node=n,
                                           scale_up_size=min(lc.link.scale_up_size or domain, domain),
                                           source=f"{lc.link.source}; {said}"))
                 for lvl, lc in self.comms.items()}
        return replace(self, accelerators_per_node=n, scale_up_size=domain, comms=comms)

    def with_network(self, inter_node_Gbps: float, source: str) -> Calibration:
        """This calibration on a cluster whose scale-out network carries ``inter_node_Gbps`` per node (one
        direction), as a published run's source states it. Every level's link model takes that NIC rate; the
        inter-node level drops curves fitted on the catalog's own network (they measured another one) and is
        priced by the link model, with its validation band."""
        if isinstance(inter_node_Gbps, bool) or not isinstance(inter_node_Gbps, (int, float)) \
                or not math.isfinite(inter_node_Gbps) or inter_node_Gbps <= 0:
            raise ModelInputError(f"inter_node_Gbps: must be a positive number of Gb/s per node, got "
                                  f"{inter_node_Gbps!r}")
        per_acc = inter_node_Gbps * 1e9 / 8.0 / max(self.accelerators_per_node, 1)
        comms: dict[str, LevelComms] = {}
        for lvl, lc in self.comms.items():
            link = replace(lc.link, inter_bytes_per_s=per_acc,
                           source=f"{lc.link.source}; scale-out {inter_node_Gbps:g} Gb/s per node ({source})")
            if lvl != "inter":
                comms[lvl] = replace(lc, link=link)
                continue
            bn = link.inter_efficiency * per_acc
            comms[lvl] = LevelComms(
                level=lvl, link=link, fits={}, geometries={}, kind="datasheet",
                rel_sigma=LINK_MODEL_REL_ERROR / Z90,
                source=f"link model on the stated network ({source}): {inter_node_Gbps:g} Gb/s per node, "
                       f"{bn / 1e9:.1f} GB/s per accelerator ({link.inter_efficiency:.2f} x NIC); curves measured "
                       f"on the catalog's network not used; +/-{LINK_MODEL_REL_ERROR:.0%} band")
        return replace(self, comms=comms)

    def with_power_limit(self, power_limit_watts: float, tdp_watts: float, source: str) -> Calibration:
        """This calibration with its accelerators held to ``power_limit_watts`` (TDP ``tdp_watts``), as a run's
        source or a buyer states it: the matmul and attention rates (and a measured GEMM curve) scaled by the
        sustained-clock ratio at that limit (:func:`hwmodels.predict.power.compute_factor`), their uncertainty
        widened by the curve's; bandwidth, collectives and launches unchanged. The same object at or above TDP."""
        from hwmodels.predict.power import compute_factor

        pf = compute_factor(self.node_id, tdp_watts, power_limit_watts)
        if pf.value == 1.0:
            return self
        said = f"{pf.source} ({source})"

        def scaled(r: Rate) -> Rate:
            return replace(r, value=r.value * pf.value, rel_sigma=math.hypot(r.rel_sigma, pf.rel_sigma),
                           source=f"{r.source}; {said}")

        extra = dict(self.extra)
        if "attention_curves" in extra:
            extra["attention_curves"] = {k: (scaled(rate), sh) for k, (rate, sh) in extra["attention_curves"].items()}
        if "gemm_curve" in extra:
            extra["gemm_curve"] = {d: tuple((x, y * pf.value) for x, y in c) for d, c in extra["gemm_curve"].items()}
        extra["power_limit"] = {"watts": float(power_limit_watts), "tdp_watts": float(tdp_watts),
                                "compute_factor": pf.value, "rel_sigma": pf.rel_sigma, "source": said}
        return replace(self, matmul_eff_max={d: scaled(r) for d, r in self.matmul_eff_max.items()},
                       attention_eff=scaled(self.attention_eff), extra=extra)

    def attention_time(self, flops: float, seq_len: int, dtype: str) -> float:
        sh = self.extra.get("attention_s_half", ATTN_S_HALF)
        eff = self.attention_eff.value * seq_len / (seq_len + sh)
        return flops / (self.peak_flops(dtype) * eff)

    def memory_time(self, nbytes: float, launches: float = 1.0) -> float:
        bw = (self.elementwise_bw or self.mem_bw).value
        if self.serial_dispatch:
            return nbytes / bw + launches * self._serial_launch()
        return max(nbytes / bw, launches * self.launch_s.value)

    # -- collectives ---------------------------------------------------------------
    def collective_time(self, kind: str, size_bytes: float, ranks: int, level: str,
                        ranks_per_node: int | None = None) -> float:
        """See :func:`hwmodels.predict.collectives.collective_time`."""
        from hwmodels.predict.collectives import collective_time
        return collective_time(self, kind=kind, size_bytes=size_bytes, ranks=ranks, level=level,
                               ranks_per_node=ranks_per_node)

    def sources(self) -> dict[str, str]:
        out = {f"matmul_efficiency.{d}": r.label() for d, r in self.matmul_eff_max.items()}
        out["memory_bandwidth"] = self.mem_bw.label()
        out["attention_efficiency"] = self.attention_eff.label()
        out["launch_overhead"] = self.launch_s.label()
        if self.elementwise_bw is not None:
            out["elementwise_bandwidth"] = self.elementwise_bw.label()
        if self.host_op_s is not None:
            out["host_dispatch_per_op"] = self.host_op_s.label()
        if self.optimizer_host:
            out["optimizer_host"] = self.optimizer_host_source
        if self.host_link is not None:
            out["host_link"] = self.host_link.label()
        for lvl, c in self.comms.items():
            out[f"collective_busbw.{lvl}"] = c.label()
        out["overlap"] = self.overlap.label()
        out["step_overhead"] = self.step_overhead_s.label()
        if "power_limit" in self.extra:
            out["power_limit"] = f"published: {self.extra['power_limit']['source']}"
        return out

    def source_kinds(self) -> dict[str, str]:
        out = {f"matmul_efficiency.{d}": r.kind for d, r in self.matmul_eff_max.items()}
        out.update(memory_bandwidth=self.mem_bw.kind, attention_efficiency=self.attention_eff.kind,
                   launch_overhead=self.launch_s.kind, overlap=self.overlap.kind)
        out.update({f"collective_busbw.{lvl}": c.kind for lvl, c in self.comms.items()})
        if self.elementwise_bw is not None:
            out["elementwise_bandwidth"] = self.elementwise_bw.kind
        if self.host_op_s is not None:
            out["host_dispatch_per_op"] = self.host_op_s.kind
        if self.host_link is not None:
            out["host_link"] = self.host_link.kind
        return out

    def rel_sigma(self, comm_share: float = 0.0) -> float:
        """Combined relative uncertainty of the rates (root sum of squares, dominant terms).

        ``comm_share``: the fraction of the step that is exposed communication; the
        collective model's own uncertainty (the larger of the two levels') enters
        weighted by it.
        """
        m = self.matmul_eff_max.get("bf16") or next(iter(self.matmul_eff_max.values()), None)
        parts = [m.rel_sigma if m else 0.2, self.attention_eff.rel_sigma * 0.5, self.mem_bw.rel_sigma * 0.3]
        if comm_share > 0 and self.comms:
            parts.append(min(comm_share, 1.0) * max(c.rel_sigma for c in self.comms.values()))
        return math.sqrt(sum(p * p for p in parts))


def _interp_eff(pts: tuple[tuple[float, float], ...], flops: float) -> float:
    x = math.log(max(flops, 1.0))
    if x <= pts[0][0]:
        return pts[0][1]
    if x >= pts[-1][0]:
        return pts[-1][1]
    for (x0, y0), (x1, y1) in zip(pts[:-1], pts[1:]):
        if x0 <= x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0) if x1 > x0 else y1
    return pts[-1][1]


def k_half(peak: Mapping[str, float], dtype: str) -> float:
    """The small-k falloff constant of ``dtype``'s GEMMs: K_HALF for 16-bit inputs; for fp8 K_HALF x the fp8/bf16
    peak ratio, because its main loop runs that much faster while the C load/store and prologue do not (module
    docstring)."""
    if dtype in NARROW_PRECISIONS and peak.get(dtype) and peak.get("bf16"):
        return K_HALF * max(peak[dtype] / peak["bf16"], 1.0)
    return K_HALF


@lru_cache(maxsize=200_000)
def _gemm_eff(units: int, eff_max: float, m: int, n: int, k: int, kh: float = K_HALF) -> float:
    if units <= 0:  # no unit count in the catalog: padding to 128 only (systolic arrays / MMEs are 128 wide)
        pad = (m / (-(-m // 128) * 128)) * (n / (-(-n // 128) * 128))
        return max(eff_max * pad * k / (k + kh), 1e-4)
    best = 0.0
    for tm, tn, speed in TILES:
        gm, gn = -(-m // tm), -(-n // tn)
        pad = (m / (gm * tm)) * (n / (gn * tn))
        tiles = gm * gn
        waves = -(-tiles // units)
        wave = tiles / (waves * units)
        best = max(best, pad * wave * speed)
    return max(eff_max * best * k / (k + kh), 1e-4)


# ------------------------------------------------------------------------ building
def _units(node: Any) -> int:
    """SM / CU / core count: the catalog's peak derivation (``units_count``), else a per-kind default."""
    for dt in ("bf16", "fp16", "fp32"):
        p = node.peaks.get(dt) if hasattr(node, "peaks") else None
        d = getattr(p, "derivation", None) or {}
        if d.get("units_count"):
            return int(d["units_count"])
    path = getattr(node, "path", "")
    for cand in (Path(path), DATA_DIR / "catalog" / str(path)) if path else ():
        if cand.exists():
            try:
                data = tomllib.loads(cand.read_text())
            except (OSError, tomllib.TOMLDecodeError):
                break
            for dt in ("bf16", "fp16", "fp32"):
                d = data.get("peak", {}).get(dt, {}).get("derivation", {})
                if "units_count" in d:
                    return int(d["units_count"])
            break
    return 0  # unknown: the GEMM model keeps the 128-padding term and drops the wave term


def _published_rows(node_id: str, path: Path | None = None) -> list[dict[str, str]]:
    p = path or DATA_DIR / "calibration" / "published.csv"
    if not p.exists():
        return []
    return [r for r in _read_csv(str(p)) if r.get("node_id") == node_id]


MATMUL_QUANTITIES = ("matmul_tflops", "achievable_matmul_tflops")


def _attention_peak(peak: Mapping[str, float], dt: str) -> float | None:
    """The datasheet peak an attention row of ``dt`` is a fraction of (its own type's, else the 16-bit one)."""
    return peak.get(dt) or peak.get("bf16") or peak.get("fp16")


def _same_die_node(node: Any, catalog: Any = None) -> Any:
    """The catalog node ``node``'s ``[die] same_as`` names (None when unset); an unknown id lists the valid ones."""
    sib_id = getattr(node, "same_die_as", "")
    if not sib_id:
        return None
    if catalog is None:
        from hwmodels.catalog import default_catalog

        catalog = default_catalog()
    if sib_id not in catalog:
        raise ModelInputError(f"{node.id}: die.same_as: unknown node {sib_id!r}; valid choices: "
                              f"{', '.join(sorted(n for n in catalog.ids() if n != node.id))}")
    return catalog.get(sib_id)


def _same_die_rows(node: Any, sib: Any, own: list[dict[str, str]], path: Path | None) -> list[dict[str, str]]:
    """The published kernel rows of ``node``'s same-die sibling ``sib`` (:func:`_same_die_node`) for the matmul
    dtypes and attention kernels ``own`` has no row for, each rescaled to ``node``'s datasheet peak (module
    docstring)."""
    if sib is None:
        return []
    sib_id = sib.id
    mine = {d: p.dense_flops_per_s for d, p in node.peaks.items()}
    theirs = {d: p.dense_flops_per_s for d, p in sib.peaks.items()}
    have_mm = {_cond(r.get("condition", "")).get("dtype", "bf16") for r in own if r.get("quantity") in MATMUL_QUANTITIES}
    have_attn = {_cond(r.get("condition", "")).get("kernel", DEFAULT_ATTENTION_KERNEL) for r in own
                 if r.get("quantity") == "attention_tflops"}
    out = []
    for r in _published_rows(sib_id, path):
        c = _cond(r.get("condition", ""))
        dt = c.get("dtype", "bf16")
        if r.get("quantity") in MATMUL_QUANTITIES and dt not in have_mm:
            a, b = mine.get(dt), theirs.get(dt)
        elif r.get("quantity") == "attention_tflops" and c.get("kernel", DEFAULT_ATTENTION_KERNEL) not in have_attn:
            a, b = _attention_peak(mine, dt), _attention_peak(theirs, dt)
        else:
            continue
        if not a or not b:
            continue
        out.append({**r, "node_id": node.id, "value": repr(float(r["value"]) * a / b),
                    "source": f"{r.get('source', '')} [measured on {sib_id}; carried to {node.id} at the same "
                              f"fraction of datasheet peak (x {a / b:.3f}): same die, catalog die.same_as]"})
    return out


def _table_figure(table: Mapping[str, tuple[float, str]], node: Any, sib: Any) -> tuple[Any, float, str] | None:
    """``table``'s figure for ``node``, else for its same-die sibling ``sib`` (:func:`_same_die_node`), as (the node
    it was measured on, value, source with the carry noted); None when neither has one."""
    for n in (node, sib):
        if n is not None and n.id in table:
            v, src = table[n.id]
            return n, v, src + ("" if n is node else f" [measured on {n.id}; same die, catalog die.same_as]")
    return None


@lru_cache(maxsize=8)
def _read_csv(path: str) -> tuple[dict[str, str], ...]:
    with open(path, newline="") as f:
        return tuple(csv.DictReader(line for line in f if not line.startswith("#")))


def _cond(text: str) -> dict[str, str]:
    out = {}
    for part in (text or "").split(";"):
        if "=" in part:
            k, v = part.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def _published_matmul_eff(node: Any, pub: list[dict[str, str]]) -> dict[str, Rate]:
    """Per dtype, the best published matmul figure of ``pub`` as a fraction of ``node``'s datasheet peak, with the
    tile model's shape terms undone (the large-square ceiling)."""
    peak = {d: p.dense_flops_per_s for d, p in node.peaks.items()}
    out: dict[str, Rate] = {}
    for r in pub:
        if r.get("quantity") in MATMUL_QUANTITIES:
            c = _cond(r.get("condition", ""))
            dt = c.get("dtype", "bf16")
            if dt not in peak:
                continue
            v = float(r["value"]) * 1e12 / peak[dt]
            m, n, k = (int(float(c.get(x, 0) or 0)) for x in "mnk")
            # a vendor's Max-Achievable FLOPs figure (statistic maf_*: AMD's MAF, at a shape chosen to tile the CUs
            # evenly with its kernels' tiles, 192-wide among them) is the ceiling as it stands: the tile model,
            # which knows no 192-wide tile, would read waste into that shape and inflate it
            if m and n and k and not c.get("statistic", "").startswith("maf"):
                # the shape terms of the tile model are undone: eff_max is the ceiling
                # a brute-force search's best shape keeps its K falloff: the search tried larger K and found this
                # one fastest, so the K term cost it nothing there (only the tile/wave terms are undone)
                kh = 0.0 if c.get("statistic") == "best_shape_mean" else k_half(peak, dt)
                v = v / max(_gemm_eff(_units(node), 1.0, m, n, k, kh), 1e-3)
            if dt not in out or v > out[dt].value:
                out[dt] = Rate(value=min(v, 1.0), kind="published", rel_sigma=0.05,
                               source=f"{r.get('source', '')}; {r.get('condition', '')} ({r.get('as_of', '')}; "
                                      "data/calibration/published.csv)")
    return out


#: Nodes with both published ceilings a derived ratio needs (:func:`narrow_over_bf16`); with fewer, the labelled
#: assumption of FROM_BF16_CEILING stands.
MIN_RATIO_NODES = 3


def narrow_over_bf16(dtype: str, published_csv: Path | None = None, catalog: Any = None) -> tuple[float, float, str]:
    """(factor, added relative sigma, how) that turns a node's bf16 matmul fraction of peak into ``dtype``'s when
    the node has no ``dtype`` figure of its own: the median, over the catalog nodes whose own published rows give
    both ceilings (MIN_RATIO_NODES or more), of (``dtype`` fraction / bf16 fraction), with half their range as the
    added sigma; else FROM_BF16_CEILING's labelled assumption."""
    f, extra = FROM_BF16_CEILING[dtype]
    if f == 1.0:
        return f, extra, "the same units"
    if catalog is None:
        from hwmodels.catalog import default_catalog

        catalog = default_catalog()
    key = str(published_csv or DATA_DIR / "calibration" / "published.csv")
    ratios = _narrow_ratios(dtype, key, [catalog.get(nid) for nid in sorted(catalog.ids())])
    if len(ratios) < MIN_RATIO_NODES:
        return f, extra, f"assumption: fewer than {MIN_RATIO_NODES} nodes publish both ceilings"
    vals = [r for _, r in ratios]
    med = float(statistics.median(vals))
    spread = (max(vals) - min(vals)) / 2 / med
    listed = ", ".join(f"{n} {r:.2f}" for n, r in ratios)
    return med, spread, (f"the median of {dtype}/bf16 published ceilings as fractions of their peaks over "
                         f"{len(ratios)} nodes: {listed}; data/calibration/published.csv")


_RATIO_CACHE: dict[tuple, tuple[tuple[str, float], ...]] = {}


def _narrow_ratios(dtype: str, path: str, nodes: list[Any]) -> tuple[tuple[str, float], ...]:
    """(node id, ``dtype`` fraction / bf16 fraction) for each of ``nodes`` whose own published rows give both;
    cached per dtype, file and the nodes' ids, kinds and peaks."""
    key = (dtype, path, tuple((n.id, n.kind, tuple(sorted((d, p.dense_flops_per_s) for d, p in n.peaks.items())))
                              for n in nodes))
    if key not in _RATIO_CACHE:
        out = []
        for node in nodes:
            if node.kind == "cpu" or dtype not in node.peaks or "bf16" not in node.peaks:
                continue
            eff = _published_matmul_eff(node, _published_rows(node.id, Path(path)))
            if dtype in eff and "bf16" in eff:
                out.append((node.id, eff[dtype].value / eff["bf16"].value))
        _RATIO_CACHE[key] = tuple(out)
    return _RATIO_CACHE[key]


def calibrate(node: Any, points: Iterable[KernelPoint] = (), *, published_csv: Path | None = None,
              use_published: bool = True, catalog: Any = None) -> Calibration:
    """The calibration of one catalog node: (a)/(b) ``points`` > (c) published (with the same-die sibling's
    kernel rows where the node has none: module docstring) > (d) datasheet derated.

    ``use_published=False`` skips (c) (e.g. to predict a node from its datasheet only). ``catalog`` (default: the
    default catalog) is where a ``[die] same_as`` sibling is looked up.
    """
    nid, kind = node.id, node.kind
    peak = {d: p.dense_flops_per_s for d, p in node.peaks.items()}
    pts = list(points)
    pub = _published_rows(nid, published_csv) if use_published else []
    sib = _same_die_node(node, catalog) if use_published else None
    if use_published:
        pub = pub + _same_die_rows(node, sib, pub, published_csv)

    # matmul efficiency per dtype
    eff: dict[str, Rate] = {}
    for p in pts:
        if p.kernel in ("gemm", "gemm_max") and p.metrics.get("flops_per_s"):
            dt = str(p.params.get("dtype", "fp32"))
            if dt not in peak:
                continue
            v = float(p.metrics.get("search_best_flops_per_s") or p.metrics["flops_per_s"]) / peak[dt]
            m, n, k = (int(p.params.get(x, 0) or 0) for x in "mnk")
            if m and n and k:  # undo the shape terms so eff_max is the large-square ceiling
                v = v / max(_gemm_eff(_units(node), 1.0, m, n, k, k_half(peak, dt)), 1e-3)
            prev = eff.get(dt)
            if prev is None or v > prev.value:
                eff[dt] = Rate(value=min(v, 1.0), kind=p.origin, rel_sigma=0.05,
                               source=f"best gemm record ({m}x{n}x{k} {dt}) {p.where}".strip())
    for dt, rate in _published_matmul_eff(node, pub).items():
        eff.setdefault(dt, rate)
    mm_table = _table_figure(PUBLISHED_MATMUL_TFLOPS, node, sib) if use_published else None
    if mm_table is not None and "bf16" not in eff and "bf16" in peak and "bf16" in mm_table[0].peaks:
        n, v, src = mm_table  # at the same fraction of its own peak as on the node it was measured on
        eff["bf16"] = Rate(value=v * 1e12 / n.peaks["bf16"].dense_flops_per_s, kind="published", source=src,
                           rel_sigma=0.05)
    for dt in PREDICT_PRECISIONS:  # bf16 first: the others may derive from its fraction
        if dt in peak and dt not in eff:
            if dt in FROM_BF16_CEILING and "bf16" in eff:
                base = eff["bf16"]
                f, extra, how = narrow_over_bf16(dt, published_csv, catalog)
                eff[dt] = Rate(value=base.value * f, kind=base.kind, rel_sigma=base.rel_sigma + extra,
                               source=base.source + ("" if f == 1 else f"; {dt} = {f:.2f} x the bf16 fraction "
                                                                       f"({how})"))
            else:
                eff[dt] = Rate(value=DERATE_MATMUL if kind != "cpu" else 0.5, kind="datasheet", rel_sigma=0.2,
                               source=f"catalog dense peak x {DERATE_MATMUL if kind != 'cpu' else 0.5} (derating, "
                                      "no measured or published matmul figure)")

    # measured GEMM sweep -> efficiency vs size (the closed loop calibrates from this node's sweeps only)
    curve: dict[str, list[tuple[float, float]]] = {}
    for p in pts:
        if p.kernel == "gemm" and p.metrics.get("flops_per_s"):
            dt = str(p.params.get("dtype", "fp32"))
            m, n, k = (int(p.params.get(x, 0) or 0) for x in "mnk")
            if dt in peak and m and n and k:
                curve.setdefault(dt, []).append((math.log(2.0 * m * n * k),
                                                 min(float(p.metrics["flops_per_s"]) / peak[dt], 1.0)))
    gemm_curve = {}
    for dt, c in curve.items():
        if len(c) >= 3:
            c.sort()
            merged: dict[float, list[float]] = {}
            for x, y in c:
                merged.setdefault(round(x, 6), []).append(y)
            gemm_curve[dt] = tuple((x, sorted(ys)[len(ys) // 2]) for x, ys in sorted(merged.items()))

    # memory bandwidth
    mem = None
    for p in pts:
        if not (p.kernel.startswith("stream") and p.metrics.get("bytes_per_s")):  # kernels/stream.py: stream_copy..
            continue
        nbytes = float(p.metrics.get("bytes") or 0.0)  # the working set (kernels/stream.py counts it per call)
        if 0.0 < nbytes < CACHE_RESIDENT_BYTES:
            continue  # cache-resident: not DRAM bandwidth
        v = float(p.metrics["bytes_per_s"])
        if mem is None or v > mem.value:
            mem = Rate(value=v, kind=p.origin, source=f"best stream record {p.where}".strip(), rel_sigma=0.05)
    if mem is None:
        # a node's first published row is priced (data/calibration/README.md: the 3-stream triad, or its nearest
        # kernel, on the largest arrays); the others corroborate it and are named
        bw = [r for r in pub if r.get("quantity") in ("memory_bw_GBps", "memory_bandwidth_GBps",
                                                       "achievable_memory_bandwidth_GBps")]
        if bw:
            r = bw[0]
            others = "; other published rows: " + ", ".join(
                f"{float(o['value']):.0f} GB/s ({_cond(o.get('condition', '')).get('kernel', '?')})" for o in bw[1:]) \
                if len(bw) > 1 else ""
            mem = Rate(value=float(r["value"]) * 1e9, kind="published", rel_sigma=0.05,
                       source=f"{r.get('source', '')}; {r.get('condition', '')}; {float(r['value']):.0f} GB/s = "
                              f"{float(r['value']) * 1e9 / node.memory_bandwidth_bytes_per_s:.2f} of the datasheet "
                              f"({r.get('as_of', '')}; data/calibration/published.csv){others}")
    if mem is None:
        mem = Rate(value=node.memory_bandwidth_bytes_per_s * DERATE_MEMBW, kind="datasheet", rel_sigma=0.08,
                   source=f"catalog memory bandwidth x {DERATE_MEMBW} (derating)")

    # element-wise (memory-bound) ops: the suite's layernorm / gelu / softmax records of this node, if any
    ew_rates = sorted(float(p.metrics["bytes_per_s"]) for p in pts
                      if p.kernel in ELEMENTWISE_KERNELS and (p.metrics.get("bytes_per_s") or 0) > 0)
    elementwise = None
    if ew_rates:
        bw = ew_rates[len(ew_rates) // 2]
        origin = next(p.origin for p in pts if p.kernel in ELEMENTWISE_KERNELS)
        elementwise = Rate(value=bw, kind=origin, rel_sigma=0.15,
                           source=f"median bytes/s of {len(ew_rates)} element-wise kernel records (layernorm, gelu, "
                                  f"softmax; {bw / 1e9:.1f} GB/s)")

    # attention
    attn = None
    for p in pts:
        if p.kernel == "attention" and p.metrics.get("flops_per_s"):
            dt = str(p.params.get("dtype", "fp32"))
            v = float(p.metrics["flops_per_s"]) / peak.get(dt, peak.get("fp32", 1.0))
            s = float(p.params.get("seq_len", p.params.get("seq", 2048)) or 2048)
            # kernels/fused.py times the forward pass; FlashAttention-2's backward runs ~0.7x the forward's
            # rate (Dao 2023, Fig. 4-7: fwd+bwd below fwd), so the fwd+bwd efficiency is taken as 0.8 x fwd
            v = 0.8 * v * (s + ATTN_S_HALF) / s
            if attn is None or v > attn.value:
                attn = Rate(value=min(v, 1.0), kind=p.origin, rel_sigma=0.1, source=f"attention record {p.where}".strip())
    attn_s_half = ATTN_S_HALF
    default_kernel = DEFAULT_ATTENTION_KERNEL
    if attn is None and pub and nid in FA2_NATIVE_NODES:
        fit = _fit_attention(pub, peak)
        if fit is not None:
            attn, attn_s_half = fit
    # other implementations' published curves (kernel=... rows), for frameworks that run them
    attn_curves = {}
    for kern in sorted({_cond(r.get("condition", "")).get("kernel", DEFAULT_ATTENTION_KERNEL) for r in pub
                        if r.get("quantity") == "attention_tflops"}
                       - ({DEFAULT_ATTENTION_KERNEL} if nid in FA2_NATIVE_NODES else set())):
        fit = _fit_attention(pub, peak, kernel=kern)
        if fit is not None:
            attn_curves[kern] = fit
    if attn is None and attn_curves and nid not in FA2_NATIVE_NODES:
        # FlashAttention-2 is not this architecture's own kernel: price the fastest published one, named
        default_kernel = max(attn_curves, key=lambda k: attn_curves[k][0].value)
        attn, attn_s_half = attn_curves.pop(default_kernel)
        attn = replace(attn, source=f"{attn.source}; the fastest published kernel for {nid}, where FlashAttention-2 "
                                    f"is not the architecture's own (FA2_NATIVE_NODES)")
    attn_table = _table_figure(ATTN_EFF, node, sib) if use_published else None
    if attn is None and attn_table is not None:
        _, v, src = attn_table
        attn = Rate(value=v, kind="published", rel_sigma=0.15, source=src)
    if attn is None:
        attn = Rate(value=ATTN_EFF_DEFAULT if kind != "cpu" else 0.3, kind="datasheet", rel_sigma=0.3,
                    source="no attention measurement: fraction of peak assumed (module ATTN_EFF_DEFAULT)")
        mxu = int(getattr(node, "matrix_unit_dim", 0) or 0)
        if mxu > ATTENTION_HEAD_DIM:
            fill = ATTENTION_HEAD_DIM / mxu
            attn = replace(attn, value=attn.value * fill,
                           source=f"{attn.source} x {fill:g}: head dimension {ATTENTION_HEAD_DIM} on the catalog's "
                                  f"{mxu}x{mxu} matrix unit (accelerators.matrix_unit_dim) fills {fill:.0%} of it "
                                  f"(module ATTENTION_HEAD_DIM)")

    # launch overhead
    launch = None
    for r in pub:
        if r.get("quantity") == "launch_overhead_us":
            launch = Rate(value=float(r["value"]) * 1e-6, kind="published", rel_sigma=0.3,
                          source=f"{r.get('source', '')} ({r.get('as_of', '')})")
    for p in pts:
        if p.kernel == "launch" and p.metrics.get("seconds"):
            launch = Rate(value=float(p.metrics["seconds"]), kind=p.origin, source=f"launch record {p.where}")
    host_op, opt_host, opt_origin = None, [], "measured"
    for p in pts:
        if p.kernel != "dispatch" or not p.metrics.get("median_s"):
            continue
        mode = str(p.params.get("mode", "train"))
        if mode == "optimizer":
            opt_host.append((int(p.params.get("tensors", 8)), float(p.metrics.get("per_step_s") or p.metrics["median_s"])))
            opt_origin = p.origin
            continue
        per = float(p.metrics.get("per_op_s") or float(p.metrics["median_s"]) / int(p.params.get("ops", 1)))
        if mode == "forward" and (launch is None or launch.kind != "measured"):
            launch = Rate(value=per, kind=p.origin, rel_sigma=0.2,
                          source=f"dispatch record (forward, no_grad: {per * 1e6:.1f} us per op) {p.where}".strip())
        elif mode == "train" and (host_op is None or per < host_op.value):  # the least disturbed of repeated probes
            host_op = Rate(value=per, kind=p.origin, rel_sigma=0.2,
                           source=f"dispatch record (train: {per * 1e6:.1f} us per differentiable op, "
                                  f"forward + backward) {p.where}".strip())
    opt_host.sort()
    opt_src = (f"{opt_origin}: dispatch records (optimizer phase: clip_grad_norm_ + AdamW(foreach).step + zero_grad; "
               f"{len(opt_host)} point(s), {opt_host[0][1] * 1e3:.2f} ms at {opt_host[0][0]} tensors)"
               if opt_host else "")
    if launch is None:
        launch = Rate(value=LAUNCH_FLOOR_S.get(kind, 5e-6), kind="datasheet", rel_sigma=0.5,
                      source="per-kernel launch floor, typical figure (module LAUNCH_FLOOR_S)")

    step_oh = Rate(value=STEP_OVERHEAD_S if kind != "cpu" else 1e-4, kind="datasheet", rel_sigma=0.5,
                   source="fixed per-step host overhead (module STEP_OVERHEAD_S, assumption)")
    if kind != "cpu" and host_op is not None:  # the host's own work per step is measured: no fixed guess for it
        step_oh = Rate(value=2.0 * launch.value, kind=host_op.kind, rel_sigma=0.5,
                       source="two launch floors per step (the loss's host sync, the next step's first launch); the "
                              "host's work per step from the dispatch probe (STEP_OVERHEAD_S not used)")
    comms = _comms(node, pts, pub, use_published)
    return Calibration(
        node_id=nid, kind=kind, peak=peak, matmul_eff_max=eff, units=_units(node), mem_bw=mem, attention_eff=attn,
        launch_s=launch, comms=comms,
        overlap=Rate(value=OVERLAP, kind="datasheet", rel_sigma=0.1,
                     source="fraction of overlappable communication hidden (module OVERLAP, assumption)"),
        step_overhead_s=step_oh,
        accelerators_per_node=node.accelerators_per_node,
        scale_up_size=max(1, int(getattr(node, "scale_up_size", 0) or node.accelerators_per_node)),
        memory_capacity_bytes=node.memory_capacity_bytes,
        extra={**({"gemm_curve": gemm_curve} if gemm_curve else {}), "attention_s_half": attn_s_half,
               **({"attention_curves": attn_curves} if attn_curves else {}),
               **({"attention_kernel": default_kernel} if default_kernel != DEFAULT_ATTENTION_KERNEL else {})},
        elementwise_bw=elementwise,
        host_op_s=host_op, optimizer_host=tuple(opt_host), optimizer_host_source=opt_src,
        software_stack=str(getattr(node, "software_stack", "") or ""),
        host_link=_host_link(pub),
    )


def host_link_rate(node_id: str, published_csv: Path | None = None) -> Rate | None:
    """The host <-> device copy rate :func:`calibrate` gives ``node_id`` (``Calibration.host_link``), without the
    rest of its calibration: what an input check needs to know whether activation offload can be priced."""
    return _host_link(_published_rows(node_id, published_csv))


def _host_link(pub: list[dict[str, str]]) -> Rate | None:
    """The node's host <-> device copy rate per accelerator from its published ``host_copy_GBps`` rows (condition
    ``direction=d2h|h2d``; ``concurrent=all``: every accelerator of the node copying at once, as activation offload
    does): the slower direction's figure (each direction has its own copy engines, so the two run side by side and
    the slower one sets the pace). Rows measured one accelerator at a time are not used (one GPU alone gets more of
    a host link it shares). None without such rows: activation offload is then not priced."""
    rows = [r for r in pub if r.get("quantity") == "host_copy_GBps" and _cond(r.get("condition", "")).get(
        "concurrent") == "all"]
    by_dir: dict[str, list[dict[str, str]]] = {}
    for r in rows:
        by_dir.setdefault(_cond(r.get("condition", "")).get("direction", ""), []).append(r)
    if not {"d2h", "h2d"} <= set(by_dir):
        return None
    r = min((min(by_dir[d], key=lambda x: float(x["value"])) for d in ("d2h", "h2d")), key=lambda x: float(x["value"]))
    carried = "; carried from another node (source_detail)" if "carried" in r.get("source_detail", "") else ""
    return Rate(value=float(r["value"]) * 1e9, kind="published", rel_sigma=0.25 if carried else 0.1,
                source=f"{r.get('source', '')}; {r.get('condition', '')}; {float(r['value']):.0f} GB/s per accelerator, "
                       f"the slower direction ({r.get('as_of', '')}; data/calibration/published.csv){carried}")


def _fit_attention(pub: list[dict[str, str]], peak: Mapping[str, float], kernel: str = DEFAULT_ATTENTION_KERNEL
                   ) -> tuple[Rate, float] | None:
    """Published fwd+bwd TFLOP/s of one attention implementation (``kernel``; rows without a ``kernel=``
    condition are FlashAttention-2) vs sequence length -> (eff_max, s_half) of ``eff(s) = eff_max s / (s + s_half)``
    (least squares over an s_half grid); causal rows preferred. Beyond the longest published sequence the rate
    stays at the curve's plateau: a causal kernel's rate rises towards its non-causal rate as the masked diagonal
    blocks' share (~ block / s) shrinks, and FlashAttention-2's causal 16k rate is already within 3% of its
    non-causal one (328 vs 338 TFLOP/s on H100, 189 vs 203 on A100), so the plateau is not optimistic."""
    pts: dict[bool, list[tuple[float, float, str]]] = {True: [], False: []}
    for r in pub:
        if r.get("quantity") != "attention_tflops":
            continue
        c = _cond(r.get("condition", ""))
        if c.get("kernel", DEFAULT_ATTENTION_KERNEL) != kernel:
            continue
        if c.get("pass", "fwd_bwd") != "fwd_bwd" or c.get("head_dim", "128") not in ("128",):
            continue
        dt = c.get("dtype", "bf16")
        pk = _attention_peak(peak, dt)
        if not pk or "seq_len" not in c:
            continue
        causal = c.get("causal", "true").lower() == "true"
        pts[causal].append((float(c["seq_len"]), float(r["value"]) * 1e12 / pk, r.get("source", "")))
    use = pts[True] if len(pts[True]) >= 3 else pts[False]
    if len(use) < 3:
        return None
    best = None
    for sh in (32.0, 64.0, 128.0, 192.0, 256.0, 384.0, 512.0, 768.0, 1024.0, 1536.0, 2048.0):
        ratios = sorted(v * (s + sh) / s for s, v, _ in use)
        emax = ratios[len(ratios) // 2]
        err = sum((emax * s / (s + sh) - v) ** 2 for s, v, _ in use)
        if best is None or err < best[0]:
            best = (err, emax, sh)
    _, emax, sh = best
    kind = "causal" if use is pts[True] else "non-causal (no causal curve published; causal kernels run ~5-10% slower)"
    return (Rate(value=min(emax, 1.0), kind="published", rel_sigma=0.1,
                 source=f"{use[0][2]}; {ATTENTION_KERNEL_NAMES.get(kernel, kernel)} fwd+bwd, head_dim 128, {kind}, "
                        f"{len(use)} sequence lengths; "
                        f"eff(s) = {emax:.3f} s/(s + {sh:.0f}) (data/calibration/published.csv)"), sh)


# ------------------------------------------------------------------------ collectives
@dataclass(frozen=True)
class _Curve:
    """One busbw curve of one collective on one geometry, as (size, time) points (replicates allowed)."""

    origin: str  # SOURCE_KINDS
    collective: str
    ranks: int
    geometry: tuple[int, int]  # (ranks per domain, domains)
    sizes: tuple[float, ...]
    times: tuple[float, ...]
    source: str
    raw: bool = False  # a raw nccl-tests log (with in-place replicates): preferred over a table of the same curve
    network_bytes_per_s: float | None = None  # the measured system's scale-out network per node, where stated

    @property
    def distinct(self) -> int:
        return len({x for x in self.sizes if x >= COMMS_FIT_MIN_BYTES})


def _geometry(level: str, ranks: int, nodes: int | None, apn: int) -> tuple[int, int]:
    if level == "intra":
        return ranks, 1
    n_dom = int(nodes) if nodes and nodes > 1 else -(-ranks // max(min(apn, ranks), 1))
    return -(-ranks // n_dom), n_dom


def _curve_level(ranks: int, nodes: int | None, domain: int) -> str:
    return "inter" if (nodes and nodes > 1) or ranks > domain else "intra"


def _point_curves(pts: list[KernelPoint], apn: int, domain: int) -> dict[str, list[_Curve]]:
    """(a)/(b): the store's collective records handed in as points, one curve per (origin, kernel, ranks, nodes)."""
    groups: dict[tuple, list[tuple[float, float]]] = {}
    srcs: dict[tuple, str] = {}
    for p in pts:
        if p.kernel not in ("all_reduce", "all_gather", "reduce_scatter"):
            continue
        pa, me = p.params, p.metrics
        size = float(pa.get("size_bytes", pa.get("size", 0)) or 0)
        n = int(pa.get("ranks") or pa.get("world_size") or pa.get("nprocs") or 0)
        if size <= 0 or n < 2:
            continue
        nodes = int(pa.get("nodes") or 0) or None
        level = str(pa.get("level") or _curve_level(n, nodes, domain))
        f = busbw_factor(p.kernel, n)
        times = [float(me[k]) for k in ("time_s", "inplace_time_s") if (me.get(k) or 0) > 0]
        if not times:
            t = next((float(me[k]) for k in ("median_s", "latency_s", "seconds") if (me.get(k) or 0) > 0), 0.0)
            bw = float(me.get("busbw_bytes_per_s") or me.get("busbw_Bps") or 0.0)
            times = [t] if t > 0 else ([f * size / bw] if bw > 0 else [])
        # a record written by `hweval import` carries its provenance in params: source (b), whatever the caller said
        origin = "imported" if pa.get("importer") else p.origin
        key = (origin, p.kernel, level, n, nodes)
        groups.setdefault(key, []).extend((size, t) for t in times)
        if pa.get("source_path"):
            srcs[key] = f"; {pa['source_path']}"
    out: dict[str, list[_Curve]] = {}
    for (origin, kern, level, n, nodes), rows in groups.items():
        rows.sort()
        out.setdefault(level, []).append(_Curve(
            origin=origin, collective=kern, ranks=n, geometry=_geometry(level, n, nodes, apn),
            sizes=tuple(r[0] for r in rows), times=tuple(r[1] for r in rows), raw=True,
            source=f"{kern} {'imported' if origin == 'imported' else 'measured'} records of this node ({n} ranks"
                   f"{f', {nodes} nodes' if nodes else ''}, {len({r[0] for r in rows})} sizes{srcs.get(key, '')})"))
    return out


@lru_cache(maxsize=8)
def _reference_curves(ref_dir: str) -> tuple[tuple[str, str, _Curve], ...]:
    """(c) the public curves of ``data/reference/nccl_tests`` (``sources.toml``): (node id, level, curve)."""
    d = Path(ref_dir)
    try:
        meta = tomllib.loads((d / "sources.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return ()
    out = []
    for key, e in meta.items():
        try:
            coll, n, nodes = str(e["collective"]), int(e["ranks"]), int(e.get("nodes", 1) or 1)
            text = (d / e["file"]).read_text()
        except (KeyError, OSError, ValueError):
            continue
        f = busbw_factor(coll, n)
        rows: list[tuple[float, float]] = []
        if e.get("format") == "csv":
            for r in csv.DictReader(line for line in text.splitlines() if not line.startswith("#")):
                s_b, bw = float(r["size_bytes"]), float(r["busbw_GBps"]) * 1e9
                if s_b > 0 and bw > 0:
                    rows.append((s_b, f * s_b / bw))
        else:
            try:
                tab = parse_nccl_text(text, path=f"data/reference/nccl_tests/{e['file']}", collective=coll, ranks=n)[0]
            except ModelInputError:
                continue
            rows = [(float(r.size_bytes), t) for r in tab.rows for t in (r.time_s, r.inplace_time_s)
                    if r.size_bytes > 0 and t > 0]
        rows.sort()
        what = "torch.distributed benchmark" if e.get("format") == "csv" else "nccl-tests"
        level = "inter" if nodes > 1 else "intra"
        net = e.get("inter_node_Gbps")
        out.append((str(e.get("node", "")), level, _Curve(
            network_bytes_per_s=float(net) * 1e9 / 8.0 if isinstance(net, (int, float)) and net > 0 else None,
            origin="published", collective=coll, ranks=n, geometry=(-(-n // nodes), nodes) if nodes > 1 else (n, 1),
            sizes=tuple(r[0] for r in rows), times=tuple(r[1] for r in rows), raw=e.get("format") != "csv",
            source=f"{what} {coll} busbw, {e.get('system', key)} (data/reference/nccl_tests/{e['file']}; "
                   f"{e.get('url', '')})")))
    return tuple(out)


def _published_csv_curves(pub: list[dict[str, str]], apn: int) -> dict[str, list[_Curve]]:
    """(c) busbw rows of published.csv, one curve per (source, collective, ranks, level) at NCCL's default algorithm."""
    series: dict[tuple, list[tuple[float, float]]] = {}
    for r in pub:
        if not r.get("quantity", "").startswith("busbw"):
            continue
        c = _cond(r.get("condition", ""))
        if c.get("algo", "default") not in ("default", ""):
            continue  # a forced algorithm is not what training runs with
        coll, n = c.get("collective", "all_reduce"), int(float(c.get("ranks", 0) or 0))
        size = float(c.get("size_bytes", 0) or 0)
        bw = float(r["value"]) * (1e9 if "GB" in r.get("unit", "GB/s") else 1.0)
        if n < 2 or size <= 0 or bw <= 0 or coll not in ("all_reduce", "all_gather", "reduce_scatter"):
            continue
        key = (r.get("source", ""), coll, n, c.get("level", "intra"), r.get("as_of", ""))
        series.setdefault(key, []).append((size, busbw_factor(coll, n) * size / bw))
    out: dict[str, list[_Curve]] = {}
    for (src, coll, n, level, as_of), rows in series.items():
        rows.sort()
        out.setdefault(level, []).append(_Curve(
            origin="published", collective=coll, ranks=n, geometry=_geometry(level, n, None, apn),
            sizes=tuple(x[0] for x in rows), times=tuple(x[1] for x in rows),
            source=f"{src}; {coll} busbw, {n} ranks, NCCL default algorithm ({as_of}; data/calibration/published.csv)"))
    return out


@lru_cache(maxsize=64)
def _fit_curve(collective: str, ranks: int, sizes: tuple[float, ...], times: tuple[float, ...],
               ceiling: float | None = None) -> tuple[CommsResult, float] | None:
    """CommsModel fit of one curve (sizes >= COMMS_FIT_MIN_BYTES) and its relative 1-sigma (module docstring).
    ``ceiling``: the line-rate bound on busbw across domains (``LinkModel.network_ceiling``), None inside one."""
    try:
        res = CommsModel(collective=collective, min_size_bytes=COMMS_FIT_MIN_BYTES, max_busbw=ceiling).fit(
            list(sizes), time_s=list(times), ranks=ranks)
    except ModelInputError:
        return None
    half = []
    for size in (16 * 2**20, 2**30):  # a TP activation and a DP gradient bucket
        p = collective_time_s(collective, size, ranks, level=0.9, model_or_link=res)
        half.append(math.log(p["hi"] / p["time_s"]))
    return res, max(half) / Z90


def _comms(node: Any, pts: list[KernelPoint], pub: list[dict[str, str]], use_published: bool
           ) -> dict[str, LevelComms]:
    """Per level: fitted ramps from the best source that has a curve, else the catalog link model."""
    try:
        link = LinkModel.from_node(node)
    except ModelInputError:  # a node without a link figure (one accelerator, no network): 1 B/s, labelled below
        apn0 = max(int(getattr(node, "accelerators_per_node", 1) or 1), 1)
        link = LinkModel(intra_bytes_per_s=1.0, inter_bytes_per_s=1.0, accelerators_per_node=apn0,
                         source=f"catalog {node.id}: no link figures")
    apn = int(node.accelerators_per_node)
    cand = _point_curves(pts, apn, link.domain)
    other_net = []
    if use_published:
        node_net = float(getattr(node, "inter_node_bytes_per_s", 0.0) or 0.0)
        for nid, level, c in _reference_curves(str(DATA_DIR / "reference" / "nccl_tests")):
            if nid != node.id:
                continue
            if level == "inter" and c.network_bytes_per_s and node_net > 0 \
                    and abs(c.network_bytes_per_s / node_net - 1.0) > NETWORK_MATCH:
                # measured on a network other than the catalog node's: it says how that one performs
                other_net.append(f"{c.collective} on {c.ranks} ranks at {c.network_bytes_per_s * 8e-9:g} Gb/s per "
                                 f"node")
                continue
            cand.setdefault(level, []).append(c)
        for level, cs in _published_csv_curves(pub, apn).items():
            cand.setdefault(level, []).extend(cs)
    out: dict[str, LevelComms] = {}
    for level in LEVELS:
        curves = [c for c in cand.get(level, []) if c.distinct >= 3]
        fits: dict[str, CommsResult] = {}
        geos: dict[str, tuple[int, int]] = {}
        labels, sig, kinds = [], [], []
        for origin in SOURCE_KINDS[:3]:  # measured > imported > published: the first origin with a curve wins
            mine = sorted((c for c in curves if c.origin == origin), key=lambda c: (-c.distinct, not c.raw, c.source))
            for c in mine:
                if c.collective in fits:
                    continue
                # across nodes the NICs' line rate bounds the fitted asymptote (hwmodels.comms "Ceiling"):
                # a sweep that stops while still ramping cannot extrapolate past the wire
                got = _fit_curve(c.collective, c.ranks, c.sizes, c.times,
                                 ceiling=link.network_ceiling(c.collective, c.ranks) if level == "inter" else None)
                if got is None:
                    continue
                res, rel = got
                fits[c.collective], geos[c.collective] = res, c.geometry
                sig.append(rel)
                kinds.append(origin)
                labels.append(f"{c.source}: CommsModel ramp fit (B_inf {res.busbw_inf / 1e9:.0f} GB/s, "
                              f"alpha {res.alpha_s * 1e6:.0f} us, {len(res.regimes)} regime(s)) on sizes >= 32 KiB")
            if fits:
                break
        if fits:
            others = [c for c in ("all_reduce", "all_gather", "reduce_scatter") if c not in fits]
            note = (f"; {', '.join(others)} priced in bus bytes from that curve" if others else "") + \
                "; other rank counts and placements through the catalog link model's ratios" + \
                (_other_net_note(node, other_net) if level == "inter" else "")
            out[level] = LevelComms(level=level, link=link, fits=fits, geometries=geos, kind=kinds[0],
                                    source="; ".join(labels) + note, rel_sigma=max(sig))
            continue
        bi = link.intra_efficiency * link.intra_bytes_per_s
        bn = link.inter_efficiency * link.inter_bytes_per_s
        out[level] = LevelComms(
            level=level, link=link, fits={}, geometries={}, kind="datasheet", rel_sigma=LINK_MODEL_REL_ERROR / Z90,
            source=f"link model (hwmodels.comms.LinkModel.from_node): no measured, imported or published {level} "
                   f"busbw curve for {node.id}; catalog links, intra {bi / 1e9:.0f} GB/s busbw "
                   f"({link.intra_efficiency:.2f} x {link.intra_bytes_per_s / 1e9:.0f} GB/s/dir), inter "
                   f"{bn / 1e9:.1f} GB/s per accelerator ({link.inter_efficiency:.2f} x NIC), "
                   f"+/-{LINK_MODEL_REL_ERROR:.0%} band"
                   + (_other_net_note(node, other_net) if level == "inter" else ""))
    return out


#: a published curve calibrates a node's scale-out level only when its system's network per node (sources.toml
#: ``inter_node_Gbps``) is within this relative distance of the catalog node's
NETWORK_MATCH = 0.05


def _other_net_note(node: Any, skipped: list[str]) -> str:
    if not skipped:
        return ""
    return (f"; not used, measured on another network than the catalog's "
            f"{float(node.inter_node_bytes_per_s) * 8e-9:g} Gb/s per node: " + ", ".join(skipped))


__all__ = ["Calibration", "Rate", "LevelComms", "KernelPoint", "calibrate", "SOURCE_KINDS"]
