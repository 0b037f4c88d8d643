"""Host dispatch: what an eager framework spends per op and per optimizer step, apart from the op's work.

A small model's training step is bound by the host, not by FLOPs or bytes: each
differentiable op is dispatched from Python (argument parsing, dispatcher,
allocation), records an autograd node, and in the backward pass runs that node
(its gradient kernels and the gradient accumulation); the optimizer step
(``clip_grad_norm_``, ``AdamW.step``, ``zero_grad``) costs hundreds of
microseconds of host code on a handful of tensors. Kernel rates (GEMM, STREAM)
do not see any of it, so the step-time predictor (``hwmodels.predict``) reads
these three probes on a node that runs ops one after another on the host
(a CPU; on a GPU the host runs ahead of the device and the cost hides unless
the kernels are shorter than it):

``mode=forward``
    a chain of ``ops`` element-wise multiplies ``y = y * w`` on ``n``-element
    fp32 tensors under ``torch.no_grad()``: the per-op dispatch floor.
``mode=train``
    the same chain with ``requires_grad`` inputs, then ``y.sum().backward()``:
    per op, one forward dispatch with its autograd node plus its backward node
    (two gradient multiplies and the accumulation into ``w.grad``). The figure
    the predictor charges per differentiable op of a training step.
``mode=optimizer``
    one optimizer phase of the suite's workloads (``workloads/torch/backend.py``):
    ``clip_grad_norm_`` + ``torch.optim.AdamW(foreach=True).step()`` +
    ``zero_grad(set_to_none=True)`` on ``tensors`` parameter tensors of ``n``
    elements, gradients re-attached before each call (as backward leaves them).

Metrics: ``median_s`` is one call (``ops`` ops, or one optimizer phase);
``per_op_s`` divides by ``ops`` (``forward``/``train``); ``per_step_s`` is the
optimizer phase. Sizes are tiny on purpose (``n`` = 64 by default): the data
work is a few nanoseconds, so the time is the host's.

FLOPs: ``forward`` ``ops * n`` multiplies; ``train`` ``3 * ops * n`` (forward
multiply, two gradient multiplies; the accumulation adds are not counted);
``optimizer`` 14 per parameter (``kernels/optim.py``'s AdamW count) plus 2 per
parameter for the gradient norm and 1 for the clip scaling. Bytes: fp32, one
read of each input and one write per multiply; the optimizer's 7 elements per
parameter (``kernels/optim.py``) plus the gradient's read and write in the clip.

Checked against an fp64 reference: ``forward``/``train`` the chain's output
``x * w**ops``; ``optimizer`` the first parameter after one step, from
``clip_grad_norm_``'s definition and AdamW's update (Loshchilov & Hutter 2019,
Algorithm 2; torch's defaults betas (0.9, 0.999), eps 1e-8, weight decay 0.01).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hwcore.errors import InputError
from hwcore.timing import Measurement
from kernels import _util as U
from kernels.registry import Kernel, Param, Setup, register

MODES = ("forward", "train", "optimizer")
LR = 1e-3
WEIGHT_DECAY = 0.01
BETAS = (0.9, 0.999)
EPS = 1e-8
CLIP = 1.0


def dispatch_flops(p: dict[str, Any]) -> float:
    if p["mode"] == "optimizer":
        return 17.0 * p["n"] * p["tensors"]
    return (3.0 if p["mode"] == "train" else 1.0) * p["ops"] * p["n"]


def dispatch_bytes(p: dict[str, Any]) -> float:
    if p["mode"] == "optimizer":
        return (7.0 + 2.0) * 4.0 * p["n"] * p["tensors"]
    return (3.0 if p["mode"] == "train" else 1.0) * 3.0 * 4.0 * p["ops"] * p["n"]


def dispatch_memory(p: dict[str, Any]) -> float:
    if p["mode"] == "optimizer":
        return 6.0 * 4.0 * p["n"] * p["tensors"]  # p, grad, saved grad, m, v + fp64 reference row
    return 4.0 * p["n"] * (2 * p["ops"] + 4)  # the chain's saved activations + x, w, y


def dispatch_check(p: dict[str, Any]) -> None:
    if p["mode"] != "optimizer" and p["ops"] > 4096:
        raise InputError(f"dispatch.ops: {p['ops']} is above 4096 (a longer chain measures the same per-op cost); "
                         "valid range: 1..4096")


def dispatch_supports(p: dict[str, Any], device: str) -> tuple[str, str] | None:
    return None


def _per_op(p: dict[str, Any], m: Measurement) -> dict[str, float]:
    if p["mode"] == "optimizer":
        return {"per_step_s": float(m.median_s)}
    return {"per_op_s": float(m.median_s) / p["ops"]}


def _chain_ref(x: np.ndarray, w: np.ndarray, ops: int) -> np.ndarray:
    return x * w ** ops


def _adamw_ref(p0: np.ndarray, grads: list[np.ndarray]) -> np.ndarray:
    """The first parameter after one clipped AdamW step from zero moments (step 1)."""
    total = float(np.sqrt(sum(float((g * g).sum()) for g in grads)))
    scale = min(1.0, CLIP / (total + 1e-6))
    g = grads[0] * scale
    b1, b2 = BETAS
    m = (1 - b1) * g
    v = (1 - b2) * g * g
    m_hat, v_hat = m / (1 - b1), v / (1 - b2)
    p = p0 * (1 - LR * WEIGHT_DECAY)
    return p - LR * m_hat / (np.sqrt(v_hat) + EPS)


def build_dispatch(p: dict[str, Any], device: str) -> Setup:
    import torch

    n, ops, mode = p["n"], p["ops"], p["mode"]
    sync = "cuda" if device.startswith("cuda") else "none"
    if mode == "optimizer":
        k = p["tensors"]
        params = [torch.nn.Parameter(U.randn((n,), "fp32", device, p["seed"] + i)) for i in range(k)]
        grads = [U.randn((n,), "fp32", device, p["seed"] + 1000 + i) for i in range(k)]
        opt = torch.optim.AdamW(params, lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY, foreach=True)
        p0 = U.to_f64(params[0].detach().clone())
        g64 = [U.to_f64(g) for g in grads]

        def reference():
            return _adamw_ref(p0, g64)

        # clip_grad_norm_ scales the gradients in place: every call starts from fresh copies of the same ones
        base = [g.clone() for g in grads]

        def fn():
            for q, g, b in zip(params, grads, base, strict=True):
                g.copy_(b)
                q.grad = g  # re-attached, as backward leaves them
            torch.nn.utils.clip_grad_norm_(params, CLIP)
            opt.step()
            opt.zero_grad(set_to_none=True)
            return params[0]

        return Setup(fn=fn, inputs=[()], reference=reference, output=lambda y: y.detach(), tolerance=1e-5,
                     sync=sync, metadata={"impl": "clip_grad_norm_ + AdamW(foreach=True).step + zero_grad",
                                          "tensors": k})
    x = U.randn((n,), "fp32", device, p["seed"])
    w = 1.0 + 1e-3 * U.randn((n,), "fp32", device, p["seed"] + 1)  # near 1: a long chain stays finite
    if mode == "train":
        x.requires_grad_(True)
        w.requires_grad_(True)

    def forward(x, w):
        y = x
        for _ in range(ops):
            y = y * w
        return y

    if mode == "train":
        def fn(x, w):
            y = forward(x, w)
            y.sum().backward()
            return y
    else:
        def fn(x, w):
            with torch.no_grad():
                return forward(x, w)

    x64, w64 = U.to_f64(x.detach()), U.to_f64(w.detach())
    return Setup(fn=fn, inputs=[(x, w)], reference=lambda: _chain_ref(x64, w64, ops), output=lambda y: y.detach(),
                 tolerance=1e-4, sync=sync,
                 metadata={"impl": f"{ops} x (y = y * w)" + (" + backward" if mode == "train" else ", no_grad")})


register(
    Kernel(
        name="dispatch",
        family="overhead",
        help="host cost per eager op (forward, or forward+backward in training) and per optimizer phase",
        params=(
            Param(name="mode", type=str, default="train", choices=MODES,
                  help="forward: no_grad dispatch floor; train: fwd+bwd per differentiable op; "
                       "optimizer: clip_grad_norm_ + AdamW(foreach).step + zero_grad"),
            Param(name="ops", type=int, default=32, min=1, help="ops in the chain (forward/train)"),
            Param(name="n", type=int, default=64, min=1, max=1 << 20, help="elements per tensor"),
            Param(name="tensors", type=int, default=8, min=1, max=4096, help="parameter tensors (optimizer)"),
            Param(name="seed", type=int, default=0, min=0),
        ),
        flops=dispatch_flops,
        bytes=dispatch_bytes,
        build=build_dispatch,
        memory_bytes=dispatch_memory,
        supports=dispatch_supports,
        check_params=dispatch_check,
        extra_metrics=_per_op,
        module=__name__,
    )
)
