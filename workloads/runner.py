"""The training loop shared by every workload, its measurements, and :func:`run`.

Per step the loop reads the host clock at each phase boundary
(:class:`~workloads.phases.PhaseTimer`: data, forward, backward, optimizer,
communication); the step time is the sum of its phases. Throughput, MFU and
the breakdown are means over the steps after the first
:data:`WARMUP_STEPS` (which carry compilation, allocator growth and thread
pool start-up; their times are reported apart as ``warmup_step_s``).

Every ``eval_every`` steps the held-out loss is measured and a point
``{step, tokens, seconds, loss, train_loss}`` is added to the loss curve
(``seconds``: wall time since the loop started, evaluation and checkpoint
time included, as a user waiting for the target sees it). The run stops at
the first eval point at or under the target (``stop_at_target``), at a
non-finite training loss (status ``diverged``, at that very step), past
``max_time_s`` (status ``timeout``), on out-of-memory (status ``oom``), or at
``max_steps`` (``target_reached: false`` and a reason when the target was not
met). ``max_steps`` is always finite, so no run can hang on an unreachable
target.

MFU = model FLOPs per second (:mod:`workloads.flops`) / peak FLOP/s (PaLM
appendix B): against the node's datasheet peak for the run's dtype from the
``hwmodels`` catalog when it knows the node (``mfu``, ``mfu_datasheet``),
and against ``peak_flops_per_s`` when given (``mfu_measured``; a measured
GEMM peak of the devices used). HFU counts the recomputed forward of
activation checkpointing too.
"""

from __future__ import annotations

import contextlib
import math
import os
import statistics
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from hwcore.errors import Fault, InputError
from workloads.phases import PHASES, PhaseTimer

WARMUP_STEPS = 2


@dataclass(frozen=True, kw_only=True)
class TrainResult:
    """One training run; :meth:`to_json` is what the CLI prints and the store keeps."""

    workload: str
    params: dict[str, Any]
    status: str  # ok | diverged | oom | timeout | failed
    error: str | None = None
    framework: str = "torch"
    device: str = "cpu"
    world_size: int = 1
    steps: int = 0
    target_loss: float | None = None
    target_reached: bool = False
    target_reason: str | None = None
    steps_to_target: int | None = None
    time_to_target_s: float | None = None
    tokens_to_target: int | None = None
    final_eval_loss: float | None = None
    best_eval_loss: float | None = None
    samples_per_s: float | None = None
    tokens_per_s: float | None = None
    step_time_s: dict[str, Any] | None = None  # Measurement.to_dict(raw=False) over post-warm-up steps
    warmup_step_s: list[float] = field(default_factory=list)
    breakdown_s: dict[str, float | None] = field(default_factory=dict)  # mean seconds per step per phase
    breakdown_notes: list[str] = field(default_factory=list)
    flops_per_step: float | None = None
    hardware_flops_per_step: float | None = None
    flops_formula: str | None = None
    achieved_flops_per_s: float | None = None
    mfu: float | None = None
    hfu: float | None = None
    mfu_datasheet: float | None = None
    mfu_measured: float | None = None
    peak_flops_per_s_datasheet: float | None = None
    peak_flops_per_s_measured: float | None = None
    peak_note: str | None = None
    params_count: int | None = None
    params_count_analytic: int | None = None
    peak_mem_bytes: int | None = None
    peak_host_rss_bytes: int | None = None
    peak_device_mem_bytes: int | None = None
    loss_curve: list[dict[str, Any]] = field(default_factory=list)
    checkpoint_save_s: float | None = None
    checkpoint_restore_s: float | None = None
    checkpoint_dir: str | None = None
    resumed_from_step: int | None = None
    data: dict[str, Any] = field(default_factory=dict)
    loop_step_s: float | None = None  # wall s per post-warm-up step, loop bookkeeping included
    profile_trace: str | None = None  # Chrome/Perfetto JSON of the profiled steps (workloads.profile)
    profile_breakdown_s: dict[str, float] = field(default_factory=dict)  # s per step per op class
    profile: dict[str, Any] = field(default_factory=dict)  # workloads.profile.ProfileBreakdown.to_dict()
    wall_s: float | None = None
    started_at: str | None = None
    finished_at: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TrainResult:
        return cls(**d)

    def summary(self) -> str:
        def f(x, spec=".4g"):
            return "n/a" if x is None else format(x, spec)
        lines = [
            f"{self.workload} [{self.framework}, {self.device}, world={self.world_size}]: status {self.status}"
            + (f" ({self.error})" if self.error else ""),
            f"  steps {self.steps}; target {f(self.target_loss)} reached={self.target_reached}"
            + (f" at step {self.steps_to_target} after {f(self.time_to_target_s)} s" if self.target_reached
               else f" ({self.target_reason})" if self.target_reason else ""),
            f"  eval loss final {f(self.final_eval_loss)} best {f(self.best_eval_loss)}",
            f"  {f(self.samples_per_s)} samples/s, {f(self.tokens_per_s)} tokens/s, MFU {f(self.mfu, '.2%')}",
            "  breakdown s/step: " + ", ".join(f"{k}={f(v, '.3g')}" for k, v in self.breakdown_s.items()),
        ]
        return "\n".join(lines)


