"""``torch.profiler`` capture of a few steady-state training steps and a per-op-class breakdown.

:class:`StepProfiler` wraps :class:`torch.profiler.profile` with a
``wait/warmup/active`` schedule (Kineto's own, one cycle): the first ``wait``
steps (the runner's warm-up steps) run unprofiled, ``warmup`` steps run with
the profiler on but discarded, ``active`` steps are recorded. The runner wraps
each training step (data + forward + backward + optimizer, what its step time
measures) in a :func:`torch.profiler.record_function` range named
:data:`STEP_RANGE`, so evaluation and checkpoint work between steps stays out
of the breakdown. When the cycle ends the trace is written as Chrome/Perfetto
JSON (``chrome://tracing``, ui.perfetto.dev) and classified.

Classification (:func:`classify`): every profiler op event that starts inside a
recorded step range is charged its *self* time (self CPU time; self device
time when CUDA kernels were recorded) to one class, so the classes add up to the
time spent inside ops plus the step range's own self time (the Python between
ops), which goes to ``other``. With device time only the CPU op events count
(each op's self device time holds the kernels it launched; the kernels' own
events would count them twice) and the classes add up to the device's busy
time: ``step_s - classified_total_s`` is the time the device sat idle. When the
trace holds the kernels' own events (Kineto on CUDA), device time is taken from
them instead (``time_kind="device_kernels"``): each kernel is charged to the
class of the op that launched it, and a kernel no recorded op claims (seen on
an H200 with torch 2.11 / CUDA 13: the ops' self device time covered 32-47% of
the step where the GEMM FLOPs alone need more; a later run there linked none of
its kernels) is classed by its own name and reported as ``unlinked_s``
(``kernel_links`` counts both kinds). The device-side copies of host ranges
(Kineto's ``gpu_user_annotation`` of the step range and of ``Optimizer.step``)
are neither steps nor kernels. The class of an event is decided by the event
itself or the nearest ancestor that names one (``aten::t`` under
``aten::linear`` is GEMM time; ``aten::add_`` under ``Optimizer.step`` is
optimizer time), with the optimizer range winning over everything beneath it:

========== ==================================================================
gemm       aten::mm / addmm / bmm / baddbmm / addbmm / matmul / linear / dot,
           their autograd nodes (``MmBackward0``, ``AddmmBackward0`` ...)
attention  scaled_dot_product_attention, flash / efficient / cudnn attention
           ops and their backward nodes
memory     norms, activations, softmax, element-wise arithmetic, embedding,
           cross-entropy / nll, copies and casts, gradient accumulation,
           reductions, data movement of the batch
optimizer  ``Optimizer.step#*`` / ``Optimizer.zero_grad#*`` ranges and what
           they call, ``_foreach_*`` ops anywhere (grad-norm clipping)
comm       c10d / gloo / nccl / record_param_comms ops
other      everything else, including the step range's own self time
========== ==================================================================

The per-step figures divide by the number of recorded steps; ``fraction`` is
each class over the mean recorded step time (the step range's duration).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CLASSES = ("gemm", "attention", "memory_bound", "optimizer", "communication", "other")
STEP_RANGE = "hweval::train_step"
DEFAULT_WAIT, DEFAULT_WARMUP, DEFAULT_ACTIVE = 2, 1, 3

_OPT_RANGE = re.compile(r"^Optimizer\.(step|zero_grad)#")
_COMM = re.compile(r"(c10d|gloo|nccl|record_param_comms|ProcessGroup|_allreduce|all_reduce|allgather|all_gather|"
                   r"reduce_scatter|_reduce_scatter_base|_allgather_base)", re.I)  # not aten::broadcast_tensors
_ATTN = re.compile(r"(scaled_dot_product|flash_attention|efficient_attention|cudnn_attention|_attention_forward|"
                   r"_attention_backward|ScaledDotProduct|FlashAttention|EfficientAttention)", re.I)
_GEMM_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addbmm", "aten::matmul", "aten::linear",
             "aten::dot", "aten::mv", "aten::addmv", "aten::_addmm_activation", "aten::einsum",
             "aten::_scaled_mm", "aten::tensordot"}
_GEMM_BWD = re.compile(r"\b(Mm|Addmm|Bmm|Baddbmm|Addbmm|Matmul|Linear|Dot|Mv|Addmv|Einsum|UnsafeView)Backward\d*")
_FOREACH = re.compile(r"^aten::_foreach_|^aten::_fused_adam")
_MEMORY_WORDS = re.compile(
    r"(norm|gelu|relu|silu|sigmoid|tanh|softmax|dropout|embedding|cross_entropy|nll_loss|mse_loss|add|sub|mul|div|"
    r"copy|clone|cat|stack|fill|zero|to|_to_copy|contiguous|sum|mean|where|masked|index|gather|scatter|exp|log|"
    r"pow|sqrt|rsqrt|clamp|neg|abs|AccumulateGrad|expand|view|reshape|permute|transpose|split|chunk|select|slice|"
    r"unsqueeze|squeeze|empty|ones|zeros|from_numpy|as_strided|detach|t\b|lerp|addcmul|addcdiv|max|min|argmax|"
    r"gru|lstm|rnn|_pack|_pad)", re.I)


def op_class(name: str) -> str | None:
    """The class an event's own name decides, or None (then its ancestors decide, else ``other``)."""
    if _OPT_RANGE.match(name) or _FOREACH.match(name):
        return "optimizer"
    if _COMM.search(name):
        return "communication"
    if _ATTN.search(name):
        return "attention"
    base = name.split(": ", 1)[-1] if name.startswith("autograd::engine::evaluate_function") else name
    if base in _GEMM_OPS or _GEMM_BWD.search(base):
        return "gemm"
    if name == STEP_RANGE or name.startswith("ProfilerStep#"):
        return None
    if name.startswith("aten::") or "Backward" in base or base.startswith("torch::autograd::AccumulateGrad") \
            or _MEMORY_WORDS.search(base):
        return "memory_bound"
    return None


