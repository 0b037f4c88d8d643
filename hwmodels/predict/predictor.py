"""Step time, throughput, MFU, memory and their interval for one job on one layout.

Step model (per optimizer step, on the slowest pipeline stage)::

    t_stage   = ceil(L/pp) x layer(fwd + bwd + recompute) + head   per micro-batch, incl. TP collectives
                (with context parallelism a layer runs the rank's s/cp tokens: :mod:`.ops`)
    compute   = m x (GEMM + attention time of t_stage) / eta
    memory    = m x (memory-bound time of t_stage) / eta + optimizer step
    exposed   = TP collectives (on the critical path, Shoeybi 2019; with ``tp_comm_overlap`` only what
                  exceeds the layer's GEMM time, as for DP below)
                + CP ring send/recv beyond the attention time of the same phase it hides under
                + pipeline send/recv (per micro-batch and chunk one exchange with each neighbouring stage, on
                  that hop's level: :func:`.layout.pp_hops`)
                + DP/FSDP collectives beyond what overlaps with the compute they can hide under
                  (DDP/ZeRO-1 gradients: the last micro-batch's backward, more with interleaved pipeline
                  chunks, unless ``dp_comm_overlap`` is off)
                + overlap_cost x the collective time that does overlap (interference)
    bubble    = (pp - 1) / v x t_stage        (1F1B with v interleaved chunks: Narayanan 2021, section 2.2)
    overhead  = the calibration's fixed per-step overhead

with ``m = ceil(global_batch / (dp x micro_batch))`` micro-batches per step,
``eta`` the framework efficiency on compute and memory time, ``comm_eff``
the achieved fraction of the calibrated collective bandwidth and
``overlap_cost`` the share of an overlapped collective's duration that its
interference still adds to the step (1, 1 and 0 unless the validation fitted
them: the share of time no op model accounts for; the values and how they were
fitted are in ``data/reference/predictor_error.json``).

Overlap is not free: a collective running under compute takes SMs for its
kernels (NCCL's channels) and HBM bandwidth for its copies and reductions, so
the GEMMs beside it slow down. ``overlap_cost`` in [0, 1] prices that: 0 is the
ideal hiding, 1 no hiding at all. The validation fits it per framework family
with ``eta`` and ``comm_eff`` (on the rows outside each held-out split); before
it had that term, the published rows' log error grew with the hidden share of
the step (slope about 0.7 on 149 llm-foundry rows), which the family's
``comm_eff`` half absorbed.

MFU (PaLM, Chowdhery et al. 2022, appendix B): model FLOPs per step (6 N +
12 L T d per token) / (step time x accelerators x dense datasheet peak of the
precision). HFU adds the recomputed FLOPs.

The interval: the held-out relative error quantiles of the validation
(``predictor_error.json``: ``known_hardware_band``, a hardware's own
leave-one-hardware-out quantile pooled with the band of a type without rows,
calibrated on publications held out by source; a type without rows carries
that band) combined in quadrature with the calibration's relative
uncertainty (its rates', plus the collective model's own interval weighted by
the exposed-communication share of the step); the level is the quantile's (0.9).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from hwmodels.dtypes import predict_precision
from hwmodels.errors import ModelInputError
from hwmodels.predict import ops as O
from hwmodels.predict.calibration import Calibration
from hwmodels.predict.collectives import collective_time
from hwmodels.predict.layout import Layout, placement, pp_hops
from hwmodels.predict.memory import (GiB, MemoryEstimate, estimate, offloaded_layers, saved_bytes_per_layer,
                                     saved_precision)
from hwmodels.predict.spec import GenericSpec, ModelSpec

ERROR_FILE = Path(__file__).resolve().parents[2] / "data" / "reference" / "predictor_error.json"
#: the memory model's held-out error on published peak memory (benchmarks/memory_validation.py)
MEMORY_ERROR_FILE = ERROR_FILE.with_name("memory_error.json")
INTERVAL_LEVEL = 0.9
DEFAULT_REL_ERROR = 0.25  # used when no validation file exists (stated; the validation replaces it)
MIN_ROWS_PER_HARDWARE = 5  # fewer held-out rows than this: the overall quantile, not the hardware's own


@dataclass(frozen=True, kw_only=True)
class StepTimes:
    compute: float
    memory_bound: float
    exposed_comm: float
    bubble: float
    overhead: float
    model_flops: float
    hardware_flops: float
    memory: MemoryEstimate
    microbatches: int
    comm_total: float = 0.0
    overlapped_comm: float = 0.0  # collective time hidden under compute (its interference is in exposed_comm)

    @property
    def total(self) -> float:
        return self.compute + self.memory_bound + self.exposed_comm + self.bubble + self.overhead


@lru_cache(maxsize=10_000)
def _layer_ops(spec: ModelSpec, tp: int, mb: int, seq: int, recompute: str, sp: bool, attention: str,
               precision: str, cp: int = 1) -> tuple[O.Op, ...]:
    """:func:`.ops.layer_ops`, kept per shape: the same ops are priced on every node type a search visits (read
    only; the node's rates come in :func:`_cost_ops`)."""
    return tuple(O.layer_ops(spec, micro_batch=mb, seq_len=seq, tp=tp, sp=sp, recompute=recompute,
                             attention=attention, precision=precision, cp=cp))


@lru_cache(maxsize=100_000)
def _layer_cost(cal: Calibration, spec: ModelSpec, tp: int, mb: int, seq: int, recompute: str, sp: bool,
                attention: str, precision: str, cp: int = 1) -> tuple[float, float, float, float, float, float, float]:
    """Seconds of one layer: (compute_fwd, compute_bwd+recompute, memory_fwd, memory_bwd+recompute, tp_comm,
    attention_fwd, attention_bwd+recompute); the compute figures include the attention kernel's (run on the
    rank's ``seq / cp`` query tokens: its rate is the one at that length). The CP ring is :func:`_cp_cost`."""
    level, rpn = placement(Layout(dp=1, tp=tp), scale_up=cal.scale_up_size,
                           accelerators_per_node=cal.accelerators_per_node)["tp"]
    return _cost_ops(cal, _layer_ops(spec, tp, mb, seq, recompute, sp, attention, precision, cp),
                     O.local_seq(seq, cp), precision, tp, level, rpn)


def layer_cost(cal: Calibration, spec: ModelSpec, tp: int, mb: int, seq: int, recompute: str, share: float, sp: bool,
               attention: str, precision: str, cp: int = 1) -> tuple[float, ...]:
    """``_layer_cost`` averaged over a stage whose share ``share`` of layers runs ``recompute``, the rest none."""
    rc = _layer_cost(cal, spec, tp, mb, seq, recompute, sp, attention, precision, cp)
    if share >= 1.0 or recompute == "none":
        return rc
    keep = _layer_cost(cal, spec, tp, mb, seq, "none", sp, attention, precision, cp)
    return tuple(share * a + (1.0 - share) * b for a, b in zip(rc, keep))


@lru_cache(maxsize=1_000)
def _autocast_cost(cal: Calibration, spec: ModelSpec, mb: int, seq: int, recompute: str, share: float) -> float:
    """Seconds of one layer's autocast traffic (:func:`.ops.autocast_ops`) per micro-batch; a full recompute on
    ``share`` of the layers repeats the forward part there."""
    t = 0.0
    for op in O.autocast_ops(spec, micro_batch=mb, seq_len=seq, recompute=recompute):
        t += cal.memory_time(op.nbytes, op.launches) * (share if op.phase == "recompute" else 1.0)
    return t


@lru_cache(maxsize=10_000)
def _cp_cost(cal: Calibration, spec: ModelSpec, tp: int, cp: int, mb: int, seq: int, sp: bool, recompute: str,
             precision: str, level: str, rpn: int) -> tuple[float, float]:
    """Seconds of one layer's context-parallel ring per micro-batch: (forward, backward + recompute), one
    send/recv per ring step on the CP group's link ``level`` with ``rpn`` of its ranks per node
    (:func:`.layout.placement`)."""
    f = b = 0.0
    for op in _layer_ops(spec, tp, mb, seq, recompute, sp, "flash", precision, cp):
        if op.group != "cp":
            continue
        t = collective_time(cal, kind=op.collective, size_bytes=op.nbytes, ranks=2, level=level,
                            ranks_per_node=rpn) * op.count
        if op.phase == "fwd":
            f += t
        else:
            b += t
    return f, b


@lru_cache(maxsize=10_000)
def _head_cost(cal: Calibration, spec: ModelSpec, tp: int, mb: int, seq: int, precision: str):
    # the output layer stays in 16 bits under fp8 and fp4 (TransformerEngine keeps the LM head and embedding in bf16)
    prec = O.wide_precision(precision)
    return _cost_ops(cal, O.head_ops(spec, micro_batch=mb, seq_len=seq, tp=tp, precision=prec), seq,
                     prec, tp, "intra", 1)


def _cost_ops(cal: Calibration, ops: Iterable[O.Op], seq: int, precision: str, tp: int, level: str, rpn: int):
    gemm_dtype = precision
    e = O.NARROW_GEMM_BYTES.get(precision) or O.dtype_bytes(precision)
    cf = cb = mf = mb_ = comm = attn_f = attn_b = 0.0
    for op in ops:
        if op.kind == "gemm":
            t = cal.gemm_time(op.m, op.n, op.k, gemm_dtype, e) * op.count
        elif op.kind == "attention":
            t = cal.attention_time(op.flops, seq, O.wide_precision(precision))
            if op.phase == "fwd":
                attn_f += t
            else:
                attn_b += t
        elif op.kind == "memory":
            t = cal.memory_time(op.nbytes, op.launches)
        else:
            if op.group == "cp":  # the CP ring is priced on its own level (_cp_cost)
                continue
            comm += collective_time(cal, kind=op.collective, size_bytes=op.nbytes, ranks=tp, level=level,
                                    ranks_per_node=rpn) * op.count
            continue
        if op.kind == "memory":
            if op.phase == "fwd":
                mf += t
            else:
                mb_ += t
        elif op.phase == "fwd":
            cf += t
        else:
            cb += t
    return cf, cb, mf, mb_, comm, attn_f, attn_b


def layout_memory(spec: ModelSpec, cal: Calibration, layout: Layout, *, global_batch: int, seq_len: int,
                  attention: str = "flash") -> MemoryEstimate:
    """Bytes per accelerator of ``layout`` for a step of ``global_batch`` sequences (:func:`memory.estimate`)."""
    m = -(-global_batch // (layout.dp * layout.micro_batch))
    # a CP rank holds the activations of its own s/cp tokens of each sequence
    return estimate(spec, capacity_bytes=cal.memory_capacity_bytes, precision=layout.precision,
                    sharding=layout.sharding, dp=layout.shard_degree(cal.scale_up_size), tp=layout.tp, pp=layout.pp,
                    micro_batch=layout.micro_batch, seq_len=O.local_seq(seq_len, layout.cp), recompute=layout.recompute,
                    sp=layout.sequence_parallel, flash=attention == "flash", microbatches=m,
                    interleave=layout.interleave, recompute_layers=layout.recompute_layers,
                    selective_saves=layout.selective_saves, quantized_saves=layout.quantized_saves,
                    offload_layers=layout.offload_layers)


def _offload_cost(spec: ModelSpec, cal: Calibration, layout: Layout, *, seq: int, fwd_s: float,
                  bwd_s: float) -> tuple[float, float]:
    """(exposed, total) seconds per micro-batch of activation offload (``layout.offload_layers``): the saved
    activations of that many layers go to host memory over the host link during the forward pass (``fwd_s``, a
    stage's forward per micro-batch) and come back during the backward (``bwd_s``), one direction each, on copy
    engines beside the compute (Transformer Engine's offload handler: separate CUDA streams, layer by layer).
    What the compute hides is ``overlap`` of its phase, as for a collective; a transfer never costs less than 5%
    of itself (the HBM traffic it adds: each byte is read or written once more)."""
    if layout.offload_layers <= 0:
        return 0.0, 0.0
    off = offloaded_layers(layout.offload_layers, spec.n_layers / layout.pp)
    if cal.host_link is None:
        raise ModelInputError(f"layout.offload_layers: {cal.node_id} has no host-link bandwidth (a published "
                              f"host_copy_GBps row in data/calibration/published.csv); valid here: 0")
    per_layer = saved_bytes_per_layer(spec, micro_batch=layout.micro_batch, seq_len=seq, tp=layout.tp,
                                      sp=layout.sequence_parallel, recompute=layout.recompute,
                                      recompute_layers=layout.recompute_layers, selective_saves=layout.selective_saves,
                                      precision=saved_precision(layout.precision, layout.quantized_saves))
    t = off * per_layer / cal.host_link.value
    ov = cal.overlap.value
    exposed = max(t - ov * fwd_s, 0.05 * t) + max(t - ov * bwd_s, 0.05 * t)
    return exposed, 2.0 * t


def asymmetric_split(n_layers: int, pp: int, v: int) -> bool:
    """True when a pipeline of ``pp`` stages x ``v`` chunks can hold ``n_layers`` only with the embedding and the
    loss counted as one layer slot each (Megatron-Core ``account_for_embedding_in_pipeline_split`` /
    ``account_for_loss_in_pipeline_split``, MLPerf's ``ASYM_PP_EMBED`` / ``ASYM_PP_LOSS``): Megatron needs the layers
    to divide evenly over the chunks, so a stated layout where ``n_layers`` does not and ``n_layers + 2`` does runs
    that way (Llama 3.1 405B's 126 layers on PP 8 x VP 4, 8 x 8 or 16 x 8)."""
    chunks = pp * v
    return pp > 1 and n_layers % chunks != 0 and (n_layers + 2) % chunks == 0


def _grad_window_mbs(pp: int, v: int, m: int) -> float:
    """Micro-batch backward passes of a stage that its bucketed DDP/ZeRO-1 gradient reduction can hide under.

    Without interleaving a stage's gradients are complete only during its last micro-batch's backward: 1. With
    ``v`` interleaved chunks (Narayanan et al. 2021, section 2.2) the stage's last ``g = min(pp, m)`` micro-batches
    run their backward chunk after chunk, ``g`` passes of ``1/v`` of the stage each; a chunk's gradients are
    complete once its last pass ends, so the reduction of the first ``v - 1`` chunks overlaps the rest of those
    passes (Megatron-Core reduces each model chunk's buckets as that chunk finishes): ``(v-1)/v x g`` passes, plus
    the last chunk's own ``1/v`` as without interleaving.
    """
    if pp <= 1 or v <= 1:
        return 1.0
    return (v - 1) / v * min(pp, m) + 1.0 / v


def step_times(spec: ModelSpec, cal: Calibration, layout: Layout, *, global_batch: int, seq_len: int | None = None,
               attention: str = "flash", eta: float = 1.0, comm_eff: float = 1.0, overlap_cost: float = 0.0,
               memory_only: bool = False, autocast: bool = False,
               torch_optimizer: O.TorchOptimizer | None = None, memory: MemoryEstimate | None = None) -> StepTimes:
    """The step model of the module docstring for one layout.

    ``autocast``: the step runs under bf16 autocast over fp32 parameters (the suite's own ``bf16_autocast``
    workloads) and moves :func:`.ops.autocast_ops` on top of the 16-bit element-wise traffic; ``torch_optimizer``:
    the optimizer phase is the suite's torch one (:class:`.ops.TorchOptimizer`) instead of a fused Adam.

    ``eta`` divides compute and memory-bound time, ``comm_eff`` every collective's time (both 1 = the
    calibrated rates as they are), ``overlap_cost`` the share of the hidden collective time (DP/FSDP, and TP with
    ``layout.tp_comm_overlap``) that the step still pays (0 = ideal overlap); the validation fits all three per
    framework family. ``memory``: the layout's :func:`layout_memory` where the caller has it already (the search).
    """
    if not 0.0 <= overlap_cost <= 1.0:
        raise ModelInputError(f"overlap_cost: must lie in [0, 1] (0 = ideal overlap, 1 = none), got {overlap_cost!r}")
    seq = seq_len or spec.seq_len
    L, tp, pp, dp, v, mbs = spec.n_layers, layout.tp, layout.pp, layout.dp, layout.interleave, layout.micro_batch
    m = -(-global_batch // (dp * mbs))
    dps = layout.shard_degree(cal.scale_up_size)  # ranks the state is sharded over
    mem = memory if memory is not None else layout_memory(spec, cal, layout, global_batch=global_batch, seq_len=seq,
                                                          attention=attention)
    model_f, hw_f = O.step_flops(spec, seq_len=seq, sequences=m * dp * mbs, recompute=layout.recompute,
                                 recompute_layers=layout.recompute_layers)
    if memory_only:
        return StepTimes(compute=0, memory_bound=0, exposed_comm=0, bubble=0, overhead=0, model_flops=model_f,
                         hardware_flops=hw_f, memory=mem, microbatches=m)
    cp = layout.cp
    s_loc = O.local_seq(seq, cp)  # a CP rank's tokens of each sequence
    cf, cb, mf, mbw, tpc, af, ab = layer_cost(cal, spec, tp, mbs, seq, layout.recompute, layout.recompute_layers,
                                              layout.sequence_parallel, attention, layout.precision, cp)
    hf, hb, hmf, hmb, *_ = _head_cost(cal, spec, tp, mbs, s_loc, layout.precision)
    stage_layers = -(-L // pp)
    # the framework factor eta covers what a framework loses around its GEMMs and element-wise kernels; the
    # attention kernel's rate is already that of the kernel the framework runs (a published fwd+bwd curve or a
    # measured record), so it is not divided again: here, and in every overlap window below
    cf, cb = (cf - af) / eta + af, (cb - ab) / eta + ab
    c_stage = stage_layers * (cf + cb) + (hf + hb) / eta
    m_stage = (stage_layers * (mf + mbw) + hmf + hmb) / eta
    if asymmetric_split(L, pp, v):
        # the embedding and the loss take a layer's slot each: the last stage runs one layer fewer beside the head,
        # and the slowest stage is the larger of a full stage and that one
        c_stage = max(stage_layers * (cf + cb), c_stage - (cf + cb))
        m_stage = max(stage_layers * (mf + mbw) / eta, m_stage - (mf + mbw) / eta)
    tp_layer = tpc / comm_eff
    tp_exposed_layer = tp_layer
    if layout.tp_comm_overlap and tp > 1:  # chunked and pipelined with the layer's GEMMs (not the attention core)
        gemms = (cf - af) + (cb - ab)
        tp_exposed_layer = max(tp_layer - cal.overlap.value * gemms, 0.05 * tp_layer)
    layer_comm = stage_layers * tp_exposed_layer  # a stage's exposed TP (and CP) time per micro-batch
    place = placement(layout, scale_up=cal.scale_up_size, accelerators_per_node=cal.accelerators_per_node)
    # CP ring: each step's send/recv hidden under the attention of the chunk already held (per phase)
    cp_layer = cp_exposed_layer = 0.0
    if cp > 1:
        cp_f, cp_b = (x / comm_eff for x in _cp_cost(cal, spec, tp, cp, mbs, seq, layout.sequence_parallel,
                                                     layout.recompute, layout.precision, *place["cp"]))
        cp_layer = cp_f + cp_b
        cp_exposed_layer = (max(cp_f - cal.overlap.value * af, 0.05 * cp_f)
                            + max(cp_b - cal.overlap.value * ab, 0.05 * cp_b))
    layer_comm += stage_layers * cp_exposed_layer
    # pipeline p2p: activations t d e (/tp with the scatter/gather optimisation), per micro-batch and chunk one
    # exchange with the next stage and one with the previous, each on its own hop's level (layout.pp_hops)
    p2p = 0.0
    if pp > 1:
        size = mbs * s_loc * spec.d_model * O.dtype_bytes(layout.precision) / tp
        hops = pp_hops(layout, scale_up=cal.scale_up_size, accelerators_per_node=cal.accelerators_per_node)
        p2p = v * sum(collective_time(cal, kind="send_recv", size_bytes=size, ranks=2, level=lvl, ranks_per_node=1)
                      for lvl in hops) / comm_eff
    if autocast:
        if tp > 1 or cp > 1:
            raise ModelInputError(f"autocast traffic is modelled for one rank per model replica (tp = cp = 1), "
                                  f"got tp={tp}, cp={cp}")
        m_stage += stage_layers * _autocast_cost(cal, spec, mbs, s_loc, layout.recompute,
                                                 layout.recompute_layers) / eta
    t_stage = c_stage + m_stage + layer_comm + p2p
    compute = m * c_stage
    memory = m * m_stage
    # optimizer step on the local (sharded) optimizer state
    local = spec.n_params() / (tp * pp)
    opt_params = local / dps if layout.sharding in ("zero1", "shard_grad_op", "full_shard") else local
    opt = O.optimizer_op(opt_params, layout.precision, torch_optimizer)
    opt_s = cal.memory_time(opt.nbytes, opt.launches) / eta
    memory += opt_s
    # fp8/fp4 weights quantized once per step, in each layer's first micro-batch (TE's weight workspace)
    wcast = O.weight_cast_op(spec, tp=tp, precision=layout.precision)
    if wcast is not None:
        memory += stage_layers * cal.memory_time(wcast.nbytes, wcast.launches) / eta
    # data-parallel collectives
    lvl, rpn = place["dp"]
    dpc = dp * cp  # the gradient group: DP x CP
    if dps < dpc:  # hybrid: the sharded collectives stay inside the domain
        lvl, rpn = placement(Layout(dp=dps, tp=tp), scale_up=cal.scale_up_size,
                             accelerators_per_node=cal.accelerators_per_node)["dp"]
    dp_exposed = dp_total = 0.0
    fwd_mb = stage_layers * (cf + mf / eta)  # a stage's forward per micro-batch
    bwd_mb = stage_layers * (cb + mbw / eta)
    grad_window = bwd_mb * _grad_window_mbs(pp, v, m)  # backward time a bucketed gradient reduction can hide under
    if dps < dpc:
        # replicas all-reduce their shard of the fp32 gradients once per step across domains, under the last backward
        # passes (grad_window)
        t = collective_time(cal, kind="all_reduce", size_bytes=local / dps * O.GRAD_REDUCE_BYTES, ranks=dpc // dps,
                            level="inter", ranks_per_node=1) / comm_eff
        dp_total += t
        dp_exposed += max(t - cal.overlap.value * grad_window, 0.05 * t) if layout.dp_comm_overlap else t
    if dps > 1:
        layer_local = spec.layer_params() / tp
        colls = O.dp_collectives(sharding=layout.sharding, local_params=local, layer_params_local=layer_local,
                                 n_layers_local=stage_layers, microbatches=m, precision=layout.precision)
        ov = cal.overlap.value
        if layout.sharding in ("ddp", "zero1"):
            for c in colls:
                t = collective_time(cal, kind=c.collective, size_bytes=c.nbytes, ranks=dps, level=lvl,
                                    ranks_per_node=rpn) / comm_eff
                dp_total += t
                if c.phase == "bwd" and layout.dp_comm_overlap:  # bucketed, under the last backward passes
                    dp_exposed += max(t - ov * grad_window, 0.05 * t)
                else:
                    dp_exposed += t
        else:
            per_unit_fwd = per_unit_bwd = 0.0
            for c in colls:
                t = collective_time(cal, kind=c.collective, size_bytes=c.nbytes, ranks=dps, level=lvl,
                                    ranks_per_node=rpn) / comm_eff
                if c.phase == "fwd":
                    per_unit_fwd += t
                else:
                    per_unit_bwd += t
            per_layer_fwd = fwd_mb / max(stage_layers, 1)
            per_layer_bwd = bwd_mb / max(stage_layers, 1)
            exp_mb = (stage_layers * (max(per_unit_fwd - ov * per_layer_fwd, 0.0)
                                      + max(per_unit_bwd - ov * per_layer_bwd, 0.0)) + per_unit_fwd)
            dp_exposed += m * exp_mb
            dp_total += m * stage_layers * (per_unit_fwd + per_unit_bwd)
    hidden = max(dp_total - dp_exposed, 0.0) + m * stage_layers * (tp_layer - tp_exposed_layer
                                                                    + cp_layer - cp_exposed_layer)
    off_exposed, off_total = _offload_cost(spec, cal, layout, seq=s_loc, fwd_s=fwd_mb, bwd_s=bwd_mb)
    exposed = m * (layer_comm + p2p + off_exposed) + dp_exposed + overlap_cost * hidden
    bubble = (pp - 1) / v * t_stage if pp > 1 else 0.0
    host = 0.0
    if cal.host_op_s is not None:  # a measured dispatch probe: the host's own time per step, by phase
        fwd_ops = stage_layers * spec.host_ops_per_layer() + spec.host_ops_outside_layers()
        host_fb = m * fwd_ops * cal.host_op_s.value
        if layout.recompute == "full":
            host_fb += m * layout.recompute_layers * stage_layers * spec.host_ops_per_layer() * cal.launch_s.value
        host = host_bound_overhead(cal, ((host_fb, compute + memory - opt_s + exposed + bubble),
                                         (cal.optimizer_host_time(spec.param_tensors()), opt_s)))
    return StepTimes(compute=compute, memory_bound=memory, exposed_comm=exposed, bubble=bubble,
                     overhead=cal.step_overhead_s.value + host, model_flops=model_f, hardware_flops=hw_f, memory=mem,
                     microbatches=m, comm_total=m * (stage_layers * (tp_layer + cp_layer) + p2p + off_total) + dp_total,
                     overlapped_comm=hidden)


# ------------------------------------------------------------------------------ errors
@lru_cache(maxsize=4)
def _errors(path: str) -> dict[str, Any]:
    p = Path(path)
    if not p.exists():
        return {}
    try:
        return json.loads(p.read_text())
    except (OSError, json.JSONDecodeError):
        return {}


#: Sections of the validation file the intervals read, in order of preference.
LOHO_KEYS = ("leave_one_hardware_out_stack", "leave_one_hardware_out_any_framework", "leave_one_hardware_out")


def loho_section(errors: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(how it was scored, section) of a validation file's leave-one-hardware-out error that new predictions
    carry: scored with one framework factor for every framework, as a new prediction uses; older files only
    have the per-family one. ("", {}) when the file has neither."""
    for name, how in zip(LOHO_KEYS, ("leave-one-hardware-out, framework unknown, with the stack factor of the "
                                      "stack's other hardware", "leave-one-hardware-out, framework unknown",
                                      "leave-one-hardware-out")):
        if errors.get(name):
            return how, errors[name]
    return "", {}


def family_band_ratio(errors: dict[str, Any], framework: str | None) -> tuple[float, str]:
    """(factor, how) on a stated family's band: ``framework_stated_band.per_family``'s ratio of the validation (the
    q90 of the family's held-out |error| over its hardware's band, pooled with 1, never below 1): it widens the band
    of a family whose factors carry worse to other hardware than the bands allow (torchtitan, AXLearn); (1, "")
    for the others and without one."""
    fr = (errors.get("framework_stated_band") or {}).get("per_family") or {}
    f = (fr.get("per_family") or {}).get(framework) if framework else None
    if not fr.get("met") or not isinstance(f, dict) or not isinstance(f.get("ratio"), (int, float)) \
            or f["ratio"] <= 1.0:
        return 1.0, ""
    cov = (fr.get("held_out_source_coverage") or {}).get("mean_group_covered")
    held = (f"; with each publication held out in turn such bands held {cov:.0%} of its rows on average"
            if isinstance(cov, (int, float)) else "")
    return float(f["ratio"]), (
        f"x{f['ratio']:.2f} for {framework}, whose factors carry worse to other hardware than the bands allow: the "
        f"q{fr['level'] * 100:g} of its {f['n']} rows' held-out |error| (from {f['source_groups']} sources) over "
        f"their hardware's band is {f['own_ratio']:.2f}, pooled with 1 at {fr['k']:g} pseudo-sources "
        f"(framework_stated_band.per_family){held}")


def stated_prior_band(errors: dict[str, Any], framework: str | None = None) -> float | None:
    """The band a stated framework carries on a hardware type without published rows: ``framework_stated_band``'s
    band of such a type times the family's ratio (:func:`family_band_ratio`), but no narrower than the
    framework-unknown one (``known_hardware_band``). Such a type's error is its rates' (assumed, not measured),
    which the family does not know: stating it narrows the framework part only (pre-registered: TPU7x, never seen,
    held 4 of 8 in the stated band of a type without rows, 6 of 8 in the framework-unknown one). None where the
    file has no framework-stated band."""
    stated = ((errors.get("framework_stated_band") or {}).get("known") or {}).get("prior_band_rel")
    if not isinstance(stated, (int, float)):
        return None
    unknown = (errors.get("known_hardware_band") or {}).get("prior_band_rel")
    return max(float(stated) * family_band_ratio(errors, framework)[0],
               float(unknown) if isinstance(unknown, (int, float)) else 0.0)


def held_out_error(hardware: str, path: Path | None = None, framework: str | None = None) -> tuple[float, str]:
    """(relative error at INTERVAL_LEVEL, where it came from) for this hardware: the validation's
    ``known_hardware_band`` where the file has it (calibrated on publications held out by source), else the
    hardware's own leave-one-hardware-out quantile, else the band of a hardware type without rows.

    ``framework``: a stated framework family (:func:`framework_families`): the validation's
    ``framework_stated_band`` (the same bands, built from errors scored with the family's factors), where the
    file has it; else the framework-unknown band above, which is wider, with a note saying so."""
    e = _errors(str(path or ERROR_FILE))
    key = f"q{int(INTERVAL_LEVEL * 100)}"
    kb = e.get("known_hardware_band") or {}
    stated = ""
    prior = kb.get("prior_band_rel")  # the band of a type without rows
    ratio, ratio_how = 1.0, ""
    if framework:
        fs = (e.get("framework_stated_band") or {}).get("known") or {}
        if fs.get("level") == INTERVAL_LEVEL and isinstance(fs.get("prior_band_rel"), (int, float)):
            kb, prior = fs, stated_prior_band(e, framework)
            ratio, ratio_how = family_band_ratio(e, framework)
            pro = (e.get("prospective_coverage") or {}).get("framework_stated") or {}
            own = (pro.get("by_family") or {}).get(framework) or {}
            own_txt = (f"; {own['inside']} of the {own['n']} that stated {framework}"
                       if isinstance(own.get("inside"), int) and own.get("n") else "")
            pre = (f" (pre-registered: of {pro['n']} published runs predicted this way before they were read, "
                   f"{pro['inside']} fell inside, {pro['inside'] / pro['n']:.0%} against the {INTERVAL_LEVEL:.0%} "
                   f"claimed{own_txt})") if isinstance(pro.get("inside"), int) and pro.get("n") else ""
            stated = (f"framework family {framework} stated: framework_stated_band, the bands scored with each "
                      f"family's factors fitted on the other hardware{pre}; "
                      + (f"the hardware's band {ratio_how}; " if ratio_how else ""))
        else:
            stated = (f"framework family {framework} stated, but {ERROR_FILE.name} has no framework_stated_band: "
                      "the framework-unknown band (wider) is used; ")
    if kb.get("level") == INTERVAL_LEVEL and isinstance(kb.get("prior_band_rel"), (int, float)):
        cov = (kb.get("held_out_source_coverage") or {}).get("mean_group_covered")
        held = (f"; with each publication (hardware, source) held out in turn, such bands held {cov:.0%} of its "
                f"rows on average") if isinstance(cov, (int, float)) else ""
        hw = (kb.get("per_hardware") or {}).get(hardware)
        if hw and isinstance(hw.get("band_rel"), (int, float)) and hw.get("n", 0) >= MIN_ROWS_PER_HARDWARE:
            return float(hw["band_rel"]) * ratio, stated + (
                f"known_hardware_band ({ERROR_FILE.name}): {hardware}'s own held-out |error| {key} "
                f"({hw['own_q']:.1%}, {hw['n']} rows from {hw['source_groups']} sources) pooled with the band of a "
                f"type without rows (+-{kb['prior_band_rel']:.1%}), root-mean-square with weights {hw['source_groups']} "
                f"(its sources) and {kb['k']:g} (pseudo-sources), so that rows of one publication count once{held}")
        wider = ("" if prior <= kb["prior_band_rel"] else  # stated_prior_band: the larger of these two
                 f"; times the family's ratio: +-{prior:.1%}" if prior <= kb["prior_band_rel"] * ratio else
                 f"; not narrower than the framework-unknown band of a type without rows (+-{prior:.1%}): for a "
                 "type without published rows the error is its rates', which the framework does not carry")
        return float(prior), stated + (
            f"{hardware} has fewer than {MIN_ROWS_PER_HARDWARE} published training rows: the band of a type without "
            f"rows (known_hardware_band, {ERROR_FILE.name}): q{kb['prior_quantile'] * 100:g} of every row's "
            f"held-out |error|, the least quantile at which bands held a held-out publication's rows at "
            f"{INTERVAL_LEVEL:.0%}{held}{wider}")
    what, loho = loho_section(e)
    what = what or "leave-one-hardware-out"
    hw = loho.get("per_hardware", {}).get(hardware)
    if hw and key in hw and hw.get("n", 0) >= MIN_ROWS_PER_HARDWARE:
        return float(hw[key]), f"{what}, held-out |error| {key} for {hardware} ({ERROR_FILE.name})"
    band = e.get("never_seen_band") or {}
    if isinstance(band.get("band_rel"), (int, float)) and band.get("level") == INTERVAL_LEVEL:
        cov = band.get("coverage", {}).get("mean_hardware_covered")
        held = f" ({cov:.0%})" if isinstance(cov, (int, float)) else ""
        return float(band["band_rel"]), (
            f"{hardware} has fewer than {MIN_ROWS_PER_HARDWARE} published training rows: the band of a hardware type "
            f"without validation rows (never_seen_band, {ERROR_FILE.name}): q{band['quantile'] * 100:g} of every "
            f"row's {what} |error|, the first quantile whose band, with each hardware type held out in turn, held "
            f"at least {INTERVAL_LEVEL:.0%} of that type's rows on average over types{held}"
            f"{'' if band.get('met', True) else '; short of that level: no quantile tried reached it'}")
    ov = loho.get("overall") or e.get("cross_validation", {}).get("overall")
    if ov and key in ov:
        cov = e.get("interval_coverage", {}).get("overall_covered")
        held = (f"; in the validation such a band, for a hardware type it had not seen, held {cov:.0%} of that "
                f"hardware's published rows (interval_coverage)") if isinstance(cov, (int, float)) else ""
        return float(ov[key]), f"overall {what}, held-out |error| {key} ({ERROR_FILE.name}); " \
                               f"{hardware} has fewer than {MIN_ROWS_PER_HARDWARE} published training rows{held}"
    return DEFAULT_REL_ERROR, "no validation file: default +-25% (stated assumption)"


#: Fewer held-out pairs than this in a predicted-gap bin: too few to say how often such an order holds.
MIN_RANKING_PAIRS = 10


@dataclass(frozen=True, kw_only=True)
class OrderRecord:
    """How often, held out, two hardware types predicted about this far apart were ordered right
    (``ranking_reliability`` of the validation file: pairs at the same model, sequence, precision and count)."""

    gap_lo: float
    gap_hi: float | None
    pairs: int
    ordered_right: int
    ratio_error_q90: float | None
    scored_with: str

    @property
    def rate(self) -> float:
        return self.ordered_right / self.pairs if self.pairs else float("nan")

    def holds(self, level: float) -> bool:
        """Enough pairs, and at least ``level`` of them ordered right."""
        return self.pairs >= MIN_RANKING_PAIRS and self.ordered_right >= level * self.pairs

    def bin_label(self) -> str:
        return f"{self.gap_lo:.0%} to {self.gap_hi:.0%}" if self.gap_hi is not None else f"{self.gap_lo:.0%} or more"


def has_validation_rows(hardware: str, path: Path | None = None) -> bool:
    """Whether the validation scored at least MIN_ROWS_PER_HARDWARE published runs on ``hardware``."""
    e = _errors(str(path or ERROR_FILE))
    hw = ((e.get("known_hardware_band") or {}).get("per_hardware") or {}).get(hardware) or {}
    return int(hw.get("n", 0) or 0) >= MIN_ROWS_PER_HARDWARE


def order_record(gap_rel: float, *, new_type: bool, path: Path | None = None) -> OrderRecord | None:
    """The held-out record of ordering two hardware types whose predicted throughput (or cost, at quoted prices)
    differs by ``gap_rel`` (the larger over the smaller, minus 1): the validation's ``ranking_reliability`` bin the
    gap falls in, scored leave-one-out where both types have published rows, leave-one-hardware-out where either
    has not (``new_type``). None when the file has no such section."""
    sec = ((_errors(str(path or ERROR_FILE)).get("ranking_reliability") or {}).get("new" if new_type else "known")
           or {})
    q90 = (sec.get("ratio_error") or {}).get("q90")
    for b in sec.get("bins") or ():
        lo, hi = float(b["gap_lo"]), b.get("gap_hi")
        if lo <= abs(gap_rel) and (hi is None or abs(gap_rel) < float(hi)):
            return OrderRecord(gap_lo=lo, gap_hi=None if hi is None else float(hi), pairs=int(b["pairs"]),
                               ordered_right=int(b["ordered_right"]),
                               ratio_error_q90=float(q90) if isinstance(q90, (int, float)) else None,
                               scored_with=str(sec.get("scored_with", "")))
    return None


def memory_held_out_error(path: Path | None = None) -> tuple[float | None, str]:
    """(relative |error| at INTERVAL_LEVEL of the memory model on published peak memory, where it came from);
    (None, why) when no memory validation file exists."""
    p = path or MEMORY_ERROR_FILE
    e = _errors(str(p))
    band, ov = e.get("band_rel"), e.get("overall") or {}
    if not isinstance(band, (int, float)) or e.get("level") != INTERVAL_LEVEL:
        return None, f"no memory validation ({p.name}): the memory figure carries no interval"
    return float(band), (f"memory model's held-out |error| q{int(INTERVAL_LEVEL * 100)} on {ov.get('n', '?')} "
                         f"published peak-memory runs (median {ov.get('median', float('nan')):.1%}, worst "
                         f"{ov.get('max', float('nan')):.1%}; {p.name})")


def memory_fit_note(total_bytes: float, capacity_bytes: float, rel: float | None) -> str | None:
    """What the fit verdict should be read with when the capacity lies inside the memory interval."""
    if rel is None or capacity_bytes <= 0:
        return None
    lo, hi = _interval(total_bytes, rel)
    if not lo <= capacity_bytes <= hi:
        return None
    verdict = "fits" if total_bytes <= capacity_bytes else "does not fit"
    return (f"memory: the layout {verdict} by the point estimate ({total_bytes / GiB:.1f} of {capacity_bytes / GiB:.1f}"
            f" GiB), but the capacity lies inside the memory interval [{lo / GiB:.1f}, {hi / GiB:.1f}] GiB (held-out "
            f"+-{rel:.0%}): whether it fits is not settled by the model")


#: A hardware type whose published runs (all of which ran) the memory model said would not fit at least this often,
#: over at least MIN_REGIME_ROWS runs, has its record stated with every prediction on it (``memory_record_note``)
MEMORY_RECORD_SHARE = 0.25


def memory_record_note(hardware: str, path: Path | None = None) -> str | None:
    """What a fit verdict on ``hardware`` should be read with when the memory model rejected a share of at least
    MEMORY_RECORD_SHARE of that type's published runs, all of which ran (``memory_fit.by_hardware`` of the
    validation file; TPU runs under XLA, whose memory planning and host offload the model does not follow): a
    "does not fit" up to the largest estimate / capacity among them is not conclusive there, and the search, which
    drops layouts that do not fit, may have dropped layouts that run. None when the record is small or clean."""
    rec = ((_errors(str(path or ERROR_FILE)).get("memory_fit") or {}).get("by_hardware") or {}).get(hardware) or {}
    n, k, top = rec.get("rows", 0), rec.get("predicted_not_to_fit", 0), rec.get("max_ratio")
    if n < MIN_REGIME_ROWS or not k or k / n < MEMORY_RECORD_SHARE or not isinstance(top, (int, float)):
        return None
    return (f"memory: on {hardware} the memory model said {k} of {n} published runs would not fit although they ran "
            f"(estimates up to {top:.2f}x the capacity; {ERROR_FILE.name} memory_fit): a 'does not fit' up to that "
            "ratio is not conclusive on this hardware, and the layout search may have dropped layouts that run")


def search_optimism(path: Path | None = None) -> str | None:
    """What a layout chosen by the search should be read with: on the published runs whose layout the validation
    left (in part) to the search, how far its prediction was above the published throughput (``by_layout_source``
    of the validation file); None when the file does not say."""
    bl = _errors(str(path or ERROR_FILE)).get("by_layout_source") or {}
    med, s = bl.get("searched_median_signed"), bl.get("searched") or {}
    if not isinstance(med, (int, float)) or not s.get("n"):
        return None
    return (f"layout chosen by the search (the model's fastest that fits): on the {s['n']} published runs whose "
            f"layout the validation left to the search, the prediction was a median {med:+.1%} from the published "
            f"throughput (held out, {ERROR_FILE.name} by_layout_source; positive = faster than the runs achieved), "
            f"against {bl.get('stated', {}).get('mean_signed', float('nan')):+.1%} mean on runs priced on their "
            "stated layout: a run on another layout is slower than this figure")


#: Regimes the validation breaks its held-out error down by (``bias_by_regime`` of the validation file, written
#: by benchmarks/predictor_validation.py with these edges): name -> bucket edges, a bucket is [edge_i, edge_i+1);
#: ``None``: the value itself is the bucket (precision; hardware: a catalog id, whose bucket says which way its
#: published runs were missed, beside the band of its held-out |error|).
BIAS_EDGES: dict[str, tuple[float, ...] | None] = {
    "seq_len": (0, 1024, 2048, 4096, 8192, 16384, 32768, math.inf),
    "params_B": (0, 5, 15, 50, 150, math.inf),
    "accelerators": (0, 9, 65, 513, 4097, math.inf),
    "precision": None,
    "hardware": None,
    "year": None,
}
REGIME_BIAS_NOTE = 0.05  # a held-out median signed error at least this far from 0 is stated with the prediction
MIN_REGIME_ROWS = 8  # ... when that bucket held at least this many published rows


def regime_bucket(name: str, value: Any) -> str:
    """The bucket of BIAS_EDGES[name] that ``value`` falls in, as the validation file names it."""
    edges = BIAS_EDGES[name]
    if edges is None:
        return str(value)
    v = float(value)
    j = max(k for k in range(len(edges) - 1) if v >= edges[k])
    lo, hi = edges[j], edges[j + 1]
    return f"{lo:g}-{hi:g}" if hi != math.inf else f">={lo:g}"


def regime_bias_notes(values: dict[str, Any], path: Path | None = None) -> list[str]:
    """Notes for a prediction whose regime (``values``: name -> value, names of BIAS_EDGES) was predicted with a
    bias in the held-out validation: the bucket's median signed error when it is at least REGIME_BIAS_NOTE from 0
    over at least MIN_REGIME_ROWS published rows. The prediction itself is not corrected (the validation scores it
    uncorrected); the note says which way to read it."""
    bias = _errors(str(path or ERROR_FILE)).get("bias_by_regime") or {}
    out = []
    for name, value in values.items():
        if name not in BIAS_EDGES or value is None or not isinstance(bias.get(name), dict):
            continue
        key = regime_bucket(name, value)
        b = bias[name].get(key) or {}
        med, n = b.get("median_signed"), b.get("n", 0)
        if isinstance(med, (int, float)) and n >= MIN_REGIME_ROWS and abs(med) >= REGIME_BIAS_NOTE:
            shown = value if isinstance(value, str) else f"{value:g}"
            way = "faster" if med > 0 else "slower"
            within = " beyond each run's hardware's own bias" if bias.get("within_hardware") and name != "hardware" \
                else ""
            out.append(f"{name} {shown} is in the validation's bucket {key}, where the held-out prediction was a "
                       f"median {med:+.1%} from the published throughput{within} over {n} runs (predicted {way} "
                       f"than the runs achieved; {ERROR_FILE.name} bias_by_regime)")
    return out


@dataclass(frozen=True)
class FrameworkFactors:
    """What no op model accounts for, fitted by the validation (module docstring): ``eta`` on compute and
    memory-bound time, ``comm_eff`` on collective time, ``overlap_cost`` on hidden collective time; ``how`` says
    where they came from."""
    eta: float = 1.0
    comm_eff: float = 1.0
    overlap_cost: float = 0.0
    how: str = "no fitted framework efficiency (eta = comm_eff = 1, overlap_cost = 0)"

    def label(self) -> str:
        return (f"eta = {self.eta:.3f}, comm_eff = {self.comm_eff:.3f}, overlap_cost = {self.overlap_cost:.2f} "
                f"({self.how})")


def framework_eta(path: Path | None = None, family: str | None = None) -> FrameworkFactors:
    """The framework factors fitted on all published rows (of ``family`` when given and fitted); files written
    before ``overlap_cost`` existed give 0 for it."""
    e = _errors(str(path or ERROR_FILE))
    fe = e.get("framework_efficiency", {})
    fam = fe.get("per_family", {}).get(family) if family else None
    if fam:
        return FrameworkFactors(float(fam["eta"]), float(fam["comm_eff"]), float(fam.get("overlap_cost", 0.0)),
                                f"framework family {family} stated: fitted on its {fam.get('rows', '?')} published "
                                "rows of the validation, shrunk towards the all-rows fit")
    if "eta" in fe:
        how = "fitted on all published runs of the validation, one value for every framework"
        fams = {k: v["eta"] for k, v in fe.get("per_family", {}).items() if "eta" in v}
        if fams:
            lo, hi = min(fams, key=fams.get), max(fams, key=fams.get)
            how += (f"; per framework family it spans {fams[lo]:.2f} ({lo}) to {fams[hi]:.2f} ({hi}); the interval's "
                    f"held-out error is scored with this one value across all of them")
        return FrameworkFactors(float(fe["eta"]), float(fe.get("comm_eff", 1.0)),
                                float(fe.get("overlap_cost", 0.0)), how)
    return FrameworkFactors()


#: Framework families a prediction may state: those of the validation's per-family fit with at least this many
#: published rows ("other", runs of no named framework, is not one)
MIN_STATED_FAMILY_ROWS = 3
FRAMEWORK_UNKNOWN = "unknown"


def framework_families(path: Path | None = None) -> tuple[str, ...]:
    """The framework families ``--framework`` accepts: fitted per family in the validation file with at least
    MIN_STATED_FAMILY_ROWS published rows, "other" excluded; () without such a file."""
    per = ((_errors(str(path or ERROR_FILE)).get("framework_efficiency") or {}).get("per_family") or {})
    return tuple(sorted(f for f, v in per.items() if f != "other" and isinstance(v, dict)
                        and v.get("rows", 0) >= MIN_STATED_FAMILY_ROWS and "eta" in v))


def framework_efficiency_of(framework: str, path: Path | None = None) -> tuple[float | None, int]:
    """(compute factor ``eta``, published runs it was fitted on) of a framework family in the validation file;
    (None, 0) when the file has no such family."""
    fam = ((_errors(str(path or ERROR_FILE)).get("framework_efficiency") or {}).get("per_family") or {}).get(framework)
    if not isinstance(fam, dict) or not isinstance(fam.get("eta"), (int, float)):
        return None, 0
    return float(fam["eta"]), int(fam.get("rows", 0) or 0)


def families_on_stack(stack: str, path: Path | None = None) -> tuple[str, ...]:
    """The fitted framework families (:func:`framework_families`) with published runs on hardware of vendor software
    stack ``stack`` (the validation's ``software_stack_factor`` per stack), most runs first: the frameworks a job on
    that stack can be priced with (no Neuron SDK family on a GPU, no Megatron on a TPU); () for a stack without
    runs."""
    per = (((_errors(str(path or ERROR_FILE)).get("software_stack_factor") or {}).get("per_stack") or {})
           .get(stack) or {}).get("families") or {}
    fitted = set(framework_families(path))
    return tuple(f for f, _ in sorted(per.items(), key=lambda kv: -kv[1]) if f in fitted)


def framework_spread_note(path: Path | None = None) -> str | None:
    """What leaving the framework unstated costs, from the validation file: a framework-unknown prediction is priced
    at the all-frameworks fit, while the fitted families' compute factors (``eta``) span a range, so the same job
    runs that many times longer on the slowest family than on the fastest; and the bands a stated family carries on
    hardware with published runs against the framework-unknown ones. None without two fitted families."""
    e = _errors(str(path or ERROR_FILE))
    fe = e.get("framework_efficiency") or {}
    fams = {f: eta for f in framework_families(path) if (eta := framework_efficiency_of(f, path)[0]) is not None}
    if len(fams) < 2 or not isinstance(fe.get("eta"), (int, float)):
        return None
    lo, hi = min(fams, key=fams.get), max(fams, key=fams.get)

    def span(section: dict[str, Any]) -> str:
        b = [v["band_rel"] for v in (section.get("per_hardware") or {}).values()
             if isinstance(v.get("band_rel"), (int, float)) and v.get("n", 0) >= MIN_ROWS_PER_HARDWARE]
        return f"+/-{min(b):.0%}..{max(b):.0%}" if b else ""
    unknown, stated = span(e.get("known_hardware_band") or {}), span((e.get("framework_stated_band") or {}).get("known")
                                                                   or {})
    wide = {f: r for f in fams if (r := family_band_ratio(e, f)[0]) > 1.0}
    bands = (f"; on hardware with published runs its band is {stated} against {unknown} with the framework unknown"
             + (f" (times {', '.join(f'{r:.2f} for {f}' for f, r in sorted(wide.items()))}: families whose factors "
                f"carried worse to other hardware)" if wide else "") if unknown and stated else "")
    return (f"framework not stated: every row is priced at the all-frameworks fit (eta {float(fe['eta']):.2f}); the "
            f"validation's families run from {lo} (eta {fams[lo]:.2f}) to {hi} ({fams[hi]:.2f}), so the same job "
            f"can take {fams[hi] / fams[lo]:.1f}x as long on one framework as on another. State the framework the job "
            f"will run (job.framework / --framework: {', '.join(sorted(fams))}) to price it with its family's "
            f"factors{bands} ({ERROR_FILE.name})")


def framework_choice_error(framework: Any, path: Path | None = None) -> str | None:
    """Why ``framework`` is not a family a prediction may state ("unknown family ...; valid choices: ..."), or None
    when it is one (or ``FRAMEWORK_UNKNOWN``): the one check the CLI, the plan's job and the predictor share."""
    fams = framework_families(path)
    if framework == FRAMEWORK_UNKNOWN or (isinstance(framework, str) and framework in fams):
        return None
    return f"unknown family {framework!r}; valid choices: {', '.join((FRAMEWORK_UNKNOWN,) + fams)}"


def check_framework(framework: str | None, path: Path | None = None) -> str | None:
    """A stated framework family, checked: None for none or ``FRAMEWORK_UNKNOWN``; a family not in
    :func:`framework_families` is a ModelInputError naming the valid choices."""
    if framework is None or framework == FRAMEWORK_UNKNOWN:
        return None
    why = framework_choice_error(framework, path)
    if why:
        raise ModelInputError(f"framework: {why}")
    return framework


def framework_factors(*, eta: float | None = None, comm_eff: float | None = None, overlap_cost: float | None = None,
                      path: Path | None = None, framework: str | None = None) -> FrameworkFactors:
    """The factors a prediction uses: each one given, or else the validation's fit: the stated framework family's
    (``framework``, checked by :func:`check_framework`) or the all-frameworks one (:func:`framework_eta`), with
    ``how`` naming which."""
    fitted = framework_eta(path, check_framework(framework, path))
    given = tuple(x is not None for x in (eta, comm_eff, overlap_cost))
    return FrameworkFactors(eta if given[0] else fitted.eta, comm_eff if given[1] else fitted.comm_eff,
                            overlap_cost if given[2] else fitted.overlap_cost,
                            fitted.how if not any(given) else "given" if all(given) else
                            f"{', '.join(n for n, g in zip(('eta', 'comm_eff', 'overlap_cost'), given) if g)} "
                            f"given; the rest {fitted.how}")


#: A stack factor whose runs come this much from one framework family is stated as that framework's
STACK_ONE_FRAMEWORK = 0.75


def stack_factor(stack: str, path: Path | None = None) -> tuple[float, str]:
    """(step-time factor, where it came from) of a vendor software stack (catalog ``software_stack``): what the
    published runs on that stack's hardware took beyond the op model at the framework-unknown fit, the
    validation's ``software_stack_factor`` (median over the stack's rows, shrunk towards 1). 1 when the stack has
    no published rows or the file does not say. Validated by leave-one-hardware-out with the factor of the stack's
    other hardware only (``leave_one_hardware_out_stack``), which the intervals read."""
    per = (_errors(str(path or ERROR_FILE)).get("software_stack_factor") or {}).get("per_stack") or {}
    s = per.get(stack) if stack else None
    if not isinstance(s, dict) or not isinstance(s.get("time_factor"), (int, float)):
        return 1.0, (f"software stack {stack or 'not stated'}: no published training rows on it in "
                     f"{ERROR_FILE.name}, no stack factor (x1)")
    f = float(s["time_factor"])
    fams = s.get("families") or {}
    top = max(fams.values()) / max(sum(fams.values()), 1) if fams else 0.0
    caveat = (f"; {max(fams, key=fams.get)} ran {top:.0%} of them, so the factor is mostly that framework's: on "
              "another framework it can move the prediction the wrong way (its one prospective test so far, AXLearn "
              "on TPU against the MaxText-fitted xla-tpu factor, was missed by more with it than without)") if top >= STACK_ONE_FRAMEWORK else ""
    return f, (f"software stack {stack}: step time x{f:.3f}, the median of {s.get('rows', '?')} published runs on "
               f"{', '.join(s.get('hardware', ())) or '?'} against the op model at the framework-unknown fit "
               f"({'slower' if f > 1 else 'faster'} than modelled; {ERROR_FILE.name} software_stack_factor){caveat}")


# ------------------------------------------------------------------------------ output
@dataclass(frozen=True, kw_only=True)
class Prediction:
    hardware: str
    accelerators: int
    model: str
    seq_len: int
    global_batch: int
    layout: Layout
    step_time_s: float
    breakdown_s: dict[str, float]
    tokens_per_s: float
    tokens_per_s_per_accelerator: float
    mfu: float
    hfu: float
    memory: MemoryEstimate
    interval: dict[str, Any]
    calibration: dict[str, str]
    tokens: float | None = None
    time_to_train_s: float | None = None
    accelerator_hours: float | None = None
    pricing: str | None = None
    usd_per_accelerator_hour: float | None = None
    cost_usd: float | None = None
    framework: str = "unknown"
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def fits(self) -> bool:
        return self.memory.fits

    @property
    def memory_per_accelerator_GiB(self) -> float:
        return self.memory.total / GiB

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "hardware": self.hardware, "accelerators": self.accelerators, "model": self.model,
            "seq_len": self.seq_len, "global_batch": self.global_batch, "framework": self.framework,
            "tokens_per_s": self.tokens_per_s, "tokens_per_s_per_accelerator": self.tokens_per_s_per_accelerator,
            "step_time_s": self.step_time_s, "mfu": self.mfu, "hfu": self.hfu,
            "memory_per_accelerator_GiB": self.memory_per_accelerator_GiB, "fits": self.fits,
            "memory_GiB": self.memory.to_dict(), "layout": self.layout.to_dict(),
            "breakdown_s": dict(self.breakdown_s), "interval": self.interval, "calibration": dict(self.calibration),
        }
        if self.tokens is not None:
            out.update(tokens=self.tokens, time_to_train_s=self.time_to_train_s,
                       accelerator_hours=self.accelerator_hours)
        if self.cost_usd is not None:
            out.update(pricing=self.pricing, usd_per_accelerator_hour=self.usd_per_accelerator_hour,
                       cost_usd=self.cost_usd)
        if self.notes:
            out["notes"] = list(self.notes)
        return out


def cost_usd(*, accelerator_hours: float, usd_per_accelerator_hour: float) -> float:
    """Cost of a training job: accelerator-hours x price per accelerator-hour (catalog node price / accelerators)."""
    return accelerator_hours * usd_per_accelerator_hour


def _interval(x: float, rel: float) -> list[float]:
    """[lo, hi] = [x / (1 + rel), x (1 + rel)]: the held-out error is a ratio, symmetric in log space."""
    return [x / (1.0 + rel), x * (1.0 + rel)]


def make_prediction(spec: ModelSpec, cal: Calibration, layout: Layout, *, hardware: str, accelerators: int,
                    global_batch: int, seq_len: int | None = None, tokens: float | None = None,
                    usd_per_accelerator_hour: float | None = None, pricing: str | None = None,
                    attention: str = "flash", eta: float | None = None, comm_eff: float | None = None,
                    overlap_cost: float | None = None, error_path: Path | None = None, times: StepTimes | None = None,
                    min_billed_hours: float = 0.0, stack: float | None = None,
                    memory_error_path: Path | None = None, framework: str | None = None) -> Prediction:
    """One layout's prediction. ``min_billed_hours``: hours per accelerator a committed pricing term bills
    however short the job (``Price.min_billed_hours``); the cost is the larger of the job's accelerator-hours
    and ``accelerators x min_billed_hours``, so it agrees with the report's bill. ``stack``: the step-time factor
    of the node's software stack; None = the validation's (:func:`stack_factor` of ``cal.software_stack``), which
    scales every part of the breakdown alike. ``memory_error_path``: the memory validation file the memory
    interval reads (default ``MEMORY_ERROR_FILE``). ``framework``: a stated framework family
    (:func:`framework_families`; None or "unknown": not stated): its fitted factors instead of the all-frameworks
    ones, no software-stack factor (the family's fit already holds what its runs lost, on whatever hardware they
    ran), and the interval of the validation's ``framework_stated_band``, scored that way."""
    seq = seq_len or spec.seq_len
    if layout.world != accelerators:
        raise ModelInputError(f"layout: dp*tp*pp*cp = {layout.world} != accelerators ({accelerators})")
    framework = check_framework(framework, error_path)
    factors = framework_factors(eta=eta, comm_eff=comm_eff, overlap_cost=overlap_cost, path=error_path,
                                framework=framework)
    st = times or step_times(spec, cal, layout, global_batch=global_batch, seq_len=seq, attention=attention,
                             eta=factors.eta, comm_eff=factors.comm_eff, overlap_cost=factors.overlap_cost)
    if stack is None and framework:
        stack, stack_how = 1.0, (f"framework family {framework} stated: no software-stack factor (x1); the family's "
                                 "fitted factors stand for what its runs lost beyond the op model, as the validation "
                                 "scores a stated family (framework_stated_band)")
    elif stack is None:
        stack, stack_how = stack_factor(cal.software_stack, error_path)
    else:
        stack_how = f"step time x{stack:.3f} (given)"
    step = st.total * stack
    seqs = st.microbatches * layout.dp * layout.micro_batch
    tps = seqs * seq / step
    peak = cal.peak_flops(layout.precision) * accelerators
    mfu = st.model_flops / (step * peak)
    hfu = st.hardware_flops / (step * peak)
    rel_v, rel_src = held_out_error(hardware, error_path, framework)
    cal_sigma = cal.rel_sigma(comm_share=st.exposed_comm / st.total if st.total > 0 else 0.0)
    rel = math.sqrt(rel_v ** 2 + cal_sigma ** 2)
    interval = {"level": INTERVAL_LEVEL, "relative": rel,
                "method": f"{rel_src}; combined in quadrature with calibration uncertainty "
                          f"{cal_sigma:.3f} (rates, and the collective model's weighted by the exposed "
                          "communication share of the step)",
                "step_time_s": _interval(step, rel), "tokens_per_s": _interval(tps, rel),
                "tokens_per_s_per_accelerator": _interval(tps / accelerators, rel),
                "mfu": _interval(mfu, rel)}
    notes = []
    mem_rel, mem_how = memory_held_out_error(memory_error_path)
    if mem_rel is not None:
        interval["memory_per_accelerator_GiB"] = _interval(st.memory.total / GiB, mem_rel)
        interval["memory_method"] = mem_how
        fit_note = memory_fit_note(st.memory.total, st.memory.capacity, mem_rel)
        if fit_note:
            notes.append(fit_note)
    ttt = acc_h = cost = None
    if tokens is not None:
        ttt = tokens / tps
        acc_h = accelerators * ttt / 3600.0
        interval["time_to_train_s"] = _interval(ttt, rel)
        interval["accelerator_hours"] = _interval(acc_h, rel)
    if tokens is not None and usd_per_accelerator_hour is not None:
        floor_h = accelerators * max(float(min_billed_hours), 0.0)
        cost = cost_usd(accelerator_hours=max(acc_h, floor_h), usd_per_accelerator_hour=usd_per_accelerator_hour)
        lo_h, hi_h = _interval(acc_h, rel)
        interval["cost_usd"] = [max(lo_h, floor_h) * usd_per_accelerator_hour,
                                max(hi_h, floor_h) * usd_per_accelerator_hour]
        if floor_h > acc_h:
            notes.append(f"{pricing or 'this'} pricing bills a committed term of {min_billed_hours:,.0f} h per "
                         f"accelerator ({floor_h:,.0f} accelerator-hours) although the job needs {acc_h:,.0f}")
    if global_batch % (layout.dp * layout.micro_batch):
        notes.append(f"global batch {global_batch} is not a multiple of dp x micro_batch "
                     f"({layout.dp * layout.micro_batch}): {seqs} sequences per step are computed")
    record = memory_record_note(hardware, error_path)
    if record:
        notes.append(record)
    if layout.offload_layers and cal.host_link is not None:
        notes.append(f"activation offload: {layout.offload_layers} of each stage's {spec.n_layers / layout.pp:g} "
                     f"layers keep their activations in host memory, copied over the host link at "
                     f"{cal.host_link.value / 1e9:.0f} GB/s per accelerator ({cal.host_link.kind}, +-"
                     f"{cal.host_link.rel_sigma:.0%}); the copies' exposed time is in exposed_comm (the "
                     f"published runs that offload: benchmarks/README.md, session 10)")
    notes += regime_bias_notes({"seq_len": seq, "params_B": spec.n_params() / 1e9, "accelerators": accelerators,
                                "precision": layout.precision, "hardware": hardware}, error_path)
    calib = dict(cal.sources())
    calib["framework_efficiency"] = factors.label()
    calib["software_stack"] = stack_how
    return Prediction(framework=framework or FRAMEWORK_UNKNOWN,
        hardware=hardware, accelerators=accelerators, model=getattr(spec, "name", "custom"), seq_len=seq,
        global_batch=global_batch, layout=layout, step_time_s=step,
        breakdown_s={"compute": st.compute * stack, "memory_bound": st.memory_bound * stack,
                     "exposed_comm": st.exposed_comm * stack, "bubble": st.bubble * stack,
                     "overhead": st.overhead * stack},
        tokens_per_s=tps, tokens_per_s_per_accelerator=tps / accelerators, mfu=mfu, hfu=hfu, memory=st.memory,
        interval=interval, calibration=calib, tokens=tokens, time_to_train_s=ttt, accelerator_hours=acc_h,
        pricing=pricing if cost is not None else None,
        usd_per_accelerator_hour=usd_per_accelerator_hour if cost is not None else None, cost_usd=cost,
        notes=tuple(notes))


# ------------------------------------------------------------------ generic (CPU) workloads
def host_bound_overhead(cal: Calibration, phases: Sequence[tuple[float, float]]) -> float:
    """What the host's own time per step adds to the step's device work, given per phase (host seconds, device
    seconds): the forward + backward (dispatching the eager ops) and the optimizer phase. A serial-dispatch node
    (a CPU runs each op on the thread that dispatched it) pays all the host time; an asynchronous one (a GPU
    queues kernels while the host runs ahead) pays, per phase, only what exceeds that phase's device time: the
    phases do not overlap each other, since the loss's host sync ends the backward and the next step's batch copy
    (from pageable memory, ordered on the stream) waits for the optimizer's kernels. So a small model is
    host-bound and a large one device-bound, phase by phase."""
    if cal.serial_dispatch:
        return sum(h for h, _ in phases)
    return sum(max(h - d, 0.0) for h, d in phases)


def generic_step_time(spec: GenericSpec, cal: Calibration, *, batch: int, precision: str = "fp32",
                      recompute: bool = False, torch_optimizer: O.TorchOptimizer | None = None) -> dict[str, float]:
    """Step time of a GRU/MLP workload on one device: fwd + 2x bwd GEMMs and 3x element-wise traffic; the
    optimizer phase a fused Adam's 28 bytes per parameter, or the suite's torch phase (``torch_optimizer``)."""
    e = 4.0 if precision == "fp32" else 2.0
    comp = mem = 0.0
    for op in spec.ops:
        if op.kind == "gemm":
            steps = op.sequential
            m = op.m * batch // steps
            t = 0.0
            for i, (mm, nn, kk) in enumerate(((m, op.n, op.k), (m, op.k, op.n), (op.k, op.n, m))):
                if i == 2 and steps > 1 and not cal.serial_dispatch:  # cuDNN: one weight-gradient GEMM over all
                    t += cal.gemm_time(max(op.k, 1), max(op.n, 1), max(m * steps, 1), precision, e)  # steps
                    continue
                t += cal.gemm_time(max(mm, 1), max(nn, 1), max(kk, 1), precision, e) * steps
            if recompute:
                t += cal.gemm_time(max(m, 1), op.n, op.k, precision, e) * steps
            comp += t
        else:
            nb = op.elements * batch * e * op.passes
            if op.sequential > 1 and not cal.serial_dispatch:  # cuDNN: a forward and a backward cell kernel a step
                mem += (cal.memory_time(nb / op.sequential, 1.0) + cal.memory_time(2.0 * nb / op.sequential, 1.0)) \
                    * op.sequential
            else:
                mem += 3.0 * cal.memory_time(nb / op.sequential, 1.0) * op.sequential
    o = O.optimizer_op(spec.params, "fp32", torch_optimizer)  # fp32 master state: 28 B/param without torch_optimizer
    opt = cal.memory_time(o.nbytes, o.launches)
    n_ops = spec.host_ops(serial=cal.serial_dispatch)
    host_fb = 0.0
    if cal.host_op_s is not None:
        host_fb = n_ops * cal.host_op_s.value
        if not cal.serial_dispatch:  # cuDNN's recurrent loop: launched from C++, one launch per kernel
            host_fb += spec.sequential_launches() * cal.launch_s.value
        if recompute:
            host_fb += n_ops * cal.launch_s.value  # the recomputed forward dispatches its ops again
    host = host_bound_overhead(cal, ((host_fb, comp + mem), (cal.optimizer_host_time(spec.param_tensors), opt)))
    return {"compute": comp, "memory_bound": mem + opt, "exposed_comm": 0.0, "bubble": 0.0,
            "overhead": cal.step_overhead_s.value + host}


__all__ = ["StepTimes", "step_times", "Prediction", "make_prediction", "cost_usd", "held_out_error", "predict_workload",
           "stated_prior_band", "OrderRecord", "order_record", "has_validation_rows", "framework_spread_note", "framework_efficiency_of",
           "families_on_stack",
           "framework_eta", "framework_families", "framework_choice_error", "check_framework", "stack_factor",
           "generic_step_time", "host_bound_overhead", "ERROR_FILE"]


def predict_workload(name: str, config: dict[str, Any], cal: Calibration, *, attention: str = "materialized",
                     eta: float = 1.0) -> dict[str, Any]:
    """Predicted step time and breakdown of one of the suite's own workloads (the local closed loop).

    ``config`` is the workload's ``TrainKnobs.to_dict()`` (batch_size = global samples per step,
    nprocs, grad_accum, precision, activation_checkpointing). transformer_lm goes through the
    transformer step model (DDP over ``nprocs`` ranks on this node); the GRU and MLP through
    :func:`generic_step_time`. No framework efficiency is applied unless ``eta`` is given: the
    closed loop calibrates from kernel sweeps only.
    """
    from hwmodels.predict.spec import from_workload

    spec = from_workload(name, config)
    prec = predict_precision(str(config.get("precision") or "") or None)
    nprocs = int(config.get("nprocs", 1) or 1)
    batch = int(config.get("batch_size", 16))
    accum = int(config.get("grad_accum", 1) or 1)
    ckpt = bool(config.get("activation_checkpointing", False))
    torch_opt = None
    if str(config.get("framework", "torch")) == "torch":
        torch_opt = O.TorchOptimizer(impl=str(config.get("optimizer_impl") or "foreach"),
                                     weight_decay=float(config.get("weight_decay", 0.0) or 0.0) != 0.0,
                                     grad_clip=float(config.get("grad_clip", 1.0) or 0.0) > 0.0)
    autocast = str(config.get("precision") or "") == "bf16_autocast"
    if isinstance(spec, GenericSpec):
        b = generic_step_time(spec, cal, batch=batch // nprocs, precision=prec, recompute=ckpt,
                              torch_optimizer=torch_opt)
        return {"step_time_s": sum(b.values()), "breakdown_s": b, "model": spec.to_dict()}
    lay = Layout(dp=nprocs, micro_batch=max(1, batch // nprocs // accum), sharding="ddp" if nprocs > 1 else "none",
                 recompute="full" if ckpt else "none", precision=prec)
    st = step_times(spec, cal, lay, global_batch=batch, attention=attention, eta=eta, autocast=autocast,
                    torch_optimizer=torch_opt)
    return {"step_time_s": st.total,
            "breakdown_s": {"compute": st.compute, "memory_bound": st.memory_bound, "exposed_comm": st.exposed_comm,
                            "bubble": st.bubble, "overhead": st.overhead},
            "model_flops_per_step": st.model_flops, "hardware_flops_per_step": st.hardware_flops,
            "model": spec.to_dict()}
