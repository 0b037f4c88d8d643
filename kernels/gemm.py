"""Dense GEMM ``C[m,n] = A[m,k] @ B[k,n]`` in torch and JAX, and a max-achievable search.

FLOPs: each of the ``m*n`` outputs is a length-``k`` dot product, ``k``
multiplies and ``k`` adds (``k-1`` strictly, plus the accumulate into a zero
start), hence ``2*m*n*k`` -- the convention of cuBLAS, mamf-finder and every
vendor peak figure. Bytes: the compulsory traffic, A and B read once and C
written once, ``(m*k + k*n)*in_bytes + m*n*out_bytes`` (fp8 GEMMs write bf16).
Actual traffic is higher when tiles are re-read; intensity computed from the
compulsory bytes is the roofline's upper bound for this shape.

Method: inputs are fresh N(0,1) values per rotation buffer (never zeros), C is
preallocated (``out=``, no allocation in the timed region); on CUDA each
sample is preceded by a write over 2x the device L2 and timed with CUDA
events (``flush=auto``; see :func:`flush_enabled` for why CPU samples are warm); fp32 means IEEE fp32 (TF32 explicitly off), ``tf32`` turns the TF32
tensor-core mode on only for the measurement. The check compares up to 128
rows of C against an fp64 product of the same (already rounded) inputs.

``gemm_max`` follows the "maximum achievable matmul FLOPS" approach
(mamf-finder, Stas Bekman's ml-engineering): search shapes, report the best
rate found, never the datasheet's.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hwcore.errors import InputError, OutOfMemory
from hwmodels import dtypes
from kernels import _util as U
from kernels.registry import (
    Kernel,
    KernelResult,
    Param,
    Setup,
    check_fits,
    get,
    make_result,
    register,
    time_kernel,
    validate_params,
)

DTYPES = dtypes.KERNEL_DTYPES
#: numpy = the BLAS numpy links (OpenBLAS in the wheels), fp64/fp32 on CPU; on an AMD CPU torch's MKL
#: and numpy's OpenBLAS differ by ~10% at fp32 (benchmarks/README.md), so both are worth measuring
FRAMEWORKS = ("torch", "jax", "numpy")
#: rows of C compared with the fp64 reference (all rows when m is smaller)
CHECK_ROWS = 128


def out_bytes_per_elt(dtype: str) -> int:
    """Bytes per element of C: the scaled fp8 GEMM writes bf16 (``out_dtype=torch.bfloat16``)."""
    return U.DTYPE_BYTES["bf16" if dtypes.get(dtype).family == "fp8" else dtype]


def gemm_flops(p: dict[str, Any]) -> float:
    # 2 FLOPs (multiply + add) per term of each of the m*n length-k dot products
    return 2.0 * p["m"] * p["n"] * p["k"]


def gemm_bytes(p: dict[str, Any]) -> float:
    # compulsory traffic: read A (m*k) and B (k*n), write C (m*n)
    e = U.DTYPE_BYTES[p["dtype"]]
    return float((p["m"] * p["k"] + p["k"] * p["n"]) * e + p["m"] * p["n"] * out_bytes_per_elt(p["dtype"]))


def gemm_memory(p: dict[str, Any]) -> float:
    # rotation copies of A, B, C + the fp64 reference of up to CHECK_ROWS rows (A rows, all of B, C rows)
    rows = min(p["m"], CHECK_ROWS)
    ref = 8.0 * (rows * p["k"] + p["k"] * p["n"] + rows * p["n"])
    return p.get("rotation", 1) * gemm_bytes(p) + ref


def gemm_supports(p: dict[str, Any], device: str) -> tuple[str, str] | None:
    dtype, fw = p["dtype"], p["framework"]
    if fw == "numpy":
        if device.startswith("cuda"):
            return "framework", "numpy runs on the host only"
        if dtype not in ("fp64", "fp32"):
            return "dtype", "numpy has BLAS GEMM for fp64/fp32 only (no bf16/fp16/fp8 fast path)"
        return None
    if fw == "jax":
        if dtype.startswith("fp8"):
            return "dtype", "fp8 GEMM is benchmarked with torch._scaled_mm only (use framework=torch)"
        if dtype == "fp64":
            import jax

            if not jax.config.jax_enable_x64:
                return "dtype", "JAX computes fp64 only with jax_enable_x64=True (set JAX_ENABLE_X64=1)"
        if dtype == "tf32" and not device.startswith("cuda"):
            return "dtype", "TF32 is a CUDA tensor-core math mode; a CPU has none"
        if device.startswith("cuda"):
            try:
                import jax

                jax.devices("gpu")
            except RuntimeError:
                return "framework", "this JAX install has no GPU backend"
        return None
    reason = U.torch_dtype_reason(dtype, device)
    if reason:
        return "dtype", reason
    if dtype.startswith("fp8") and any(p[d] % 16 for d in ("m", "n", "k")):
        return "m", "fp8 GEMM (torch._scaled_mm) needs m, n and k to be multiples of 16"
    return None


def _set_tf32(on: bool) -> None:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = on


def _torch_mm(a, b, c):
    import torch

    return torch.mm(a, b, out=c)


def _torch_scaled_mm(a, b, sa, sb):
    import torch

    return torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)


class _JaxFlusher:
    """Writes a buffer of 2x the GPU's L2 through XLA so JAX's stream sees the flush."""

    def __init__(self, nbytes: int, dev) -> None:
        import jax
        import jax.numpy as jnp

        self._buf = jax.device_put(jnp.zeros(nbytes // 4, jnp.float32), dev)
        self._f = jax.jit(lambda x: x + 1.0)

    def __call__(self) -> None:
        self._buf = self._f(self._buf)
        self._buf.block_until_ready()


def flush_enabled(p: dict[str, Any], device: str) -> bool:
    """``flush=auto``: flush the L2 before each sample on CUDA (triton.do_bench), not on CPU.

    On CPU a 2x-LLC write between samples also lets the BLAS thread pool fall
    asleep, so a small GEMM would be timed with a thread wake-up (measured
    here: 128x128x64 fp32 took 19 us warm, 447 us after a flush); between
    consecutive layers of a real step the operands are warm, so CPU samples
    are warm unless ``flush=on``.
    """
    return p["flush"] == "on" or (p["flush"] == "auto" and device.startswith("cuda"))


def _flusher(p: dict[str, Any], device: str):
    if not flush_enabled(p, device):
        return None
    from hwcore.timing import CacheFlusher

    if p["framework"] == "jax" and device.startswith("cuda"):
        import torch

        l2 = int(getattr(torch.cuda.get_device_properties(torch.device(device)), "L2_cache_size", 0) or 50 * 2**20)
        return _JaxFlusher(2 * l2, U.jax_device(device))
    return CacheFlusher(device)


def build_gemm(p: dict[str, Any], device: str) -> Setup:
    m, n, k, dtype = p["m"], p["n"], p["k"], p["dtype"]
    rows = np.arange(min(m, CHECK_ROWS)) * max(1, m // CHECK_ROWS)
    seed = p["seed"]
    if p["framework"] == "jax":
        return _build_jax(p, device, rows)
    if p["framework"] == "numpy":
        return _build_numpy(p, rows)
    import torch

    sets = []
    for r in range(p["rotation"]):
        if dtype.startswith("fp8"):
            a = U.randn((m, k), dtype, device, seed + 2 * r)
            # _scaled_mm wants B column-major: make it (n, k) row-major and transpose the view
            b = U.randn((n, k), dtype, device, seed + 2 * r + 1).t()
            one = torch.ones((), dtype=torch.float32, device=device)
            sets.append((a, b, one, one))
        else:
            a = U.randn((m, k), dtype, device, seed + 2 * r)
            b = U.randn((k, n), dtype, device, seed + 2 * r + 1)
            c = torch.empty((m, n), dtype=U.torch_dtype(dtype), device=device)
            sets.append((a, b, c))
    fn = _torch_scaled_mm if dtype.startswith("fp8") else _torch_mm
    idx = torch.as_tensor(rows, device=device)
    a0, b0 = sets[0][0], sets[0][1]

    def reference():
        # via fp32 on the device (exact for every input dtype; fp8 tensors lack index_select)
        return U.to_f64(a0.to(torch.float32).index_select(0, idx)) @ U.to_f64(b0.to(torch.float32))

    cuda = device.startswith("cuda")
    prev_tf32 = torch.backends.cuda.matmul.allow_tf32 if cuda else None
    enter = (lambda: _set_tf32(dtype == "tf32")) if cuda else (lambda: None)
    cleanup = (lambda: _set_tf32(bool(prev_tf32))) if cuda else (lambda: None)
    enter()
    return Setup(
        fn=fn,
        inputs=sets,
        reference=reference,
        output=lambda c: c.index_select(0, idx),
        tolerance=U.TOLERANCE[dtype],
        sync="cuda" if cuda else "none",
        flusher=_flusher(p, device),
        enter=enter,
        cleanup=cleanup,
        metadata={"impl": "torch._scaled_mm" if dtype.startswith("fp8") else "torch.mm(out=)",
                  "tf32": dtype == "tf32", "threads": torch.get_num_threads()},
    )


def _numpy_mm(a, b, c):
    return np.matmul(a, b, out=c)


def _build_numpy(p: dict[str, Any], rows: np.ndarray) -> Setup:
    m, n, k = p["m"], p["n"], p["k"]
    npdt = getattr(np, dtypes.get(p["dtype"]).numpy)  # fp64 or fp32 (supports() refuses the rest)
    sets = []
    for r in range(p["rotation"]):
        a = U.randn((m, k), "fp32", "cpu", p["seed"] + 2 * r).numpy().astype(npdt)
        b = U.randn((k, n), "fp32", "cpu", p["seed"] + 2 * r + 1).numpy().astype(npdt)
        sets.append((a, b, np.empty((m, n), dtype=npdt)))
    a0, b0 = sets[0][0], sets[0][1]
    return Setup(fn=_numpy_mm, inputs=sets, reference=lambda: a0[rows].astype(np.float64) @ b0.astype(np.float64),
                 output=lambda c: c[rows], tolerance=U.TOLERANCE[p["dtype"]], sync="none",
                 flusher=_flusher(p, "cpu"), metadata={"impl": "numpy.matmul(out=)"})


def _build_jax(p: dict[str, Any], device: str, rows: np.ndarray) -> Setup:
    import jax
    import jax.numpy as jnp

    m, n, k, dtype = p["m"], p["n"], p["k"], p["dtype"]
    dev = U.jax_device(device)
    jdt = U.jax_dtype(dtype)
    # "float32" = full fp32 passes, "tensorfloat32" = TF32 tensor cores (jax.lax.Precision aliases)
    precision = "tensorfloat32" if dtype == "tf32" else ("float32" if dtype in ("fp32", "fp64") else None)
    f = jax.jit(lambda a, b: jnp.matmul(a, b, precision=precision))
    sets = []
    for r in range(p["rotation"]):
        # the same values torch would draw for this seed, so the two frameworks can be compared
        a = U.randn((m, k), "fp32", "cpu", p["seed"] + 2 * r).numpy()
        b = U.randn((k, n), "fp32", "cpu", p["seed"] + 2 * r + 1).numpy()
        sets.append((jax.device_put(jnp.asarray(a, dtype=jdt), dev), jax.device_put(jnp.asarray(b, dtype=jdt), dev)))
    a0, b0 = sets[0]
    jrows = jnp.asarray(rows)

    def reference():
        return U.to_f64(np.asarray(a0)[rows]) @ U.to_f64(np.asarray(b0))

    return Setup(
        fn=f,
        inputs=sets,
        reference=reference,
        output=lambda c: np.asarray(c[jrows]),
        tolerance=U.TOLERANCE[dtype],
        sync="jax",
        flusher=_flusher(p, device),
        cuda_events=False,
        metadata={"impl": f"jax.jit(jnp.matmul, precision={precision})", "jax_device": str(dev)},
    )


def _gemm_check(p: dict[str, Any]) -> None:
    if p["rotation"] < 1:
        raise InputError("gemm.rotation: must be >= 1")


GEMM_PARAMS = (
    Param(name="m", type=int, default=1024, min=1, help="rows of A and C"),
    Param(name="n", type=int, default=1024, min=1, help="columns of B and C"),
    Param(name="k", type=int, default=1024, min=1, help="inner dimension"),
    Param(name="dtype", type=str, default="fp32", choices=DTYPES, help="input dtype (tf32 = fp32 storage, TF32 math)"),
    Param(name="framework", type=str, default="torch", choices=FRAMEWORKS),
    Param(name="flush", type=str, default="auto", choices=("auto", "on", "off"),
          help="evict caches (2x LLC / L2) before each sample; auto = on for cuda, off for cpu"),
    Param(name="rotation", type=int, default=1, min=1, max=64, help="input buffer sets cycled through"),
    Param(name="seed", type=int, default=0, min=0),
)

register(
    Kernel(
        name="gemm",
        family="gemm",
        help="C = A @ B; 2mnk FLOPs, compulsory bytes",
        params=GEMM_PARAMS,
        flops=gemm_flops,
        bytes=gemm_bytes,
        build=build_gemm,
        frameworks=FRAMEWORKS,
        memory_bytes=gemm_memory,
        supports=gemm_supports,
        check_params=_gemm_check,
        module=__name__,
    )
)


# ---------------------------------------------------------------------------------
# shape helpers
# ---------------------------------------------------------------------------------
def square_shapes(sizes=(256, 512, 1024, 2048, 4096)) -> list[dict[str, int]]:
    return [{"m": s, "n": s, "k": s} for s in sizes]


def transformer_shapes(hidden: int = 4096, tokens: int = 4096, ffn_mult: int = 4) -> list[dict[str, Any]]:
    """The GEMMs of one GPT-style transformer block's forward pass (Megatron-LM layout).

    ``tokens`` = micro-batch x sequence length (the M of every projection);
    QKV projection h -> 3h, attention output h -> h, MLP up h -> ffn_mult*h,
    MLP down ffn_mult*h -> h (Narayanan et al. 2021, "Efficient Large-Scale
    Language Model Training on GPU Clusters", sec. 3 / appendix FLOP count).
    """
    f = ffn_mult * hidden
    shapes = [
        {"name": "qkv_proj", "m": tokens, "n": 3 * hidden, "k": hidden},
        {"name": "attn_out", "m": tokens, "n": hidden, "k": hidden},
        {"name": "mlp_up", "m": tokens, "n": f, "k": hidden},
        {"name": "mlp_down", "m": tokens, "n": hidden, "k": f},
    ]
    # (the per-head attention-score GEMMs are batched: see the attention kernel)
    return shapes


def shape_sweep(kind: str = "square", **kw: Any) -> list[dict[str, Any]]:
    """Parameter dicts for :func:`kernels.registry.sweep` over GEMM shapes.

    ``kind="square"`` (``sizes=...``) or ``"transformer"`` (``hidden``,
    ``tokens``, ``ffn_mult``); extra keyword arguments (``dtype``,
    ``framework``, ...) are added to every dict. The transformer shapes' names
    are dropped from the params (GEMM does not take one); use
    :func:`transformer_shapes` to label results.
    """
    extra = {k: v for k, v in kw.items() if k not in ("sizes", "hidden", "tokens", "ffn_mult")}
    if kind == "square":
        shapes = square_shapes(kw.get("sizes", (256, 512, 1024, 2048, 4096)))
    elif kind == "transformer":
        shapes = transformer_shapes(kw.get("hidden", 4096), kw.get("tokens", 4096), kw.get("ffn_mult", 4))
    else:
        from hwcore.errors import choices_error

        raise choices_error("shape_sweep.kind", kind, ("square", "transformer"))
    return [{**{d: s[d] for d in ("m", "n", "k")}, **extra} for s in shapes]


# ---------------------------------------------------------------------------------
# maximum achievable FLOP/s
# ---------------------------------------------------------------------------------
def search_candidates(p: dict[str, Any], device: str) -> list[tuple[int, int, int]]:
    """Square sizes ``min_dim..max_dim`` by ``step`` (``max_dim=0``: 2048 on cpu, 16384 on cuda)."""
    hi = p["max_dim"] or (16384 if device.startswith("cuda") else 2048)
    lo, step = p["min_dim"], p["step"]
    if lo > hi:
        raise InputError(f"gemm_max.min_dim: {lo} is larger than max_dim {hi}")
    return [(s, s, s) for s in range(lo, hi + 1, step)]


def _refine(best: tuple[int, int, int], lo: int, hi: int, step: int) -> list[tuple[int, int, int]]:
    """Rectangular neighbours of the best square: each of m, n, k in {s - step, s, s + step, 2s}."""
    s = best[0]
    vals = sorted({v for v in (s - step, s, s + step, 2 * s) if lo <= v <= hi})
    return [(m, n, k) for m in vals for n in vals for k in vals if (m, n, k) != best]


def _gemm_max_runner(kernel: Kernel, plist: list[dict[str, Any]], *, device: str, warmup_ms: float,
                     measure_ms: float, do_check: bool) -> list[KernelResult]:
    return [_gemm_max_one(kernel, p, device, warmup_ms, measure_ms, do_check) for p in plist]


def _gemm_max_one(kernel: Kernel, p: dict[str, Any], device: str, warmup_ms: float, measure_ms: float,
                  do_check: bool) -> KernelResult:
    g = get("gemm")
    base = {"dtype": p["dtype"], "framework": p["framework"], "flush": p["flush"]}
    tried: list[list[Any]] = []

    def measure(shape: tuple[int, int, int], budget_ms: float, chk: bool) -> KernelResult | None:
        q = validate_params("gemm", {**base, "m": shape[0], "n": shape[1], "k": shape[2]}, device=device)
        try:
            check_fits(g, q, device)
        except OutOfMemory:  # a shape that does not fit is not a candidate (recorded in `tried`)
            tried.append([*shape, None, "oom"])
            return None
        r = time_kernel(g, q, device, warmup_ms=min(warmup_ms, budget_ms), measure_ms=budget_ms, do_check=chk)
        tried.append([*shape, r.flops_per_s, r.status])
        return r if r.ok else None

    cands = search_candidates(p, device)
    lo, hi = p["min_dim"], max(c[0] for c in cands)
    first = True
    results: dict[tuple[int, int, int], KernelResult] = {}
    for shape in cands:
        r = measure(shape, p["search_ms"], do_check and first)  # check the kernel once, on the first shape
        first = False
        if r is not None:
            results[shape] = r
    if not results:
        return make_result(kernel, p, device, status="oom", error="gemm_max: no candidate shape fits in memory")
    best = max(results, key=lambda s: results[s].flops_per_s or 0.0)
    if p["refine"]:
        for shape in _refine(best, lo, hi, p["step"]):
            r = measure(shape, p["search_ms"], False)
            if r is not None:
                results[shape] = r
        best = max(results, key=lambda s: results[s].flops_per_s or 0.0)
    # re-measure the winner with the full budget and its correctness check
    final = measure(best, measure_ms, do_check)
    if final is None:
        return make_result(kernel, p, device, status="oom", error=f"gemm_max: best shape {best} failed on re-measure")
    q = {**p, "m": best[0], "n": best[1], "k": best[2]}
    extra = {"best_m": best[0], "best_n": best[1], "best_k": best[2], "candidates": len(tried),
             "search_best_flops_per_s": results[best].flops_per_s, "search": tried}
    return make_result(kernel, q, device, measurement=final.measurement, flops=final.flops, bytes=final.bytes,
                       extra=extra, started_at=final.started_at, finished_at=final.finished_at)


def _gemm_max_check(p: dict[str, Any]) -> None:
    if p["max_dim"] and p["min_dim"] > p["max_dim"]:
        raise InputError(f"gemm_max.min_dim: {p['min_dim']} is larger than max_dim {p['max_dim']}")


def _gemm_max_supports(p: dict[str, Any], device: str) -> tuple[str, str] | None:
    q = {"m": 16 * math.ceil(p["min_dim"] / 16), "n": 16 * math.ceil(p["min_dim"] / 16),
         "k": 16 * math.ceil(p["min_dim"] / 16), **{k: p[k] for k in ("dtype", "framework")}}
    return gemm_supports(q, device)


register(
    Kernel(
        name="gemm_max",
        family="gemm",
        help="max-achievable GEMM FLOP/s: search square shapes (+ rectangular neighbours), re-measure the best",
        params=(
            Param(name="dtype", type=str, default="fp32", choices=DTYPES),
            Param(name="framework", type=str, default="torch", choices=FRAMEWORKS),
            Param(name="min_dim", type=int, default=256, min=16),
            Param(name="max_dim", type=int, default=0, min=0, help="0 = auto (2048 on cpu, 16384 on cuda)"),
            Param(name="step", type=int, default=256, min=1),
            Param(name="refine", type=bool, default=True, help="also try rectangular neighbours of the best"),
            Param(name="search_ms", type=float, default=60.0, min=1.0, help="measure budget per candidate"),
            Param(name="flush", type=str, default="auto", choices=("auto", "on", "off")),
        ),
        runner=_gemm_max_runner,
        frameworks=FRAMEWORKS,
        supports=_gemm_max_supports,
        check_params=_gemm_max_check,
        module=__name__,
    )
)

__all__ = ["shape_sweep", "square_shapes", "transformer_shapes"]