@dataclass(frozen=True, kw_only=True)
class ProfileBreakdown:
    """Seconds per recorded step per op class, the recorded step time, and how it was measured."""

    per_step_s: dict[str, float]
    step_s: float  # mean duration of the recorded step ranges
    steps: int
    time_kind: str  # self_cpu | self_device | device_kernels
    top_ops: list[tuple[str, str, float]] = field(default_factory=list)  # (name, class, s per step), largest first
    unlinked_s: float = 0.0  # device_kernels: kernel time per step that no recorded op claimed (classed by name)
    #: device_kernels: in-step kernels by how they were classed ("linked": by their launching op, "unlinked": by
    #: their own name), counts over the recorded steps
    kernel_links: dict[str, int] = field(default_factory=dict)

    @property
    def total_s(self) -> float:
        return sum(self.per_step_s.values())

    def fractions(self) -> dict[str, float]:
        return {k: (v / self.step_s if self.step_s > 0 else 0.0) for k, v in self.per_step_s.items()}

    def to_dict(self) -> dict[str, Any]:
        return {"per_step_s": dict(self.per_step_s), "fraction_of_step": self.fractions(), "step_s": self.step_s,
                "classified_total_s": self.total_s, "steps": self.steps, "time_kind": self.time_kind,
                "unlinked_s": self.unlinked_s, "kernel_links": dict(self.kernel_links),
                "top_ops": [list(t) for t in self.top_ops[:20]]}


def _ancestors(ev: Any) -> Iterable[Any]:
    p = getattr(ev, "cpu_parent", None)
    while p is not None:
        yield p
        p = getattr(p, "cpu_parent", None)


STRONG = ("optimizer", "communication", "attention", "gemm")


