"""Fused row-wise softmax written in Triton, benchmarked against ``torch.softmax``.

One program per row (the layout of Triton's tutorial 02, "Fused Softmax"): the
row is loaded once into registers, reduced (max, then sum of exponentials) and
written once, so the kernel moves the minimum ``2 x rows x cols x itemsize``
bytes that any softmax must move. The maximum is subtracted before the
exponential (numerically stable for any finite input); columns past ``cols``
in the power-of-2 block are masked with ``-inf`` so they add ``exp(-inf) = 0``
to the sum. Arithmetic is in fp32 whatever the storage dtype.

Where it runs:

* on CUDA tensors, the compiled Triton kernel;
* on CPU tensors, Triton's interpreter, which exists only when the process
  imported triton with ``TRITON_INTERPRET=1`` in its environment (the
  interpreter replaces ``tl.*`` at import). This checks correctness on machines
  without a GPU; its times are not a kernel speed and are never reported as one.

``impl=torch`` runs ``torch.softmax`` on the same inputs so the two can be
compared side by side: ``hweval bench triton_softmax --set impl=torch``.
"""

from __future__ import annotations

import os
from typing import Any

from hwcore.errors import InputError
from hwmodels import dtypes

try:  # optional: the torch path and the accounting work without triton
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised where triton is absent
    triton = None
    tl = None

#: Widest row the single-block kernel takes: the row lives in registers, and
#: past 64 Ki fp32 values per program the tutorial's kernel spills to local
#: memory (``num_warps`` tops out at 16 warps x 32 lanes x 128 values).
MAX_COLS = 65536

IMPLS = ("triton", "torch")
#: rows of the output the registry's pre-timing check compares with fp64
CHECK_ROWS = 1024
DTYPES = tuple(d for d in dtypes.FLOAT_DTYPES if d != "fp64")  # fp32, bf16, fp16: the storage dtypes Triton loads

#: Tolerances of the correctness check against an fp64 reference: fp32 output
#: is rounded once from fp32 arithmetic (exp has ~2 ulp error, the sum of
#: ``cols`` terms ~log2(cols) ulp), bf16/fp16 outputs are rounded once to 8/11
#: significant bits (relative error <= 2^-8 / 2^-11), plus the input rounding.
TOLERANCES = {
    "fp32": {"atol": 1e-6, "rtol": 1e-5},
    "bf16": {"atol": 1e-3, "rtol": 1.6e-2},
    "fp16": {"atol": 1e-4, "rtol": 2e-3},
}


# ---------------------------------------------------------------------------------
# accounting
# ---------------------------------------------------------------------------------
def softmax_flops(rows: int, cols: int) -> int:
    """FLOPs of a numerically stable softmax over ``rows x cols``.

    Per element, counted from the kernel's operations: 1 compare (row max),
    1 subtract (x - max), 1 exp, 1 add (row sum), 1 divide = 5. The exp is
    counted as one operation, as the hardware's special-function unit issues
    it as one instruction (``ex2`` after a multiply folded into the subtract).
    """
    return 5 * rows * cols


def softmax_bytes(rows: int, cols: int, itemsize: int) -> int:
    """Minimum DRAM traffic: read the input once, write the output once.

    The same count Triton's tutorial 02 uses for its GB/s figure
    (``2 * x.numel() * x.element_size()``); an unfused softmax moves more.
    """
    return 2 * rows * cols * itemsize


