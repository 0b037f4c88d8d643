"""Optimizer step: ``torch.optim.AdamW`` with ``impl=plain|foreach|fused``.

``plain`` is the per-tensor loop (``foreach=False, fused=False``), ``foreach``
the multi-tensor ``torch._foreach_*`` path, ``fused`` the single fused kernel
(``fused=True``; CPU support since torch 2.4). Parameters are split into
``n_tensors`` tensors of about equal size, as a model's parameters are, since
the per-tensor overhead is what foreach and fused remove.

FLOPs per parameter: 14, counted from torch's single-tensor AdamW
(``torch/optim/adamw.py``, ``_single_tensor_adamw``): decoupled weight decay
``p *= 1 - lr*wd`` (1), ``m.lerp_(g, 1-beta1)`` (3: sub, mul, add),
``v.mul_(beta2).addcmul_(g, g, 1-beta2)`` (4), ``denom = v.sqrt() / bc2_sqrt + eps``
(3), ``p.addcdiv_(m, denom, -step_size)`` (3: div, mul, add); scalar
bias-correction terms are per step, not per parameter.
Bytes per parameter: p, grad, m, v read and p, m, v written = 7 elements
(Loshchilov & Hutter 2019, Algorithm 2, has the same state).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from kernels import _util as U
from kernels.registry import Kernel, Param, Setup, register

IMPLS = ("plain", "foreach", "fused")
FLOPS_PER_PARAM = 14  # see module docstring
ELEMENTS_MOVED_PER_PARAM = 7  # read p, g, m, v; write p, m, v
BETAS = (0.9, 0.999)
EPS = 1e-8


def adamw_flops(p: dict[str, Any]) -> float:
    return float(FLOPS_PER_PARAM * p["n_params"])


def adamw_bytes(p: dict[str, Any]) -> float:
    return float(ELEMENTS_MOVED_PER_PARAM * p["n_params"] * U.DTYPE_BYTES[p["dtype"]])


def adamw_memory(p: dict[str, Any]) -> float:
    # p, g, m, v + fp64 snapshot of p, g for the reference + the flattened output
    return 4.0 * p["n_params"] * U.DTYPE_BYTES[p["dtype"]] + 8.0 * 3 * p["n_params"]


def _split(n: int, parts: int) -> list[int]:
    base, rem = divmod(n, parts)
    return [base + (1 if i < rem else 0) for i in range(parts) if base + (1 if i < rem else 0) > 0]


def _make(p: dict[str, Any], device: str):
    import torch

    sizes = _split(p["n_params"], p["n_tensors"])
    params = []
    for i, s in enumerate(sizes):
        t = torch.nn.Parameter(U.randn((s,), p["dtype"], device, p["seed"] + 2 * i))
        t.grad = U.randn((s,), p["dtype"], device, p["seed"] + 2 * i + 1)
        params.append(t)
    opt = torch.optim.AdamW(params, lr=p["lr"], betas=BETAS, eps=EPS, weight_decay=p["weight_decay"],
                            foreach=p["impl"] == "foreach", fused=p["impl"] == "fused")
    return params, opt


@functools.lru_cache(maxsize=32)
def _probe(impl: str, dtype: str, device: str) -> str | None:
    try:
        _params, opt = _make({"n_params": 8, "n_tensors": 2, "dtype": dtype, "impl": impl, "lr": 1e-3,
                              "weight_decay": 0.0, "seed": 0}, device)
        opt.step()
    except (RuntimeError, ValueError, TypeError) as exc:
        return str(exc).splitlines()[0][:160]
    return None


def adamw_supports(p: dict[str, Any], device: str) -> tuple[str, str] | None:
    err = _probe(p["impl"], p["dtype"], device)
    if err:
        return "impl", f"torch.optim.AdamW({p['impl']}) cannot step {p['dtype']} parameters here ({err})"
    return None


def adamw_reference(p0: np.ndarray, g: np.ndarray, lr: float, wd: float) -> np.ndarray:
    """The first AdamW step in fp64 (m0 = v0 = 0, step 1), as torch.optim.AdamW computes it."""
    b1, b2 = BETAS
    m = (1 - b1) * g
    v = (1 - b2) * g * g
    bc1, bc2 = 1 - b1, 1 - b2
    denom = np.sqrt(v) / np.sqrt(bc2) + EPS
    return p0 * (1 - lr * wd) - (lr / bc1) * m / denom


def build_adamw(p: dict[str, Any], device: str) -> Setup:
    import torch

    params, opt = _make(p, device)
    snap_p = np.concatenate([U.to_f64(t) for t in params])
    snap_g = np.concatenate([U.to_f64(t.grad) for t in params])

    def reference():
        return adamw_reference(snap_p, snap_g, p["lr"], p["weight_decay"])

    def step():
        opt.step()

    def output(_):
        with torch.no_grad():
            return torch.cat([t.detach().flatten() for t in params])

    if p["dtype"] in ("fp32", "fp64"):
        # the update is ~lr relative to p: compare the update itself, so a wrong step cannot hide
        # under p's scale (normalized error of the delta; fp32 rounding of p+delta costs ~2^-24/lr)
        ref_fn, out_fn = (lambda: reference() - snap_p), (lambda x: U.to_f64(output(x)) - snap_p)
        tol = {"fp32": 1e-3, "fp64": 1e-9}[p["dtype"]]
    else:
        # bf16/fp16 storage cannot even hold an lr-sized update of p: compare p after the step
        ref_fn, out_fn, tol = reference, output, U.TOLERANCE[p["dtype"]]
    return Setup(fn=step, inputs=[()], reference=ref_fn, output=out_fn, tolerance=tol,
                 sync="cuda" if device.startswith("cuda") else "none",
                 metadata={"impl": p["impl"], "tensors": len(params)})


register(
    Kernel(
        name="adamw",
        family="optimizer",
        help="one torch.optim.AdamW step over n_params parameters in n_tensors tensors",
        params=(
            Param(name="n_params", type=int, default=1 << 24, min=1),
            Param(name="n_tensors", type=int, default=64, min=1),
            Param(name="impl", type=str, default="fused", choices=IMPLS),
            Param(name="dtype", type=str, default="fp32", choices=("fp64", "fp32", "bf16", "fp16")),
            Param(name="lr", type=float, default=1e-3, min=0.0),
            Param(name="weight_decay", type=float, default=0.01, min=0.0),
            Param(name="seed", type=int, default=0, min=0),
        ),
        flops=adamw_flops,
        bytes=adamw_bytes,
        build=build_adamw,
        memory_bytes=adamw_memory,
        supports=adamw_supports,
        module=__name__,
    )
)
