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
mamf-finder sweeps, which peak at k = 2048..3840). The time is then bounded
below by the bytes moved at the achievable memory bandwidth (roofline,
Williams et al. 2009) and by the per-kernel launch floor.

Collective bus bandwidth ramps with the message size (nccl-tests
PERFORMANCE.md definitions of algbw/busbw)::

    busbw(S) = busbw_max * S / (S + S_HALF),   t = latency + factor * S / busbw(S)

with ``busbw_max``, ``S_HALF`` and ``latency`` fitted per link level from
nccl-tests logs where they exist (:func:`fit_ramp`), else from the catalog's
link figure derated.
"""

from __future__ import annotations

import csv
import math
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from hwmodels.errors import ModelInputError, choices_error

SOURCE_KINDS = ("measured", "imported", "published", "datasheet")
LEVELS = ("intra", "inter")
K_HALF = 64.0  # see module docstring
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

    kernel: str  # gemm | stream | attention | all_reduce | all_gather | reduce_scatter | launch
    params: Mapping[str, Any]
    metrics: Mapping[str, Any]
    origin: str = "measured"  # measured | imported
    where: str = ""  # e.g. the run id / file


@dataclass(frozen=True, kw_only=True)
class Ramp:
    """Bus bandwidth vs message size on one link level."""

    busbw_max: float  # B/s
    s_half: float  # B
    latency_s: float
    kind: str
    source: str
    rel_sigma: float = 0.15

    def busbw(self, size_bytes: float) -> float:
        return self.busbw_max * size_bytes / (size_bytes + self.s_half)


def fit_ramp(points: Iterable[tuple[float, float, float]]) -> tuple[float, float, float]:
    """(size_B, time_s, busbw_Bps) points -> (busbw_max, s_half, latency_s).

    busbw_max: median of the largest three sizes; latency: median time of the
    three smallest; s_half: median over mid-size points of S (B/b - 1).
    """
    pts = sorted(p for p in points if p[0] > 0 and p[1] > 0)
    if len(pts) < 4:
        raise ModelInputError("fit_ramp: need >= 4 (size, time, busbw) points")
    top = sorted(p[2] for p in pts[-3:])
    bmax = top[1]
    lat = sorted(p[1] for p in pts[:3])[1]
    mids = [p[0] * (bmax / p[2] - 1.0) for p in pts if 0.05 * bmax < p[2] < 0.95 * bmax]
    s_half = sorted(mids)[len(mids) // 2] if mids else 1 << 20
    return bmax, max(s_half, 1.0), lat


def parse_nccl_log(text: str) -> list[tuple[float, float, float]]:
    """nccl-tests stdout -> (size_B, out-of-place time_s, busbw_Bps) rows (rank prefixes like '0:' allowed)."""
    rows = []
    for line in text.splitlines():
        s = re.sub(r"^\s*\d+:\s", " ", line)
        if s.lstrip().startswith("#"):
            continue
        parts = s.split()
        if len(parts) < 8 or not parts[0].isdigit():
            continue
        try:
            size, t_us, busbw = float(parts[0]), float(parts[5]), float(parts[7])
        except ValueError:
            continue
        rows.append((size, t_us * 1e-6, busbw * 1e9))
    return rows


# nccl-tests logs shipped under data/reference/nccl_tests: file stem -> (node id, level, what)
NCCL_LOGS: dict[str, tuple[str, str, str]] = {
    "dgx_h100_8gpu_all_reduce": ("h100-sxm", "intra", "nccl-tests all_reduce_perf, DGX H100, 8 GPUs, 1 node"),
    "aws_p5_2node_16gpu_all_reduce": ("h100-sxm", "inter", "nccl-tests all_reduce_perf, AWS p5.48xlarge, 2 nodes x 8 H100"),
    "aws_p4de_2node_16gpu_all_reduce": ("a100-80gb-sxm", "inter",
                                        "nccl-tests all_reduce_perf, AWS p4de.24xlarge, 2 nodes x 8 A100 80GB"),
}

# (c) small published table used when data/calibration/published.csv has no figure for a node.
# Achievable dense bf16 matmul (mamf-finder: best of a shape sweep).
PUBLISHED_MATMUL_TFLOPS: dict[str, tuple[float, str]] = {
    "a100-80gb-sxm": (267.9, "mamf-finder results table, github.com/mag-/gpu_benchmark README 'Stats' "
                             "(NVIDIA A100 SXM 267.9 TFLOPS, 6912x16384x2048), read 2026-12"),
    "a100-40gb-sxm": (267.9, "A100 SXM mamf-finder figure (github.com/mag-/gpu_benchmark README), same GA100 "
                             "silicon and clocks as the 80GB part"),
    "h100-sxm": (792.1, "mamf-finder results table, github.com/mag-/gpu_benchmark README 'Stats' "
                        "(NVIDIA H100 SXM 792.1 TFLOPS, 6144x17920x2816), read 2026-12"),
    "h200-sxm": (792.1, "H100 SXM mamf-finder figure (github.com/mag-/gpu_benchmark README): H200 has the same GH100 "
                        "die, SM count and clocks (NVIDIA H200 datasheet); only memory differs"),
    "mi300x": (758.3, "mamf-finder results table, github.com/mag-/gpu_benchmark README 'Stats' "
                      "(AMD MI300X 758.3 TFLOPS, 4352x13568x3840), read 2026-12"),
}

# (d) deratings used only where nothing measured or published exists; each labelled.
DERATE_MATMUL = 0.75  # median achievable/peak of the three mamf-finder figures above (0.86, 0.80, 0.58) -> 0.75 rounded down for unknown stacks
DERATE_MEMBW = 0.85  # STREAM-style copy on HBM GPUs reaches ~85-92% of datasheet (H100/A100 babelstream reports); lower end taken
DERATE_INTRA = 0.80  # nccl-tests DGX H100 8-GPU all_reduce busbw 480 GB/s of 450 GB/s unidir NVLink = 1.07 (NVLS); ring-only fabrics ~0.8
DERATE_INTER = 0.80  # nccl-tests multi-node busbw vs NIC line rate (ring), 80% of line rate
# Flash-attention training efficiency (fwd+bwd, causal, head dim 128, long sequence) as a fraction of dense bf16 peak:
# FlashAttention-2 (Dao 2023, arXiv:2307.08691): "up to 225 TFLOPs/s per A100" end-to-end and ~190 TFLOP/s
# fwd+bwd kernels at 8k-16k (Fig. 4) -> 0.60 of 312; on H100 SXM5 "up to 335 TFLOPs/s" (Fig. 7) -> 0.34 of 989.
ATTN_EFF = {"a100-80gb-sxm": (0.60, "FlashAttention-2 on A100 (Dao 2023, arXiv:2307.08691, Fig. 4: ~190 of 312 TFLOP/s fwd+bwd)"),
            "a100-40gb-sxm": (0.60, "FlashAttention-2 on A100 (Dao 2023, arXiv:2307.08691, Fig. 4: ~190 of 312 TFLOP/s fwd+bwd)"),
            "h100-sxm": (0.34, "FlashAttention-2 on H100 SXM5 (Dao 2023, arXiv:2307.08691, Fig. 7: up to 335 of 989 TFLOP/s)"),
            "h200-sxm": (0.34, "FlashAttention-2 on H100 SXM5 (Dao 2023, Fig. 7), same Hopper SM as H200")}
ATTN_EFF_DEFAULT = 0.40  # (d) no flash-attention figure for this node: 0.4 (between Hopper-FA2 0.34 and Ampere 0.60)
ATTN_S_HALF = 384.0  # attention kernels lose efficiency at short sequences: FA2 Fig. 4, 512 tokens ~55-60% of the 16k rate
LAUNCH_FLOOR_S = {"gpu": 4e-6, "tpu": 2e-6, "accelerator": 6e-6, "cpu": 2e-6}
# per-kernel floor: CUDA launch + inter-kernel gap 2.5-5 us (NVIDIA Nsight Systems traces of small kernels; PyTorch
# "CUDA graphs" blog 2021 quotes "a few microseconds"); TPU/XLA fused programs launch less often.
STEP_OVERHEAD_S = 0.010  # optimizer zero_grad/bookkeeping, data loader handoff, per step (d); fitted away in validation
OVERLAP = 0.95  # fraction of overlappable communication hidden under compute when it fits (d): NCCL kernels take SMs


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
    ramps: Mapping[str, Ramp]  # level -> ramp (per-rank busbw over the whole node's links for inter)
    overlap: Rate
    step_overhead_s: Rate
    accelerators_per_node: int
    scale_up_size: int
    memory_capacity_bytes: float
    extra: Mapping[str, Any] = field(default_factory=dict)

    # -- GEMM ----------------------------------------------------------------------
    def gemm_eff(self, m: int, n: int, k: int, dtype: str) -> float:
        """Achievable fraction of peak for this shape: interpolated from >= 3 measured GEMM shapes of this
        node (log-FLOPs axis, clamped at the ends) when the store has them, else the tile/wave model."""
        pts = self.extra.get("gemm_curve", {}).get(dtype)
        if pts:
            return _interp_eff(pts, 2.0 * m * n * k)
        return _gemm_eff(self.units, self._eff_max(dtype), int(m), int(n), int(k))

    def _eff_max(self, dtype: str) -> float:
        r = self.matmul_eff_max.get(dtype) or self.matmul_eff_max.get("bf16")
        return r.value if r is not None else DERATE_MATMUL

    def peak_flops(self, dtype: str) -> float:
        if dtype in self.peak:
            return self.peak[dtype]
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
        return max(t_c, t_m, self.launch_s.value)

    def attention_time(self, flops: float, seq_len: int, dtype: str) -> float:
        sh = self.extra.get("attention_s_half", ATTN_S_HALF)
        eff = self.attention_eff.value * seq_len / (seq_len + sh)
        return flops / (self.peak_flops(dtype) * eff)

    def memory_time(self, nbytes: float, launches: float = 1.0) -> float:
        return max(nbytes / self.mem_bw.value, launches * self.launch_s.value)

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
        for lvl, r in self.ramps.items():
            out[f"collective_busbw.{lvl}"] = f"{r.kind}: {r.source}"
        out["overlap"] = self.overlap.label()
        out["step_overhead"] = self.step_overhead_s.label()
        return out

    def source_kinds(self) -> dict[str, str]:
        out = {f"matmul_efficiency.{d}": r.kind for d, r in self.matmul_eff_max.items()}
        out.update(memory_bandwidth=self.mem_bw.kind, attention_efficiency=self.attention_eff.kind,
                   launch_overhead=self.launch_s.kind, overlap=self.overlap.kind)
        out.update({f"collective_busbw.{lvl}": r.kind for lvl, r in self.ramps.items()})
        return out

    def rel_sigma(self) -> float:
        """Combined relative uncertainty of the compute-side rates (root sum of squares, dominant terms)."""
        m = self.matmul_eff_max.get("bf16") or next(iter(self.matmul_eff_max.values()), None)
        parts = [m.rel_sigma if m else 0.2, self.attention_eff.rel_sigma * 0.5, self.mem_bw.rel_sigma * 0.3]
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


@lru_cache(maxsize=200_000)
def _gemm_eff(units: int, eff_max: float, m: int, n: int, k: int) -> float:
    if units <= 0:  # no unit count in the catalog: padding to 128 only (systolic arrays / MMEs are 128 wide)
        pad = (m / (-(-m // 128) * 128)) * (n / (-(-n // 128) * 128))
        return max(eff_max * pad * k / (k + K_HALF), 1e-4)
    best = 0.0
    for tm, tn, speed in TILES:
        gm, gn = -(-m // tm), -(-n // tn)
        pad = (m / (gm * tm)) * (n / (gn * tn))
        tiles = gm * gn
        waves = -(-tiles // units)
        wave = tiles / (waves * units)
        best = max(best, pad * wave * speed)
    return max(eff_max * best * k / (k + K_HALF), 1e-4)


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


@lru_cache(maxsize=8)
def _nccl_ramp(stem: str) -> tuple[float, float, float] | None:
    p = DATA_DIR / "reference" / "nccl_tests" / f"{stem}.log"
    if not p.exists():
        return None
    pts = parse_nccl_log(p.read_text())
    return fit_ramp(pts) if len(pts) >= 4 else None


def calibrate(node: Any, points: Iterable[KernelPoint] = (), *, published_csv: Path | None = None,
              use_published: bool = True) -> Calibration:
    """The calibration of one catalog node: (a)/(b) ``points`` > (c) published > (d) datasheet derated.

    ``use_published=False`` skips (c) (e.g. to predict a node from its datasheet only).
    """
    nid, kind = node.id, node.kind
    peak = {d: p.dense_flops_per_s for d, p in node.peaks.items()}
    pts = list(points)
    pub = _published_rows(nid, published_csv) if use_published else []

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
                v = v / max(_gemm_eff(_units(node), 1.0, m, n, k), 1e-3)
            prev = eff.get(dt)
            if prev is None or v > prev.value:
                eff[dt] = Rate(value=min(v, 1.0), kind=p.origin, rel_sigma=0.05,
                               source=f"best gemm record ({m}x{n}x{k} {dt}) {p.where}".strip())
    pub_eff: dict[str, Rate] = {}
    for r in pub:
        if r.get("quantity") in ("matmul_tflops", "achievable_matmul_tflops"):
            c = _cond(r.get("condition", ""))
            dt = c.get("dtype", "bf16")
            if dt not in peak:
                continue
            v = float(r["value"]) * 1e12 / peak[dt]
            m, n, k = (int(float(c.get(x, 0) or 0)) for x in "mnk")
            if m and n and k:  # the shape terms of the tile model are undone: eff_max is the ceiling
                v = v / max(_gemm_eff(_units(node), 1.0, m, n, k), 1e-3)
            if dt not in pub_eff or v > pub_eff[dt].value:
                pub_eff[dt] = Rate(value=min(v, 1.0), kind="published", rel_sigma=0.05,
                                   source=f"{r.get('source', '')}; {r.get('condition', '')} ({r.get('as_of', '')}; "
                                          "data/calibration/published.csv)")
    for dt, rate in pub_eff.items():
        eff.setdefault(dt, rate)
    if use_published and "bf16" not in eff and nid in PUBLISHED_MATMUL_TFLOPS and "bf16" in peak:
        v, src = PUBLISHED_MATMUL_TFLOPS[nid]
        eff["bf16"] = Rate(value=v * 1e12 / peak["bf16"], kind="published", source=src, rel_sigma=0.05)
    for dt in ("bf16", "fp16", "fp8", "fp32"):
        if dt in peak and dt not in eff:
            if dt in ("fp16", "fp8") and "bf16" in eff:
                base = eff["bf16"]
                # fp8 GEMMs reach a lower fraction of their doubled peak (TransformerEngine reports ~1.3-1.6x
                # over bf16 end to end, not 2x); 0.85 x the bf16 fraction, labelled
                f = 1.0 if dt == "fp16" else 0.85
                eff[dt] = Rate(value=base.value * f, kind=base.kind, rel_sigma=base.rel_sigma + (0.1 if f < 1 else 0),
                               source=base.source + ("" if f == 1 else "; fp8 = 0.85 x the bf16 fraction (assumption)"))
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
        if p.kernel.startswith("stream") and p.metrics.get("bytes_per_s"):  # kernels/stream.py: stream_copy, ...
            v = float(p.metrics["bytes_per_s"])
            if mem is None or v > mem.value:
                mem = Rate(value=v, kind=p.origin, source=f"best stream record {p.where}".strip(), rel_sigma=0.05)
    if mem is None:
        for r in pub:
            if r.get("quantity") in ("memory_bw_GBps", "memory_bandwidth_GBps", "achievable_memory_bandwidth_GBps"):
                mem = Rate(value=float(r["value"]) * 1e9, kind="published", rel_sigma=0.05,
                           source=f"{r.get('source', '')} ({r.get('as_of', '')})")
                break
    if mem is None:
        mem = Rate(value=node.memory_bandwidth_bytes_per_s * DERATE_MEMBW, kind="datasheet", rel_sigma=0.08,
                   source=f"catalog memory bandwidth x {DERATE_MEMBW} (derating)")

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
    if attn is None and pub:
        fit = _fit_attention(pub, peak)
        if fit is not None:
            attn, attn_s_half = fit
    if attn is None and use_published and nid in ATTN_EFF:
        v, src = ATTN_EFF[nid]
        attn = Rate(value=v, kind="published", source=src, rel_sigma=0.15)
    if attn is None:
        attn = Rate(value=ATTN_EFF_DEFAULT if kind != "cpu" else 0.3, kind="datasheet", rel_sigma=0.3,
                    source="no attention measurement: fraction of peak assumed (module ATTN_EFF_DEFAULT)")

    # launch overhead
    launch = None
    for r in pub:
        if r.get("quantity") == "launch_overhead_us":
            launch = Rate(value=float(r["value"]) * 1e-6, kind="published", rel_sigma=0.3,
                          source=f"{r.get('source', '')} ({r.get('as_of', '')})")
    for p in pts:
        if p.kernel == "launch" and p.metrics.get("seconds"):
            launch = Rate(value=float(p.metrics["seconds"]), kind=p.origin, source=f"launch record {p.where}")
    if launch is None:
        launch = Rate(value=LAUNCH_FLOOR_S.get(kind, 5e-6), kind="datasheet", rel_sigma=0.5,
                      source="per-kernel launch floor, typical figure (module LAUNCH_FLOOR_S)")

    ramps = _ramps(node, pts, pub, use_published)
    return Calibration(
        node_id=nid, kind=kind, peak=peak, matmul_eff_max=eff, units=_units(node), mem_bw=mem, attention_eff=attn,
        launch_s=launch, ramps=ramps,
        overlap=Rate(value=OVERLAP, kind="datasheet", rel_sigma=0.1,
                     source="fraction of overlappable communication hidden (module OVERLAP, assumption)"),
        step_overhead_s=Rate(value=STEP_OVERHEAD_S if kind != "cpu" else 1e-4, kind="datasheet", rel_sigma=0.5,
                             source="fixed per-step host overhead (module STEP_OVERHEAD_S, assumption)"),
        accelerators_per_node=node.accelerators_per_node,
        scale_up_size=max(1, int(getattr(node, "scale_up_size", 0) or node.accelerators_per_node)),
        memory_capacity_bytes=node.memory_capacity_bytes,
        extra={**({"gemm_curve": gemm_curve} if gemm_curve else {}), "attention_s_half": attn_s_half},
    )


def _fit_attention(pub: list[dict[str, str]], peak: Mapping[str, float]) -> tuple[Rate, float] | None:
    """Published flash-attention fwd+bwd TFLOP/s vs sequence length -> (eff_max, s_half) of
    ``eff(s) = eff_max s / (s + s_half)`` (least squares over an s_half grid); causal rows preferred."""
    pts: dict[bool, list[tuple[float, float, str]]] = {True: [], False: []}
    for r in pub:
        if r.get("quantity") != "attention_tflops":
            continue
        c = _cond(r.get("condition", ""))
        if c.get("pass", "fwd_bwd") != "fwd_bwd" or c.get("head_dim", "128") not in ("128",):
            continue
        dt = c.get("dtype", "bf16")
        pk = peak.get(dt) or peak.get("bf16") or peak.get("fp16")
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
                 source=f"{use[0][2]}; FlashAttention-2 fwd+bwd, head_dim 128, {kind}, {len(use)} sequence lengths; "
                        f"eff(s) = {emax:.3f} s/(s + {sh:.0f}) (data/calibration/published.csv)"), sh)


def _ramps(node: Any, pts: list[KernelPoint], pub: list[dict[str, str]], use_published: bool) -> dict[str, Ramp]:
    out: dict[str, Ramp] = {}
    # (a)/(b) collective records
    for level in LEVELS:
        rows = []
        for p in pts:
            if p.kernel == "all_reduce" and p.metrics.get("busbw_Bps"):
                lvl = str(p.params.get("level", "intra"))
                if lvl == level:
                    rows.append((float(p.params.get("size_bytes", p.params.get("size", 0)) or 0),
                                 float(p.metrics.get("median_s", p.metrics.get("seconds", 1e-3)) or 1e-3),
                                 float(p.metrics["busbw_Bps"])))
        if len(rows) >= 4:
            b, s, lat = fit_ramp(rows)
            out[level] = Ramp(busbw_max=b, s_half=s, latency_s=lat, kind=pts[0].origin,
                              source=f"all_reduce records of this node ({len(rows)} sizes)", rel_sigma=0.05)
    # (c) published.csv busbw rows
    if use_published:
        for level in LEVELS:
            if level in out:
                continue
            series: dict[tuple, list] = {}
            for r in pub:
                if r.get("quantity", "").startswith("busbw"):
                    c = _cond(r.get("condition", ""))
                    if c.get("collective", "all_reduce") == "all_reduce" and c.get("level", "intra") == level:
                        size = float(c.get("size_bytes", 0) or 0)
                        bw = float(r["value"]) * (1e9 if "GB" in r.get("unit", "GB/s") else 1.0)
                        key = (r.get("source", ""), c.get("ranks", ""), c.get("algo", "default"))
                        series.setdefault(key, []).append((size, size / max(bw, 1.0) * 2, bw))
            # the longest curve NCCL ran with its default algorithm choice (else any)
            ranked = sorted(series.items(), key=lambda kv: (kv[0][2] in ("default", ""), len(kv[1])), reverse=True)
            rows, src = (ranked[0][1], f"{ranked[0][0][0]}; ranks={ranked[0][0][1]}, algo={ranked[0][0][2]}") \
                if ranked else ([], "")
            if len(rows) >= 4:
                b, s, lat = fit_ramp(rows)
                out[level] = Ramp(busbw_max=b, s_half=s, latency_s=lat, kind="published",
                                  source=f"data/calibration/published.csv busbw ({src})", rel_sigma=0.1)
        for stem, (nid, level, what) in NCCL_LOGS.items():
            if nid == node.id and level not in out:
                fit = _nccl_ramp(stem)
                if fit:
                    out[level] = Ramp(busbw_max=fit[0], s_half=fit[1], latency_s=fit[2], kind="published",
                                      source=f"{what} (data/reference/nccl_tests/{stem}.log)", rel_sigma=0.1)
    # (d) catalog links
    apn = node.accelerators_per_node
    intra_uni = getattr(node, "intra_node_unidir_bytes_per_s", 0.0) or node.intra_node_bytes_per_s / 2
    inter_acc = getattr(node, "inter_node_bytes_per_s_per_accelerator", 0.0) or node.inter_node_bytes_per_s / apn
    if "intra" not in out:
        out["intra"] = Ramp(busbw_max=max(intra_uni, 1.0) * DERATE_INTRA, s_half=4 << 20, latency_s=15e-6,
                            kind="datasheet", rel_sigma=0.25,
                            source=f"catalog intra-node link {intra_uni / 1e9:.0f} GB/s/dir x {DERATE_INTRA} (derating)")
    if "inter" not in out:
        out["inter"] = Ramp(busbw_max=max(inter_acc * apn, 1.0) * DERATE_INTER, s_half=16 << 20, latency_s=40e-6,
                            kind="datasheet", rel_sigma=0.3,
                            source=f"catalog scale-out {inter_acc * apn / 1e9:.0f} GB/s per node x {DERATE_INTER} "
                                   "(derating)")
    return out


__all__ = ["Calibration", "Rate", "Ramp", "KernelPoint", "calibrate", "fit_ramp", "parse_nccl_log", "SOURCE_KINDS"]
