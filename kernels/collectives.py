"""torch.distributed collectives: ``all_reduce``, ``all_gather``, ``reduce_scatter``, ``broadcast``.

The kernel launches its own ``world_size`` processes (``python -m
kernels._collective_worker``) on loopback with a free port: gloo on CPU, NCCL
on CUDA (one GPU per rank). One launch serves a whole sweep of sizes.

Sizes follow nccl-tests: ``size_bytes`` is the total message (the full
all_reduce / broadcast buffer, the all_gather *output*, the reduce_scatter
*input*; each rank holds ``size/world`` of the latter two). Bandwidths are
nccl-tests' definitions (``doc/PERFORMANCE.md``,
https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md):

* ``algbw = size / time``;
* ``busbw = algbw * factor``, the per-rank bus traffic that a ring
  implementation needs, comparable to the link's peak: all_reduce
  ``2 (n-1) / n`` (a reduce-scatter then an all-gather, each moving
  ``(n-1)/n`` of the data), all_gather and reduce_scatter ``(n-1) / n``,
  broadcast ``1``.

``bytes`` is therefore ``size * factor`` (so ``bytes_per_s`` is busbw) and
``flops`` the per-rank additions of a ring reduction, ``(n-1)/n * count``
for all_reduce and reduce_scatter (0 for the others). Times are per
iteration, host clock closed by a device sync, maximum over ranks; at small
sizes the median is the collective's latency. Worker processes run with one
intra-op thread each (two gloo ranks on two cores must not oversubscribe).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from hwcore.errors import InputError, OutOfMemory
from hwcore.timing import from_times
from hwmodels import dtypes
from kernels import _util as U
from kernels.registry import Kernel, KernelCheckError, KernelResult, Param, make_result, register

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")
DTYPES = dtypes.FLOAT_DTYPES
REPO = Path(__file__).resolve().parent.parent


def bus_factor(op: str, world: int) -> float:
    """nccl-tests' busbw / algbw factor for ``op`` on ``world`` ranks (PERFORMANCE.md)."""
    n = world
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter"):
        return (n - 1) / n
    if op == "broadcast":
        return 1.0
    from hwcore.errors import choices_error

    raise choices_error("collective.op", op, OPS)


def algbw(size_bytes: float, seconds: float) -> float:
    return size_bytes / seconds


def busbw(op: str, size_bytes: float, seconds: float, world: int) -> float:
    return algbw(size_bytes, seconds) * bus_factor(op, world)


