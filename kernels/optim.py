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

``framework=jax``: ``optax.adamw`` (same lr, betas, eps, weight decay; optax's
``-lr * (m_hat / (sqrt(v_hat) + eps) + wd * p)`` is torch's decoupled update)
followed by ``optax.apply_updates``, the whole step under one ``jax.jit`` over
the same ``n_tensors`` arrays (same seeds, so the same values as the torch
variant). Only ``impl=plain`` is accepted there (torch's foreach / fused paths
have no optax counterpart; XLA fuses the jitted step itself). The JAX step is
functional: each timed call is the first step from the same (params, grads,
state), where torch keeps stepping in place; the per-parameter work, FLOPs and
bytes are the same. fp64 under JAX needs ``jax_enable_x64``.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from hwcore.errors import InputError
from hwmodels import dtypes
from kernels import _util as U
from kernels.registry import Kernel, Param, Setup, register

IMPLS = ("plain", "foreach", "fused")
FRAMEWORKS = ("torch", "jax")
JAX_IMPLS = ("plain",)
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


def adamw_check(p: dict[str, Any]) -> None:
    if p["framework"] == "jax" and p["impl"] not in JAX_IMPLS:
        raise InputError(f"adamw.impl={p['impl']!r} is a torch.optim.AdamW path; valid choices for framework=jax: "
                         f"{', '.join(JAX_IMPLS)} (optax.adamw update under jax.jit)")


def adamw_supports(p: dict[str, Any], device: str) -> tuple[str, str] | None:
    if p["framework"] == "jax":
        if p["dtype"] == "fp64":
            import jax

            if not jax.config.jax_enable_x64:
                return "dtype", "JAX computes fp64 only with jax_enable_x64=True (set JAX_ENABLE_X64=1)"
        return None
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


def _optax_adamw(lr: float, wd: float):
    import optax

    return optax.adamw(learning_rate=lr, b1=BETAS[0], b2=BETAS[1], eps=EPS, weight_decay=wd)


def _adamw_jax_step(tx, params, grads, state):
    """One optax AdamW step: ``(new_params, new_state)``."""
    import optax

    updates, state = tx.update(grads, state, params)
    return optax.apply_updates(params, updates), state


def _check_tolerance(p: dict[str, Any], reference, output, snap_p: np.ndarray):
    if p["dtype"] in ("fp32", "fp64"):
        # the update is ~lr relative to p: compare the update itself, so a wrong step cannot hide
        # under p's scale (normalized error of the delta; fp32 rounding of p+delta costs ~2^-24/lr)
        return (lambda: reference() - snap_p), (lambda x: U.to_f64(output(x)) - snap_p), \
            {"fp32": 1e-3, "fp64": 1e-9}[p["dtype"]]
    # bf16/fp16 storage cannot even hold an lr-sized update of p: compare p after the step
    return reference, output, U.TOLERANCE[p["dtype"]]


def _build_adamw_jax(p: dict[str, Any], device: str) -> Setup:
    import jax
    import jax.numpy as jnp

    import kernels.optim as mod

    dev, jdt = U.jax_device(device), U.jax_dtype(p["dtype"])
    sizes = _split(p["n_params"], p["n_tensors"])

    def draw(shape, seed):  # the torch variant's draw (CPU generator, fp32), rounded to dtype
        return jax.device_put(jnp.asarray(U.randn(shape, "fp32", "cpu", seed).numpy(), dtype=jdt), dev)

    params = [draw((s,), p["seed"] + 2 * i) for i, s in enumerate(sizes)]
    grads = [draw((s,), p["seed"] + 2 * i + 1) for i, s in enumerate(sizes)]
    tx = mod._optax_adamw(p["lr"], p["weight_decay"])
    state = jax.device_put(tx.init(params), dev)
    snap_p = np.concatenate([U.to_f64(np.asarray(t)) for t in params])
    snap_g = np.concatenate([U.to_f64(np.asarray(t)) for t in grads])
    step = jax.jit(lambda params, grads, state: mod._adamw_jax_step(tx, params, grads, state))

    def reference():
        return adamw_reference(snap_p, snap_g, p["lr"], p["weight_decay"])

    def output(res):
        return np.concatenate([U.to_f64(np.asarray(t)) for t in res[0]])

    ref_fn, out_fn, tol = _check_tolerance(p, reference, output, snap_p)
    return Setup(fn=step, inputs=[(params, grads, state)], reference=ref_fn, output=out_fn, tolerance=tol,
                 sync="jax", cuda_events=False, metadata={"impl": "jax.jit(optax.adamw)", "tensors": len(params)})


def build_adamw(p: dict[str, Any], device: str) -> Setup:
    if p["framework"] == "jax":
        return _build_adamw_jax(p, device)
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

    ref_fn, out_fn, tol = _check_tolerance(p, reference, output, snap_p)
    return Setup(fn=step, inputs=[()], reference=ref_fn, output=out_fn, tolerance=tol,
                 sync="cuda" if device.startswith("cuda") else "none",
                 metadata={"impl": p["impl"], "tensors": len(params)})


register(
    Kernel(
        name="adamw",
        family="optimizer",
        help="one torch.optim.AdamW step over n_params parameters in n_tensors tensors; JAX: jit(optax.adamw)",
        params=(
            Param(name="n_params", type=int, default=1 << 24, min=1),
            Param(name="n_tensors", type=int, default=64, min=1),
            Param(name="impl", type=str, default="fused", choices=IMPLS,
                  help="torch.optim.AdamW path; framework=jax takes plain only (optax.adamw update under jax.jit)"),
            Param(name="dtype", type=str, default="fp32", choices=dtypes.FLOAT_DTYPES),
            Param(name="lr", type=float, default=1e-3, min=0.0),
            Param(name="weight_decay", type=float, default=0.01, min=0.0),
            Param(name="framework", type=str, default="torch", choices=FRAMEWORKS),
            Param(name="seed", type=int, default=0, min=0),
        ),
        flops=adamw_flops,
        bytes=adamw_bytes,
        build=build_adamw,
        frameworks=FRAMEWORKS,
        memory_bytes=adamw_memory,
        supports=adamw_supports,
        check_params=adamw_check,
        module=__name__,
    )
)