def _event_class(ev: Any) -> str:
    """Optimizer range above > own strong class > nearest strong ``aten::`` ancestor > own class > nearest
    ancestor with a class (an autograd node) > ``other`` (module docstring)."""
    anc = list(_ancestors(ev))
    if _OPT_RANGE.match(ev.name) or any(_OPT_RANGE.match(a.name) for a in anc):
        return "optimizer"
    own = op_class(ev.name)
    if own in STRONG:
        return own
    for a in anc:
        if a.name.startswith("aten::"):
            c = op_class(a.name)
            if c in STRONG:
                return c
    if own is not None:
        return own
    for a in anc:
        c = op_class(a.name)
        if c is not None:
            return c
    return "other"


def classify(events: Sequence[Any], *, step_range: str = STEP_RANGE, device: bool | None = None) -> ProfileBreakdown:
    """Per-class self time of the events inside the ``step_range`` ranges (module docstring).

    ``events`` are :class:`torch.autograd.profiler_util.FunctionEvent` s (``prof.events()``);
    ``device``: use self device time (default: when any event has some).
    """
    # the host-side ranges only: Kineto also records each ``record_function`` range as a device-side annotation
    # (``gpu_user_annotation``: the span of the range's kernels on the GPU) under the same name
    ranges = sorted((e.time_range.start, e.time_range.end) for e in events
                    if e.name == step_range and not _is_device_event(e))
    if not ranges:
        raise ValueError(f"profile: no {step_range!r} range among {len(events)} events; was the step wrapped?")

    def dev_t(e: Any) -> float:
        return float(getattr(e, "self_device_time_total", 0) or 0)

    if device is None:
        device = any(dev_t(e) > 0 for e in events)
    starts = [r[0] for r in ranges]
    import bisect

    def in_step(t: float) -> bool:
        i = bisect.bisect_right(starts, t) - 1
        return i >= 0 and t <= ranges[i][1]

    n = len(ranges)
    step_s = sum(b - a for a, b in ranges) / n * 1e-6
    kernels = _device_kernels(events) if device else []
    if kernels:
        return _classify_kernels(events, kernels, in_step, n, step_s, step_range)
    per: dict[str, float] = dict.fromkeys(CLASSES, 0.0)
    by_op: dict[tuple[str, str], float] = {}
    for e in events:
        if device and _is_device_event(e):
            continue  # a kernel's own event: its time is already in its launching op's self device time
        if not in_step(e.time_range.start):
            continue
        t_us = dev_t(e) if device else float(e.self_cpu_time_total)
        if t_us <= 0:
            continue
        c = "other" if e.name == step_range else _event_class(e)
        per[c] += t_us
        by_op[(e.name, c)] = by_op.get((e.name, c), 0.0) + t_us
    top = sorted(((k[0], k[1], v * 1e-6 / n) for k, v in by_op.items()), key=lambda x: -x[2])
    return ProfileBreakdown(per_step_s={k: v * 1e-6 / n for k, v in per.items()}, step_s=step_s, steps=n,
                            time_kind="self_device" if device else "self_cpu", top_ops=top[:20])
    # with device time the classes add up to the kernels' busy time; step_s - total is device idle time


def _is_device_event(e: Any) -> bool:
    return str(getattr(e, "device_type", "CPU")).split(".")[-1] != "CPU"


def _device_kernels(events: Sequence[Any]) -> list[Any]:
    """The device events that are work (kernels, memsets, copies), not the device-side copies of host ranges: a
    ``record_function`` range (the step range, ``Optimizer.step#...``) is also recorded on the device as an
    annotation spanning its kernels, under the host range's name. Counting those counted each step twice (seen
    on an H200, torch 2.11: six step ranges for three steps, and the step's whole GPU span as one kernel)."""
    host_names = {e.name for e in events if not _is_device_event(e)}
    return [e for e in events if _is_device_event(e) and e.name not in host_names]