# ---------------------------------------------------------------------------------
# peaks
# ---------------------------------------------------------------------------------
def _dtype(precision: str) -> str:
    return "fp32" if precision == "fp32" else "bf16"


def datasheet_peak(precision: str, device: str, world: int) -> tuple[float | None, str]:
    """Dense datasheet peak FLOP/s of the devices this run uses, and where it came from.

    From ``hwmodels.catalog.match_node(fingerprint)``; ``NodeType.peak_flops_per_s(dtype)``
    with ``per="node"`` on CPU (the whole socket set); on GPU the per-accelerator
    figure times the accelerators this run uses. Never raises.
    """
    try:
        from hwmodels.catalog import match_node  # written by the hwmodels issue; optional here
    except ImportError as exc:  # no catalog in this install: the reason is recorded with the result
        return None, f"no datasheet peak: hwmodels.catalog unavailable ({type(exc).__name__})"
    try:
        from hwcore.fingerprint import fingerprint

        fp = fingerprint()
        node = match_node(fp)
        if node is None:
            return None, "no datasheet peak: this node matches no hwmodels catalog entry"
        name = getattr(node, "name", "node")
        if device.startswith("cuda"):
            # per accelerator x the accelerators this run drives (not the fingerprint's GPU count:
            # CUDA_VISIBLE_DEVICES may hide some of the node's GPUs)
            used = max(1, min(world, int(getattr(node, "accelerators_per_node", world) or world)))
            peak = float(node.peak_flops_per_s(_dtype(precision), per="accelerator")) * used
            return peak, f"datasheet dense {_dtype(precision)} peak of {name}: {used} accelerator(s)"
        peak = float(node.peak_flops_per_s(_dtype(precision), per="node"))
        return peak, f"datasheet dense {_dtype(precision)} peak of {name} (whole node)"
    except Exception as exc:  # noqa: BLE001 - a catalog problem must not fail a training run; reason recorded
        return None, f"no datasheet peak: catalog lookup failed ({type(exc).__name__}: {exc})"


# ---------------------------------------------------------------------------------
# memory
# ---------------------------------------------------------------------------------
def _rss_reader():
    """A cheap RSS probe: ``pread`` of ``/proc/self/statm`` on a kept-open fd (~2 us), else psutil."""
    try:
        fd = os.open("/proc/self/statm", os.O_RDONLY)
        page = os.sysconf("SC_PAGE_SIZE")

        def read() -> int:
            return int(os.pread(fd, 128, 0).split()[1]) * page

        read()
        return read
    except (OSError, ValueError, IndexError, AttributeError):
        pass
    try:
        import psutil

        proc = psutil.Process()
        return lambda: proc.memory_info().rss
    except (ImportError, OSError) as exc:  # psutil.Error subclasses neither; Process() of ourselves cannot fail
        warnings.warn(f"peak RSS unavailable (no /proc/self/statm, psutil: {exc}); recorded as 0", stacklevel=2)
        return lambda: 0


def _is_oom(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError):
        return True
    name = type(exc).__name__
    msg = str(exc)
    return name == "OutOfMemoryError" or "out of memory" in msg.lower() or "RESOURCE_EXHAUSTED" in msg


# ---------------------------------------------------------------------------------
# the loop
# ---------------------------------------------------------------------------------
def _make_backend(w: Any, cfg: Any, split: Any, ctx: Any) -> Any:
    if cfg.framework == "jax":
        from workloads.jax.transformer import JaxBackend

        return JaxBackend(cfg=cfg, ctx=ctx)
    from workloads.torch.backend import TorchBackend

    return TorchBackend(module=w.torch_module(cfg, split), cfg=cfg, ctx=ctx)


