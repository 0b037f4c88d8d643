"""One training step as operations: GEMMs, attention, memory-bound ops, collectives.

Per transformer layer and micro-batch of ``b`` sequences of ``s`` tokens
(``t = b s`` tokens), on one rank of a ``tp``-way tensor-parallel group
(Megatron column/row split, Shoeybi et al. 2019, arXiv:1909.08053, section 3):

GEMMs, forward (m, n, k) with ``d_kv = n_kv_heads * head_dim``, ``f = ffn_dim``::

    qkv        (t, (d + 2 d_kv)/tp, d)
    attn_out   (t, d, d/tp)
    mlp_up     (t, f/tp * (2 if glu else 1), d)
    mlp_down   (t, d, f/tp)

Backward: for each forward GEMM ``(m, n, k)`` a data-gradient GEMM ``(m, k, n)``
and a weight-gradient GEMM ``(k, n, m)``: twice the forward FLOPs (Kaplan et
al. 2020, section 2.1; Narayanan et al. 2021, eq. 3 counts 3x forward).

Attention core: model FLOPs ``4 b s^2 d / tp`` forward (QK^T and AV, 2 FLOPs
per MAC; PaLM appendix B counts it without causal halving) and twice that
backward. What the hardware executes with a fused causal kernel is half the
forward (masked blocks skipped) and 2.5x that backward (FlashAttention-2,
Dao 2023, section 3.1 and its benchmark convention: bwd = 2.5 fwd FLOPs, causal
= 1/2); ``materialized`` attention runs the score GEMMs (``b a/tp`` batched
``(s, s, d_head)`` and ``(s, d_head, s)``) in full and a softmax over
``b a s^2 / tp`` elements (read + write forward, 3 passes backward).

Memory-bound ops, forward bytes (16-bit activations, ``e`` bytes/element;
with SP (Korthikanti 2022) the norms and residual adds see ``t/tp`` tokens)::

    2 norms          2 x (read + write) t d e
    2 residual adds  2 x (read 2 + write 1) t d e
    activation       GELU read + write t f/tp e; SwiGLU read 2 + write 1 t f/tp e
    rotary (GQA/rmsnorm models)  read + write t (d + d_kv)/tp e

Backward moves twice the forward bytes (read the saved input and the incoming
gradient, write the outgoing gradient). Per step and model: the embedding
gather (t d e), the logits GEMM ``(t, V/tp, d)``, cross-entropy over fp32
logits (4 passes of ``4 t V/tp`` bytes: softmax read/write, grad read/write),
and the optimizer (Adam on fp32 master weights: read master, grad, m, v and
write master, m, v, bf16 copy = 30 bytes per local parameter; 28 in fp32).

Collectives (each with the link level it crosses; see :mod:`.layout`): TP
all-reduce of ``t d e`` bytes, 2 forward + 2 backward per layer (+2 in full
recompute) (Shoeybi 2019, Fig. 4); with SP each becomes an all-gather and a
reduce-scatter of the same buffer (Korthikanti 2022, section 4.2.2). Under
fp8/fp4 the all-gathers carry the quantized GEMM input (``NARROW_GEMM_BYTES``
per element: TransformerEngine quantizes the norm output before the forward
gather and the output gradient before the backward one,
``gather_along_first_dim(..., quantizer=...)`` in ``module/layernorm_linear.py``
and ``module/base.py``; torchao's float8 TP does the same); the reduce-scatters
of the 16-bit GEMM outputs stay 16-bit. Not modelled: the backward re-gather of
the saved norm output for the weight gradient, which TE issues asynchronously
under the data-gradient GEMM. Data
parallel: DDP all-reduces fp32 gradients once per step (overlapped with the
last backward); ZeRO-1 reduce-scatters them and all-gathers the bf16
parameters after the step; SHARD_GRAD_OP all-gathers bf16 parameters in each
forward and reduce-scatters gradients in each backward; FULL_SHARD all-gathers
in forward and again in backward (Zhao et al. 2023, "PyTorch FSDP",
arXiv:2304.11277, section 3). Pipeline: send/recv of ``t d e`` bytes (``/tp``
with Megatron's scatter/gather optimisation) per micro-batch and boundary,
forward and backward (Narayanan 2021, section 4.1).

Context parallelism (``cp`` ranks per sequence; Megatron-Core with Transformer
Engine's ring attention, load-balanced causal chunks: each rank holds two of
``2 cp`` chunks so every rank does the same attention work): a rank runs
``s/cp`` tokens through every GEMM and memory-bound op, and ``1/cp`` of the
sequence's attention FLOPs (``4 b s^2 d / (tp cp)`` model FLOPs forward). Its
keys and values (``b (s/cp) 2 d_kv/tp e`` bytes) go round the ring in ``cp - 1``
send/recv steps forward, each hidden under the attention of the chunk already
held; backward sends keys/values and their gradients (twice the forward
traffic). Weights are replicated over CP ranks: gradients are reduced over DP x
CP (:mod:`.layout`). CP needs the fused attention kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from hwmodels import dtypes
from hwmodels.errors import ModelInputError, choices_error
from hwmodels.predict.spec import ModelSpec

PHASES = ("fwd", "bwd", "recompute", "step")
OP_KINDS = ("gemm", "attention", "memory", "collective")
ATTENTION = ("flash", "materialized")
GRAD_REDUCE_BYTES = 4.0  # fp32 gradient reduction (PyTorch DDP/AMP grads, Megatron main_grads, FSDP reduce_dtype fp32)
ADAM_BYTES = {"mixed": 30.0, "fp32": 28.0}
#: bytes per parameter of one optimizer phase of the suite's own torch workloads (``workloads/torch/backend.py``:
#: ``clip_grad_norm_`` + ``AdamW.step`` + ``zero_grad(set_to_none)``, fp32 parameters, gradients and moments), by
#: AdamW implementation, counted from torch's source (``torch/optim/adam.py``, one pass per op, 4-byte elements):
#: ``foreach`` (``_multi_tensor_adam``, not capturable): ``_foreach_lerp_`` of m towards g (read m, g, write m: 12),
#: ``_foreach_mul_`` of v (8), ``_foreach_addcmul_`` g*g into v (12), ``_foreach_sqrt`` of v into a temporary (8),
#: ``_foreach_div_`` and ``_foreach_add_`` (eps) on it (8 + 8), ``_foreach_addcdiv_`` into p (16): 72; a non-zero
#: weight decay adds ``_foreach_mul_`` on p (8). ``fused`` (``_fused_adamw``: one kernel reads p, g, m, v and
#: writes p, m, v): 28, weight decay inside. ``default`` is foreach on a GPU; on a CPU torch takes the per-tensor
#: loop, the same passes. A gradient clip adds ``_foreach_norm`` (read g, 4) and ``_foreach_mul_`` by the clip
#: coefficient (read + write g, 8): 12.
TORCH_ADAM_BYTES = {"foreach": 72.0, "default": 72.0, "fused": 28.0}
TORCH_WEIGHT_DECAY_BYTES = {"foreach": 8.0, "default": 8.0, "fused": 0.0}
TORCH_CLIP_BYTES = 12.0
#: launches of the Adam step (one multi-tensor kernel per foreach op and chunk of tensors; the fused kernel)
TORCH_ADAM_LAUNCHES = {"foreach": 7, "default": 7, "fused": 1}


@dataclass(frozen=True)
class TorchOptimizer:
    """The suite's torch optimizer phase: AdamW implementation, whether weight decay and the gradient clip run."""

    impl: str = "foreach"
    weight_decay: bool = False
    grad_clip: bool = True

    def __post_init__(self) -> None:
        if self.impl not in TORCH_ADAM_BYTES:
            raise choices_error("optimizer_impl", self.impl, TORCH_ADAM_BYTES)

    def bytes_per_param(self) -> float:
        return (TORCH_ADAM_BYTES[self.impl] + (TORCH_WEIGHT_DECAY_BYTES[self.impl] if self.weight_decay else 0.0)
                + (TORCH_CLIP_BYTES if self.grad_clip else 0.0))

    def launches(self) -> int:
        return (TORCH_ADAM_LAUNCHES[self.impl] + (1 if self.weight_decay and self.impl != "fused" else 0)
                + (2 if self.grad_clip else 0))