_K_GEMM = re.compile(r"(gemm|gemv|cutlass|xmma|nvjet|cublas|hmma|wgmma|splitk|matmul)", re.I)
_K_ATTN = re.compile(r"(flash|fmha|attention|sdpa|cudnn::fusion)", re.I)  # cuDNN SDPA's dO.O and dQ helpers
_K_OPT = re.compile(r"(multi_tensor_apply|foreach|adam)", re.I)
_K_MEM = re.compile(r"(elementwise|vectorized|reduce|norm|softmax|copy|memcpy|memset|index|cat|fill|cast|gather|"
                    r"scatter|embedding|loss|gelu|relu|silu|unrolled|gru|lstm|rnn|dropout|gammabeta|backward|"
                    r"sort|segment|grad_weight|unique)", re.I)  # the last four: embedding backward


def kernel_class(name: str) -> str:
    """The class of a device kernel that no recorded op launched, from its own name (cuBLAS/CUTLASS GEMMs,
    flash/fused attention, the optimizer's multi-tensor kernels, NCCL, element-wise and reduction kernels)."""
    if "nccl" in name.lower():
        return "communication"
    if _K_ATTN.search(name):
        return "attention"
    if _K_OPT.search(name):
        return "optimizer"
    if _K_GEMM.search(name):
        return "gemm"
    if _K_MEM.search(name):
        return "memory_bound"
    return "other"


def _classify_kernels(events: Sequence[Any], kernels: Sequence[Any], in_step: Any, n: int, step_s: float,
                      step_range: str) -> ProfileBreakdown:
    """Device time from the kernel events themselves: each kernel's duration goes to the class of the op that
    launched it (its ``linked_correlation_id`` is that op's ``id``) when the op started inside a step range; a
    kernel no recorded op claims (a library that launches through the driver API, e.g. cuBLASLt's
    ``cuLaunchKernelEx``, is not correlated by every profiler build) counts when it starts inside a step range,
    classed by its name (:func:`kernel_class`) and reported as ``unlinked_s``. The classes then add up to the
    device's busy time, whether or not the profiler linked every kernel to its op (an op's
    ``self_device_time_total`` holds only the kernels linked to it)."""
    op_class_by_id: dict[Any, str] = {}
    op_ids_outside: set[Any] = set()
    for e in events:
        if _is_device_event(e) or getattr(e, "id", None) is None:
            continue
        if getattr(e, "linked_correlation_id", 0):
            continue  # a runtime call (cudaLaunchKernel ...): linked to its op, not an op; its id is another counter
        if in_step(e.time_range.start):
            op_class_by_id[e.id] = "other" if e.name == step_range else _event_class(e)
        else:
            op_ids_outside.add(e.id)
    per: dict[str, float] = dict.fromkeys(CLASSES, 0.0)
    by_op: dict[tuple[str, str], float] = {}
    unlinked = 0.0
    links = {"linked": 0, "unlinked": 0}
    for k in kernels:
        t_us = float(k.time_range.end - k.time_range.start)
        if t_us <= 0:
            continue
        link = getattr(k, "linked_correlation_id", 0) or 0
        if link and link in op_class_by_id:
            c = op_class_by_id[link]
            if c in ("memory_bound", "other"):  # an op running mixed kernels (cuDNN's RNN: its GEMMs and its
                kc = kernel_class(k.name)       # element-wise cells): a GEMM/attention/NCCL kernel keeps its class
                c = kc if kc in ("gemm", "attention", "communication") else c
            links["linked"] += 1
        elif link and link in op_ids_outside:
            continue  # launched by an op outside the recorded steps
        elif in_step(k.time_range.start):
            c = kernel_class(k.name)
            unlinked += t_us
            links["unlinked"] += 1
        else:
            continue
        per[c] += t_us
        by_op[(k.name, c)] = by_op.get((k.name, c), 0.0) + t_us
    top = sorted(((a, b, v * 1e-6 / n) for (a, b), v in by_op.items()), key=lambda x: -x[2])
    return ProfileBreakdown(per_step_s={k: v * 1e-6 / n for k, v in per.items()}, step_s=step_s, steps=n,
                            time_kind="device_kernels", top_ops=top[:20], unlinked_s=unlinked * 1e-6 / n,
                            kernel_links=links)