_NULL = contextlib.nullcontext()


def _profiler(w: Any, cfg: Any, ctx: Any, profile_dir: str | None) -> Any:
    """A started :class:`workloads.profile.StepProfiler` when ``profile_dir`` is given (torch only), else None."""
    if not profile_dir:
        return None
    if cfg.framework != "torch":
        raise InputError(f"{w.name}.framework: --profile records a torch.profiler trace; framework "
                         f"{cfg.framework!r} is not supported (use framework=torch)")
    from workloads.profile import StepProfiler, default_trace_path

    # wait out the runner's warm-up steps, one profiler warm-up step, then record 3 (Kineto schedule)
    return StepProfiler(default_trace_path(profile_dir, w.name if ctx.world == 1 else f"{w.name}-rank{ctx.rank}"),
                        device=ctx.device, wait=WARMUP_STEPS).start()


def train_local(name: str, cfg_or_dict: Any, callback: Any = None, profile_dir: str | None = None) -> dict[str, Any]:
    """Train in this process (joining the process group when launched with WORLD_SIZE > 1)."""
    from workloads import distributed, registry

    w = registry.get(name)
    cfg = cfg_or_dict if isinstance(cfg_or_dict, w.config_cls) else w.config_cls(**cfg_or_dict)
    ctx = distributed.init(cfg.device, cfg.framework)
    threads_before = None
    if cfg.threads and cfg.framework == "torch":
        import torch

        threads_before = torch.get_num_threads()
    try:
        if ctx.world != cfg.nprocs:
            if ctx.world > 1 and cfg.nprocs == 1:  # launched by torchrun/srun: the launcher sets the world
                cfg = replace(cfg, nprocs=ctx.world)
            else:
                raise InputError(f"{name}.nprocs ({cfg.nprocs}) differs from the launcher's WORLD_SIZE ({ctx.world})")
        return _train(w, cfg, ctx, callback, profile_dir).to_json()
    finally:
        if threads_before is not None:
            import torch

            torch.set_num_threads(threads_before)
        if ctx.launcher != "none":
            distributed.shutdown()


