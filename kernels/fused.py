"""Attention, layernorm, softmax and GELU: fused library kernels vs unfused compositions.

Counting conventions (each elementwise arithmetic op or transcendental = 1 FLOP,
as in the FLOP counts of FlashAttention and of most fusion papers):

* attention forward, FlashAttention-2's benchmark formula
  (``benchmarks/benchmark_flash_attention.py``: ``4 * batch * seqlen**2 *
  nheads * headdim // (2 if causal else 1)``): ``Q K^T`` and ``P V`` are two
  GEMMs of ``2 s^2 d`` FLOPs per head; causal masking skips half. Softmax
  FLOPs (O(s^2), not O(s^2 d)) are left out, as there.
  Bytes: Q, K, V read and O written once, ``4 b h s d`` elements -- the
  traffic of a fused kernel; an unfused one also writes and re-reads the
  ``s x s`` scores, which is why it is slower.
* layernorm: 8 FLOPs/element -- mean (1 add), variance (sub, square, add = 3),
  normalize (sub, multiply by rstd = 2), affine (multiply, add = 2); bytes:
  x read, y written, weight and bias read once (``2 r c + 2 c`` elements).
* softmax: 5 FLOPs/element -- running max (1 compare), subtract (1), exp (1),
  sum (1), divide (1); bytes ``2 r c`` elements (read, write).
* GELU: exact ``0.5 x (1 + erf(x / sqrt 2))`` = 5 FLOPs/element (scale,
  erf, add, multiply, multiply); tanh form ``0.5 x (1 + tanh(sqrt(2/pi) (x +
  0.044715 x^3)))`` = 9 (x^3 = 2, scale, add, scale, tanh, add, multiply,
  multiply); bytes ``2 n`` elements.

All bytes are the *minimum* traffic (what a fused kernel moves), the same
denominator for fused and unfused variants, so bytes/s compares them directly.
Unfused variants allocate their intermediates, as eager code does; the fused
torch softmax and GELU write into a preallocated output (``out=``).

``framework=jax`` (attention, layernorm, softmax, GELU): the same math in JAX on
the same N(0,1) draws (the torch generator's fp32 values, rounded to ``dtype``),
checked against the same fp64 reference, timed with ``block_until_ready``
(``sync="jax"``); the FLOP/byte counts are those above (they describe the math,
not the framework). ``fused`` = the whole op under one ``jax.jit`` (XLA fuses
it); ``unfused`` = the same ``jnp`` ops dispatched one by one without ``jit``,
each materializing its intermediate, as eager torch does (softmax refuses it).
Attention under JAX: ``backend=auto`` is ``jax.nn.dot_product_attention`` (an
explicit composition on a jax without it), ``backend=unfused`` the explicit
``softmax(QK^T/sqrt d) V``, both under ``jax.jit``, in JAX's ``(batch, seq,
heads, head_dim)`` layout; the torch SDPA backends are refused. fp64 under JAX
needs ``jax_enable_x64``.
"""

from __future__ import annotations

import contextlib
import functools
import math
from typing import Any

import numpy as np

from hwcore.errors import InputError
from hwmodels import dtypes
from kernels import _util as U
from kernels.registry import Kernel, Param, Setup, register

DTYPES = dtypes.FLOAT_DTYPES
IMPLS = ("fused", "unfused")
FRAMEWORKS = ("torch", "jax")
CHECK_ROWS = 256


def _framework_param() -> Param:
    return Param(name="framework", type=str, default="torch", choices=FRAMEWORKS)


def _jax_x64_reason(p: dict[str, Any]) -> tuple[str, str] | None:
    """``("dtype", why)`` for JAX fp64 without x64 enabled (JAX would silently compute fp32)."""
    if p.get("framework") == "jax" and p["dtype"] == "fp64":
        import jax

        if not jax.config.jax_enable_x64:
            return "dtype", "JAX computes fp64 only with jax_enable_x64=True (set JAX_ENABLE_X64=1)"
    return None


def _jax_randn(shape: tuple[int, ...], dtype: str, device: str, seed: int, perm: tuple[int, ...] | None = None):
    """The torch variant's N(0,1) draw (CPU generator, fp32, rounded to ``dtype``) as a JAX array on ``device``."""
    import jax
    import jax.numpy as jnp

    xh = U.randn(shape, "fp32", "cpu", seed).numpy()
    if perm is not None:
        xh = np.ascontiguousarray(xh.transpose(perm))
    return jax.device_put(jnp.asarray(xh, dtype=U.jax_dtype(dtype)), U.jax_device(device))