class StepProfiler:
    """Profile a few steady-state steps of a training loop (module docstring).

    Use::

        prof = StepProfiler(trace_path, device="cpu").start()
        for step in ...:
            with prof.step_range():
                ...one training step...
            prof.step()            # advances the schedule; at the end of the cycle writes and classifies
        prof.stop()
        prof.breakdown, prof.trace_path, prof.recorded(step)
    """

    def __init__(self, trace_path: str | os.PathLike[str], *, device: str = "cpu", wait: int = DEFAULT_WAIT,
                 warmup: int = DEFAULT_WARMUP, active: int = DEFAULT_ACTIVE) -> None:
        if wait < 0 or warmup < 0 or active < 1:
            raise ValueError(f"profile: wait ({wait}) and warmup ({warmup}) must be >= 0, active ({active}) >= 1")
        self.trace_path = Path(trace_path)
        self.device = device
        self.wait, self.warmup, self.active = wait, warmup, active
        self.breakdown: ProfileBreakdown | None = None
        self.error: str | None = None
        self.handler_s = 0.0  # seconds spent writing and classifying the trace
        self._prof: Any = None
        self._n = 0  # steps completed (prof.step() calls)
        self._done = False

    # -- schedule -----------------------------------------------------------------------
    def recorded(self, step_index: int) -> bool:
        """Whether the ``step_index``-th step (0-based, counted from :meth:`start`) runs under the profiler."""
        return self.wait <= step_index < self.wait + self.warmup + self.active

    def under_profiler(self) -> bool:
        """Whether the step about to run is profiled (warm-up or active): its timing carries the overhead."""
        return self._prof is not None and not self._done and self.recorded(self._n)

    def start(self) -> StepProfiler:
        import torch
        from torch.profiler import ProfilerActivity, profile, schedule

        acts = [ProfilerActivity.CPU]
        if str(self.device).startswith("cuda") and torch.cuda.is_available():
            acts.append(ProfilerActivity.CUDA)
        self._prof = profile(activities=acts, schedule=schedule(wait=self.wait, warmup=self.warmup,
                                                               active=self.active, repeat=1),
                             on_trace_ready=self._ready, record_shapes=False, with_stack=False)
        self._prof.__enter__()
        return self

    def step_range(self) -> AbstractContextManager[Any]:
        if self._prof is None or self._done:
            return nullcontext()
        from torch.profiler import record_function

        return record_function(STEP_RANGE)

    def step(self) -> None:
        if self._prof is None or self._done:
            return
        self._n += 1
        self._prof.step()

    def stop(self) -> None:
        if self._prof is not None and not self._done:
            self._prof.__exit__(None, None, None)
            self._done = True

    def _ready(self, prof: Any) -> None:
        t0 = time.perf_counter()
        self._done = True
        try:
            self.trace_path.parent.mkdir(parents=True, exist_ok=True)
            prof.export_chrome_trace(str(self.trace_path))
            self.breakdown = classify(prof.events())
        except Exception as exc:  # noqa: BLE001 - a profiling problem must not fail the training run
            self.error = f"{type(exc).__name__}: {exc}"
        self.handler_s += time.perf_counter() - t0

    # -- output ----------------------------------------------------------------------------
    def metrics(self) -> dict[str, Any]:
        """What the runner stores in the workload record."""
        out: dict[str, Any] = {"profile_trace": str(self.trace_path) if self.trace_path.exists() else None}
        if self.breakdown is not None:
            out["profile_breakdown_s"] = dict(self.breakdown.per_step_s)
            out["profile"] = self.breakdown.to_dict()
        else:
            out["profile_breakdown_s"] = {}
            out["profile"] = {"error": self.error or f"the profile cycle did not complete (wait {self.wait}, "
                                                    f"warmup {self.warmup}, active {self.active} steps needed)"}
        return out


