"""The predictor's local closed loop on this machine (issue 11, part 4).

1. Calibrate ``hwmodels.predict`` from this machine's kernel sweeps ONLY: the
   suite's own kernels run now, in this process (GEMM at several shapes, small
   dimensions included; STREAM copy and triad at DRAM working sets; causal
   attention; a minimal element-wise op as the per-kernel launch floor), written
   to a temporary store and read back as store records, so every rate is
   source (a) ``measured`` (``calibrate(..., use_published=False)``: nothing
   published, no datasheet derating except the peaks the efficiencies are
   fractions of, which cancel).
2. Measure the suite's own workloads (transformer_lm, the MLP and the GRU) at
   configurations never used for calibration (width, depth, batch, sequence
   length, with and without activation checkpointing): median step time over
   the timed steps after the runner's warm-up, in the same run, same thread
   count; a few steady-state steps of each run are profiled
   (:mod:`workloads.profile`) and left out of the timing.
3. Predict each (``hwmodels.predict.predictor.predict_workload``; no framework
   efficiency, nothing fitted on the workloads) and print predicted vs measured,
   the error per config, median and worst, and the predicted breakdown
   (compute / memory-bound / overhead) beside the measured op classes mapped
   onto the same buckets: gemm + attention -> compute; memory-bound + optimizer
   -> memory_bound; communication -> exposed_comm; other (Python between ops,
   the step range's own time) -> overhead.

Run: ``.venv/bin/python benchmarks/predictor_closed_loop.py [--threads 1] [--quick] [--json OUT]``.

On a GPU: ``--device cuda --node ID`` runs the GPU plan instead (bf16 GEMMs at 256^3..8192^3 and the configs'
shapes, copy/triad past the L2, causal bf16 attention, element-wise kernels and the dispatch probe on the device;
then 9 transformer_lm configs at 8k-32k tokens per step, 2 MLPs and a GRU in bf16 autocast without per-phase
synchronization), on the wall clock (CUDA events for the kernels); ``benchmarks/device_run.sh`` is the prepared
call. ``--gpu-smoke`` runs that plan's path at tiny sizes on a CPU (wiring only).
The default of one thread: on this shared 2-core machine (load average 3-6)
two OpenMP threads spend most of a small GEMM waiting at barriers for a core,
which makes the step times swing several-fold between runs; one thread is what
both the kernels and the workloads then use.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: what each row keeps of the run's profile summary (workloads.profile.ProfileBreakdown.to_dict)
PROFILE_KEYS = ("time_kind", "classified_total_s", "unlinked_s", "kernel_links", "top_ops")
BUCKETS = ("compute", "memory_bound", "exposed_comm", "overhead")
CLASS_TO_BUCKET = {"gemm": "compute", "attention": "compute", "memory_bound": "memory_bound",
                   "optimizer": "memory_bound", "communication": "exposed_comm", "other": "overhead"}

# -- the kernel sweep (calibration) ---------------------------------------------------------------
# GEMM shapes: squares from 32 to 1024 (the small-dimension falloff) and transformer-like rectangles
# (tokens x width x width, tokens x 4 width x width, the weight-gradient shape width x width x tokens)
GEMM_SHAPES = ((32, 32, 32), (64, 64, 64), (128, 128, 128), (256, 256, 256), (512, 512, 512), (1024, 1024, 1024),
               (2048, 384, 96), (1024, 256, 256), (256, 1024, 1024), (96, 96, 2048), (4096, 512, 128))
QUICK_GEMM_SHAPES = ((32, 32, 32), (128, 128, 128), (512, 512, 512), (1024, 256, 256))
STREAM = (("stream_copy", 8_388_608), ("stream_triad", 8_388_608))  # fp64: 64 MiB per array, past the LLC
ATTENTION = ({"batch": 8, "heads": 4, "seq": 128, "head_dim": 32, "causal": True, "dtype": "fp32"},
             {"batch": 4, "heads": 4, "seq": 256, "head_dim": 64, "causal": True, "dtype": "fp32"})
LAUNCH = ("stream_copy", 256)  # a 2 KiB copy: the time is the per-op dispatch floor, not bandwidth
# element-wise kernels at the workloads' activation sizes (tokens x width, cache-resident on this CPU)
ELEMENTWISE = (("layernorm", {"rows": 1024, "cols": 128, "dtype": "fp32"}),
               ("layernorm", {"rows": 2048, "cols": 256, "dtype": "fp32"}),
               ("gelu", {"n": 524_288, "dtype": "fp32"}),
               ("softmax", {"rows": 2048, "cols": 256, "dtype": "fp32"}))
ELEMENTWISE_KERNELS = ("layernorm", "gelu", "softmax")
# host dispatch (kernels/dispatch.py): per-op cost of a differentiable op in training, and the optimizer phase
# at three parameter-tensor counts (the workloads have 6-28 tensors)
DISPATCH = ({"mode": "train"}, {"mode": "optimizer", "tensors": 4}, {"mode": "optimizer", "tensors": 16},
            {"mode": "optimizer", "tensors": 32})

# -- the GPU plan (--device cuda): kernels at the sizes the GPU configs below run -----------------
# bf16 GEMMs from 256^3 (launch-bound) to 8192^3, and the transformer's shapes at 8-32k tokens (tokens x width x
# width, the MLP's 4x, the weight-gradient shape width x width x tokens)
GPU_GEMM_SHAPES = ((256, 256, 256), (512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096),
                   (8192, 8192, 8192), (8192, 1024, 1024), (16384, 4096, 1024), (16384, 1024, 4096),
                   (1024, 1024, 16384), (16384, 2048, 2048), (2048, 8192, 16384))
GPU_SMOKE_GEMM_SHAPES = ((32, 32, 32), (64, 64, 64), (128, 128, 128))
GPU_STREAM = (("stream_copy", 2**26), ("stream_triad", 2**26))  # fp32: 256 MiB per array, >> a 50-60 MB L2
GPU_ATTENTION = ({"batch": 16, "heads": 16, "seq": 1024, "head_dim": 64, "causal": True, "dtype": "bf16"},
                 {"batch": 8, "heads": 16, "seq": 2048, "head_dim": 128, "causal": True, "dtype": "bf16"})
# element-wise kernels at the GPU configs' activation sizes (16k tokens x 1024), past the L2
GPU_ELEMENTWISE = (("layernorm", {"rows": 16384, "cols": 1024, "dtype": "fp32"}),
                   ("gelu", {"n": 2**25, "dtype": "bf16"}),
                   ("softmax", {"rows": 16384, "cols": 1024, "dtype": "fp32"}))


@contextlib.contextmanager
def cpu_clock() -> Iterator[None]:
    """Time the suite's kernels on the process CPU clock instead of the wall clock, for this block.

    ``kernels.registry.execute`` times with :func:`hwcore.timing.benchmark`, whose ``timer`` is
    injectable; here it is ``time.process_time`` (CLOCK_PROCESS_CPUTIME_ID), so a kernel call
    preempted by another tenant of this shared machine is charged only the CPU it used, as the
    workload steps are (:func:`measure`). The records say so (``metadata.timer``).
    """
    from kernels.registry import execute as X

    orig = X.benchmark

    def cpu_benchmark(*a: Any, **kw: Any) -> Any:
        kw["metadata"] = {**(kw.get("metadata") or {}), "timer": "process_time (benchmarks/predictor_closed_loop.py)"}
        return orig(*a, timer=time.process_time, **kw)

    X.benchmark = cpu_benchmark
    try:
        yield
    finally:
        X.benchmark = orig


def cpu_kernel_plan(quick: bool = False) -> list[tuple[str, dict[str, Any]]]:
    """The calibration kernels of this CPU (fp32, the workloads' sizes)."""
    plan: list[tuple[str, dict[str, Any]]] = []
    for m, n, k in (QUICK_GEMM_SHAPES if quick else GEMM_SHAPES):
        plan.append(("gemm", {"m": m, "n": n, "k": k, "dtype": "fp32"}))
    for name, n in STREAM[:1] if quick else STREAM:
        plan.append((name, {"n": n}))
    for p in ATTENTION[:1] if quick else ATTENTION:
        plan.append(("attention", dict(p)))
    plan.append((LAUNCH[0], {"n": LAUNCH[1]}))
    plan.extend((n, dict(p)) for n, p in (ELEMENTWISE[1:3] if quick else ELEMENTWISE))
    plan.extend(("dispatch", dict(p)) for p in (DISPATCH[:3] if quick else DISPATCH))
    return plan


def gpu_kernel_plan(smoke: bool = False) -> list[tuple[str, dict[str, Any]]]:
    """The calibration kernels of a GPU (bf16 GEMMs and attention, as the bf16-autocast workloads run them);
    ``smoke``: the same kernels at tiny sizes (the path on a CPU; the numbers mean nothing)."""
    plan: list[tuple[str, dict[str, Any]]] = []
    for m, n, k in (GPU_SMOKE_GEMM_SHAPES if smoke else GPU_GEMM_SHAPES):
        plan.append(("gemm", {"m": m, "n": n, "k": k, "dtype": "bf16"}))
    for name, n in GPU_STREAM:
        plan.append((name, {"n": 2**12 if smoke else n, "dtype": "fp32"}))
    for p in GPU_ATTENTION:
        plan.append(("attention", {**p, **({"batch": 1, "heads": 2, "seq": 64, "head_dim": 16} if smoke else {})}))
    plan.append((LAUNCH[0], {"n": LAUNCH[1]}))
    for name, p in GPU_ELEMENTWISE:
        plan.append((name, {k: (min(v, 64) if smoke and isinstance(v, int) else v) for k, v in p.items()}))
    plan.extend(("dispatch", dict(p)) for p in DISPATCH)
    return plan


def run_kernels(store: Any, *, quick: bool = False, measure_ms: float = 250.0, clock: str = "cpu",
                device: str = "cpu", plan: Sequence[tuple[str, dict[str, Any]]] | None = None
                ) -> list[dict[str, Any]]:
    """Run the calibration kernels (``plan``, default this CPU's), each recorded in ``store``; returns one summary
    per kernel run.

    ``clock="cpu"``: timed on the process CPU clock (:func:`cpu_clock`); ``"wall"``: as ``hweval bench`` does
    (on a GPU: CUDA events on the kernel's stream, :mod:`hwcore.timing`).
    """
    from kernels import registry as R

    if plan is None:
        plan = cpu_kernel_plan(quick)
    if clock == "cpu" and not device.startswith("cpu"):
        raise ValueError(f"clock 'cpu' times on the process CPU clock; device {device!r} needs clock='wall'")
    out = []
    with warnings.catch_warnings(), (cpu_clock() if clock == "cpu" else contextlib.nullcontext()):
        warnings.simplefilter("ignore")  # noise warnings are kept in the records (noise_ratio)
        for name, p in plan:
            try:
                r = R.run(name, p, device=device, store=store, record=True, warmup_ms=min(50.0, measure_ms / 4),
                          measure_ms=measure_ms)
            except R.Unsupported as exc:  # e.g. a bf16 kernel this device has no path for: said, not fatal
                out.append({"kernel": name, "params": p, "median_s": None, "flops_per_s": None,
                            "bytes_per_s": None, "status": f"unsupported: {exc}"})
                continue
            d = r.to_json()
            out.append({"kernel": name, "params": p, "median_s": d.get("median_s"),
                        "flops_per_s": d.get("flops_per_s"), "bytes_per_s": d.get("bytes_per_s"),
                        "status": d.get("status")})
    return out


def kernel_points(store: Any) -> list[Any]:
    """The store's kernel records as calibration points (source (a) ``measured``).

    STREAM records below 32 MiB are cache-resident and are not the DRAM bandwidth the step
    model needs (as ``hweval.analysis`` filters them), except the tiny copy, which becomes the
    ``launch`` point: its median time per call is the per-kernel dispatch floor.
    """
    from hwcore.records import KernelRecord, read
    from hwmodels.predict import KernelPoint
    from hwmodels.predict.calibration import CACHE_RESIDENT_BYTES

    pts = []
    for r in read(store, KernelRecord):
        if not r.ok:
            continue
        name, params, metrics = r.kernel, dict(r.params), dict(r.metrics)
        where = f"(closed-loop store run {r.run_id})"
        if name.startswith("stream"):
            n_bytes = float(metrics.get("bytes") or 0)
            if int(params.get("n", 0)) == LAUNCH[1]:
                pts.append(KernelPoint(kernel="launch", params=params, metrics={"seconds": metrics.get("median_s")},
                                       origin="measured", where=where))
                continue
            if n_bytes < CACHE_RESIDENT_BYTES:
                continue  # calibrate() would leave it out too
        pts.append(KernelPoint(kernel=name, params=params, metrics=metrics, origin="measured", where=where))
    return pts


def this_node(node_id: str | None = None, device: str = "cpu") -> Any:
    """The catalog node these measurements are of: ``node_id`` when given, else the fingerprint's match; with no
    match, this CPU's entry (``device`` cpu) or an error naming ``--node`` (a GPU: its rates are fractions of that
    node's datasheet peaks, so a guess would scale every prediction)."""
    from hwcore.fingerprint import fingerprint
    from hwmodels.catalog import default_catalog, match_node

    cat = default_catalog()
    if node_id:
        return cat.get(node_id)
    node = None
    try:
        node = match_node(fingerprint(), cat)
    except Exception as exc:  # noqa: BLE001 - a fingerprint problem falls back to the named node, said below
        print(f"note: catalog match failed ({type(exc).__name__}: {exc})", file=sys.stderr)
    if node is None and not device.startswith("cpu"):
        raise SystemExit(f"predictor_closed_loop: this {device} device matches no catalog node; name it with --node "
                         f"(valid: {', '.join(sorted(cat.nodes))})")
    return node or cat.get("cpu-epyc-zen4-2c")


def calibrate_here(points: Sequence[Any], node: Any = None) -> Any:
    """The predictor's own calibration from ``points`` only (memory-bound ops priced at STREAM bandwidth)."""
    from hwmodels.predict import calibrate

    return calibrate(node if node is not None else this_node(), list(points), use_published=False)


# -- the workloads (validation) -------------------------------------------------------------------
@dataclass(frozen=True)
class Config:
    name: str
    workload: str
    params: dict[str, Any]


# Never used for calibration: the calibration saw only the kernels above.
CONFIGS = (
    Config("lm w128 L2 s64 b16", "transformer_lm", {"width": 128, "layers": 2, "heads": 4, "seq_len": 64,
                                                     "batch_size": 16}),
    Config("lm w256 L2 s64 b16", "transformer_lm", {"width": 256, "layers": 2, "heads": 4, "seq_len": 64,
                                                     "batch_size": 16}),
    Config("lm w128 L4 s64 b16", "transformer_lm", {"width": 128, "layers": 4, "heads": 4, "seq_len": 64,
                                                     "batch_size": 16}),
    Config("lm w128 L2 s128 b16", "transformer_lm", {"width": 128, "layers": 2, "heads": 4, "seq_len": 128,
                                                      "batch_size": 16}),
    Config("lm w128 L2 s64 b32", "transformer_lm", {"width": 128, "layers": 2, "heads": 4, "seq_len": 64,
                                                     "batch_size": 32}),
    Config("lm w192 L3 s96 b8", "transformer_lm", {"width": 192, "layers": 3, "heads": 6, "seq_len": 96,
                                                    "batch_size": 8}),
    Config("lm w128 L2 s64 b16 ckpt", "transformer_lm", {"width": 128, "layers": 2, "heads": 4, "seq_len": 64,
                                                          "batch_size": 16, "activation_checkpointing": True}),
    Config("lm w256 L2 s128 b8 ckpt", "transformer_lm", {"width": 256, "layers": 2, "heads": 8, "seq_len": 128,
                                                          "batch_size": 8, "activation_checkpointing": True}),
    Config("mlp h512 d3 b256", "mlp_regressor", {"hidden": 512, "depth": 3, "batch_size": 256}),
    Config("mlp h1024 d2 b512", "mlp_regressor", {"hidden": 1024, "depth": 2, "batch_size": 512}),
    Config("gru h64 L2 c64 b32", "timeseries_forecaster", {"hidden": 64, "layers": 2, "context": 64,
                                                           "batch_size": 32}),
    Config("gru h128 L1 c128 b64", "timeseries_forecaster", {"hidden": 128, "layers": 1, "context": 128,
                                                             "batch_size": 64}),
)
QUICK_CONFIGS = (
    Config("lm w64 L2 s64 b8", "transformer_lm", {"width": 64, "layers": 2, "heads": 4, "seq_len": 64,
                                                   "batch_size": 8}),
    Config("lm w64 L2 s64 b8 ckpt", "transformer_lm", {"width": 64, "layers": 2, "heads": 4, "seq_len": 64,
                                                        "batch_size": 8, "activation_checkpointing": True}),
)
FIXED = {"transformer_lm": {"preset": "tiny", "vocab": 256, "mlp_ratio": 4, "corpus_bytes": 300_000},
         "mlp_regressor": {"preset": "tiny"}, "timeseries_forecaster": {"preset": "tiny"}}


def _lm(width: int, layers: int, heads: int, seq: int, batch: int, ckpt: bool = False) -> Config:
    name = f"lm w{width} L{layers} s{seq} b{batch}" + (" ckpt" if ckpt else "")
    return Config(name, "transformer_lm", {"width": width, "layers": layers, "heads": heads, "seq_len": seq,
                                          "batch_size": batch, **({"activation_checkpointing": True} if ckpt else {})})


# --device cuda: bf16 autocast, 8k-32k tokens per step (device-bound), one small host-bound config per workload;
# never used for calibration (the kernels above are)
GPU_CONFIGS = (
    _lm(512, 4, 8, 512, 16),  # 8k tokens, 13M parameters: the host's dispatch decides
    _lm(1024, 8, 16, 1024, 16),
    _lm(2048, 8, 16, 1024, 8),
    _lm(1024, 16, 16, 1024, 8),
    _lm(1024, 8, 16, 2048, 8),
    _lm(1024, 8, 16, 1024, 32),
    _lm(1536, 12, 12, 1024, 16),
    _lm(1024, 8, 16, 1024, 16, ckpt=True),
    _lm(2048, 8, 16, 2048, 8, ckpt=True),
    Config("mlp h4096 d4 b4096", "mlp_regressor", {"hidden": 4096, "depth": 4, "batch_size": 4096}),
    Config("mlp h1024 d3 b1024", "mlp_regressor", {"hidden": 1024, "depth": 3, "batch_size": 1024}),
    # lr 1e-3: the tiny preset's 1e-2 diverges at this width (the H200 run of 2026-12-04 lost this config to a NaN
    # at step 7; the same config on this CPU climbs from 1.2 to 3.5 in 10 steps); the step's work does not change
    Config("gru h512 L2 c256 b256", "timeseries_forecaster", {"hidden": 512, "layers": 2, "context": 256,
                                                              "batch_size": 256, "lr": 1e-3}),
)
#: ``--holdout``: a second GPU set, chosen after the step model's GPU terms (autocast traffic, the torch optimizer
#: phase, per-phase host/device overlap, cuDNN's recurrent launches) were derived from runs of GPU_CONFIGS, so
#: those runs are development data and these configs the held-out test of the change: other widths (640-3072),
#: depths, sequence lengths (512-4096), batches, head sizes, with and without checkpointing; MLPs and GRUs of
#: other sizes
GPU_HOLDOUT_CONFIGS = (
    _lm(640, 6, 10, 512, 16),  # 8k tokens, 30M parameters: host-bound
    _lm(768, 6, 12, 1024, 16),
    _lm(1280, 10, 10, 1024, 16),
    _lm(2048, 4, 16, 4096, 4),
    _lm(1024, 12, 16, 512, 32, ckpt=True),
    _lm(2560, 6, 20, 1024, 8),
    _lm(1536, 8, 12, 2048, 8, ckpt=True),
    _lm(3072, 4, 24, 1024, 8),
    Config("mlp h2048 d6 b2048", "mlp_regressor", {"hidden": 2048, "depth": 6, "batch_size": 2048}),
    Config("mlp h8192 d3 b8192", "mlp_regressor", {"hidden": 8192, "depth": 3, "batch_size": 8192}),
    Config("gru h256 L1 c128 b128", "timeseries_forecaster", {"hidden": 256, "layers": 1, "context": 128,
                                                              "batch_size": 128, "lr": 1e-3}),
    Config("gru h1024 L2 c128 b128", "timeseries_forecaster", {"hidden": 1024, "layers": 2, "context": 128,
                                                               "batch_size": 128, "lr": 1e-3}),
)
GPU_SMOKE_CONFIGS = (_lm(64, 2, 4, 64, 4), _lm(64, 2, 4, 64, 4, ckpt=True),
                     Config("mlp h64 d2 b64", "mlp_regressor", {"hidden": 64, "depth": 2, "batch_size": 64}))
#: the GPU plans by the name a run records in its meta (``--gpu-smoke``, ``--holdout``, else ``gpu``)
GPU_PLANS = {"gpu": GPU_CONFIGS, "gpu-smoke": GPU_SMOKE_CONFIGS, "gpu-holdout": GPU_HOLDOUT_CONFIGS}
#: on a GPU every workload runs in bf16 autocast without a synchronize at each phase boundary (the step still ends
#: at the loss's host sync), as a user would run it
GPU_FIXED = {"precision": "bf16_autocast", "sync_phases": False}


@dataclass
class Row:
    config: Config
    measured_s: float  # median process CPU seconds per timed step (clock "cpu"), else = measured_wall_s
    measured_iqr_s: float
    measured_wall_s: float  # median wall seconds per timed step (the runner's step_time_s)
    timed_steps: int
    predictions: dict[str, dict[str, Any]]  # calibration variant -> {step_time_s, breakdown_s}
    measured_classes_s: dict[str, float] = field(default_factory=dict)
    measured_profiled_step_s: float | None = None
    #: how the profile was taken and what it saw: time kind, kernels linked to their op or classed by name (and
    #: the seconds of the latter), the largest ops/kernels with their class
    measured_profile: dict[str, Any] = field(default_factory=dict)

    def predicted(self, variant: str) -> float:
        return float(self.predictions[variant]["step_time_s"])

    def error(self, variant: str) -> float:
        return self.predicted(variant) / self.measured_s - 1.0

    def measured_buckets(self) -> dict[str, float]:
        out = dict.fromkeys(BUCKETS, 0.0)
        for k, v in self.measured_classes_s.items():
            out[CLASS_TO_BUCKET.get(k, "overhead")] += v
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.config.name, "workload": self.config.workload, "params": self.config.params,
                "measured_step_s": self.measured_s, "measured_iqr_s": self.measured_iqr_s,
                "measured_wall_step_s": self.measured_wall_s, "timed_steps": self.timed_steps,
                "predictions": self.predictions, "errors": {v: self.error(v) for v in self.predictions},
                "measured_classes_s": self.measured_classes_s, "measured_buckets_s": self.measured_buckets(),
                "measured_profiled_step_s": self.measured_profiled_step_s,
                "measured_profile": self.measured_profile}


