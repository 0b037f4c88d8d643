"""One rank of a collective benchmark (launched by :mod:`kernels.collectives`).

``python -m kernels._collective_worker CONFIG.json`` with ``RANK``,
``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` in the environment. For each
size: a correctness check with known values, warm-up, an agreed repetition
count (the per-call estimate is max-reduced so every rank runs the same
number of iterations), then per-iteration host-clock times closed by a device
sync; the per-iteration time is the maximum over ranks (a collective is done
when its slowest rank is). Rank 0 writes the results JSON.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback


def _dtype(name: str):
    import torch

    from hwmodels import dtypes

    return getattr(torch, dtypes.get(name).torch)


def _op(op: str, inp, out, world: int):
    import torch.distributed as dist

    if op == "all_reduce":
        dist.all_reduce(inp)
    elif op == "all_gather":
        dist.all_gather_into_tensor(out, inp)
    elif op == "reduce_scatter":
        dist.reduce_scatter_tensor(out, inp)
    elif op == "broadcast":
        dist.broadcast(inp, src=0)
    else:  # pragma: no cover - validated by the parent
        raise ValueError(op)


def _buffers(op: str, count: int, world: int, dtype, device: str):
    """(input, output) for ``count`` elements of total message (nccl-tests' size convention)."""
    import torch

    per = count // world
    if op == "all_gather":
        return torch.empty(per, dtype=dtype, device=device), torch.empty(count, dtype=dtype, device=device)
    if op == "reduce_scatter":
        return torch.empty(count, dtype=dtype, device=device), torch.empty(per, dtype=dtype, device=device)
    return torch.empty(count, dtype=dtype, device=device), None


def _check(op: str, count: int, world: int, rank: int, dtype, device: str) -> str | None:
    """Run ``op`` on known values; an error message when the result is wrong."""
    import torch

    inp, out = _buffers(op, count, world, dtype, device)
    inp.fill_(rank + 1)
    _op(op, inp, out, world)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    tri = world * (world + 1) / 2
    if op == "all_reduce":
        got, want = inp, torch.full_like(inp, tri)
    elif op == "reduce_scatter":
        got, want = out, torch.full_like(out, tri)
    elif op == "broadcast":
        got, want = inp, torch.full_like(inp, 1)
    else:
        got = out
        want = torch.arange(1, world + 1, dtype=dtype, device=device).repeat_interleave(count // world)
    if not torch.equal(got, want):
        bad = (got != want).nonzero()[0].item()
        return f"{op}: rank {rank} element {bad} is {got[bad].item()}, expected {want[bad].item()}"
    return None


def main(path: str) -> int:
    import torch
    import torch.distributed as dist

    cfg = json.load(open(path))
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    device = cfg["device"]
    if device.startswith("cuda"):
        # the launcher's (torchrun/srun) local rank picks the GPU on a multi-node job
        local = int(os.environ.get("LOCAL_RANK", os.environ.get("SLURM_LOCALID", rank))) % torch.cuda.device_count()
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
    torch.set_num_threads(cfg.get("threads", 1))
    dist.init_process_group(cfg["backend"], rank=rank, world_size=world)
    results = []
    try:
        for item in cfg["items"]:
            op, dtype = item["op"], _dtype(item["dtype"])
            count = item["count"]
            err = _check(op, count, world, rank, dtype, device) if cfg.get("check", True) else None
            if err:
                results.append({"error": err, "status": "failed"})
                break
            inp, out = _buffers(op, count, world, dtype, device)
            g = torch.Generator(device="cpu").manual_seed(1000 + rank)
            inp.copy_(torch.randn(inp.shape, generator=g).to(dtype))  # fresh random values, never zeros
            sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(cfg["warmup"]):
                _op(op, inp, out, world)
            sync()
            est = torch.tensor([(time.perf_counter() - t0) / cfg["warmup"]], dtype=torch.float64, device=device)
            dist.all_reduce(est, op=dist.ReduceOp.MAX)
            reps = int(min(cfg["max_reps"], max(cfg["min_reps"], cfg["measure_s"] / max(est.item(), 1e-9))))
            times = []
            dist.barrier()
            if device.startswith("cuda"):
                # nccl-tests style: CUDA events around a batch of back-to-back ops, so a
                # host sync per op does not inflate small-message latency; each sample is
                # the batch time / batch size (batch sized to ~1 ms from the warm-up)
                batch = max(1, min(1000, int(1e-3 / max(est.item(), 1e-9))))
                reps = max(cfg["min_reps"], reps // batch)
                for _ in range(reps):
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    for _ in range(batch):
                        _op(op, inp, out, world)
                    end.record()
                    end.synchronize()
                    times.append(start.elapsed_time(end) * 1e-3 / batch)
            else:
                for _ in range(reps):
                    t = time.perf_counter()
                    _op(op, inp, out, world)
                    sync()
                    times.append(time.perf_counter() - t)
            tt = torch.tensor(times, dtype=torch.float64, device=device)
            dist.all_reduce(tt, op=dist.ReduceOp.MAX)
            results.append({"status": "ok", "times_s": tt.cpu().tolist(), "warmup_n": cfg["warmup"]})
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which records the fault
        results.append({"status": "failed", "error": f"{type(exc).__name__}: {exc}".splitlines()[0],
                        "traceback": traceback.format_exc()})
    finally:
        if rank == 0:
            tmp = cfg["out"] + ".tmp"
            with open(tmp, "w") as fh:
                json.dump(results, fh)
            os.replace(tmp, cfg["out"])
        try:
            dist.destroy_process_group()
        except Exception:  # noqa: BLE001 - results are written; a teardown error must not turn them into a failure
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