def _tol(dtype: str) -> float:
    return U.TOLERANCE[dtype]


def _cuda(device: str) -> bool:
    return device.startswith("cuda")


# ---------------------------------------------------------------------------------
# attention
# ---------------------------------------------------------------------------------
BACKENDS = ("auto", "math", "flash", "efficient", "cudnn", "unfused")
_SDP = {"math": "MATH", "flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "cudnn": "CUDNN_ATTENTION"}


def attention_flops(p: dict[str, Any]) -> float:
    # 2 GEMMs (QK^T, PV) x 2 s^2 d FLOPs per (batch, head); causal computes half (FlashAttention-2 convention)
    f = 4.0 * p["batch"] * p["heads"] * p["seq"] ** 2 * p["head_dim"]
    return f / 2 if p["causal"] else f


def attention_bytes(p: dict[str, Any]) -> float:
    # Q, K, V read + O written once, each b*h*s*d elements
    return 4.0 * p["batch"] * p["heads"] * p["seq"] * p["head_dim"] * U.DTYPE_BYTES[p["dtype"]]


def attention_memory(p: dict[str, Any]) -> float:
    scores = 2.0 * p["batch"] * p["heads"] * p["seq"] ** 2 * U.DTYPE_BYTES[p["dtype"]]  # unfused / math S and P
    ref = 8.0 * (4 * p["seq"] * p["head_dim"] + 2 * p["seq"] ** 2)  # fp64 reference of one head
    return attention_bytes(p) + (scores if p["backend"] in ("unfused", "math", "auto") else 0.0) + ref


@functools.lru_cache(maxsize=64)
def _sdpa_probe(backend: str, dtype: str, causal: bool, head_dim: int, device: str) -> str | None:
    """Run a tiny SDPA with only ``backend`` enabled; the error text when torch has no such kernel."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = U.randn((1, 2, 32, head_dim), dtype, device, 0)
    try:
        with sdpa_kernel([getattr(SDPBackend, _SDP[backend])]):
            F.scaled_dot_product_attention(q, q, q, is_causal=causal)
        if _cuda(device):
            torch.cuda.synchronize(torch.device(device))
    except RuntimeError as exc:
        return str(exc).splitlines()[0][:160]
    return None


JAX_BACKENDS = ("auto", "unfused")


def attention_check(p: dict[str, Any]) -> None:
    if p["framework"] == "jax" and p["backend"] not in JAX_BACKENDS:
        raise InputError(f"attention.backend={p['backend']!r} is a torch SDPA backend; valid choices for "
                         f"framework=jax: {', '.join(JAX_BACKENDS)}")


def attention_supports(p: dict[str, Any], device: str) -> tuple[str, str] | None:
    if p["framework"] == "jax":
        return _jax_x64_reason(p)
    if p["backend"] in _SDP:
        err = _sdpa_probe(p["backend"], p["dtype"], p["causal"], p["head_dim"], device)
        if err:
            return "backend", f"torch has no {p['backend']} SDPA kernel for {p['dtype']} here ({err})"
    return None


def _unfused_attention(q, k, v, causal: bool, mask):
    import torch

    s = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    if causal:
        s = s.masked_fill(mask, float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), v)


def _sdpa(q, k, v, causal: bool):
    import torch.nn.functional as F

    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def _attention_ref(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool) -> np.ndarray:
    s = q @ k.T / math.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.triu(np.ones_like(s, dtype=bool), 1), -np.inf, s)
    s = s - s.max(-1, keepdims=True)
    e = np.exp(s)
    return (e / e.sum(-1, keepdims=True)) @ v


def _attention_jax_auto(q, k, v, causal: bool):
    """``(batch, seq, heads, head_dim)`` attention: ``jax.nn.dot_product_attention`` where this jax has it."""
    import jax

    if hasattr(jax.nn, "dot_product_attention"):
        return jax.nn.dot_product_attention(q, k, v, is_causal=causal)
    return _attention_jax_unfused(q, k, v, causal)


def _attention_jax_unfused(q, k, v, causal: bool):
    """Explicit ``softmax(Q K^T / sqrt d) V`` on ``(batch, seq, heads, head_dim)`` arrays."""
    import jax
    import jax.numpy as jnp

    s = jnp.einsum("bqhd,bkhd->bhqk", q, k) * (1.0 / math.sqrt(q.shape[-1]))
    if causal:
        n = s.shape[-1]
        s = jnp.where(jnp.triu(jnp.ones((n, n), dtype=bool), 1), -jnp.inf, s)
    return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, axis=-1), v)


def _build_attention_jax(p: dict[str, Any], device: str) -> Setup:
    import jax

    import kernels.fused as mod

    shape = (p["batch"], p["heads"], p["seq"], p["head_dim"])
    # the torch variant's (b, h, s, d) draws, laid out as JAX's (b, s, h, d) outside the timed call
    q, k, v = (_jax_randn(shape, p["dtype"], device, p["seed"] + i, perm=(0, 2, 1, 3)) for i in range(3))
    causal = p["causal"]
    name = "_attention_jax_auto" if p["backend"] == "auto" else "_attention_jax_unfused"
    fn = jax.jit(lambda q, k, v: getattr(mod, name)(q, k, v, causal))
    impl = "jax.nn.dot_product_attention" if p["backend"] == "auto" and hasattr(jax.nn, "dot_product_attention") \
        else "softmax(QK^T/sqrt(d))V"

    def reference():
        return _attention_ref(*(U.to_f64(np.asarray(t[0, :, 0, :])) for t in (q, k, v)), causal)

    return Setup(fn=fn, inputs=[(q, k, v)], reference=reference, output=lambda o: np.asarray(o[0, :, 0, :]),
                 tolerance=_tol(p["dtype"]), sync="jax", cuda_events=False,
                 metadata={"impl": f"jax.jit({impl})", "layout": "bshd"})


def build_attention(p: dict[str, Any], device: str) -> Setup:
    if p["framework"] == "jax":
        return _build_attention_jax(p, device)
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    shape = (p["batch"], p["heads"], p["seq"], p["head_dim"])
    q, k, v = (U.randn(shape, p["dtype"], device, p["seed"] + i) for i in range(3))
    causal = p["causal"]
    stack = contextlib.ExitStack()
    if p["backend"] == "unfused":
        mask = torch.ones(p["seq"], p["seq"], dtype=torch.bool, device=device).triu(1)
        import kernels.fused as mod

        def fn(q, k, v):
            return mod._unfused_attention(q, k, v, causal, mask)
    else:
        if p["backend"] != "auto":
            stack.enter_context(sdpa_kernel([getattr(SDPBackend, _SDP[p["backend"]])]))
        import kernels.fused as mod

        def fn(q, k, v):
            return mod._sdpa(q, k, v, causal)

    def reference():
        return _attention_ref(U.to_f64(q[0, 0]), U.to_f64(k[0, 0]), U.to_f64(v[0, 0]), causal)

    return Setup(fn=fn, inputs=[(q, k, v)], reference=reference, output=lambda o: o[0, 0],
                 tolerance=_tol(p["dtype"]), sync="cuda" if _cuda(device) else "none", cleanup=stack.close,
                 metadata={"impl": p["backend"], "threads": torch.get_num_threads()})


register(
    Kernel(
        name="attention",
        family="fused",
        help="scaled dot-product attention forward (SDPA backends or unfused matmul-softmax-matmul); JAX variant",
        params=(
            Param(name="batch", type=int, default=4, min=1),
            Param(name="heads", type=int, default=8, min=1),
            Param(name="seq", type=int, default=512, min=1),
            Param(name="head_dim", type=int, default=64, min=1),
            Param(name="causal", type=bool, default=False),
            Param(name="dtype", type=str, default="fp32", choices=DTYPES),
            Param(name="backend", type=str, default="auto", choices=BACKENDS,
                  help="torch SDPA backend, 'auto' lets torch choose, 'unfused' = explicit softmax(QK^T)V; "
                       "framework=jax takes auto (jax.nn.dot_product_attention) or unfused (explicit), both jitted"),
            _framework_param(),
            Param(name="seed", type=int, default=0, min=0),
        ),
        flops=attention_flops,
        bytes=attention_bytes,
        build=build_attention,
        frameworks=FRAMEWORKS,
        memory_bytes=attention_memory,
        supports=attention_supports,
        check_params=attention_check,
        module=__name__,
    )
)


# ---------------------------------------------------------------------------------
# layernorm
# ---------------------------------------------------------------------------------
EPS = 1e-5  # torch.nn.LayerNorm's default


def layernorm_flops(p: dict[str, Any]) -> float:
    return 8.0 * p["rows"] * p["cols"]  # see module docstring: mean 1 + var 3 + normalize 2 + affine 2


def layernorm_bytes(p: dict[str, Any]) -> float:
    return (2.0 * p["rows"] * p["cols"] + 2.0 * p["cols"]) * U.DTYPE_BYTES[p["dtype"]]


def _rowwise_memory(p: dict[str, Any]) -> float:
    # x, y, up to 3 unfused temporaries + fp64 reference rows
    return 5.0 * p["rows"] * p["cols"] * U.DTYPE_BYTES[p["dtype"]] + 8.0 * 3 * min(p["rows"], CHECK_ROWS) * p["cols"]


def _layernorm_unfused(x, w, b):
    import torch

    mean = x.mean(-1, keepdim=True)
    xc = x - mean
    var = (xc * xc).mean(-1, keepdim=True)
    return xc * torch.rsqrt(var + EPS) * w + b


def _layernorm_fused(x, w, b):
    import torch.nn.functional as F

    return F.layer_norm(x, (x.shape[-1],), w, b, EPS)


def _layernorm_jax(x, w, b):
    """LayerNorm as a sequence of ``jnp`` ops (jitted whole for ``fused``, dispatched one by one for ``unfused``)."""
    import jax
    import jax.numpy as jnp

    mean = jnp.mean(x, -1, keepdims=True)
    xc = x - mean
    var = jnp.mean(xc * xc, -1, keepdims=True)
    return xc * jax.lax.rsqrt(var + EPS) * w + b


def _layernorm_ref(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + EPS) * w + b


def layernorm_supports(p: dict[str, Any], device: str) -> tuple[str, str] | None:
    return _jax_x64_reason(p)


def build_layernorm(p: dict[str, Any], device: str) -> Setup:
    import kernels.fused as mod

    rows, cols, dtype = p["rows"], p["cols"], p["dtype"]
    r = min(rows, CHECK_ROWS)
    if p["framework"] == "jax":
        import jax

        x, w, b = (_jax_randn(s, dtype, device, p["seed"] + i) for i, s in enumerate(((rows, cols), (cols,), (cols,))))

        def eager(x, w, b):
            return mod._layernorm_jax(x, w, b)

        fn = jax.jit(eager) if p["impl"] == "fused" else eager
        return Setup(fn=fn, inputs=[(x, w, b)],
                     reference=lambda: _layernorm_ref(*(U.to_f64(np.asarray(t)) for t in (x[:r], w, b))),
                     output=lambda y: np.asarray(y[:r]), tolerance=_tol(dtype), sync="jax", cuda_events=False,
                     metadata={"impl": "jax.jit(layernorm)" if p["impl"] == "fused" else "eager jnp ops"})
    x = U.randn((rows, cols), dtype, device, p["seed"])
    w = U.randn((cols,), dtype, device, p["seed"] + 1)
    b = U.randn((cols,), dtype, device, p["seed"] + 2)
    name = "_layernorm_fused" if p["impl"] == "fused" else "_layernorm_unfused"

    def fn(x, w, b):
        return getattr(mod, name)(x, w, b)

    def reference():
        return _layernorm_ref(U.to_f64(x[:r]), U.to_f64(w), U.to_f64(b))

    return Setup(fn=fn, inputs=[(x, w, b)], reference=reference, output=lambda y: y[:r], tolerance=_tol(dtype),
                 sync="cuda" if _cuda(device) else "none", metadata={"impl": p["impl"]})


register(
    Kernel(
        name="layernorm",
        family="fused",
        help="LayerNorm over the last dim: F.layer_norm (fused) vs mean/var/rsqrt composition; JAX variant",
        params=(
            Param(name="rows", type=int, default=8192, min=1, help="tokens"),
            Param(name="cols", type=int, default=1024, min=1, help="hidden size"),
            Param(name="dtype", type=str, default="fp32", choices=DTYPES),
            Param(name="impl", type=str, default="fused", choices=IMPLS,
                  help="jax: fused = jax.jit of the whole op, unfused = the jnp ops un-jitted, one dispatch each"),
            _framework_param(),
            Param(name="seed", type=int, default=0, min=0),
        ),
        flops=layernorm_flops,
        bytes=layernorm_bytes,
        build=build_layernorm,
        frameworks=FRAMEWORKS,
        memory_bytes=_rowwise_memory,
        supports=layernorm_supports,
        module=__name__,
    )
)


# ---------------------------------------------------------------------------------
# softmax
# ---------------------------------------------------------------------------------
def softmax_flops(p: dict[str, Any]) -> float:
    return 5.0 * p["rows"] * p["cols"]  # max, subtract, exp, sum, divide


def softmax_bytes(p: dict[str, Any]) -> float:
    return 2.0 * p["rows"] * p["cols"] * U.DTYPE_BYTES[p["dtype"]]


def _softmax_fused(x, y):
    import torch

    return torch.softmax(x, -1, out=y)


def _softmax_unfused(x, y):
    import torch

    e = torch.exp(x - x.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)


def _softmax_ref(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def softmax_supports(p: dict[str, Any], device: str) -> tuple[str, str] | None:
    if p["framework"] == "jax":
        if p["impl"] == "unfused":
            return "impl", "XLA fuses the elementwise chain itself; an unfused JAX softmax is not meaningful"
        if p["dtype"] == "fp64":
            import jax

            if not jax.config.jax_enable_x64:
                return "dtype", "JAX computes fp64 only with jax_enable_x64=True (set JAX_ENABLE_X64=1)"
    return None


def build_softmax(p: dict[str, Any], device: str) -> Setup:
    rows, cols, dtype = p["rows"], p["cols"], p["dtype"]
    r = min(rows, CHECK_ROWS)
    if p["framework"] == "jax":
        import jax
        import jax.numpy as jnp

        dev = U.jax_device(device)
        xh = U.randn((rows, cols), "fp32", "cpu", p["seed"]).numpy()
        x = jax.device_put(jnp.asarray(xh, dtype=U.jax_dtype(dtype)), dev)
        f = jax.jit(lambda x: jax.nn.softmax(x, axis=-1))
        return Setup(fn=f, inputs=[(x,)], reference=lambda: _softmax_ref(U.to_f64(np.asarray(x)[:r])),
                     output=lambda y: np.asarray(y[:r]), tolerance=_tol(dtype), sync="jax", cuda_events=False,
                     metadata={"impl": "jax.jit(jax.nn.softmax)"})
    import torch

    import kernels.fused as mod

    x = U.randn((rows, cols), dtype, device, p["seed"])
    y = torch.empty_like(x)
    name = "_softmax_fused" if p["impl"] == "fused" else "_softmax_unfused"

    def fn(x, y):
        return getattr(mod, name)(x, y)

    return Setup(fn=fn, inputs=[(x, y)], reference=lambda: _softmax_ref(U.to_f64(x[:r])), output=lambda o: o[:r],
                 tolerance=_tol(dtype), sync="cuda" if _cuda(device) else "none", metadata={"impl": p["impl"]})


register(
    Kernel(
        name="softmax",
        family="fused",
        help="row softmax: torch.softmax (fused) vs exp/sum/divide composition; JAX jit variant",
        params=(
            Param(name="rows", type=int, default=8192, min=1),
            Param(name="cols", type=int, default=1024, min=1),
            Param(name="dtype", type=str, default="fp32", choices=DTYPES),
            Param(name="impl", type=str, default="fused", choices=IMPLS),
            _framework_param(),
            Param(name="seed", type=int, default=0, min=0),
        ),
        flops=softmax_flops,
        bytes=softmax_bytes,
        build=build_softmax,
        frameworks=("torch", "jax"),
        memory_bytes=_rowwise_memory,
        supports=softmax_supports,
        module=__name__,
    )
)


# ---------------------------------------------------------------------------------
# GELU
# ---------------------------------------------------------------------------------
#: FLOPs per element: exact (erf) form 5, tanh approximation 9 (module docstring)
GELU_FLOPS = {"none": 5, "tanh": 9}
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def gelu_flops(p: dict[str, Any]) -> float:
    return float(GELU_FLOPS[p["approximate"]] * p["n"])


def gelu_bytes(p: dict[str, Any]) -> float:
    return 2.0 * p["n"] * U.DTYPE_BYTES[p["dtype"]]


def _gelu_fused(x, y, approximate: str):
    import torch

    return torch._C._nn.gelu(x, approximate=approximate, out=y)


def _gelu_unfused(x, y, approximate: str):
    import torch

    if approximate == "tanh":
        inner = SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
        return 0.5 * x * (1.0 + torch.tanh(inner))
    return 0.5 * x * (1.0 + torch.erf(x * (1.0 / math.sqrt(2.0))))


def _gelu_ref(x: np.ndarray, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        return 0.5 * x * (1.0 + np.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x**3)))
    from scipy.special import erf

    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def _gelu_jax(x, approximate: str):
    import jax

    return jax.nn.gelu(x, approximate=approximate == "tanh")


def _gelu_jax_unfused(x, approximate: str):
    import jax.numpy as jnp
    from jax.scipy.special import erf

    if approximate == "tanh":
        inner = SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
        return 0.5 * x * (1.0 + jnp.tanh(inner))
    return 0.5 * x * (1.0 + erf(x * (1.0 / math.sqrt(2.0))))


def gelu_supports(p: dict[str, Any], device: str) -> tuple[str, str] | None:
    return _jax_x64_reason(p)


def build_gelu(p: dict[str, Any], device: str) -> Setup:
    import kernels.fused as mod

    n, dtype, approx = p["n"], p["dtype"], p["approximate"]
    r = min(n, 1 << 16)
    if p["framework"] == "jax":
        import jax

        x = _jax_randn((n,), dtype, device, p["seed"])
        if p["impl"] == "fused":
            fn = jax.jit(lambda x: mod._gelu_jax(x, approx))
        else:
            def fn(x):
                return mod._gelu_jax_unfused(x, approx)
        return Setup(fn=fn, inputs=[(x,)], reference=lambda: _gelu_ref(U.to_f64(np.asarray(x[:r])), approx),
                     output=lambda y: np.asarray(y[:r]), tolerance=_tol(dtype), sync="jax", cuda_events=False,
                     metadata={"impl": "jax.jit(jax.nn.gelu)" if p["impl"] == "fused" else "eager jnp ops",
                               "approximate": approx})
    import torch

    x = U.randn((n,), dtype, device, p["seed"])
    y = torch.empty_like(x)
    name = "_gelu_fused" if p["impl"] == "fused" else "_gelu_unfused"

    def fn(x, y):
        return getattr(mod, name)(x, y, approx)

    return Setup(fn=fn, inputs=[(x, y)], reference=lambda: _gelu_ref(U.to_f64(x[:r]), approx),
                 output=lambda o: o[:r], tolerance=_tol(dtype), sync="cuda" if _cuda(device) else "none",
                 metadata={"impl": p["impl"], "approximate": approx})


def _gelu_memory(p: dict[str, Any]) -> float:
    return 6.0 * p["n"] * U.DTYPE_BYTES[p["dtype"]] + 8.0 * 2 * min(p["n"], 1 << 16)


register(
    Kernel(
        name="gelu",
        family="fused",
        help="GELU: torch gelu kernel (fused) vs elementwise composition (unfused); JAX variant",
        params=(
            Param(name="n", type=int, default=1 << 24, min=1, help="elements"),
            Param(name="dtype", type=str, default="fp32", choices=DTYPES),
            Param(name="approximate", type=str, default="none", choices=("none", "tanh"),
                  help="jax: jax.nn.gelu(approximate=approximate == 'tanh')"),
            Param(name="impl", type=str, default="fused", choices=IMPLS,
                  help="jax: fused = jax.jit(jax.nn.gelu), unfused = the erf/tanh formula as un-jitted jnp ops"),
            _framework_param(),
            Param(name="seed", type=int, default=0, min=0),
        ),
        flops=gelu_flops,
        bytes=gelu_bytes,
        build=build_gelu,
        frameworks=FRAMEWORKS,
        memory_bytes=_gelu_memory,
        supports=gelu_supports,
        module=__name__,
    )
)