def run_params(workload: str, params: dict[str, Any], *, threads: int, device: str = "cpu",
               fixed: dict[str, Any] | None = None) -> dict[str, Any]:
    """The workload parameters a config runs with (measured here, or rebuilt by :func:`replay`): the plan's fixed
    ones, the config's own, and the loop settings that keep evaluation and early stopping out of the timed steps."""
    return {**FIXED[workload], **(fixed or {}), **params, "threads": threads, "eval_every": 100_000,
            "eval_batches": 1, "stop_at_target": False, "warmup_steps": 0,
            **({} if device == "cpu" else {"device": device})}


def measure(cfg: Config, *, threads: int, timed_steps: int, profile_dir: str | None, device: str = "cpu",
            fixed: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any], list[float]]:
    """Train ``cfg`` for warm-up + (profiled) + ``timed_steps`` steps.

    Returns (TrainResult, the full config dict, process CPU seconds of each timed step). The CPU
    time per step comes from the runner's per-step callback (``time.process_time`` deltas; the
    loop's own bookkeeping between steps is included, a few microseconds).
    """
    from workloads import registry, runner

    raw = run_params(cfg.workload, cfg.params, threads=threads, device=device, fixed=fixed)
    profiled = 4 if profile_dir else 0  # the profiler's warm-up step + 3 active steps (workloads.profile)
    steps = runner.WARMUP_STEPS + profiled + timed_steps
    marks: list[float] = []
    res = runner.run(cfg.workload, raw, max_steps=steps, record=False, profile_dir=profile_dir,
                     callback=lambda step, loss: marks.append(time.process_time()))
    if res.status != "ok":
        raise RuntimeError(f"{cfg.name}: run ended {res.status}: {res.error}")
    full = registry.config_from_params(cfg.workload, {**raw, "max_steps": steps}).to_dict()
    first = runner.WARMUP_STEPS + profiled  # marks[i] is taken after step i + 1
    cpu = [b - a for a, b in zip(marks[first - 1:-1], marks[first:], strict=True)]
    return res, full, cpu


