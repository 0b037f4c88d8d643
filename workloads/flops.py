"""Analytic parameter counts and training FLOPs per step.

One formula per model family, used by both the torch and the JAX
implementation, so MFU means the same thing in both (tests check these counts
against the real parameter counts of both models and against torch's
``FlopCounterMode`` / XLA's cost analysis).

Training FLOPs = 3 x forward FLOPs: the backward pass costs twice the forward
(one matmul for the input gradient, one for the weight gradient; Kaplan et al.
2020, "Scaling Laws for Neural Language Models", section 2.1, C ~= 6N per
token), and a multiply-add is 2 FLOPs.

Transformer (decoder-only, bias-free linears, learned positions, tied
embedding/unembedding), per token (PaLM, Chowdhery et al. 2022, appendix B;
nanoGPT ``model.py`` ``estimate_mfu``; Kaplan et al. Table 1):

    flops/token = 6 * N_matmul + 12 * L * T * d

``N_matmul = L * (4 d^2 + 2 r d^2) + V d`` are the weights a token multiplies
by (q, k, v, out projections; the two MLP matrices with ratio ``r``; the tied
unembedding); embedding lookups and LayerNorm parameters do no matmul work.
``12 L T d`` is attention's QK^T and AV: 2 matmuls x 2 FLOPs/MAC x T x d per
token per layer forward, x3 for training; like PaLM it does not halve for the
causal mask (the kernels compute the masked half too, and MFU conventions
count it).

With activation checkpointing every recomputed block forward is extra
hardware work: hardware FLOPs = model FLOPs + the blocks' forward FLOPs
(HFU, PaLM appendix B).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class FlopCount:
    params: int  # every trainable parameter
    matmul_params: int  # parameters multiplied per sample/token
    model_flops_per_step: float  # 6N + attention, x samples per step
    hardware_flops_per_step: float  # + recomputation under activation checkpointing
    per: str  # "token" or "sample"
    formula: str

    def to_dict(self) -> dict:
        return {
            "params": self.params,
            "matmul_params": self.matmul_params,
            "model_flops_per_step": self.model_flops_per_step,
            "hardware_flops_per_step": self.hardware_flops_per_step,
            "per": self.per,
            "formula": self.formula,
        }


def transformer(*, layers: int, width: int, heads: int, seq_len: int, vocab: int, mlp_ratio: int,
                batch_size: int, checkpointing: bool = False) -> FlopCount:
    d, L, T, V, r = width, layers, seq_len, vocab, mlp_ratio
    block = 4 * d * d + 2 * r * d * d  # qkv (3d^2) + out (d^2) + fc1 (r d^2) + fc2 (r d^2)
    ln = 2 * d  # LayerNorm weight + bias
    params = V * d + T * d + L * (block + 2 * ln) + ln  # tok emb (tied head), pos emb, blocks, final LN
    matmul = L * block + V * d
    attn_fwd = 4 * L * T * d  # per token: QK^T and AV, 2 FLOPs per MAC, T keys, d dims
    per_token = 6 * matmul + 3 * attn_fwd  # = 6N + 12 L T d
    tokens = batch_size * T
    recompute = (2 * L * block + attn_fwd) * tokens if checkpointing else 0  # blocks' forward again
    return FlopCount(params=params, matmul_params=matmul, model_flops_per_step=float(per_token * tokens),
                     hardware_flops_per_step=float(per_token * tokens + recompute), per="token",
                     formula="6*N_matmul + 12*L*T*d per token (PaLM app. B / Kaplan 2020)")


def gru(*, input_size: int, hidden: int, layers: int, context: int, horizon: int, batch_size: int,
        checkpointing: bool = False) -> FlopCount:
    """A stacked GRU over ``context`` steps + a linear head to ``horizon`` outputs.

    Per step and layer a GRU does 3 gates x (W_ih x + W_hh h): ``3 (in h + h h)``
    MACs (torch.nn.GRU equations); the gate nonlinearities and the elementwise
    update are O(h) and left out, as the 6N rule leaves out LayerNorms.
    Parameters: ``3 (in h + h h + 2 h)`` per layer (two bias vectors).
    """
    params, macs = 0, 0
    for i in range(layers):
        fan_in = input_size if i == 0 else hidden
        params += 3 * (fan_in * hidden + hidden * hidden + 2 * hidden)
        macs += 3 * (fan_in * hidden + hidden * hidden) * context
    head = hidden * horizon
    params += head + horizon
    macs += head
    fwd = 2 * macs  # 2 FLOPs per MAC
    recompute = 2 * (macs - head) * batch_size if checkpointing else 0
    return FlopCount(params=params, matmul_params=macs, model_flops_per_step=float(3 * fwd * batch_size),
                     hardware_flops_per_step=float(3 * fwd * batch_size + recompute), per="sample",
                     formula="6 * 3*(in*h + h*h) * context per layer + 6*h*horizon per sample")


def mlp(*, features: int, hidden: int, depth: int, outputs: int, batch_size: int,
        checkpointing: bool = False) -> FlopCount:
    """``depth`` hidden Linear+ReLU layers of width ``hidden`` and a linear output: 6N per sample."""
    dims = [features] + [hidden] * depth + [outputs]
    weights = sum(a * b for a, b in zip(dims[:-1], dims[1:], strict=True))
    biases = sum(dims[1:])
    recompute = 2 * (weights - hidden * outputs) * batch_size if checkpointing else 0
    return FlopCount(params=weights + biases, matmul_params=weights,
                     model_flops_per_step=float(6 * weights * batch_size),
                     hardware_flops_per_step=float(6 * weights * batch_size + recompute), per="sample",
                     formula="6 * sum(fan_in*fan_out) per sample")
