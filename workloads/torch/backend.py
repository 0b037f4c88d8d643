"""The torch training step: micro-batches, precision, DDP/FSDP, optimizer; timed by phase.

Phases (host clock, see :mod:`workloads.phases`): ``forward`` (model + loss
under autocast), ``backward`` (``loss.backward()``; with DDP's default
bucketed all-reduce the gradient communication overlaps this phase),
``communication`` (the explicit gradient all-reduce when
``overlap_comm=false``, and the all-reduce of the step's loss for logging),
``optimizer`` (grad clip, AdamW step, zero_grad, LR schedule).
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from workloads.phases import PhaseTimer


class TorchBackend:
    framework = "torch"

    def __init__(self, *, module: torch.nn.Module, cfg: Any, ctx: Any) -> None:
        self.cfg, self.ctx = cfg, ctx
        self.device = torch.device(ctx.device)
        self.notes: list[str] = []
        module = module.to(self.device)
        if cfg.precision == "bf16":
            module = module.to(torch.bfloat16)
        self.raw = module
        self.params_count = sum(p.numel() for p in module.parameters())
        self.world = ctx.world
        self.ddp = None
        model: Any = module
        if self.world > 1:
            if cfg.strategy == "ddp":
                from torch.nn.parallel import DistributedDataParallel as DDP

                ids = [self.device.index] if self.device.type == "cuda" else None
                model = self.ddp = DDP(_LossWrap(module), device_ids=ids)
                if cfg.overlap_comm:
                    self.notes.append("gradient all-reduce overlaps backward (DDP buckets): counted in 'backward'")
            else:
                from torch.distributed.fsdp import fully_shard

                for blk in getattr(module, "blocks", []):
                    fully_shard(blk)
                fully_shard(module)
                self.notes.append("FSDP all-gather / reduce-scatter overlap forward/backward: counted there")
        self.model = model
        # the plain path calls module.loss directly (one nn.Module call fewer per micro-batch)
        self.loss_fn: Any = self.ddp if self.ddp is not None else module.loss
        if cfg.compile:
            self.loss_fn = torch.compile(self.ddp if self.ddp is not None else _LossWrap(module))
        self.model.train()
        self._on_cpu = self.device.type == "cpu"
        self._params = list(self.model.parameters())
        self._fast = cfg.grad_accum == 1 and self.world == 1 and cfg.precision != "bf16_autocast"
        kw: dict[str, Any] = {"lr": cfg.lr, "weight_decay": cfg.weight_decay}
        if cfg.optimizer_impl == "fused":
            kw["fused"] = True
        elif cfg.optimizer_impl == "foreach":
            kw["foreach"] = True
        self.opt = torch.optim.AdamW(module.parameters(), **kw)
        warm = cfg.warmup_steps
        self.sched = torch.optim.lr_scheduler.LambdaLR(
            self.opt, lambda s: min(1.0, (s + 1) / warm) if warm else 1.0)
        self.autocast = (
            torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)
            if cfg.precision == "bf16_autocast" else contextlib.nullcontext()
        )
        self.sync = (lambda: torch.cuda.synchronize(self.device)) if (
            cfg.sync_phases and self.device.type == "cuda") else None
        if self.device.type == "cuda":
            # peak memory of this run only, not of earlier runs in the same process
            torch.cuda.reset_peak_memory_stats(self.device)
        self._loss_buf = torch.zeros(1, dtype=torch.float64, device=self.device)

    # -- helpers ------------------------------------------------------------------
    def to_device(self, batch: tuple[np.ndarray, ...]) -> list[tuple[torch.Tensor, ...]]:
        """Host arrays -> device tensors, split into ``grad_accum`` micro-batches."""
        tensors = [torch.from_numpy(np.ascontiguousarray(a)) for a in batch]
        if self.cfg.precision == "bf16":
            tensors = [t.to(torch.bfloat16) if t.is_floating_point() else t for t in tensors]
        if not self._on_cpu:
            tensors = [t.to(self.device, non_blocking=True) for t in tensors]
        n = self.cfg.grad_accum
        return list(zip(*(t.chunk(n) for t in tensors), strict=True)) if n > 1 else [tuple(tensors)]

    # -- one optimizer step -------------------------------------------------------------
    def step(self, step: int, micro: list[tuple[torch.Tensor, ...]], ph: PhaseTimer) -> float:
        cfg, n = self.cfg, len(micro)
        if self._fast:  # one micro-batch, one process, fp32: no context managers on the hot path
            loss = self.loss_fn(*micro[0])
            if cfg.inject_nan_at_step and step == cfg.inject_nan_at_step:
                loss = loss * float("nan")
            ph.lap("forward")
            loss.backward()
            ph.lap("backward")
            value = loss.item()
            return self._optimize(value, ph)
        total = None
        for i, mb in enumerate(micro):
            last = i == n - 1
            if self.ddp is not None and (not last or not cfg.overlap_comm):
                sync_ctx = self.ddp.no_sync()
            else:
                sync_ctx = contextlib.nullcontext()
                if self.world > 1 and cfg.strategy == "fsdp":
                    self.model.set_requires_gradient_sync(last)
            with sync_ctx:
                with self.autocast:
                    loss = self.loss_fn(*mb)
                if n > 1:
                    loss = loss / n
                if cfg.inject_nan_at_step and step == cfg.inject_nan_at_step:
                    loss = loss * float("nan")
                ph.lap("forward")
                loss.backward()
                ph.lap("backward")
            total = loss.detach() if total is None else total + loss.detach()
        if self.world > 1:
            if self.ddp is not None and not cfg.overlap_comm:
                grads = [p.grad for p in self.raw.parameters() if p.grad is not None]
                flat = torch.cat([g.reshape(-1) for g in grads])
                dist.all_reduce(flat)
                flat /= self.world
                off = 0
                for g in grads:
                    g.copy_(flat[off:off + g.numel()].view_as(g))
                    off += g.numel()
            self._loss_buf[0] = total
            dist.all_reduce(self._loss_buf)
            value = float(self._loss_buf.item()) / self.world
            ph.lap("communication")
        else:
            value = total.item()
        return self._optimize(value, ph)

    def _optimize(self, value: float, ph: PhaseTimer) -> float:
        if not math.isfinite(value):
            self.opt.zero_grad(set_to_none=True)
            return value
        if self.cfg.grad_clip:
            torch.nn.utils.clip_grad_norm_(self._params, self.cfg.grad_clip)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.sched.step()
        ph.lap("optimizer")
        return value

    @torch.no_grad()
    def evaluate(self, batches: list[tuple[np.ndarray, ...]]) -> float:
        """Mean held-out loss; every rank evaluates every batch (identical weights)."""
        mod = self.raw
        mod.eval()
        losses = []
        for b in batches:
            for mb in self.to_device(b):
                with self.autocast:
                    losses.append(float(mod.loss(*mb)))
        mod.train()
        return float(np.mean(losses))

    # -- checkpoint state ----------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {
            "model": self.raw.state_dict(),
            "opt": self.opt.state_dict(),
            "sched": self.sched.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        }

    def load_state(self, st: dict[str, Any]) -> None:
        self.raw.load_state_dict(st["model"])
        self.opt.load_state_dict(st["opt"])
        self.sched.load_state_dict(st["sched"])
        torch.set_rng_state(st["torch_rng"])
        if st.get("cuda_rng") is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(st["cuda_rng"])

    def peak_device_mem(self) -> int | None:
        if self.device.type == "cuda":
            return int(torch.cuda.max_memory_allocated(self.device))
        return None


class _LossWrap(torch.nn.Module):
    """``forward(*batch) = inner.loss(*batch)``, so DDP's hooks and torch.compile see the whole loss."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, *batch: torch.Tensor) -> torch.Tensor:
        return self.inner.loss(*batch)
