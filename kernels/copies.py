"""Host-device copies: ``h2d_copy`` (pinned vs pageable host memory, either direction).

Bytes = ``size_bytes`` (each byte crosses the link once); FLOPs = 0. Pinned
(page-locked) host buffers let the DMA engine copy directly and asynchronously
(``non_blocking=True``); pageable ones are staged through a driver bounce
buffer, which is the difference this kernel measures. Timed with CUDA events
around the copy on the current stream. Host data are fresh random bytes.
Without a CUDA device the kernel is skipped with that reason.
"""

from __future__ import annotations

from typing import Any

from kernels import _util as U
from kernels.registry import Kernel, Param, Setup, register

CHECK_BYTES = 1 << 20


def copy_bytes(p: dict[str, Any]) -> float:
    return float(p["size_bytes"])  # each byte crosses the host-device link once


def copy_supports(p: dict[str, Any], device: str) -> tuple[str, str] | None:
    if not device.startswith("cuda"):
        return "device", "h2d_copy measures host<->GPU copies and needs a CUDA device (run with --device cuda)"
    if not U.cuda_available():
        return "device", "no CUDA device is available"
    return None


def build_copy(p: dict[str, Any], device: str) -> Setup:
    import torch

    n = p["size_bytes"]
    g = torch.Generator().manual_seed(p["seed"])
    host = torch.randint(0, 256, (n,), dtype=torch.uint8, generator=g)
    if p["pinned"]:
        host = host.pin_memory()
    dev = torch.randint(0, 256, (n,), dtype=torch.uint8, generator=g).to(device)
    nb = bool(p["pinned"])
    r = min(n, CHECK_BYTES)
    if p["direction"] == "h2d":
        src, dst = host, dev
    else:
        src, dst = dev, host

    def fn(src, dst):
        return dst.copy_(src, non_blocking=nb)

    return Setup(fn=fn, inputs=[(src, dst)], reference=lambda: U.to_f64(src[:r]), output=lambda o: o[:r],
                 tolerance=0.0, sync="cuda", metadata={"pinned": nb, "direction": p["direction"]})


register(
    Kernel(
        name="h2d_copy",
        family="copy",
        help="host<->device copy bandwidth, pinned vs pageable host memory (CUDA only)",
        params=(
            Param(name="size_bytes", type=int, default=1 << 28, min=1, help="bytes per copy (accepts KiB/MiB/GiB)"),
            Param(name="pinned", type=bool, default=True, help="page-locked host buffer"),
            Param(name="direction", type=str, default="h2d", choices=("h2d", "d2h")),
            Param(name="seed", type=int, default=0, min=0),
        ),
        flops=lambda p: 0.0,
        bytes=copy_bytes,
        build=build_copy,
        memory_bytes=lambda p: float(p["size_bytes"]),  # device side only; the host buffer lives in host RAM
        supports=copy_supports,
        module=__name__,
    )
)
