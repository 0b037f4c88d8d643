"""Data-parallel launch and process-group set-up for the torch workloads.

Two ways in:

* already launched (torchrun, ``srun``, any launcher): ``RANK`` /
  ``WORLD_SIZE`` / ``LOCAL_RANK`` / ``MASTER_ADDR`` / ``MASTER_PORT`` (torchrun),
  else ``SLURM_PROCID`` / ``SLURM_NTASKS`` / ``SLURM_LOCALID`` with the master
  address from ``MASTER_ADDR`` or the first host of ``SLURM_JOB_NODELIST``
  (``scontrol show hostnames``) and the port from ``MASTER_PORT`` or
  ``29500 + SLURM_JOB_ID % 1000``: :func:`env_context` reads them;
* ``nprocs=N`` on a single node: :func:`launch` starts N worker processes
  (``python -m workloads.rank_worker``) with those variables set, on
  ``127.0.0.1`` and a free port; rank 0 writes the result as JSON.

Backends: gloo on CPU, NCCL on GPU (device ``cuda:LOCAL_RANK``). FSDP uses
``torch.distributed.fsdp.fully_shard`` (FSDP2), which also runs over gloo on
CPU here (torch 2.13); checkpointing an FSDP run is not implemented (its
state is sharded DTensors): that combination is refused.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hwcore.errors import Fault, InputError


@dataclass(frozen=True)
class DistContext:
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    device: str = "cpu"
    backend: str | None = None  # gloo | nccl when world > 1
    launcher: str = "none"  # none | hweval | torchrun | slurm
    master: str | None = None

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def _slurm_master() -> str:
    if os.environ.get("MASTER_ADDR"):
        return os.environ["MASTER_ADDR"]
    nodes = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST")
    if not nodes or os.environ.get("SLURM_NNODES", "1") == "1":
        return "127.0.0.1"
    try:
        out = subprocess.run(["scontrol", "show", "hostnames", nodes], capture_output=True, text=True, timeout=30)
        first = out.stdout.split()
        if first:
            return first[0]
    except (OSError, subprocess.SubprocessError):
        pass
    return nodes.split(",")[0].split("[")[0]


def env_world() -> tuple[int, int, int, str] | None:
    """(rank, world, local_rank, launcher) from the environment, or None when not launched."""
    env = os.environ
    if int(env.get("WORLD_SIZE", "1") or 1) > 1:
        launcher = env.get("HWEVAL_LAUNCHER", "torchrun")
        return int(env["RANK"]), int(env["WORLD_SIZE"]), int(env.get("LOCAL_RANK", "0")), launcher
    if int(env.get("SLURM_NTASKS", "1") or 1) > 1 and "SLURM_PROCID" in env:
        return int(env["SLURM_PROCID"]), int(env["SLURM_NTASKS"]), int(env.get("SLURM_LOCALID", "0")), "slurm"
    return None


def _jax_device(requested: str) -> str:
    """The device JAX computes on: its default backend (GPU when jaxlib has one) unless cpu is asked."""
    if requested == "cpu":
        return "cpu"
    import jax

    backend = jax.default_backend()
    if requested == "cuda" and backend != "gpu":
        raise InputError("device: 'cuda' requested but JAX has no GPU backend; valid choices here: auto, cpu")
    return "cuda" if backend == "gpu" else "cpu"


def resolve_device(requested: str, local_rank: int = 0) -> str:
    import torch

    if requested == "cuda" and not torch.cuda.is_available():
        raise InputError("device: 'cuda' requested but torch sees no CUDA device; valid choices here: auto, cpu")
    if requested == "cuda" or (requested == "auto" and torch.cuda.is_available()):
        return f"cuda:{local_rank}"
    return "cpu"


def init(requested_device: str, framework: str) -> DistContext:
    """Join the process group when launched with world > 1; else a single-process context."""
    w = env_world()
    if framework != "torch":
        if w is not None:
            raise InputError("nprocs: data-parallel launch is implemented for framework=torch only")
        return DistContext(device=_jax_device(requested_device))
    if w is None:
        return DistContext(device=resolve_device(requested_device))
    rank, world, local, launcher = w
    import torch
    import torch.distributed as dist

    device = resolve_device(requested_device, local)
    backend = "nccl" if device.startswith("cuda") else "gloo"
    if launcher == "slurm":
        os.environ.setdefault("MASTER_ADDR", _slurm_master())
        os.environ.setdefault("MASTER_PORT", str(29500 + int(os.environ.get("SLURM_JOB_ID", "0")) % 1000))
        os.environ["RANK"], os.environ["WORLD_SIZE"], os.environ["LOCAL_RANK"] = str(rank), str(world), str(local)
    if device.startswith("cuda"):
        torch.cuda.set_device(local)
    if not dist.is_initialized():
        dist.init_process_group(backend=backend, rank=rank, world_size=world)
    return DistContext(rank=rank, world=world, local_rank=local, device=device, backend=backend,
                       launcher=launcher, master=os.environ.get("MASTER_ADDR"))


def shutdown() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(name: str, cfg_dict: dict[str, Any], nprocs: int, *, timeout_s: float | None = None) -> dict[str, Any]:
    """Run workload ``name`` in ``nprocs`` local processes; returns rank 0's result dict.

    If any worker exits non-zero the others are stopped (a dead peer would
    leave them blocked in a collective) and a :class:`Fault` carries the tail
    of its stderr.
    """
    tmp = Path(tempfile.mkdtemp(prefix="hweval-ddp-"))
    (tmp / "cfg.json").write_text(json.dumps({"name": name, "cfg": cfg_dict}))
    port = free_port()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    procs, logs = [], []
    for rank in range(nprocs):
        env = dict(os.environ)
        env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(nprocs),
                   LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(nprocs), HWEVAL_LAUNCHER="hweval")
        if not cfg_dict.get("threads"):
            env["HWEVAL_WORKER_THREADS"] = str(max(1, cores // nprocs))
        log = open(tmp / f"rank{rank}.log", "w+")
        logs.append(log)
        procs.append(subprocess.Popen([sys.executable, "-m", "workloads.rank_worker", str(tmp)], env=env,
                                      stdout=log, stderr=subprocess.STDOUT))
    t0 = time.monotonic()
    failed = None
    try:
        while True:
            codes = [p.poll() for p in procs]
            bad = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
            if bad:
                failed = bad[0]
                break
            if all(c == 0 for c in codes):
                break
            if timeout_s is not None and time.monotonic() - t0 > timeout_s:
                failed = (-1, "timeout")
                break
            time.sleep(0.05)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for log in logs:
            log.flush()
    if failed is not None:
        rank, code = failed
        tail = ""
        if rank >= 0:
            logs[rank].seek(0)
            tail = " | ".join(logs[rank].read().strip().splitlines()[-3:])
        for log in logs:
            log.close()
        raise Fault(f"distributed worker rank {rank} failed ({code}): {tail}")
    for log in logs:
        log.close()
    out = json.loads((tmp / "result.json").read_text())
    if out.get("input_error"):
        raise InputError(out["input_error"])
    return out