#: fp8 training: which GEMMs run in fp8, and what bringing their operands to fp8 costs.
#: The transformer-block linears run all three GEMMs in fp8 (forward, data gradient, weight gradient), in
#: TransformerEngine (te.Linear / LayerNormLinear / LayerNormMLP: fprop E4M3, dgrad/wgrad with E5M2 gradients in the
#: HYBRID format) and in torchao Float8Linear (torchtitan); attention (the flash kernel) and the LM head stay in
#: 16 bits (TE does not replace them; torchtitan's float8 converter skips ``output``), see the predictor's
#: ``_head_cost``. An fp8 GEMM on Hopper/Blackwell reads both operands K-major, so each operand is needed in two
#: layouts: the input X (t x k) as X for the forward and X^T for wgrad, the weight W as W for the forward and W^T
#: for dgrad, the output gradient G (t x n) as G for dgrad and G^T for wgrad. Per element of X, W and G:
#:
#: * ``delayed`` (TE DelayedScaling, Megatron/NeMo's and llm-foundry's fp8 default): one fused cast-transpose
#:   kernel reads the 16-bit tensor (2 B) and writes the fp8 copy and its transpose (1 + 1 B); the amax is taken in
#:   the same pass and the scale comes from the amax history (TE ``fp8_cast_transpose_fused``): 4 B, 1 launch.
#: * ``dynamic`` (torchao tensorwise dynamic scaling, torchtitan): the scale must be known before the cast, so an
#:   amax reduction reads the tensor first (2 B), then the cast writes both layouts (2 + 1 + 1 B): 6 B, 2 launches.
#:
#: X is cast in every forward (and again in a recomputed forward), G in every backward. W is cast once per
#: optimizer step under the TE recipes: Megatron-Core hands TE ``is_first_microbatch`` and TE keeps the quantized
#: weight in a workspace for the step's later micro-batches (``update_workspace`` in TE's ``module/linear.py`` and
#: ``module/layernorm_linear.py``), recomputed forwards included; torchao's ``dynamic`` scaling casts it in every
#: forward (``WEIGHT_CACHED_RECIPES``, :func:`weight_cast_op`).
FP8_CAST = {"delayed": (4.0, 1), "dynamic": (6.0, 2)}  # recipe -> (bytes per element, launches per tensor)
FP8_RECIPE = "delayed"  # the op model's default: the recipe of TE-based stacks (most fp8 rows, and NVIDIA's)
#: fp4 training (``precision="fp4"``): NVFP4 block scaling (Transformer Engine ``NVFP4BlockScaling``, E2M1 values,
#: one E4M3 scale per 16 elements and one fp32 scale per tensor; the recipe torchao's NVFP4 tracker, pytorch/ao#3293,
#: lays out: 1x16 blocks for activations and gradients, 16x16 for weights, a random Hadamard transform on the
#: wgrad GEMM's inputs, stochastic rounding for gradients). The same GEMMs as fp8 run in fp4, attention and the LM
#: head stay in 16 bits. Per element of X, W and G, an estimate from those steps, not a measurement: a per-tensor
#: amax pass reads the 16-bit tensor (2 B); the quantize pass reads it again (2 B) and writes the rowwise copy with
#: its scales (0.5 + 1/16 B); the columnwise copy for the transposed GEMM goes through the Hadamard transform,
#: another read (2 B) and write (0.5 + 1/16 B): 7.125 B, 3 launches.
FP4_CAST = {"nvfp4": (7.125, 3)}
FP4_RECIPE = "nvfp4"
#: each narrow precision's cast recipes (``narrow_cast_ops``): precision -> recipe -> (bytes per element, launches)
CASTS = {"fp8": FP8_CAST, "fp4": FP4_CAST}
#: the recipes whose quantized weights are kept for the step's later micro-batches (TransformerEngine's)
WEIGHT_CACHED_RECIPES = frozenset({"delayed", "nvfp4"})
#: GEMM input bytes per element when the layer's linears run in a narrow type (values + block scales)
NARROW_GEMM_BYTES = {"fp8": 1.0, "fp4": 0.5 + 1.0 / 16.0}
LINEARS = ("qkv", "attn_out", "mlp_up", "mlp_down")


