"""STREAM memory-bandwidth kernels: ``stream_copy``, ``stream_scale``, ``stream_add``, ``stream_triad``.

Four registered names (one per STREAM operation, as McCalpin's benchmark
reports them) sharing one builder; each takes ``n`` elements per array:

=========  ==================  ======  ===============
kernel     operation           arrays  FLOPs / element
=========  ==================  ======  ===============
copy       ``c = a``           2       0
scale      ``b = q * c``       2       1
add        ``c = a + b``       3       1
triad      ``a = b + q * c``   3       2 (mul + add)
=========  ==================  ======  ===============

Bytes are counted as read + written, ``arrays * n * itemsize``, the STREAM
convention (https://www.cs.virginia.edu/stream/ref.html, "Counting bytes":
write-allocate traffic of a cache that reads a line before writing it is
*not* counted), so the suite's figures compare directly with STREAM's and with
``benchmarks/stream.c``.

Method: the torch kernels write into preallocated arrays (``out=``/``copy_``,
no allocation timed); the arrays stay the same between calls and no cache is
flushed, so a working set that fits in a cache level is timed at that level's
bandwidth -- this is what :func:`working_set_sweep` relies on to show the
hierarchy. Short calls are batched by the harness. At working sets of a few
KiB a framework op is bound by its dispatch overhead (~microseconds), not by
L1; the C STREAM in ``benchmarks/`` is the reference for cache bandwidth.
JAX variants are ``jax.jit`` functions, which allocate their output (XLA owns
buffers; no donation), so they include an allocation per call.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hwmodels import dtypes
from kernels import _util as U
from kernels.registry import Kernel, Param, Setup, register

#: op -> (arrays touched, FLOPs per element); see the module docstring's table.
OPS: dict[str, tuple[int, int]] = {"copy": (2, 0), "scale": (2, 1), "add": (3, 1), "triad": (3, 2)}
DTYPES = dtypes.FLOAT_DTYPES
FRAMEWORKS = ("torch", "jax")
#: STREAM's scalar (stream.c uses 3.0)
SCALAR = 3.0


def stream_flops(op: str, p: dict[str, Any]) -> float:
    return float(OPS[op][1] * p["n"])


def stream_bytes(op: str, p: dict[str, Any]) -> float:
    # read + write, STREAM convention (no write-allocate)
    return float(OPS[op][0] * p["n"] * U.DTYPE_BYTES[p["dtype"]])


def stream_memory(op: str, p: dict[str, Any]) -> float:
    # the three arrays + an fp64 reference copy of the output and its inputs
    return 3.0 * p["n"] * U.DTYPE_BYTES[p["dtype"]] + 3.0 * 8 * p["n"]


def _supports(p: dict[str, Any], device: str) -> tuple[str, str] | None:
    if p["framework"] == "jax" and p["dtype"] == "fp64":
        import jax

        if not jax.config.jax_enable_x64:
            return "dtype", "JAX computes fp64 only with jax_enable_x64=True (set JAX_ENABLE_X64=1)"
    if p["framework"] == "jax" and device.startswith("cuda"):
        try:
            import jax

            jax.devices("gpu")
        except RuntimeError:
            return "framework", "this JAX install has no GPU backend"
    return None


# torch implementations: module-level so a test can replace one with a wrong kernel
def _copy(a, b, c):
    return c.copy_(a)


def _scale(a, b, c):
    import torch

    return torch.mul(c, SCALAR, out=b)


def _add(a, b, c):
    import torch

    return torch.add(a, b, out=c)


def _triad(a, b, c):
    import torch

    return torch.add(b, c, alpha=SCALAR, out=a)


TORCH_FNS = {"copy": "_copy", "scale": "_scale", "add": "_add", "triad": "_triad"}


def _ref(op: str, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    if op == "copy":
        return a.copy()
    if op == "scale":
        return SCALAR * c
    if op == "add":
        return a + b
    return b + SCALAR * c


def _build(op: str, p: dict[str, Any], device: str) -> Setup:
    n, dtype, seed = p["n"], p["dtype"], p["seed"]
    if p["framework"] == "jax":
        return _build_jax(op, p, device)
    import torch

    a, b, c = (U.randn((n,), dtype, device, seed + i) for i in range(3))
    fn_name = TORCH_FNS[op]
    import kernels.stream as mod

    def fn(x, y, z):
        return getattr(mod, fn_name)(x, y, z)

    def reference():
        return _ref(op, U.to_f64(a), U.to_f64(b), U.to_f64(c))

    cuda = device.startswith("cuda")
    return Setup(
        fn=fn,
        inputs=[(a, b, c)],
        reference=reference,
        tolerance=_tol(dtype),
        sync="cuda" if cuda else "none",
        metadata={"impl": f"torch {op} (out=)", "threads": torch.get_num_threads(), "working_set_bytes":
                  stream_bytes(op, p)},
    )


def _tol(dtype: str) -> float:
    # one output rounding (2^-53, 2^-24, 2^-8, 2^-11 relative) times a margin of ~10
    return {"fp64": 1e-14, "fp32": 1e-6, "bf16": 1e-2, "fp16": 1e-3}[dtype]


def _build_jax(op: str, p: dict[str, Any], device: str) -> Setup:
    import jax
    import jax.numpy as jnp

    n, dtype, seed = p["n"], p["dtype"], p["seed"]
    dev = U.jax_device(device)
    jdt = U.jax_dtype(dtype)
    host = [U.randn((n,), "fp32", "cpu", seed + i).numpy() for i in range(3)]
    a, b, c = (jax.device_put(jnp.asarray(h, dtype=jdt), dev) for h in host)
    q = SCALAR
    fns = {
        "copy": lambda a, b, c: jnp.copy(a),
        "scale": lambda a, b, c: q * c,
        "add": lambda a, b, c: a + b,
        "triad": lambda a, b, c: b + q * c,
    }
    f = jax.jit(fns[op])

    def reference():
        return _ref(op, U.to_f64(np.asarray(a)), U.to_f64(np.asarray(b)), U.to_f64(np.asarray(c)))

    return Setup(fn=f, inputs=[(a, b, c)], reference=reference, tolerance=_tol(dtype), sync="jax",
                 cuda_events=False, metadata={"impl": f"jax.jit {op}", "jax_device": str(dev)})


def _params(default_n: int) -> tuple[Param, ...]:
    return (
        Param(name="n", type=int, default=default_n, min=1, help="elements per array"),
        Param(name="dtype", type=str, default="fp64", choices=DTYPES, help="STREAM uses fp64"),
        Param(name="framework", type=str, default="torch", choices=FRAMEWORKS),
        Param(name="seed", type=int, default=0, min=0),
    )


#: default n: 2^24 fp64 elements = 128 MiB per array, 4x a 32 MiB LLC (STREAM's
#: rule: each array at least 4x the sum of the last-level caches)
DEFAULT_N = 2**24

for _op, (_arrays, _fl) in OPS.items():
    register(
        Kernel(
            name=f"stream_{_op}",
            family="memory",
            help=f"STREAM {_op}: {_arrays} arrays, {_fl} FLOP/element, bytes = read + write",
            params=_params(DEFAULT_N),
            flops=lambda p, op=_op: stream_flops(op, p),
            bytes=lambda p, op=_op: stream_bytes(op, p),
            build=lambda p, d, op=_op: _build(op, p, d),
            frameworks=FRAMEWORKS,
            memory_bytes=lambda p, op=_op: stream_memory(op, p),
            supports=_supports,
            module=__name__,
        )
    )


def working_set_sweep(
    op: str = "triad",
    *,
    dtype: str = "fp64",
    points_per_octave: int = 2,
    lo_bytes: int | None = None,
    hi_factor: float = 8.0,
    caches: dict[str, int] | None = None,
    **extra: Any,
) -> list[dict[str, Any]]:
    """Parameter dicts for a STREAM working-set sweep from inside L1 to ``hi_factor`` x LLC.

    The working set is the bytes all arrays of ``op`` occupy
    (``arrays * n * itemsize``); sizes are geometric with
    ``points_per_octave`` points per doubling, from ``lo_bytes`` (default half
    the L1d) to at least ``hi_factor`` (default 8) times the last-level cache,
    both read from :func:`hwcore.fingerprint.cache_sizes`. Each dict also
    carries ``working_set_bytes`` for labelling; pass ``[{k: v for k, v in d.items()
    if k != "working_set_bytes"} ...]`` or use :func:`sweep_params` to drop it.
    """
    from hwcore.errors import InputError, choices_error
    from hwcore.fingerprint import cache_sizes

    if op not in OPS:
        raise choices_error("working_set_sweep.op", op, OPS)
    if points_per_octave < 1 or hi_factor <= 0:
        raise InputError("working_set_sweep: points_per_octave must be >= 1 and hi_factor > 0")
    sizes = caches if caches is not None else cache_sizes()
    l1 = sizes.get("L1d", 32 * 2**10)
    llc = max(sizes.values()) if sizes else 32 * 2**20
    lo = lo_bytes if lo_bytes is not None else l1 // 2
    hi = hi_factor * llc
    arrays, elt = OPS[op][0], U.DTYPE_BYTES[dtype]
    out, seen = [], set()
    steps = math.ceil(math.log2(hi / lo) * points_per_octave)
    for i in range(steps + 1):
        ws = lo * 2 ** (i / points_per_octave)
        n = max(64, int(round(ws / (arrays * elt) / 64)) * 64)  # whole 64-element (cache-line multiple) blocks
        if n in seen:
            continue
        seen.add(n)
        out.append({"n": n, "dtype": dtype, **extra, "working_set_bytes": arrays * n * elt})
    return out


def sweep_params(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``working_set_sweep`` output without the label key (ready for ``registry.sweep``)."""
    return [{k: v for k, v in d.items() if k != "working_set_bytes"} for d in points]