# ---------------------------------------------------------------------------------
# the Triton kernel
# ---------------------------------------------------------------------------------
if triton is not None:

    @triton.jit
    def _softmax_kernel(
        out_ptr,
        in_ptr,
        in_row_stride,
        out_row_stride,
        n_cols,
        BLOCK_SIZE: tl.constexpr,
    ):
        # 64-bit row offset: rows x stride passes 2^31 elements at e.g. 32768 x 65536
        row = tl.program_id(0).to(tl.int64)
        offsets = tl.arange(0, BLOCK_SIZE)
        mask = offsets < n_cols
        x = tl.load(in_ptr + row * in_row_stride + offsets, mask=mask, other=-float("inf"))
        x = x.to(tl.float32)
        x = x - tl.max(x, axis=0)
        num = tl.exp(x)
        y = num / tl.sum(num, axis=0)
        tl.store(out_ptr + row * out_row_stride + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


def triton_available() -> tuple[bool, str | None]:
    """Whether the Triton kernel can run here, and why not when it cannot."""
    if triton is None:
        return False, "triton is not installed (pip install triton; it ships in the 'test' and 'gpu' extras)"
    return True, None


def interpreter_active() -> bool:
    """Whether triton was imported in interpreter mode (``TRITON_INTERPRET=1``)."""
    if triton is None:
        return False
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(_softmax_kernel, InterpretedFunction)


def num_warps_for(block_size: int) -> int:
    """Warps per program (Triton tutorial 02's heuristic: more warps for wider rows)."""
    if block_size >= 8192:
        return 16
    if block_size >= 2048:
        return 8
    return 4


def softmax_triton(x: Any, out: Any = None) -> Any:
    """Row-wise softmax of a 2-D tensor with the fused Triton kernel."""
    ok, why = triton_available()
    if not ok:
        raise InputError(f"impl: triton unavailable: {why}")
    if x.dim() != 2:
        raise InputError(f"x: softmax_triton takes a 2-D tensor, got {x.dim()}-D")
    rows, cols = x.shape
    if cols > MAX_COLS:
        raise InputError(f"cols: must be <= {MAX_COLS} for the single-block kernel, got {cols}")
    if x.device.type == "cpu" and not interpreter_active():
        raise InputError(
            "device: the Triton kernel on CPU needs triton's interpreter; "
            "set TRITON_INTERPRET=1 before the process imports triton, or use device=cuda"
        )
    if x.stride(1) != 1:
        x = x.contiguous()
    if out is None:
        out = x.new_empty(x.shape)
    block = triton.next_power_of_2(cols)
    _softmax_kernel[(rows,)](
        out, x, x.stride(0), out.stride(0), cols, BLOCK_SIZE=block, num_warps=num_warps_for(block)
    )
    return out


def softmax_torch(x: Any, out: Any = None) -> Any:
    """The torch equivalent: ``torch.softmax`` over the last dimension.

    The benchmark passes a preallocated ``out`` to both impls, so neither pays
    for an allocation in the timed region.
    """
    import torch

    if out is None:
        return torch.softmax(x, dim=-1)
    return torch.softmax(x, dim=-1, out=out)


def softmax_reference(x: Any) -> Any:
    """fp64 reference on the host (higher precision than any tested dtype)."""
    import torch

    return torch.softmax(x.detach().to("cpu", torch.float64), dim=-1)


def make_input(rows: int, cols: int, dtype: str, device: str = "cpu", *, seed: int = 0, scale: float = 4.0) -> Any:
    """Fresh random logits ``N(0, scale^2)`` (never zeros: a zero row is a trivial softmax)."""
    import torch

    if dtype not in DTYPES:
        from hwcore.errors import choices_error

        raise choices_error("dtype", dtype, DTYPES)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(rows, cols, generator=gen, dtype=torch.float32) * scale
    return x.to(device=device, dtype=getattr(torch, dtypes.get(dtype).torch))


def check(out: Any, x: Any, dtype: str) -> float:
    """Max abs error of ``out`` vs the fp64 reference; raises AssertionError past tolerance."""
    import torch

    ref = softmax_reference(x)
    got = out.detach().to("cpu", torch.float64)
    tol = TOLERANCES[dtype]
    err = (got - ref).abs()
    bound = tol["atol"] + tol["rtol"] * ref.abs()
    bad = err > bound
    if bool(bad.any()) or not bool(torch.isfinite(got).all()):
        idx = int(bad.flatten().nonzero()[0]) if bool(bad.any()) else -1
        raise AssertionError(
            f"softmax mismatch ({dtype}): max abs err {float(err.max()):.3g}, "
            f"{int(bad.sum())} of {bad.numel()} elements past atol={tol['atol']} rtol={tol['rtol']}"
            + (f" (first at flat index {idx})" if idx >= 0 else "; non-finite output")
        )
    return float(err.max())


IMPL_FUNCS = {"triton": softmax_triton, "torch": softmax_torch}


def self_check(device: str = "cpu") -> dict[str, Any]:
    """Correctness of both impls on awkward shapes; returns max errors per case.

    Cases: non-power-of-2 widths (masking), a single column, a row with huge
    logits (stability: a naive exp overflows to inf), a strided (sliced) input.
    """
    import torch

    results: dict[str, Any] = {"interpreter": interpreter_active(), "device": device, "cases": []}
    shapes = [(3, 1), (5, 7), (4, 100), (2, 129), (3, 1000)]
    for impl in IMPLS:
        for dtype in DTYPES:
            for rows, cols in shapes:
                x = make_input(rows, cols, dtype, device, seed=rows * 1000 + cols)
                err = check(IMPL_FUNCS[impl](x), x, dtype)
                results["cases"].append({"impl": impl, "dtype": dtype, "shape": [rows, cols], "max_abs_err": err})
    # stability: logits of magnitude 1e4 (exp overflows fp32 past ~88.7 without the max shift)
    big = make_input(4, 33, "fp32", device, seed=7, scale=1.0) * 1e4
    results["cases"].append(
        {"impl": "triton", "dtype": "fp32", "shape": [4, 33], "case": "large_logits",
         "max_abs_err": check(softmax_triton(big), big, "fp32")}
    )
    # a strided view: every other column of a wider tensor
    wide = make_input(3, 96, "fp32", device, seed=9)
    view = wide[:, ::2]
    results["cases"].append(
        {"impl": "triton", "dtype": "fp32", "shape": list(view.shape), "case": "strided",
         "max_abs_err": check(softmax_triton(view), view, "fp32")}
    )
    # rows sum to one
    x = make_input(6, 77, "fp32", device, seed=11)
    row_sums = softmax_triton(x).double().sum(dim=-1).cpu()
    results["max_row_sum_err"] = float((row_sums - 1).abs().max())
    if results["max_row_sum_err"] > 1e-5:
        raise AssertionError(f"softmax rows do not sum to 1: max |sum-1| = {results['max_row_sum_err']:.3g}")
    results["ok"] = True
    return results


def describe() -> dict[str, Any]:
    ok, why = triton_available()
    return {
        "triton_version": getattr(triton, "__version__", None),
        "available": ok,
        "reason": why,
        "interpreter": interpreter_active(),
        "TRITON_INTERPRET": os.environ.get("TRITON_INTERPRET"),
        "max_cols": MAX_COLS,
    }


# ---------------------------------------------------------------------------------
# the registry entry: hweval bench triton_softmax [--set impl=torch]
# ---------------------------------------------------------------------------------
from kernels.registry import Kernel, Param, Setup, register  # noqa: E402


def _flops(p: dict[str, Any]) -> float:
    return float(softmax_flops(p["rows"], p["cols"]))


def _bytes(p: dict[str, Any]) -> float:
    return float(softmax_bytes(p["rows"], p["cols"], dtypes.itemsize(p["dtype"])))


def _memory(p: dict[str, Any]) -> float:
    # device: rotation x (input + output); the fp32 staging copy of the input
    # is made on the host, as is the fp64 reference
    return float(p["rotation"] * 2 * p["rows"] * p["cols"] * dtypes.itemsize(p["dtype"]))


def _supports(p: dict[str, Any], device: str) -> tuple[str, str] | None:
    if p["impl"] != "triton":
        return None
    ok, why = triton_available()
    if not ok:
        return "impl", why or "triton unavailable"
    if not device.startswith("cuda") and not interpreter_active():
        return "impl", ("the Triton kernel needs a CUDA device, or triton's CPU interpreter "
                        "(TRITON_INTERPRET=1 set before the process imports triton; correctness only)")
    return None


def _check_params(p: dict[str, Any]) -> None:
    if p["cols"] > MAX_COLS and p["impl"] == "triton":
        raise InputError(f"triton_softmax.cols: must be <= {MAX_COLS} for the single-block kernel, got {p['cols']}")


def _flush_on(flush: str, device: str) -> bool:
    # the registry's convention (kernels.gemm): auto flushes on CUDA, where the
    # 50-60 MiB L2 would otherwise serve small inputs, and not on CPU
    return flush == "on" or (flush == "auto" and device.startswith("cuda"))


def _build(p: dict[str, Any], device: str) -> Setup:
    import torch

    from hwcore.timing import CacheFlusher

    rows, cols, dtype = p["rows"], p["cols"], p["dtype"]
    sets = []
    for r in range(p["rotation"]):
        x = make_input(rows, cols, dtype, device, seed=p["seed"] + r)
        sets.append((x, torch.empty_like(x)))
    x0 = sets[0][0]
    check_rows = min(rows, CHECK_ROWS)
    cuda = device.startswith("cuda")
    fn = IMPL_FUNCS[p["impl"]]
    interp = (not cuda) and p["impl"] == "triton"
    return Setup(
        fn=fn,
        inputs=sets,
        # rows are independent: the first CHECK_ROWS of the output vs fp64 (the full
        # 16384 x 4096 reference would cost seconds of host time per run)
        reference=lambda: softmax_reference(x0[:check_rows]),
        output=lambda o: o[:check_rows],
        # normalized max error (|out - ref|max / |ref|max) as every kernel check;
        # the stricter per-element atol/rtol check is check()/self_check()
        tolerance={"fp32": 1e-5, "bf16": 1e-2, "fp16": 2e-3}[dtype],
        sync="cuda" if cuda else "none",
        # a write over 2x the device L2 (2x LLC on CPU) before every sample
        flusher=CacheFlusher(device) if _flush_on(p["flush"], device) and not interp else None,
        metadata={
            "impl": "triton fused (1 program/row)" if p["impl"] == "triton" else "torch.softmax(out=)",
            "triton_version": getattr(triton, "__version__", None),
            "interpreter": interp,
            "block_size": (triton.next_power_of_2(cols) if triton is not None else None),
            "note": "Triton CPU interpreter: correctness only, not a kernel speed" if interp else None,
        },
    )


register(
    Kernel(
        name="triton_softmax",
        family="fused",
        help="row-wise softmax, fused Triton kernel vs torch.softmax (impl=); 5 FLOP/elt, 2 x rows x cols x itemsize B",
        params=(
            Param(name="rows", type=int, default=4096, min=1, help="rows (independent softmaxes)"),
            Param(name="cols", type=int, default=4096, min=1, max=2**24, help="row length (softmax width)"),
            Param(name="dtype", type=str, default="bf16", choices=DTYPES, help="storage dtype; math in fp32"),
            Param(name="impl", type=str, default="triton", choices=IMPLS, help="triton kernel or torch.softmax"),
            Param(name="flush", type=str, default="auto", choices=("auto", "on", "off"),
                  help="evict caches (2x LLC / L2) before each sample; auto = on for cuda, off for cpu"),
            Param(name="rotation", type=int, default=1, min=1, max=64, help="input buffer sets cycled through"),
            Param(name="seed", type=int, default=0, min=0),
        ),
        flops=_flops,
        bytes=_bytes,
        build=_build,
        frameworks=("torch", "triton"),
        memory_bytes=_memory,
        supports=_supports,
        check_params=_check_params,
        module=__name__,
    )
)


if __name__ == "__main__":  # python -m kernels.triton_softmax: the correctness self-check as JSON
    import argparse
    import json

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    a = p.parse_args()
    print(json.dumps({"describe": describe(), "self_check": self_check(a.device)}))