def predict(workload: str, config: dict[str, Any], cal: Any) -> dict[str, Any]:
    from hwmodels.predict.predictor import predict_workload

    # torch on CPU runs F.scaled_dot_product_attention through its fused flash kernel
    return predict_workload(workload, config, cal, attention="flash")


def closed_loop(configs: Sequence[Config], cals: dict[str, Any], *, threads: int, timed_steps: int,
                profile: bool = True, log: Any = None, clock: str = "cpu", device: str = "cpu",
                fixed: dict[str, Any] | None = None, failed: list[dict[str, str]] | None = None,
                trace_dir: str | None = None) -> list[Row]:
    """Measure each config and predict it with each calibration variant of ``cals`` (name -> Calibration).

    ``trace_dir``: keep each config's profiler trace (Chrome/Perfetto JSON) there instead of discarding it.

    ``clock="cpu"``: the measured step is the median process CPU time per step (one thread only:
    with more, the process CPU clock advances in scheduler ticks of several ms and counts the
    OpenMP workers' spin-waits); ``"wall"``: the runner's median wall step time.
    """
    if clock == "cpu" and threads != 1:
        raise ValueError(f"clock 'cpu' needs threads=1 (got {threads}): the process CPU clock of a "
                         "multi-threaded process ticks coarsely and counts spin-waits; use clock='wall'")
    rows = []
    failed = [] if failed is None else failed  # configs that did not run (name, error), for the report and JSON
    with tempfile.TemporaryDirectory(prefix="hweval-closed-loop-prof-") as tmp:
        for c in configs:
            t0 = time.perf_counter()
            pdir = os.path.join(trace_dir, "_".join(c.name.split())) if trace_dir else tmp
            try:
                res, full, cpu = measure(c, threads=threads, timed_steps=timed_steps,
                                         profile_dir=pdir if profile else None, device=device, fixed=fixed)
            except Exception as exc:  # noqa: BLE001 - one config's failure (an OOM, a kernel) is said, not fatal
                if log:
                    log(f"  {c.name:26s} FAILED: {type(exc).__name__}: {str(exc)[:300]}")
                failed.append({"config": c.name, "error": f"{type(exc).__name__}: {exc}"})
                continue
            st = res.step_time_s or {}
            preds = {}
            for v, cal in cals.items():
                p = predict(c.workload, full, cal)
                preds[v] = {"step_time_s": float(p["step_time_s"]),
                            "breakdown_s": {k: float(x) for k, x in p["breakdown_s"].items()}}
            q = statistics.quantiles(cpu, n=4) if len(cpu) >= 2 else [cpu[0]] * 3
            if clock == "wall":
                q = [float(st.get("q25_s") or 0.0), 0.0, float(st.get("q75_s") or 0.0)]
            row = Row(config=c, measured_s=statistics.median(cpu) if clock == "cpu" else float(st["median_s"]),
                      measured_iqr_s=q[2] - q[0],
                      measured_wall_s=float(st["median_s"]), timed_steps=len(cpu), predictions=preds,
                      measured_classes_s=dict(res.profile_breakdown_s or {}),
                      measured_profiled_step_s=(res.profile or {}).get("step_s"),
                      measured_profile={k: (res.profile or {}).get(k) for k in PROFILE_KEYS})
            rows.append(row)
            if log:
                errs = ", ".join(f"{v} {row.error(v):+.1%}" for v in preds)
                log(f"  {c.name:26s} measured {row.measured_s * 1e3:7.2f} ms {clock} ({row.measured_wall_s * 1e3:7.2f} "
                    f"wall); error {errs} ({time.perf_counter() - t0:.1f} s)")
    return rows


