"""``transformer_lm`` in pure JAX + optax: the same architecture as the torch model.

Same layout and parameter count as :class:`workloads.torch.models.TransformerLM`
(pre-LN blocks, bias-free linears, learned positions, tied unembedding), so
:func:`workloads.flops.transformer` counts both.

The training step is two jitted functions (``compile=true``): gradients
(forward + backward, fused by XLA, reported as one ``forward_backward``
phase) and the optax update (``optimizer``); each is closed by
``block_until_ready`` so the host clock sees the work, not the dispatch.
``compile=false`` runs the same functions op by op.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from workloads.phases import PhaseTimer


def init_params(key: jax.Array, *, layers: int, width: int, heads: int, seq_len: int, vocab: int,
                mlp_ratio: int) -> dict[str, Any]:
    d, r = width, mlp_ratio
    keys = jax.random.split(key, 2 + 4 * layers)
    normal = lambda k, shape: 0.02 * jax.random.normal(k, shape, jnp.float32)  # noqa: E731 (nanoGPT's std)
    blocks = []
    for i in range(layers):
        k = keys[2 + 4 * i: 6 + 4 * i]
        blocks.append({
            "ln1_g": jnp.ones(d), "ln1_b": jnp.zeros(d),
            "qkv": normal(k[0], (d, 3 * d)), "proj": normal(k[1], (d, d)),
            "ln2_g": jnp.ones(d), "ln2_b": jnp.zeros(d),
            "fc1": normal(k[2], (d, r * d)), "fc2": normal(k[3], (r * d, d)),
        })
    return {"tok": normal(keys[0], (vocab, d)), "pos": jnp.zeros((seq_len, d)), "blocks": blocks,
            "lnf_g": jnp.ones(d), "lnf_b": jnp.zeros(d)}


def _ln(x, g, b, eps=1e-5):  # torch.nn.LayerNorm's default eps
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + eps) * g + b


def _block(p, x, heads: int):
    b, t, c = x.shape
    hd = c // heads
    qkv = _ln(x, p["ln1_g"], p["ln1_b"]) @ p["qkv"]
    q, k, v = (z.reshape(b, t, heads, hd).transpose(0, 2, 1, 3) for z in jnp.split(qkv, 3, axis=-1))
    att = (q @ k.transpose(0, 1, 3, 2)) / math.sqrt(hd)
    mask = jnp.tril(jnp.ones((t, t), bool))
    att = jnp.where(mask, att, jnp.finfo(att.dtype).min)
    y = jax.nn.softmax(att.astype(jnp.float32), axis=-1).astype(v.dtype) @ v
    x = x + y.transpose(0, 2, 1, 3).reshape(b, t, c) @ p["proj"]
    h = jax.nn.gelu(_ln(x, p["ln2_g"], p["ln2_b"]) @ p["fc1"], approximate=False)
    return x + h @ p["fc2"]


def forward(params, idx, *, heads: int, checkpointing: bool = False):
    x = params["tok"][idx] + params["pos"][: idx.shape[1]]
    blk = jax.checkpoint(_block, static_argnums=(2,)) if checkpointing else _block
    for p in params["blocks"]:
        x = blk(p, x, heads)
    return _ln(x, params["lnf_g"], params["lnf_b"]) @ params["tok"].T


def loss_fn(params, x, y, *, heads: int, checkpointing: bool = False, compute_dtype=None):
    if compute_dtype is not None:
        params = jax.tree_util.tree_map(lambda a: a.astype(compute_dtype), params)
    logits = forward(params, x, heads=heads, checkpointing=checkpointing).astype(jnp.float32)
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


def count_params(params) -> int:
    return int(sum(np.prod(a.shape) for a in jax.tree_util.tree_leaves(params)))


class JaxBackend:
    framework = "jax"

    def __init__(self, *, cfg: Any, ctx: Any) -> None:
        self.cfg = cfg
        self.notes = ["jax: forward+backward are one XLA computation, reported as 'forward_backward'"]
        params = init_params(jax.random.PRNGKey(cfg.seed), layers=cfg.layers, width=cfg.width, heads=cfg.heads,
                             seq_len=cfg.seq_len, vocab=cfg.vocab, mlp_ratio=cfg.mlp_ratio)
        if cfg.precision == "bf16":
            params = jax.tree_util.tree_map(lambda a: a.astype(jnp.bfloat16), params)
        compute = jnp.bfloat16 if cfg.precision == "bf16_autocast" else None
        self.params = params
        self.params_count = count_params(params)
        warm = cfg.warmup_steps
        sched = (lambda s: cfg.lr * jnp.minimum(1.0, (s + 1) / warm)) if warm else cfg.lr
        chain = [optax.clip_by_global_norm(cfg.grad_clip)] if cfg.grad_clip else []
        self.tx = optax.chain(*chain, optax.adamw(sched, b1=0.9, b2=0.999, eps=1e-8, weight_decay=cfg.weight_decay))
        self.opt_state = self.tx.init(params)
        n = cfg.grad_accum

        def lossf(p, x, y):
            return loss_fn(p, x, y, heads=cfg.heads, checkpointing=cfg.activation_checkpointing,
                           compute_dtype=compute)

        def grads(p, xs, ys):
            # mean over micro-batches of per-micro-batch gradients (grad accumulation)
            def one(carry, xy):
                lv, g = jax.value_and_grad(lossf)(p, *xy)
                return jax.tree_util.tree_map(lambda a, b: a + b / n, carry[0], g), carry[1] + lv / n
            zero = jax.tree_util.tree_map(jnp.zeros_like, p)
            if n == 1:
                lv, g = jax.value_and_grad(lossf)(p, xs[0], ys[0])
                return lv, g
            (g, lv), _ = jax.lax.scan(lambda c, xy: (one(c, xy), None), (zero, jnp.zeros(())), (xs, ys))
            return lv, g

        def apply(p, st, g):
            upd, st = self.tx.update(g, st, p)
            return optax.apply_updates(p, upd), st

        def evalf(p, x, y):
            return loss_fn(p, x, y, heads=cfg.heads, compute_dtype=compute)

        jit = jax.jit if cfg.compile else (lambda f, **_: f)
        self._grads = jit(grads)
        self._apply = jit(apply, donate_argnums=(0, 1)) if cfg.compile else apply
        self._eval = jit(evalf)
        self.lossf = lossf

    def to_device(self, batch):
        x, y = batch
        n = self.cfg.grad_accum
        return [(jnp.asarray(x.reshape(n, -1, x.shape[-1])), jnp.asarray(y.reshape(n, -1, y.shape[-1])))]

    def step(self, step: int, micro, ph: PhaseTimer) -> float:
        xs, ys = micro[0]
        lv, g = self._grads(self.params, xs, ys)
        lv = float(jax.block_until_ready(lv))
        if self.cfg.inject_nan_at_step and step == self.cfg.inject_nan_at_step:
            lv = float("nan")
        ph.lap("forward_backward")
        if not math.isfinite(lv):
            return lv
        self.params, self.opt_state = jax.block_until_ready(self._apply(self.params, self.opt_state, g))
        ph.lap("optimizer")
        return lv

    def evaluate(self, batches) -> float:
        return float(np.mean([float(self._eval(self.params, jnp.asarray(x), jnp.asarray(y))) for x, y in batches]))

    # -- checkpoint state: leaves as numpy, structure rebuilt from the live state
    def state(self) -> dict[str, Any]:
        leaves = jax.tree_util.tree_leaves((self.params, self.opt_state))
        return {"leaves": [np.asarray(a) for a in leaves]}

    def load_state(self, st: dict[str, Any]) -> None:
        treedef = jax.tree_util.tree_structure((self.params, self.opt_state))
        self.params, self.opt_state = jax.tree_util.tree_unflatten(treedef, [jnp.asarray(a) for a in st["leaves"]])

    def peak_device_mem(self) -> int | None:
        dev = jax.devices()[0]
        if dev.platform == "cpu":
            return None
        stats = dev.memory_stats() or {}
        return stats.get("peak_bytes_in_use")