def default_trace_path(directory: str | os.PathLike[str], workload: str) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    return Path(directory) / f"{workload}-{stamp}-{os.getpid()}.trace.json"


#: Chrome-trace event categories (Kineto's ``cat``) read back by :func:`trace_events`: host ranges and ops, and
#: device work; the device-side annotations are read too (:func:`classify` leaves them out by name)
_HOST_CATS = ("cpu_op", "user_annotation")
_DEVICE_CATS = ("kernel", "gpu_memset", "gpu_memcpy", "gpu_user_annotation")


def trace_events(path: str | os.PathLike[str]) -> list[Any]:
    """The events of a written Chrome/Perfetto trace (``.json`` or ``.json.gz``) as the profiler's event objects
    look to :func:`classify`: host ops and ranges with their parent (nesting on the same thread) and their
    ``External id``; device kernels, memsets and copies linked to the op that launched them by the same id. Lets
    a saved trace be classified again (e.g. a trace from a GPU, read on a CPU machine), and links kernels by the
    trace's own ids where the in-process events were not linked."""
    from types import SimpleNamespace as NS

    evs = _read_trace(path)
    out: list[Any] = []
    by_thread: dict[tuple[Any, Any], list[Any]] = {}
    for e in evs:
        cat, dur = e.get("cat"), e.get("dur")
        if e.get("ph") != "X" or dur is None or cat not in _HOST_CATS + _DEVICE_CATS:
            continue
        ext = (e.get("args") or {}).get("External id")
        start = float(e["ts"])
        ev = NS(name=str(e.get("name", "")), time_range=NS(start=start, end=start + float(dur)), cpu_parent=None,
                self_cpu_time_total=0.0, self_device_time_total=0.0,
                device_type="DeviceType.CUDA" if cat in _DEVICE_CATS else "DeviceType.CPU",
                id=None if cat in _DEVICE_CATS else ext, linked_correlation_id=(ext or 0) if cat in _DEVICE_CATS else 0)
        out.append(ev)
        if cat in _HOST_CATS:
            by_thread.setdefault((e.get("pid"), e.get("tid")), []).append(ev)
    for thread in by_thread.values():  # nesting: the innermost enclosing range on the same thread is the parent
        stack: list[Any] = []
        for ev in sorted(thread, key=lambda x: (x.time_range.start, -x.time_range.end)):
            while stack and stack[-1].time_range.end < ev.time_range.end:
                stack.pop()
            ev.cpu_parent = stack[-1] if stack else None
            stack.append(ev)
    return out


def classify_trace(path: str | os.PathLike[str], *, step_range: str = STEP_RANGE) -> ProfileBreakdown:
    """:func:`classify` of a written trace (:func:`trace_events`) by its device kernels (a trace without any, e.g.
    from a CPU run, has no self times to classify here: ValueError)."""
    evs = trace_events(path)
    if not any(_is_device_event(e) for e in evs):
        raise ValueError(f"profile: {path}: no device kernels in the trace (classify_trace reads GPU traces)")
    return classify(evs, step_range=step_range, device=True)


def _read_trace(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The raw events of a written Chrome/Perfetto trace (``.json``, or gzipped)."""
    import gzip

    raw = Path(path).read_bytes()
    data = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    return data.get("traceEvents", []) if isinstance(data, dict) else data


def trace_summary(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A cheap check of a written trace: event count and names of the step ranges (for tests and the CLI)."""
    evs = _read_trace(path)
    return {"events": len(evs), "step_ranges": sum(1 for e in evs if e.get("name") == STEP_RANGE)}


__all__ = ["CLASSES", "STEP_RANGE", "ProfileBreakdown", "StepProfiler", "classify", "classify_trace", "op_class",
           "default_trace_path", "trace_events", "trace_summary"]