def _train(w: Any, cfg: Any, ctx: Any, callback: Any = None, profile_dir: str | None = None) -> TrainResult:
    import numpy as np

    from workloads import checkpoint as ckpt
    from workloads.data import step_batches

    if cfg.strategy == "fsdp" and ctx.world > 1 and (cfg.checkpoint_every or cfg.resume_from):
        raise InputError(f"{w.name}.checkpoint_every: checkpointing is not implemented for strategy=fsdp "
                         "(sharded state); use strategy=ddp")
    started = datetime.now(UTC)
    t_wall0 = time.perf_counter()
    if cfg.framework == "torch":
        import torch

        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        torch.manual_seed(cfg.seed)
    np.random.seed(cfg.seed)
    split = w.split(cfg)
    fc = w.flops(cfg)
    target = cfg.target_loss or float(w.default_target(cfg, split))
    tokens_per_sample = w.tokens_per_sample(cfg)
    base = dict(workload=w.name, params=cfg.to_dict(), framework=cfg.framework, device=ctx.device,
                world_size=ctx.world, target_loss=target, flops_per_step=fc.model_flops_per_step,
                hardware_flops_per_step=fc.hardware_flops_per_step, flops_formula=fc.formula,
                params_count_analytic=fc.params, data=dict(split.info), started_at=started.isoformat())
    rss = _rss_reader()
    peak_rss = rss()
    try:
        backend = _make_backend(w, cfg, split, ctx)
    except Exception as exc:  # noqa: BLE001 - out-of-memory becomes an oom result, everything else re-raises
        if isinstance(exc, InputError) or not _is_oom(exc):
            raise
        return TrainResult(**base, status="oom", error=str(exc).splitlines()[0])
    eval_set = split.eval_batches(cfg.batch_size, cfg.eval_batches)

    curve: list[dict[str, Any]] = []
    start_step, tokens, elapsed_before = 0, 0, 0.0
    restore_s = None
    ckpt_dir = cfg.checkpoint_dir or (tempfile.mkdtemp(prefix=f"hweval-ckpt-{w.name}-") if cfg.checkpoint_every
                                      else "")
    if cfg.resume_from:
        loop, restore_s = ckpt.restore(cfg.resume_from, backend)
        start_step, tokens = loop["step"], loop["tokens"]
        curve, elapsed_before = list(loop["loss_curve"]), loop["seconds"]
    status, error = "ok", None
    steps_to_target = time_to_target = tokens_to_target = None
    reached = False
    save_times: list[float] = []
    step_times: list[float] = []
    phase_sums: dict[str, float] = {}
    train_losses: list[float] = []
    step = start_step
    t_loop = time.perf_counter() - elapsed_before

    side = {"s": 0.0, "t_timed": None}  # eval + checkpoint seconds inside the timed loop; its start

    def eval_point(at_step: int) -> float:
        nonlocal peak_rss
        peak_rss = max(peak_rss, rss())
        t_ev = time.perf_counter()
        loss = backend.evaluate(eval_set)
        tl = float(np.mean(train_losses)) if train_losses else None
        curve.append({"step": at_step, "tokens": tokens, "seconds": time.perf_counter() - t_loop,
                      "loss": loss, "train_loss": tl})
        train_losses.clear()
        side["s"] += time.perf_counter() - t_ev
        return loss

    for pt in curve:  # a resumed run may already have met the target
        if pt["loss"] <= target and not reached:
            reached, steps_to_target, time_to_target, tokens_to_target = True, pt["step"], pt["seconds"], pt["tokens"]
    sync = getattr(backend, "sync", None)
    ph = PhaseTimer(sync)
    prof = _profiler(w, cfg, ctx, profile_dir)  # steps under the profiler are left out of the step statistics
    profiled: set[int] = set()
    data_iter = step_batches(split, seed=cfg.seed, start_step=start_step, stop_step=cfg.max_steps,
                             batch_size=cfg.batch_size, rank=ctx.rank, world=ctx.world, workers=cfg.workers)
    try:
        if not curve:
            if eval_point(0) <= target:
                reached, steps_to_target, time_to_target, tokens_to_target = True, 0, curve[-1]["seconds"], 0
        while step < cfg.max_steps and not (reached and cfg.stop_at_target):
            step += 1
            if len(step_times) == WARMUP_STEPS:
                side["t_timed"], side["s"] = time.perf_counter(), 0.0
            under = prof is not None and prof.under_profiler()
            with prof.step_range() if prof is not None else _NULL:
                ph.start()
                batch = next(data_iter)
                micro = backend.to_device(batch)
                ph.lap("data")
                loss = backend.step(step, micro, ph)
                laps = ph.take()
            step_times.append(sum(laps.values()))
            if prof is not None:
                t_p = time.perf_counter()
                prof.step()
                if under:
                    profiled.add(len(step_times) - 1)
                    side["s"] += sum(laps.values()) + time.perf_counter() - t_p
            if len(step_times) > WARMUP_STEPS and not under:
                for k, v in laps.items():
                    phase_sums[k] = phase_sums.get(k, 0.0) + v
            if not step & 7:  # every 8th step (~2 us a probe); also at each eval point below
                peak_rss = max(peak_rss, rss())
            if not math.isfinite(loss):
                status, error = "diverged", f"training loss {loss} at step {step}"
                break
            train_losses.append(loss)
            tokens += cfg.batch_size * (tokens_per_sample or 0)
            if step % cfg.eval_every == 0 or step == cfg.max_steps:
                ev = eval_point(step)
                if not math.isfinite(ev):
                    status, error = "diverged", f"eval loss {ev} at step {step}"
                    break
                if ev <= target and not reached:
                    reached, steps_to_target = True, step
                    time_to_target, tokens_to_target = curve[-1]["seconds"], tokens
            if cfg.checkpoint_every and step % cfg.checkpoint_every == 0:
                loop = {"step": step, "tokens": tokens, "loss_curve": curve,
                        "seconds": time.perf_counter() - t_loop}
                if ctx.is_main:
                    save_times.append(ckpt.save(ckpt_dir, backend, loop))
                    side["s"] += save_times[-1]
                if ctx.world > 1:
                    import torch.distributed as dist

                    dist.barrier()
            if callback is not None:
                callback(step, loss)
            if cfg.max_time_s and time.perf_counter() - t_loop > cfg.max_time_s:
                if not (reached and cfg.stop_at_target):
                    status, error = "timeout", f"max_time_s ({cfg.max_time_s}) exceeded at step {step}"
                break
    except Exception as exc:  # noqa: BLE001 - a crash in the step loop is recorded as oom / failed with its error
        if isinstance(exc, InputError | Fault):
            raise
        status = "oom" if _is_oom(exc) else "failed"
        error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    finally:
        if prof is not None:
            prof.stop()
        t_loop_end = time.perf_counter()
        close = getattr(data_iter, "close", None)
        if close:
            close()

    if save_times and ctx.is_main and status == "ok":
        # time a restore of the last checkpoint into the live state (identical values: harmless)
        _, restore_s = ckpt.restore(ckpt_dir, backend) if restore_s is None else (None, restore_s)

    # -- measurements ------------------------------------------------------------------
    timed = [t for i, t in enumerate(step_times) if i >= WARMUP_STEPS and i not in profiled]
    res: dict[str, Any] = dict(base)
    res.update(status=status, error=error, steps=step, target_reached=reached, steps_to_target=steps_to_target,
               time_to_target_s=time_to_target, tokens_to_target=tokens_to_target if tokens_per_sample else None,
               params_count=int(backend.params_count), loss_curve=curve,
               warmup_step_s=step_times[:WARMUP_STEPS], breakdown_notes=list(getattr(backend, "notes", [])),
               resumed_from_step=start_step if cfg.resume_from else None,
               checkpoint_dir=ckpt_dir or None, checkpoint_restore_s=restore_s,
               checkpoint_save_s=statistics.fmean(save_times) if save_times else None)
    evals = [p["loss"] for p in curve if p["loss"] is not None and math.isfinite(p["loss"])]
    res["final_eval_loss"] = curve[-1]["loss"] if curve else None
    res["best_eval_loss"] = min(evals) if evals else None
    if not reached and status == "ok":
        res["target_reason"] = (f"eval loss target {target:.4g} not reached within {step} steps "
                                f"(best {min(evals):.4g})" if evals else "no eval point")
    elif not reached:
        res["target_reason"] = f"run ended with status {status} before the target"
    if timed:
        from hwcore.timing import from_times

        mean_step = statistics.fmean(timed)
        res["step_time_s"] = from_times(timed, label=f"{w.name} step", clock="perf_counter").to_dict(raw=False)
        res["samples_per_s"] = cfg.batch_size / mean_step
        res["tokens_per_s"] = cfg.batch_size * tokens_per_sample / mean_step if tokens_per_sample else None
        n = len(timed)
        bd: dict[str, float | None] = {k: None for k in PHASES}
        for k, v in phase_sums.items():
            bd[k] = v / n
        if ctx.world == 1:
            bd["communication"] = None
            res["breakdown_notes"].append("single process: no communication")
        res["breakdown_s"] = bd
        achieved = fc.model_flops_per_step / mean_step
        res["achieved_flops_per_s"] = achieved
        peak_ds, note = datasheet_peak(cfg.precision, ctx.device, ctx.world)
        res["peak_flops_per_s_datasheet"] = peak_ds
        if peak_ds:
            res["mfu_datasheet"] = achieved / peak_ds
        if cfg.peak_flops_per_s:
            res["peak_flops_per_s_measured"] = cfg.peak_flops_per_s
            res["mfu_measured"] = achieved / cfg.peak_flops_per_s
        peak = peak_ds or cfg.peak_flops_per_s or None
        if peak_ds is None:
            note += ("; mfu uses peak_flops_per_s (measured)" if cfg.peak_flops_per_s
                     else "; pass --set peak_flops_per_s=... for an MFU")
        res["peak_note"] = note
        if peak:
            res["mfu"] = achieved / peak
            if cfg.activation_checkpointing:
                res["hfu"] = fc.hardware_flops_per_step / mean_step / peak
    dev_peak = backend.peak_device_mem()
    res["peak_host_rss_bytes"] = int(peak_rss) or None
    res["peak_device_mem_bytes"] = dev_peak
    res["peak_mem_bytes"] = dev_peak if dev_peak is not None else (int(peak_rss) or None)
    if side["t_timed"] is not None and len(timed):
        # wall time per post-warm-up step including the loop's own bookkeeping, eval/checkpoint excluded
        res["loop_step_s"] = (t_loop_end - side["t_timed"] - side["s"]) / len(timed)
    if prof is not None:
        res.update(prof.metrics())
        res["breakdown_notes"].append(f"{len(profiled)} step(s) ran under torch.profiler (trace "
                                      f"{res['profile_trace']}); they are left out of step_time_s and the breakdown")
    res["wall_s"] = time.perf_counter() - t_wall0
    res["finished_at"] = datetime.now(UTC).isoformat()
    return TrainResult(**res)


