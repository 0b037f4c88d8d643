"""Helpers shared by the kernel modules: dtypes, devices, inputs, tolerances.

Not a kernel module (the leading underscore keeps the registry's discovery
from importing it as one).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hwcore.errors import InputError
from hwmodels import dtypes

#: dtype names the kernels accept -> bytes per element (:mod:`hwmodels.dtypes`; tf32 is stored as fp32).
DTYPE_BYTES: dict[str, int] = {name: dtypes.itemsize(name) for name in dtypes.KERNEL_DTYPES}

#: Normalized max error |out - ref|_max / |ref|_max tolerated per dtype.
#: The reference is computed in fp64 from the *same* (already rounded) inputs,
#: so only output rounding and accumulation order count: one rounding of the
#: output costs at most 2^-(mantissa bits + 1) relative to the largest element
#: (fp32 2^-24, tf32 2^-11 on inputs inside the tensor core, bf16 2^-8,
#: fp16 2^-11, fp8 e4m3 2^-4 / e5m2 2^-3 of the bf16 output the scaled GEMM
#: writes) plus accumulation error; each bound below is ~10x the rounding term.
TOLERANCE: dict[str, float] = {
    "fp64": 1e-10,
    "fp32": 1e-4,
    "tf32": 1e-2,
    "bf16": 3e-2,
    "fp16": 1e-2,
    "fp8_e4m3": 1e-1,
    "fp8_e5m2": 1e-1,
}


def torch_dtype(name: str):
    """The torch dtype object of a kernel dtype name (tf32: torch.float32, the math mode is set apart)."""
    import torch

    if name not in DTYPE_BYTES:
        raise KeyError(name)
    dt = getattr(torch, dtypes.get(name).torch or "", None)
    if dt is None:
        raise InputError(f"dtype: {name!r} needs a torch build with float8 types")
    return dt


def jax_dtype(name: str):
    """The jax.numpy dtype of a kernel dtype name (KeyError for one JAX kernels do not take: fp8)."""
    import jax.numpy as jnp

    jname = dtypes.get(name).jax if name in DTYPE_BYTES else None
    if jname is None:
        raise KeyError(name)
    return getattr(jnp, jname)


# ---------------------------------------------------------------------------------
# devices
# ---------------------------------------------------------------------------------
def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def cuda_capability(device: str = "cuda") -> tuple[int, int] | None:
    if not device.startswith("cuda") or not cuda_available():
        return None
    import torch

    return tuple(torch.cuda.get_device_capability(torch.device(device)))  # type: ignore[return-value]


def cpu_flag(name: str) -> bool:
    from hwcore.fingerprint import fingerprint

    return bool(fingerprint().get("cpu_flags", {}).get(name))


def torch_dtype_reason(dtype: str, device: str) -> str | None:
    """Why ``dtype`` cannot run on ``device`` for torch (``None`` when it can)."""
    if device.startswith("cuda"):
        cap = cuda_capability(device)
        if cap is None:
            return "no CUDA device"
        if dtype == "tf32" and cap < (8, 0):
            return f"TF32 tensor cores need compute capability >= 8.0 (device has {cap[0]}.{cap[1]})"
        if dtype == "bf16" and cap < (8, 0):
            return f"bf16 tensor cores need compute capability >= 8.0 (device has {cap[0]}.{cap[1]})"
        if dtype.startswith("fp8") and cap < (8, 9):
            return f"fp8 tensor cores need compute capability >= 8.9 (device has {cap[0]}.{cap[1]})"
        return None
    if dtype == "tf32":
        return "TF32 is a CUDA tensor-core math mode; a CPU has none"
    if dtype.startswith("fp8"):
        return "fp8 matmul (torch._scaled_mm) is benchmarked on CUDA devices with capability >= 8.9 only"
    return None


def jax_device(device: str):
    """The JAX device for ``device`` (``cpu`` or ``cuda[:i]``)."""
    import jax

    if device.startswith("cuda"):
        try:
            gpus = jax.devices("gpu")
        except RuntimeError as exc:
            raise InputError(f"framework: jax has no GPU backend here ({str(exc).splitlines()[0]})") from exc
        idx = int(device.split(":")[1]) if ":" in device else 0
        return gpus[idx]
    return jax.devices("cpu")[0]


def free_memory_bytes(device: str) -> int:
    """Bytes that can still be allocated on ``device`` (host: available RAM)."""
    if device.startswith("cuda"):
        import torch

        free, _total = torch.cuda.mem_get_info(torch.device(device))
        return int(free)
    import psutil

    return int(psutil.virtual_memory().available)


# ---------------------------------------------------------------------------------
# inputs and checks
# ---------------------------------------------------------------------------------
def randn(shape: tuple[int, ...], dtype: str, device: str, seed: int):
    """Fresh N(0,1) values (never zeros: zeros can hit fast paths and flatter a GPU's power draw)."""
    import torch

    # drawn where they live: a CPU draw of a 16k x 16k GPU operand would take seconds per candidate shape
    gen_device = device if device.startswith("cuda") else "cpu"
    g = torch.Generator(device=gen_device).manual_seed(seed)
    t = torch.randn(shape, generator=g, dtype=torch.float32, device=gen_device)
    if dtype.startswith("fp8"):
        return t.to(torch_dtype(dtype))
    return t.to(dtype=torch_dtype(dtype))


def to_f64(x: Any) -> np.ndarray:
    """Any tensor / array as a float64 numpy array (via fp32 for types numpy lacks)."""
    try:
        import torch

        if isinstance(x, torch.Tensor):
            return x.detach().to("cpu").to(torch.float64).numpy()
    except ImportError:
        pass
    return np.asarray(np.asarray(x, dtype=np.float32) if _is_jax_lowp(x) else x, dtype=np.float64)


def _is_jax_lowp(x: Any) -> bool:
    d = dtypes.from_framework_name(str(getattr(x, "dtype", "")))
    return d is not None and d.low_precision and d.bits == 16  # bf16 / fp16: numpy has no bf16


def max_rel_error(out: Any, ref: Any) -> float:
    """``max |out - ref| / max |ref|`` (the normalized max error used by every check)."""
    o, r = to_f64(out), to_f64(ref)
    if o.shape != r.shape:
        return math.inf
    if not np.all(np.isfinite(o)):
        return math.inf
    scale = float(np.max(np.abs(r))) if r.size else 0.0
    err = float(np.max(np.abs(o - r))) if r.size else 0.0
    return err / scale if scale > 0 else err