def count_of(p: dict[str, Any]) -> int:
    """Elements of the total message, rounded down to a multiple of world_size (at least world_size)."""
    elt = U.DTYPE_BYTES[p["dtype"]]
    w = p["world_size"]
    return max(w, (p["size_bytes"] // elt) // w * w)


def _bytes(op: str, p: dict[str, Any]) -> float:
    return count_of(p) * U.DTYPE_BYTES[p["dtype"]] * bus_factor(op, p["world_size"])


def _flops(op: str, p: dict[str, Any]) -> float:
    if op in ("all_reduce", "reduce_scatter"):
        return (p["world_size"] - 1) / p["world_size"] * count_of(p)
    return 0.0


def _memory(p: dict[str, Any]) -> float:
    # every rank on this host holds the input and the output (<= 2 full messages)
    return p["world_size"] * 2.0 * count_of(p) * U.DTYPE_BYTES[p["dtype"]]


def _backend(p: dict[str, Any], device: str) -> str:
    if p["backend"] != "auto":
        return p["backend"]
    return "nccl" if device.startswith("cuda") else "gloo"


def _supports(p: dict[str, Any], device: str) -> tuple[str, str] | None:
    import torch.distributed as dist

    be = _backend(p, device)
    if be == "nccl":
        if not device.startswith("cuda"):
            return "backend", "NCCL needs CUDA tensors (use --device cuda, or backend=gloo)"
        if not dist.is_nccl_available():
            return "backend", "this torch build has no NCCL"
        import torch

        if p["world_size"] > torch.cuda.device_count():
            return "world_size", f"NCCL needs one GPU per rank; {torch.cuda.device_count()} present"
    if be == "gloo":
        if not dist.is_gloo_available():
            return "backend", "this torch build has no gloo"
        if device.startswith("cuda"):
            return "backend", "gloo collectives are benchmarked on CPU tensors only (use backend=nccl)"
        if dtypes.get(p["dtype"]).low_precision and p["op_reduces"]:
            return "dtype", "gloo reductions are benchmarked for fp32/fp64 only"
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch(items: list[dict[str, Any]], *, world: int, backend: str, device: str, measure_s: float,
           timeout_s: float, check: bool = True, warmup: int = 5, min_reps: int = 5, max_reps: int = 1000
           ) -> list[dict[str, Any]]:
    """Run ``items`` (``{"op", "dtype", "count"}``) on ``world`` fresh ranks; rank 0's per-item results."""
    with tempfile.TemporaryDirectory(prefix="hweval-coll-") as tmp:
        out = os.path.join(tmp, "results.json")
        cfg = {"items": items, "backend": backend, "device": device, "measure_s": measure_s, "warmup": warmup,
               "min_reps": min_reps, "max_reps": max_reps, "out": out, "check": check, "threads": 1}
        cfg_path = os.path.join(tmp, "config.json")
        Path(cfg_path).write_text(json.dumps(cfg))
        port = free_port()
        procs = []
        logs = []
        for rank in range(world):
            env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=str(port), LOCAL_RANK=str(rank), OMP_NUM_THREADS="1")
            env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
            log = open(os.path.join(tmp, f"rank{rank}.log"), "w+")
            logs.append(log)
            procs.append(subprocess.Popen([sys.executable, "-m", "kernels._collective_worker", cfg_path],
                                          env=env, stdout=log, stderr=subprocess.STDOUT, cwd=str(REPO)))
        timed_out = False
        try:
            for pr in procs:
                pr.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            for pr in procs:
                if pr.poll() is None:
                    pr.kill()
                    pr.wait()
        results = json.loads(Path(out).read_text()) if os.path.exists(out) else []
        if timed_out or len(results) < len(items):
            tail = ""
            for log in logs:
                log.seek(0)
                text = log.read().strip().splitlines()
                if text:
                    tail = text[-1][:200]
            reason = f"timed out after {timeout_s:.0f} s" if timed_out else "a rank exited early"
            status = "timeout" if timed_out else "failed"
            for _ in range(len(items) - len(results)):
                results.append({"status": status, "error": f"collective ranks: {reason} ({tail})"})
        for log in logs:
            log.close()
        return results


def _runner(kernel: Kernel, plist: list[dict[str, Any]], *, device: str, warmup_ms: float, measure_ms: float,
            do_check: bool) -> list[KernelResult]:
    op = kernel.name
    groups: dict[tuple[int, str, float], list[int]] = {}
    for i, p in enumerate(plist):
        groups.setdefault((p["world_size"], _backend(p, device), p["timeout_s"]), []).append(i)
    out: list[KernelResult | None] = [None] * len(plist)
    for (world, backend, timeout_s), idx in groups.items():
        from kernels.registry import check_fits

        run_idx = []
        for i in idx:
            try:
                check_fits(kernel, plist[i], "cpu" if backend == "gloo" else device)
                run_idx.append(i)
            except OutOfMemory as exc:  # the estimated footprint does not fit: recorded as oom, the rest run
                out[i] = make_result(kernel, plist[i], device, status="oom", error=str(exc))
        items = [{"op": op, "dtype": plist[i]["dtype"], "count": count_of(plist[i])} for i in run_idx]
        res = launch(items, world=world, backend=backend, device=device, measure_s=measure_ms / 1e3,
                     timeout_s=timeout_s, check=do_check) if items else []
        for i, r in zip(run_idx, res, strict=True):
            p = plist[i]
            if r["status"] == "failed" and "expected" in (r.get("error") or ""):
                raise KernelCheckError(f"{op} {p}: {r['error']}")
            if r["status"] != "ok":
                out[i] = make_result(kernel, p, device, status=r["status"], error=r.get("error"))
                continue
            m = from_times(r["times_s"], label=op, clock="perf_counter(max over ranks)", warmup_n=r["warmup_n"],
                           metadata={"backend": backend, "world_size": world, "count": count_of(p)})
            size = count_of(p) * U.DTYPE_BYTES[p["dtype"]]
            extra = {"algbw_Bps": algbw(size, m.median_s), "busbw_Bps": busbw(op, size, m.median_s, world),
                     "bus_factor": bus_factor(op, world), "size_bytes_actual": size, "backend": backend,
                     "latency_s": m.median_s}
            out[i] = make_result(kernel, p, device, measurement=m, extra=extra)
    return [r for r in out if r is not None]


def _check(p: dict[str, Any]) -> None:
    if p["world_size"] < 1:
        raise InputError("collective.world_size: must be >= 1")


def _params(op: str) -> tuple[Param, ...]:
    return (
        Param(name="size_bytes", type=int, default=1 << 20, min=1,
              help="total message bytes, nccl-tests convention (accepts KiB/MiB/GiB)"),
        Param(name="world_size", type=int, default=2, min=1, max=64, help="ranks (processes) to launch"),
        Param(name="dtype", type=str, default="fp32", choices=DTYPES),
        Param(name="backend", type=str, default="auto", choices=("auto", "gloo", "nccl"),
              help="auto: gloo on cpu, nccl on cuda"),
        Param(name="timeout_s", type=float, default=300.0, min=1.0, help="kill the ranks after this long"),
    )


for _op in OPS:
    register(
        Kernel(
            name=_op,
            family="collective",
            kind="collective",
            help=f"torch.distributed {_op}; algbw and busbw (nccl-tests definitions)",
            params=_params(_op),
            flops=lambda p, op=_op: _flops(op, p),
            bytes=lambda p, op=_op: _bytes(op, p),
            runner=_runner,
            memory_bytes=_memory,
            supports=lambda p, d, op=_op: _supports({**p, "op_reduces": op in ("all_reduce", "reduce_scatter")}, d),
            check_params=_check,
            module=__name__,
        )
    )


def message_sizes(lo: int = 1 << 10, hi: int = 256 << 20, factor: int = 2) -> list[int]:
    """Message sizes ``lo, lo*factor, ... <= hi`` (default 1 KiB .. 256 MiB, doubling, as nccl-tests -f 2)."""
    if lo < 1 or hi < lo or factor < 2:
        raise InputError("message_sizes: need 1 <= lo <= hi and factor >= 2")
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= factor
    return out