@dataclass(frozen=True, slots=True)
class Op:
    name: str
    kind: str  # gemm | attention | memory | collective
    phase: str  # fwd | bwd | recompute | step
    count: float = 1.0
    m: int = 0
    n: int = 0
    k: int = 0
    flops: float = 0.0  # executed FLOPs, all ``count`` instances
    model_flops: float = 0.0  # FLOPs as MFU counts them
    nbytes: float = 0.0  # memory traffic (memory ops) or buffer size (collectives)
    collective: str = ""  # all_reduce | all_gather | reduce_scatter | send_recv
    group: str = ""  # tp | cp | dp | pp
    launches: float = 1.0


def dtype_bytes(precision: str) -> float:
    """Bytes per activation element: fp32 4; bf16/fp16 2; fp8 and fp4 run GEMM inputs narrow but keep 16-bit
    activations."""
    return dtypes.nbytes("fp32" if precision == "fp32" else "bf16")


def wide_precision(precision: str) -> str:
    """The 16-bit precision the parts that stay wide under fp8/fp4 run in (attention, the LM head and embedding:
    TransformerEngine keeps them in bf16); any other precision unchanged."""
    return "bf16" if precision in dtypes.NARROW_PRECISIONS else precision


def _gemm(name: str, phase: str, m: int, n: int, k: int, count: float = 1.0) -> Op:
    f = 2.0 * m * n * k * count
    return Op(name=name, kind="gemm", phase=phase, count=count, m=m, n=n, k=k, flops=f, model_flops=f,
              launches=count)


