"""Bytes per accelerator of one layout: weights, grads, optimizer state, activations, buffers.

Model state (Rajbhandari et al. 2020, "ZeRO", arXiv:1910.02054, section 3.1:
mixed-precision Adam keeps 2 bytes of fp16/bf16 weights, 2 bytes of grads and
K = 12 bytes of fp32 master weights, momentum and variance per parameter,
"16 Psi" in all). fp32 training: 4 + 4 + 8 (momentum, variance). ZeRO
stages / FSDP strategies divide by the data-parallel degree ``dp``::

    none, ddp        weights + grads + optimizer, all replicated
    zero1            optimizer / dp
    shard_grad_op    (grads + optimizer) / dp                  (ZeRO-2, FSDP SHARD_GRAD_OP)
    full_shard       (weights + grads + optimizer) / dp        (ZeRO-3, FSDP FULL_SHARD)
                     + 2 gathered layers of weights (current + prefetched unit)

Parameters are split over tensor (``tp``) and pipeline (``pp``) ranks first.

Activations per layer and micro-batch (Korthikanti et al. 2022, "Reducing
Activation Recomputation in Large Transformer Models", arXiv:2205.05198,
section 4, 16-bit activations, dropout masks 1 byte), for ``s`` tokens,
``b`` sequences, hidden ``h``, ``a`` heads, ``t``-way TP::

    no recompute, with SP      s b h (34 + 5 a s / h) / t
    no recompute, without SP   s b h (10 + 24 / t + 5 a s / (h t))
    selective recompute        the 5 a s / h term is dropped (also when attention is fused/flash)
    full recompute             2 s b h per layer (/ t with SP)

Selective recomputation that saves only the matmul outputs (``selective_saves
= "dots"``: JAX's ``checkpoint_dots_with_no_batch_dims``, MaxText's
``remat_policy=minimal``) keeps, per token, the Q, K, V projections
(``q + 2 d_kv``), the MLP input projections (``f``, ``2 f`` with a gate), split
over TP ranks, and the attention output projection, the MLP output and the
layer's input (``3 h``), split only with SP; 2 bytes each. Norms, activations,
dropout and the attention core are recomputed from them.

generalised to GQA and other MLP widths by counting the same stored tensors:
attention 7 sbh + 4 sb d_kv (+ 5 a s^2 b), MLP 3 sbh + 4 sb f (GELU) or
3 sbh + 6 sb f (SwiGLU: gate, up and their product), norms 4 sbh; of these the
10 sbh of norm inputs, the two linear-block inputs and the dropout masks are
replicated across TP ranks unless SP splits them. For ``f = 4h, d_kv = h`` this
is exactly 34 sbh + 5 a s^2 b. A model trained without dropout (``ModelSpec.dropout``
False: the Llama presets) stores no masks: 2 sbh less, and 2 a s^2 b of
materialized scores instead of 5.

Under fp8/fp4 (Transformer Engine) the three inputs a linear keeps for its
weight gradient, the QKV and MLP-up inputs (the norm outputs, ``sbh`` each) and
the MLP-down input (``sb f``), are saved quantized, ``NARROW_GEMM_BYTES`` per
element instead of 2: TE's ``LayerNormLinear`` / ``Linear`` save the quantized
copy their wgrad GEMM reads. The attention output stays 16-bit (the flash
kernel keeps it for its own backward). torchao's float8 linear saves the 16-bit
input instead (``matmul_with_hp_or_float8_args``): ``quantized_saves=False``.

Pipeline parallelism with 1F1B keeps ``pp`` micro-batches in flight on the first
stage: that stage holds ``L/pp x min(pp, m)`` layers' activations, times
``1 + (pp-1)/(pp v)`` with ``v`` interleaved chunks (Korthikanti 2022, section
4.2.3). Output layer: fp32 logits ``4 s b V / t`` bytes.

Activation offload (Megatron-Core / Transformer Engine ``cpu_offloading_num_layers``
= ``offload_layers``): the saved activations of that many of a stage's layers
are copied to host memory during the forward pass and reloaded before their
backward; they leave the device except one layer's worth in flight
(``OFFLOAD_RESIDENT_LAYERS``). What the copies cost in time is the step model's
(:func:`hwmodels.predict.predictor.step_times`).

Buffers (stated allowance, not measured): 1 GiB fixed (CUDA context, NCCL
buffers, cuBLAS workspace; PyTorch CUDA semantics notes put the context at
300-500 MiB and NCCL adds its channel buffers) plus 10% of everything else for
caching-allocator fragmentation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hwmodels.errors import ModelInputError
from hwmodels.predict.ops import NARROW_GEMM_BYTES
from hwmodels.predict.spec import ModelSpec

GiB = float(1 << 30)
SHARDINGS = ("none", "ddp", "zero1", "shard_grad_op", "full_shard")
RECOMPUTE = ("none", "selective", "full")
#: what "selective" keeps: Korthikanti et al.'s every-tensor-but-the-attention-core, or only the matmul outputs
SELECTIVE_SAVES = ("korthikanti", "dots")
FIXED_BUFFER_BYTES = 1.0 * GiB
FRAGMENTATION = 0.10


@dataclass(frozen=True, kw_only=True)
class MemoryEstimate:
    weights: float
    grads: float
    optimizer: float
    activations: float
    buffers: float
    capacity: float

    @property
    def total(self) -> float:
        return self.weights + self.grads + self.optimizer + self.activations + self.buffers

    @property
    def fits(self) -> bool:
        return self.total <= self.capacity

    def to_dict(self) -> dict[str, Any]:
        return {"weights_GiB": self.weights / GiB, "grads_GiB": self.grads / GiB,
                "optimizer_GiB": self.optimizer / GiB, "activations_GiB": self.activations / GiB,
                "buffers_GiB": self.buffers / GiB, "total_GiB": self.total / GiB,
                "capacity_GiB": self.capacity / GiB, "fits": self.fits}


def state_bytes_per_param(precision: str) -> tuple[float, float, float]:
    """(weights, grads, optimizer) bytes per parameter: ZeRO paper section 3.1 (see module docstring)."""
    if precision == "fp32":
        return 4.0, 4.0, 8.0
    return 2.0, 2.0, 12.0


def activation_bytes_per_layer(spec: ModelSpec, *, micro_batch: int, seq_len: int, tp: int = 1, sp: bool = False,
                               recompute: str = "none", flash: bool = True, saves: str = "korthikanti",
                               precision: str = "bf16") -> float:
    """Korthikanti et al. 2022 per-layer activation bytes, generalised; ``saves="dots"``: selective recomputation
    that keeps only the matmul outputs (module docstring). Under fp8/fp4 the inputs the linears keep for their
    weight gradient are stored quantized (module docstring)."""
    s, b, h, a = seq_len, micro_batch, spec.d_model, spec.n_heads
    sbh = s * b * h
    if recompute == "full":
        return 2.0 * sbh / (tp if sp else 1)
    if recompute == "selective" and saves == "dots":
        split = 2.0 * s * b * (spec.q_dim + 2 * spec.d_kv + (2 if spec.glu else 1) * spec.ffn_dim)
        return split / tp + 2.0 * 3.0 * sbh / (tp if sp else 1)
    q = NARROW_GEMM_BYTES.get(precision, 2.0)  # bytes per element of a saved linear input (QKV, MLP-up, MLP-down)
    # GELU: fc1 output 2 + the down projection's input q; SwiGLU: gate 2 + up 2 + their product (the input) q
    mlp = (2.0 + q) * s * b * spec.ffn_dim if not spec.glu else (4.0 + q) * s * b * spec.ffn_dim
    masks = 2.0 if spec.dropout else 0.0  # the attention-output and MLP-output dropout masks, 1 byte each
    # replicated part: 4 sbh (norms) + q sbh (QKV input) + sbh (attn dropout mask) + q sbh (MLP input) + sbh (MLP mask)
    replicated = (4.0 + masks + 2.0 * q) * sbh
    # what is left after the replicated tensors: attention 7 sbh + 4 sb dkv - (2 + 1) sbh -> Q, K, V, out-proj input;
    # MLP 3 sbh + f-terms - 3 sbh -> the f-terms
    split = (7.0 * sbh + 4.0 * s * b * spec.d_kv - 3.0 * sbh) + (3.0 * sbh + mlp - 3.0 * sbh)
    # materialized scores: softmax output 2 + its dropout mask 1 + the dropout output 2 bytes per score; without
    # dropout the softmax output is the V-matmul's input too (2 bytes)
    scores = 0.0 if (flash or recompute == "selective") else (5.0 if spec.dropout else 2.0) * a * s * s * b
    if sp:
        return (replicated + split + scores) / tp
    return replicated + (split + scores) / tp


#: offloaded layers whose activations are resident all the same: the one being copied out while the next runs
#: (Transformer Engine's offload handler double-buffers one layer's tensors; its reload prefetches one layer ahead)
OFFLOAD_RESIDENT_LAYERS = 1.0


def offloaded_layers(offload_layers: int, layers_per_stage: float) -> float:
    """Layers of a stage whose saved activations live in host memory: ``offload_layers``, which must leave one
    layer on the device (Megatron-Core requires ``cpu_offloading_num_layers < num_layers``: the last layer's
    activations are used at once by its backward)."""
    if offload_layers <= 0:
        return 0.0
    if offload_layers >= layers_per_stage:
        raise ModelInputError(f"layout.offload_layers: {offload_layers} must be below the layers of a pipeline stage "
                              f"({layers_per_stage:g})")
    return float(offload_layers)


def saved_precision(precision: str, quantized_saves: bool = True) -> str:
    """The precision a linear's saved input is kept in: the training precision where the fp8/fp4 linears keep their
    quantized inputs for the backward (``quantized_saves``, Transformer Engine's way), else bf16 (torchao float8
    keeps the high-precision input). The one home of that rule: the memory estimate and the offload copies read it."""
    return precision if quantized_saves else "bf16"


def saved_bytes_per_layer(spec: ModelSpec, *, micro_batch: int, seq_len: int, tp: int, sp: bool, recompute: str,
                          flash: bool = True, recompute_layers: float = 1.0, selective_saves: str = "korthikanti",
                          precision: str = "bf16") -> float:
    """A layer's saved activation bytes for one micro-batch, averaged over a stage's layers when ``recompute``
    applies to the share ``recompute_layers`` of them (the rest keep everything); ``precision``: that of the
    saved linear inputs (:func:`activation_bytes_per_layer`)."""
    per_layer = activation_bytes_per_layer(spec, micro_batch=micro_batch, seq_len=seq_len, tp=tp, sp=sp,
                                           recompute=recompute, flash=flash, saves=selective_saves,
                                           precision=precision)
    if recompute_layers < 1.0 and recompute != "none":
        kept = activation_bytes_per_layer(spec, micro_batch=micro_batch, seq_len=seq_len, tp=tp, sp=sp,
                                          recompute="none", flash=flash, precision=precision)
        per_layer = recompute_layers * per_layer + (1.0 - recompute_layers) * kept
    return per_layer


def estimate(spec: ModelSpec, *, capacity_bytes: float, precision: str, sharding: str, dp: int, tp: int, pp: int,
             micro_batch: int, seq_len: int, recompute: str, sp: bool, flash: bool = True,
             microbatches: int = 1, interleave: int = 1, recompute_layers: float = 1.0,
             selective_saves: str = "korthikanti", quantized_saves: bool = True,
             offload_layers: int = 0) -> MemoryEstimate:
    """Bytes per accelerator (module docstring); ``recompute_layers``: the share of layers ``recompute`` applies to,
    the others keep every activation; ``selective_saves``: what selective recomputation keeps; ``quantized_saves``:
    under fp8/fp4 the linears' saved inputs are quantized (TE) rather than 16-bit (torchao float8);
    ``offload_layers``: layers of a stage whose saved activations live in host memory (:func:`offloaded_layers`)."""
    act_precision = saved_precision(precision, quantized_saves)
    n = spec.n_params()
    n_local = n / (tp * pp)
    w, g, o = state_bytes_per_param(precision)
    weights, grads, opt = w * n_local, g * n_local, o * n_local
    if sharding == "zero1":
        opt /= dp
    elif sharding == "shard_grad_op":
        opt /= dp
        grads /= dp
    elif sharding == "full_shard":
        weights /= dp
        grads /= dp
        opt /= dp
        weights += 2 * w * spec.layer_params() / tp  # gathered unit + prefetched unit
    per_layer = saved_bytes_per_layer(spec, micro_batch=micro_batch, seq_len=seq_len, tp=tp, sp=sp,
                                      recompute=recompute, flash=flash, recompute_layers=recompute_layers,
                                      selective_saves=selective_saves, precision=act_precision)
    layers_per_stage = spec.n_layers / pp
    in_flight = min(pp, max(microbatches, 1)) if pp > 1 else 1
    factor = (1.0 + (pp - 1) / (pp * interleave)) if (pp > 1 and interleave > 1) else 1.0
    off = offloaded_layers(offload_layers, layers_per_stage)
    acts = per_layer * (layers_per_stage - off) * in_flight * factor
    if off > 0:  # the layer whose copy to (or from) the host is in flight is still resident
        acts += per_layer * OFFLOAD_RESIDENT_LAYERS
    if recompute == "full":
        # the layer being recomputed holds its full activations during its backward
        acts += activation_bytes_per_layer(spec, micro_batch=micro_batch, seq_len=seq_len, tp=tp, sp=sp,
                                           recompute="selective", flash=flash, precision=act_precision)
    logits = 4.0 * seq_len * micro_batch * spec.vocab / tp  # fp32 logits (last stage; counted for all)
    acts += logits
    body = weights + grads + opt + acts
    buffers = FIXED_BUFFER_BYTES + FRAGMENTATION * body
    return MemoryEstimate(weights=weights, grads=grads, optimizer=opt, activations=acts, buffers=buffers,
                          capacity=capacity_bytes)


def korthikanti_per_layer(s: int, b: int, h: int, a: int, t: int = 1, *, sp: bool, recompute: str) -> float:
    """The paper's own closed forms (Table 2), for tests and cross-checks."""
    if recompute == "full":
        return 2.0 * s * b * h / (t if sp else 1)
    if recompute == "selective":
        return s * b * h * 34.0 / t if sp else s * b * h * (10.0 + 24.0 / t)
    if sp:
        return s * b * h * (34.0 + 5.0 * a * s / h) / t
    return s * b * h * (10.0 + 24.0 / t + 5.0 * a * s / (h * t))


__all__ = ["MemoryEstimate", "estimate", "activation_bytes_per_layer", "saved_precision", "korthikanti_per_layer",
           "SHARDINGS", "RECOMPUTE", "SELECTIVE_SAVES", "state_bytes_per_param", "GiB"]