# ---------------------------------------------------------------------------------
# public entry point
# ---------------------------------------------------------------------------------
UNITS = {
    "samples_per_s": "1/s", "tokens_per_s": "1/s", "time_to_target_s": "s", "breakdown_s": "s",
    "peak_mem_bytes": "B", "peak_host_rss_bytes": "B", "peak_device_mem_bytes": "B",
    "flops_per_step": "FLOP", "hardware_flops_per_step": "FLOP", "achieved_flops_per_s": "FLOP/s",
    "peak_flops_per_s_datasheet": "FLOP/s", "peak_flops_per_s_measured": "FLOP/s", "mfu": "1", "hfu": "1",
    "checkpoint_save_s": "s", "checkpoint_restore_s": "s", "wall_s": "s", "final_eval_loss": "nats",
}


def run(name: str, params: dict[str, Any] | None = None, *, target_loss: float | None = None,
        max_steps: int | None = None, max_time_s: float | None = None, store: Any = None,
        record: bool = True, callback: Any = None, profile_dir: str | os.PathLike[str] | None = None) -> TrainResult:
    """Train workload ``name`` with ``params`` (raw ``--set`` strings or typed values; ``preset`` selects one).

    ``nprocs > 1`` launches that many local torch.distributed processes unless
    this process was itself launched by torchrun/srun (then it is one rank).
    The result is appended to the store as ``Record(kind="workload")`` (by
    rank 0 only) unless ``record=False``; bad input raises ``InputError``
    before anything runs or is written. ``callback(step, loss)``, if given, is
    called after every step (single-process runs only; the overhead benchmark
    uses it to interleave a bare loop step by step). ``profile_dir``: record a
    ``torch.profiler`` trace of a few steady-state steps there and a per-op-class
    breakdown (:mod:`workloads.profile`; ``profile_trace``, ``profile_breakdown_s``).
    """
    from hwcore.records import WorkloadRecord
    from hwcore.store import Store
    from workloads import distributed, registry

    raw = dict(params or {})
    if target_loss is not None:
        raw["target_loss"] = target_loss
    if max_steps is not None:
        raw["max_steps"] = max_steps
    if max_time_s is not None:
        raw["max_time_s"] = max_time_s
    cfg = registry.config_from_params(name, raw)
    st = None
    if record:
        st = store if isinstance(store, Store) else Store(store)
        st.check_writable()
    started = datetime.now(UTC)
    in_world = distributed.env_world()
    if profile_dir and cfg.nprocs > 1 and in_world is None:
        raise InputError(f"{name}.nprocs: --profile captures one process; run nprocs={cfg.nprocs} under torchrun "
                         "(each rank writes its own trace) or profile with nprocs=1")
    try:
        if cfg.nprocs > 1 and in_world is None:
            timeout = cfg.max_time_s * 2 + 600 if cfg.max_time_s else None
            out = distributed.launch(name, cfg.to_dict(), cfg.nprocs, timeout_s=timeout)
            result = TrainResult.from_json(out)
        else:
            result = TrainResult.from_json(train_local(name, cfg, callback,
                                                       str(profile_dir) if profile_dir else None))
    except InputError:
        raise
    except Exception as exc:  # a crash outside the step loop: recorded as a fault, not lost
        status = exc.status if isinstance(exc, Fault) else ("oom" if _is_oom(exc) else "failed")
        msg = str(exc).splitlines()[0] if str(exc) else ""
        result = TrainResult(workload=name, params=cfg.to_dict(), status=status,
                             error=msg if isinstance(exc, Fault) else f"{type(exc).__name__}: {msg}",
                             framework=cfg.framework, world_size=cfg.nprocs)
    is_main = in_world is None or in_world[0] == 0
    if st is not None and is_main:
        metrics = {k: v for k, v in result.to_json().items() if k not in ("params", "workload", "status", "error")}
        st.append(WorkloadRecord(workload=name, params=cfg.to_dict(), metrics=metrics, units=UNITS,
                                 status=result.status, error=result.error, started_at=started,
                                 finished_at=datetime.now(UTC)).to_record())
    return result