def _fwd_bwd(name: str, m: int, n: int, k: int, recompute: bool) -> list[Op]:
    ops = [_gemm(name, "fwd", m, n, k), _gemm(name + ".dgrad", "bwd", m, k, n), _gemm(name + ".wgrad", "bwd", k, n, m)]
    if recompute:
        r = _gemm(name, "recompute", m, n, k)
        ops.append(Op(**{**_asdict(r), "model_flops": 0.0}))
    return ops


def _asdict(op: Op) -> dict:
    return {f: getattr(op, f) for f in Op.__slots__}


def local_seq(seq_len: int, cp: int) -> int:
    """Tokens of each sequence one context-parallel rank holds."""
    return -(-int(seq_len) // max(int(cp), 1))


def layer_ops(spec: ModelSpec, *, micro_batch: int, seq_len: int, tp: int = 1, sp: bool = False,
              recompute: str = "none", attention: str = "flash", precision: str = "bf16",
              fp8_recipe: str = FP8_RECIPE, cp: int = 1) -> list[Op]:
    """Ops of one transformer layer for one micro-batch on one TP (and CP) rank (module docstring)."""
    if cp > 1 and attention != "flash":
        raise ModelInputError(f"context parallelism (cp={cp}) needs the fused attention kernel, not {attention!r}")
    b, d, f = micro_batch, spec.d_model, spec.ffn_dim
    s = local_seq(seq_len, cp)  # the rank's own tokens of each sequence
    t = b * s
    e = dtype_bytes(precision)
    full = recompute == "full"
    ops: list[Op] = []
    q = spec.q_dim
    ops += _fwd_bwd("qkv", t, (q + 2 * spec.d_kv) // tp, d, full)
    ops += _fwd_bwd("attn_out", t, d, q // tp, full)
    ops += _fwd_bwd("mlp_up", t, f * (2 if spec.glu else 1) // tp, d, full)
    ops += _fwd_bwd("mlp_down", t, d, f // tp, full)
    if precision in CASTS:
        ops += narrow_cast_ops(ops, precision, full=full, recipe=_default_recipe(precision, fp8_recipe))
    # attention core
    heads = max(spec.n_heads // tp, 1)
    model_fwd = 4.0 * b * seq_len * seq_len * q / (tp * cp)  # load-balanced: 1/cp of the sequence's attention
    if attention == "flash":
        ops.append(Op(name="attention", kind="attention", phase="fwd", flops=0.5 * model_fwd, model_flops=model_fwd))
        ops.append(Op(name="attention.bwd", kind="attention", phase="bwd", flops=1.25 * model_fwd,
                      model_flops=2.0 * model_fwd))
        if full:
            ops.append(Op(name="attention", kind="attention", phase="recompute", flops=0.5 * model_fwd))
    else:
        dh = spec.head_dim
        cnt = float(b * heads)
        sm = b * heads * s * s * e
        rec = ["fwd"] + (["recompute"] if recompute in ("full", "selective") else [])
        for ph in rec:
            for g in (_gemm("scores", ph, s, s, dh, cnt), _gemm("attn_v", ph, s, dh, s, cnt)):
                ops.append(g if ph == "fwd" else Op(**{**_asdict(g), "model_flops": 0.0}))
            ops.append(Op(name="softmax", kind="memory", phase=ph, nbytes=2.0 * sm))
        for g in (_gemm("scores.dgrad_q", "bwd", s, dh, s, cnt), _gemm("scores.dgrad_k", "bwd", s, dh, s, cnt),
                  _gemm("attn_v.dgrad_p", "bwd", s, s, dh, cnt), _gemm("attn_v.dgrad_v", "bwd", s, dh, s, cnt)):
            ops.append(g)
        ops.append(Op(name="softmax.bwd", kind="memory", phase="bwd", nbytes=3.0 * sm))
    # memory-bound
    tok = t / tp if sp else t
    act_mult = 3.0 if spec.glu else 2.0
    mem_fwd = [("norms", 2 * 2.0 * tok * d * e, 2), ("residual", 2 * 3.0 * tok * d * e, 2),
               ("activation", act_mult * t * f / tp * e, 1)]
    if spec.norm == "rmsnorm":
        mem_fwd.append(("rotary", 2.0 * t * (d + spec.d_kv) / tp * e, 2))
    for name, nb, launches in mem_fwd:
        ops.append(Op(name=name, kind="memory", phase="fwd", nbytes=nb, launches=launches))
        ops.append(Op(name=name + ".bwd", kind="memory", phase="bwd", nbytes=2.0 * nb, launches=launches))
        if full:
            ops.append(Op(name=name, kind="memory", phase="recompute", nbytes=nb, launches=launches))
    # CP ring: the rank's keys and values round the ring, cp - 1 steps (backward: with their gradients)
    if cp > 1:
        kv = t * 2.0 * spec.d_kv / tp * e
        for ph, n in (("fwd", cp - 1), ("bwd", 2 * (cp - 1))) + ((("recompute", cp - 1),) if full else ()):
            ops.append(Op(name="cp.send_recv", kind="collective", phase=ph, count=n, nbytes=kv,
                          collective="send_recv", group="cp"))
    # TP collectives
    if tp > 1:
        size = t * d * e
        # under fp8/fp4 with SP the gathered tensors (the norm output forward, the output gradient backward) travel
        # quantized: TE's gather_along_first_dim(..., quantizer=...), torchao's float8 TP; reduce-scatters stay 16-bit
        ag_size = t * d * NARROW_GEMM_BYTES.get(precision, e)
        phases = ["fwd", "fwd", "bwd", "bwd"] + (["recompute", "recompute"] if full else [])
        for ph in phases:
            if sp:
                ops.append(Op(name="tp.all_gather", kind="collective", phase=ph, nbytes=ag_size,
                              collective="all_gather", group="tp"))
                ops.append(Op(name="tp.reduce_scatter", kind="collective", phase=ph, nbytes=size,
                              collective="reduce_scatter", group="tp"))
            else:
                ops.append(Op(name="tp.all_reduce", kind="collective", phase=ph, nbytes=size, collective="all_reduce",
                              group="tp"))
    return ops


def _default_recipe(precision: str, fp8_recipe: str = FP8_RECIPE) -> str:
    """The cast recipe ``precision`` runs: ``fp8_recipe`` for fp8, NVFP4 block scaling for fp4."""
    return fp8_recipe if precision == "fp8" else FP4_RECIPE


def narrow_cast_ops(ops: list[Op], precision: str, *, full: bool = False, recipe: str = FP8_RECIPE) -> list[Op]:
    """The per-micro-batch casts of the ``precision`` (fp8, fp4) linears among ``ops`` (their forward GEMMs
    ``(t, n, k)``): forward X (t k), and W (k n) unless the recipe caches it (``WEIGHT_CACHED_RECIPES``: then it is
    :func:`weight_cast_op`, once per step), backward G (t n), again forward in a full recompute; bytes and launches
    per element of ``CASTS[precision][recipe]``, the ops named ``<precision>_cast``."""
    per_el, launches = _cast_recipe(precision, recipe)
    fwd = _forward_linears(ops)
    cached = recipe in WEIGHT_CACHED_RECIPES
    x_w = sum(o.m * o.k + (0 if cached else o.k * o.n) for o in fwd)
    fwd_launches = (1 if cached else 2) * launches * len(fwd)
    g = sum(o.m * o.n for o in fwd)
    name = f"{precision}_cast"
    out = [Op(name=name, kind="memory", phase="fwd", nbytes=per_el * x_w, launches=fwd_launches),
           Op(name=name + ".bwd", kind="memory", phase="bwd", nbytes=per_el * g, launches=launches * len(fwd))]
    if full:
        out.append(Op(name=name, kind="memory", phase="recompute", nbytes=per_el * x_w, launches=fwd_launches))
    return out


def _cast_recipe(precision: str, recipe: str) -> tuple[float, int]:
    """(bytes per element, launches per tensor) of ``precision``'s cast ``recipe``; an unknown recipe names the
    valid ones."""
    recipes = CASTS[precision]
    if recipe not in recipes:
        raise choices_error(f"{precision}_recipe", recipe, recipes)
    return recipes[recipe]


def _forward_linears(ops: list[Op]) -> list[Op]:
    """The forward GEMMs of the transformer-block linears among ``ops`` (the ones fp8/fp4 run narrow)."""
    return [o for o in ops if o.kind == "gemm" and o.phase == "fwd" and o.name in LINEARS]


@lru_cache(maxsize=1_000)
def weight_cast_op(spec: ModelSpec, *, tp: int = 1, precision: str = "bf16",
                   recipe: str | None = None) -> Op | None:
    """One layer's weight casts on one TP rank, once per optimizer step (phase ``step``), for a ``precision``
    (fp8, fp4) recipe that caches its quantized weights (``WEIGHT_CACHED_RECIPES``); None otherwise (16-bit
    precisions; ``dynamic`` scaling, whose per-forward weight casts are in :func:`narrow_cast_ops`). Cached: the
    step model asks for it once per layout priced."""
    if precision not in CASTS:
        return None
    recipe = recipe or _default_recipe(precision)
    per_el, launches = _cast_recipe(precision, recipe)
    if recipe not in WEIGHT_CACHED_RECIPES:
        return None
    fwd = _forward_linears(layer_ops(spec, micro_batch=1, seq_len=1, tp=tp, precision="bf16"))
    return Op(name=f"{precision}_cast.weight", kind="memory", phase="step",
              nbytes=per_el * sum(o.k * o.n for o in fwd), launches=launches * len(fwd))


def head_ops(spec: ModelSpec, *, micro_batch: int, seq_len: int, tp: int = 1, precision: str = "bf16") -> list[Op]:
    """Embedding, logits GEMM and cross-entropy for one micro-batch (per TP rank)."""
    t = micro_batch * seq_len
    e = dtype_bytes(precision)
    v = -(-spec.vocab // tp)
    ops = _fwd_bwd("logits", t, v, spec.d_model, False)
    ops.append(Op(name="embedding", kind="memory", phase="fwd", nbytes=2.0 * t * spec.d_model * e))
    ops.append(Op(name="embedding.bwd", kind="memory", phase="bwd", nbytes=3.0 * t * spec.d_model * e))
    ops.append(Op(name="cross_entropy", kind="memory", phase="fwd", nbytes=2.0 * 4.0 * t * v, launches=2))
    ops.append(Op(name="cross_entropy.bwd", kind="memory", phase="bwd", nbytes=2.0 * 4.0 * t * v, launches=2))
    return ops


def optimizer_op(local_params: float, precision: str, torch_opt: TorchOptimizer | None = None) -> Op:
    """The optimizer step on ``local_params`` parameters: a fused Adam's traffic (``ADAM_BYTES``), or, for the
    suite's own torch workloads, that of their optimizer phase (:class:`TorchOptimizer`)."""
    if torch_opt is not None:
        return Op(name="adamw." + torch_opt.impl, kind="memory", phase="step",
                  nbytes=local_params * torch_opt.bytes_per_param(), launches=torch_opt.launches())
    nb = local_params * ADAM_BYTES["fp32" if precision == "fp32" else "mixed"]
    return Op(name="adam", kind="memory", phase="step", nbytes=nb, launches=4)  # multi-tensor apply: a few launches


def autocast_ops(spec: ModelSpec, *, micro_batch: int, seq_len: int, recompute: str = "none") -> list[Op]:
    """What bf16 autocast over fp32 parameters (``torch.autocast``, the suite's ``bf16_autocast``) moves on top of
    :func:`layer_ops` priced at 2 bytes, for one layer and one micro-batch (t = b s tokens, d = d_model): the
    residual stream stays fp32 and autocast runs LayerNorm in fp32, so each norm reads and writes 4 bytes and its
    output is cast to bf16 for the next linear (4 + 4 + 6 = 14 B per element against 2 + 2), each residual add reads
    fp32 and bf16 and writes fp32 (10 B against 6); backward, each norm's gradient arrives in bf16 and is cast up
    (6), runs in fp32 (read dy and x, write dx, 12) with its gamma/beta reduction reading both again (8) (26 B
    against 8), and each branch's bf16 gradient is cast up before it joins the fp32 residual gradient (6). Every
    weight matrix (``spec.layer_params``) is cast to bf16 at each use in the forward (read 4, write 2) and its bf16
    weight gradient cast back to the fp32 ``.grad`` (6). A full recompute repeats the forward part."""
    t, d = micro_batch * seq_len, spec.d_model
    w = float(spec.layer_params())
    fwd = 2 * (14.0 - 4.0) * t * d + 2 * (10.0 - 6.0) * t * d + 6.0 * w
    bwd = 2 * (26.0 - 8.0) * t * d + 2 * 6.0 * t * d + 6.0 * w
    ops = [Op(name="autocast", kind="memory", phase="fwd", nbytes=fwd, launches=4 + spec.param_tensors_per_layer()),
           Op(name="autocast.bwd", kind="memory", phase="bwd", nbytes=bwd, launches=4 + spec.param_tensors_per_layer())]
    if recompute == "full":
        ops.append(Op(name="autocast", kind="memory", phase="recompute", nbytes=fwd,
                      launches=4 + spec.param_tensors_per_layer()))
    return ops


def dp_collectives(*, sharding: str, local_params: float, layer_params_local: float, n_layers_local: float,
                   microbatches: int, precision: str) -> list[Op]:
    """Data-parallel collectives of one step per rank (module docstring); sizes are whole buffers."""
    pw = 4.0 if precision == "fp32" else 2.0
    g = GRAD_REDUCE_BYTES
    if sharding in ("none",):
        return []
    if sharding == "ddp":
        return [Op(name="dp.all_reduce", kind="collective", phase="bwd", nbytes=local_params * g,
                   collective="all_reduce", group="dp", count=1.0)]
    if sharding == "zero1":
        return [Op(name="dp.reduce_scatter", kind="collective", phase="bwd", nbytes=local_params * g,
                   collective="reduce_scatter", group="dp"),
                Op(name="dp.all_gather", kind="collective", phase="step", nbytes=local_params * pw,
                   collective="all_gather", group="dp")]
    # FSDP units: one per layer; the collectives repeat per micro-batch
    unit = layer_params_local
    n_units = n_layers_local
    per_mb: list[Op] = [
        Op(name="fsdp.all_gather.fwd", kind="collective", phase="fwd", nbytes=unit * pw, collective="all_gather",
           group="dp", count=n_units * microbatches),
        Op(name="fsdp.reduce_scatter", kind="collective", phase="bwd", nbytes=unit * g, collective="reduce_scatter",
           group="dp", count=n_units * microbatches),
    ]
    if sharding == "full_shard":
        per_mb.append(Op(name="fsdp.all_gather.bwd", kind="collective", phase="bwd", nbytes=unit * pw,
                         collective="all_gather", group="dp", count=n_units * microbatches))
    return per_mb


def step_flops(spec: ModelSpec, *, seq_len: int, sequences: int, recompute: str,
               recompute_layers: float = 1.0) -> tuple[float, float]:
    """(model FLOPs, hardware FLOPs) of one optimizer step over ``sequences`` sequences (PaLM app. B);
    ``recompute_layers``: the share of layers ``recompute`` applies to."""
    tokens = sequences * seq_len
    model = spec.model_flops_per_token(seq_len) * tokens
    hw = model
    if recompute == "full":
        layer_fwd = (2.0 * (spec.matmul_params() - spec.vocab * spec.d_model)
                     + 4.0 * spec.n_layers * seq_len * spec.q_dim)
        hw += recompute_layers * layer_fwd * tokens
    elif recompute == "selective":
        hw += recompute_layers * 4.0 * spec.n_layers * seq_len * spec.q_dim * tokens  # the attention core again
    return model, hw


__all__ = ["Op", "layer_ops", "local_seq", "narrow_cast_ops", "weight_cast_op", "WEIGHT_CACHED_RECIPES", "CASTS",
           "FP8_CAST", "FP8_RECIPE", "FP4_CAST", "FP4_RECIPE", "NARROW_GEMM_BYTES", "head_ops", "optimizer_op", "dp_collectives", "step_flops", "dtype_bytes", "ATTENTION"]