def summary(rows: Sequence[Row], variant: str, workload: str | None = None) -> dict[str, float]:
    """Median / worst |error| and mean signed error of ``variant`` (over ``workload``'s rows when given)."""
    rows = [r for r in rows if workload is None or r.config.workload == workload]
    errs = [abs(r.error(variant)) for r in rows]
    return {"n": len(rows), "median_abs_error": statistics.median(errs) if errs else math.nan,
            "worst_abs_error": max(errs) if errs else math.nan,
            "mean_signed_error": statistics.fmean(r.error(variant) for r in rows) if rows else math.nan}


def pooled_shares(rows: Sequence[Row], variant: str) -> tuple[dict[str, float], dict[str, float]]:
    """(predicted, measured) share of each bucket, pooled over the configs."""
    tot_p = {b: sum(r.predictions[variant]["breakdown_s"].get(b, 0.0) for r in rows) for b in BUCKETS}
    tot_m = {b: sum(r.measured_buckets()[b] for r in rows) for b in BUCKETS}
    sp, sm = sum(tot_p.values()) or 1.0, sum(tot_m.values()) or 1.0
    return {b: x / sp for b, x in tot_p.items()}, {b: x / sm for b, x in tot_m.items()}


def print_report(rows: Sequence[Row], cals: dict[str, Any], kernels: Sequence[dict[str, Any]],
                 meta: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    con = Console(width=220)
    clock = "process CPU clock" if meta["clock"] == "cpu" else "wall clock (CUDA events on a GPU)"
    kt = Table(title=f"calibration kernels ({meta.get('node', 'this machine')}, {meta.get('device', 'cpu')}, this "
                     f"run, {clock}; source (a) measured)")
    for col in ("kernel", "params", "median", "GFLOP/s", "GB/s"):
        kt.add_column(col)
    for k in kernels:
        p = ", ".join(f"{a}={b}" for a, b in k["params"].items() if a != "dtype")
        kt.add_row(k["kernel"], p, f"{(k['median_s'] or 0) * 1e6:.1f} us",
                   f"{(k['flops_per_s'] or 0) / 1e9:.1f}", f"{(k['bytes_per_s'] or 0) / 1e9:.2f}")
    con.print(kt)
    last = list(cals.values())[-1]
    con.print("calibration sources:")
    for k, v in last.sources().items():
        if not k.startswith("collective"):
            con.print(f"  {k}: {v}")
    t = Table(title=f"closed loop: predicted vs measured step time ({meta['threads']} thread(s), "
                    f"load average {meta['loadavg_start']} -> {meta['loadavg_end']})")
    t.add_column("config")
    t.add_column(f"measured {meta['clock']} ms (IQR)")
    t.add_column("wall ms")
    for v in cals:
        t.add_column(f"pred ms ({v})")
        t.add_column(f"error ({v})")
    t.add_column(f"pred compute/mem/ovh ms ({list(cals)[-1]})")
    t.add_column("profiled compute/mem/ovh ms (profiled step, wall)")
    for r in rows:
        pb, mb = r.predictions[list(cals)[-1]]["breakdown_s"], r.measured_buckets()
        prof = f" ({r.measured_profiled_step_s * 1e3:.1f})" if r.measured_profiled_step_s else ""
        cells = [r.config.name, f"{r.measured_s * 1e3:.2f} ({r.measured_iqr_s * 1e3:.2f})",
                 f"{r.measured_wall_s * 1e3:.2f}"]
        for v in cals:
            cells += [f"{r.predicted(v) * 1e3:.2f}", f"{r.error(v):+.1%}"]
        cells += [f"{pb['compute'] * 1e3:.2f} / {pb['memory_bound'] * 1e3:.2f} / {pb['overhead'] * 1e3:.2f}",
                  f"{mb['compute'] * 1e3:.2f} / {mb['memory_bound'] * 1e3:.2f} / {mb['overhead'] * 1e3:.2f}{prof}"]
        t.add_row(*cells)
    con.print(t)
    for v in cals:
        s = summary(rows, v)
        ps, ms = pooled_shares(rows, v)
        con.print(f"({v}) median |error| {s['median_abs_error']:.1%}, worst {s['worst_abs_error']:.1%}, "
                  f"mean signed {s['mean_signed_error']:+.1%} over {s['n']} configs (target: median < 10%)")
        for w in sorted({r.config.workload for r in rows}):
            sw = summary(rows, v, w)
            con.print(f"({v})   {w}: median |error| {sw['median_abs_error']:.1%}, worst {sw['worst_abs_error']:.1%}, "
                      f"mean signed {sw['mean_signed_error']:+.1%} over {sw['n']}")
        con.print(f"({v}) breakdown share, pooled (predicted vs profiled): " + ", ".join(
            f"{b} {ps[b]:.0%} vs {ms[b]:.0%}" for b in BUCKETS))


def calibrations(points: Sequence[Any], node: Any = None) -> dict[str, Any]:
    """The calibration variants compared, all the predictor's own ``calibrate()`` on subsets of this run's
    kernel records, the last one the predictor as shipped: ``stream`` (element-wise and dispatch records left
    out: memory-bound ops priced at STREAM bandwidth, host cost = the launch floor per op), ``elementwise``
    (the layernorm/gelu/softmax records in: memory-bound ops at their rate; dispatch left out) and
    ``dispatch`` (every record: the host cost of each differentiable op and of the optimizer phase from the
    ``dispatch`` probes, what the predictor does whenever those records exist)."""
    node = node if node is not None else this_node()
    no_disp = [p for p in points if p.kernel != "dispatch"]
    out = {"stream": calibrate_here([p for p in no_disp if p.kernel not in ELEMENTWISE_KERNELS], node)}
    if any(p.kernel in ELEMENTWISE_KERNELS for p in points):
        out["elementwise"] = calibrate_here(no_disp, node)
    if any(p.kernel == "dispatch" for p in points):
        out["dispatch"] = calibrate_here(points, node)
    return out


def replay(path: str | Path) -> dict[str, Any]:
    """Re-predict a recorded closed-loop run (``--json`` output, e.g. ``data/reference/device/*_closed_loop.json``)
    from its own calibration points with the predictor as it is now, no device needed: the rows' measured steps
    stay as recorded, each calibration variant is rebuilt from the recorded points for the recorded node, and each
    row's config is rebuilt from the plan's config of the same name. Returns {"rows": [...], "summary": {...}}."""
    from hwmodels.catalog import default_catalog
    from hwmodels.predict import KernelPoint
    from workloads import registry, runner

    d = json.loads(Path(path).read_text())
    meta = d.get("meta") or {}
    if not d.get("points"):
        raise SystemExit(f"predictor_closed_loop: {path}: no 'points' (recorded before runs kept them); cannot replay")
    gpu = meta.get("plan") in GPU_PLANS
    plan = {c.name: c for c in (GPU_PLANS[meta["plan"]] if gpu else (*CONFIGS, *QUICK_CONFIGS))}
    pts = [KernelPoint(kernel=p["kernel"], params=p["params"], metrics=p["metrics"], origin="measured",
                       where=f"(recorded run {meta.get('date_utc', '?')})") for p in d["points"]]
    cals = calibrations(pts, default_catalog().get(meta.get("node") or "cpu-epyc-zen4-2c"))
    rows = []
    for r in d.get("rows", []):
        c = plan.get(r["config"])
        if c is None:
            continue  # a config this version's plan no longer has
        raw = run_params(c.workload, r["params"], threads=meta.get("threads", 1), device=meta.get("device", "cpu"),
                         fixed=GPU_FIXED if gpu else None)
        full = registry.config_from_params(c.workload, {**raw, "max_steps": runner.WARMUP_STEPS + 4 + int(
            r.get("timed_steps") or 1)}).to_dict()
        preds = {v: predict(c.workload, full, cal) for v, cal in cals.items()}
        rows.append({"config": c.name, "workload": c.workload, "measured_step_s": r["measured_step_s"],
                     "recorded_errors": r.get("errors", {}),
                     "errors": {v: float(p["step_time_s"]) / r["measured_step_s"] - 1 for v, p in preds.items()},
                     "breakdown_s": {v: {k: float(x) for k, x in p["breakdown_s"].items()} for v, p in preds.items()}})
    summ = {}
    for v in cals:
        e = [abs(r["errors"][v]) for r in rows]
        summ[v] = {"n": len(e), "median_abs_error": statistics.median(e) if e else math.nan,
                   "worst_abs_error": max(e) if e else math.nan}
    return {"meta": meta, "rows": rows, "summary": summ}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads for kernels and workloads")
    ap.add_argument("--timed-steps", type=int, default=8, help="timed steps per config after warm-up")
    ap.add_argument("--quick", action="store_true", help="2 tiny configs, fewer kernels (a smoke run)")
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                    help="clock of kernels and steps (cpu: process CPU time, --threads 1 only; wall: as hweval "
                         "bench / hweval train measure)")
    ap.add_argument("--no-profile", action="store_true", help="skip the per-config profile (breakdown)")
    ap.add_argument("--json", default=None, help="write the rows and summary here")
    ap.add_argument("--holdout", action="store_true", help="with --device cuda: the held-out GPU configs "
                    "(GPU_HOLDOUT_CONFIGS) instead of the development ones")
    ap.add_argument("--keep-traces", default=None, metavar="DIR", help="keep each config's profiler trace "
                    "(Chrome/Perfetto JSON) in DIR")
    ap.add_argument("--device", default="cpu", help="cpu (this machine's plan) or cuda[:N] (the GPU plan: bf16 "
                    "kernels and configs, wall clock with CUDA events)")
    ap.add_argument("--node", default=None, help="catalog node id of this device (default: the fingerprint's "
                    "match; a GPU without one must be named)")
    ap.add_argument("--gpu-smoke", action="store_true", help="the GPU plan's path at tiny sizes on this CPU "
                    "(wiring only; its numbers mean nothing)")
    ap.add_argument("--measure-ms", type=float, default=250.0, help="timed milliseconds per calibration kernel")
    ap.add_argument("--replay", default=None, metavar="JSON", help="re-predict a recorded run (its --json output, "
                    "e.g. data/reference/device/h200-sxm_2026-12-04_closed_loop.json) from its own calibration "
                    "points with the predictor as it is now; measures nothing")
    a = ap.parse_args(argv)
    if a.replay:
        if not Path(a.replay).is_file():
            ap.error(f"--replay: no such file: {a.replay}")
        out = replay(a.replay)
        for r in out["rows"]:
            print(f"{r['config']:28s} measured {r['measured_step_s'] * 1e3:8.2f} ms  " + "  ".join(
                f"{v} {e:+7.1%} (recorded {r['recorded_errors'].get(v, math.nan):+7.1%})"
                for v, e in r["errors"].items()))
        for v, sm in out["summary"].items():
            print(f"({v}) median |error| {sm['median_abs_error']:.1%}, worst {sm['worst_abs_error']:.1%} over "
                  f"{sm['n']} configs")
        if a.json:
            Path(a.json).write_text(json.dumps(out, indent=1, default=str))
        return 0
    gpu_plan = a.gpu_smoke or not a.device.startswith("cpu")
    if gpu_plan:
        if a.device.startswith("cuda"):
            import torch as _t
            if not _t.cuda.is_available():
                ap.error(f"--device {a.device}: no CUDA device here (torch.cuda.is_available() is False); "
                         "use --gpu-smoke to run the GPU plan's path on the CPU")
        elif not a.gpu_smoke:
            ap.error(f"--device: expected cpu or cuda[:N], got {a.device!r}")
        a.clock = "wall"
    if a.threads != 1 and a.clock == "cpu":
        ap.error("--clock cpu needs --threads 1 (a multi-threaded process's CPU clock ticks coarsely and counts "
                 "OpenMP spin-waits); use --clock wall with more threads")
    import torch

    from hwcore.store import Store

    t0 = time.perf_counter()
    torch.set_num_threads(a.threads)
    meta = {"date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "threads": a.threads,
            "loadavg_start": " ".join(f"{x:.2f}" for x in os.getloadavg()), "torch": torch.__version__,
            "clock": a.clock}
    node = this_node(a.node, a.device)
    plan_name = ("gpu-smoke" if a.gpu_smoke else "gpu-holdout" if a.holdout else "gpu") if gpu_plan else "cpu"
    meta.update(device=a.device, node=node.id, plan=plan_name)
    if a.device.startswith("cuda"):
        meta["gpu"] = torch.cuda.get_device_name(0)
    with tempfile.TemporaryDirectory(prefix="hweval-closed-loop-store-") as sdir:
        store = Store(sdir)
        print(f"running calibration kernels into {sdir} ...", flush=True)
        plan = gpu_kernel_plan(smoke=a.gpu_smoke) if gpu_plan else None
        kernels = run_kernels(store, quick=a.quick, clock=a.clock, device=a.device, plan=plan,
                              measure_ms=a.measure_ms)
        points = kernel_points(store)
        cals = calibrations(points, node)
    t_cal = time.perf_counter() - t0
    print(f"calibrated {cals['stream'].node_id} in {t_cal:.0f} s; measuring workloads ...", flush=True)
    configs = GPU_PLANS[plan_name] if gpu_plan else (QUICK_CONFIGS if a.quick else CONFIGS)
    failed: list[dict[str, str]] = []
    rows = closed_loop(configs, cals, threads=a.threads, timed_steps=a.timed_steps,
                       profile=not a.no_profile, log=print, clock=a.clock, device=a.device,
                       fixed=GPU_FIXED if gpu_plan else None, failed=failed, trace_dir=a.keep_traces)
    meta["loadavg_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    meta["wall_s"] = time.perf_counter() - t0
    print_report(rows, cals, kernels, meta)
    print(f"wall {meta['wall_s']:.0f} s (calibration {t_cal:.0f} s)")
    if a.json:
        per_w = {v: {w: summary(rows, v, w) for w in sorted({r.config.workload for r in rows})} for v in cals}
        Path(a.json).write_text(json.dumps({"meta": meta, "summary": {v: summary(rows, v) for v in cals},
                                            "failed": failed,
                                            # the calibration points as read from the store (kernel, params,
                                            # metrics): what the calibration saw, re-usable as measured records
                                            "points": [{"kernel": q.kernel, "params": dict(q.params),
                                                        "metrics": {m: x for m, x in q.metrics.items()
                                                                    if m != "measurement"}}  # raw samples: no
                                                       for q in points],
                                            "summary_per_workload": per_w,
                                            "kernels": kernels,
                                            "calibration": {v: c.sources() for v, c in cals.items()},
                                            "rows": [r.to_dict() for r in rows]}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
