"""One timing harness for every kernel and workload.

Method (after triton's ``do_bench``, ``torch.utils.benchmark`` and mamf-finder):

* time budgets that stop on convergence, not on a fixed tiny count: warm up
  for at least ``warmup_ms`` (and ``min_warmup`` calls) and then until the
  rate stabilises (the last three calls within :data:`WARMUP_TOL` of their
  median) or ``warmup_cap_ms`` is spent; estimate the cost of one call from
  the stable calls; take as many samples as fit in ``measure_ms`` (clamped to
  ``[min_reps, max_reps]``), then keep sampling in blocks until the 95%
  confidence interval of the median is within ``rel_tol`` of it or
  ``max_measure_ms`` is spent (the approach of ``torch.utils.benchmark``'s
  ``blocked_autorange`` and nvbench's noise-based stopping criterion). The
  measurement says which way it stopped (``stop_reason``) and warns when the
  cap was hit first;
* every sample is closed by a device synchronization (``torch.cuda.synchronize``,
  JAX ``block_until_ready``) or timed with CUDA events, so asynchronous
  dispatch is never mistaken for work done;
* optional cache flush before each sample (a write over a buffer larger than
  the last-level cache on CPU, or the L2 on GPU) and rotation across several
  input buffers, so data left in cache by the previous call is not timed;
* very short calls are batched ``inner`` times per sample (only when neither
  flushing nor rotation asks for per-call state) so the clock's resolution and
  the harness's own overhead stay well under 1% of a sample;
* the result is a :class:`Measurement` holding the raw per-iteration times,
  median, IQR, min, count, warm-up count, clock and a noise warning when
  IQR/median exceeds :data:`NOISE_THRESHOLD` (torch.utils.benchmark's 10%).
"""

from __future__ import annotations

import math
import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hwcore.errors import InputError

#: IQR/median above which a measurement is flagged as noisy (torch.utils.benchmark uses 10%).
NOISE_THRESHOLD = 0.10
#: Shortest sample worth timing on a host clock; shorter calls are batched.
MIN_SAMPLE_S = 200e-6
#: Warm-up ends once the last three calls lie within this fraction of their median.
WARMUP_TOL = 0.05
#: Default stopping tolerance: half-width of the median's 95% CI relative to the median.
REL_TOL = 0.02
#: z for the two-sided 95% distribution-free CI of the median (order statistics).
_Z95 = 1.959964


def median_ci(times: Sequence[float], z: float = _Z95) -> tuple[float, float]:
    """Distribution-free ~95% CI of the median from order statistics.

    The ranks are ``n/2 -+ z sqrt(n)/2`` (normal approximation to the
    binomial(n, 1/2) count of samples below the median; Conover, *Practical
    Nonparametric Statistics*, 3rd ed., 1999, sec. 3.2). Needs n >= 6, else
    the sample range is returned.
    """
    xs = sorted(times)
    n = len(xs)
    if n < 6:
        return xs[0], xs[-1]
    half = z * math.sqrt(n) / 2.0
    lo = max(0, int(math.floor(n / 2.0 - half)) - 1)
    hi = min(n - 1, int(math.ceil(n / 2.0 + half)) - 1)
    return xs[lo], xs[hi]


def median_ci_rel(times: Sequence[float]) -> float:
    """Half-width of :func:`median_ci` relative to the median (inf for < 6 samples)."""
    if len(times) < 6:
        return math.inf
    lo, hi = median_ci(times)
    if hi == lo:  # no spread (a frozen or coarse clock): nothing more to learn from more samples
        return 0.0
    med = statistics.median(times)
    return (hi - lo) / 2.0 / med if med > 0 else math.inf


class NoisyMeasurementWarning(UserWarning):
    """IQR/median of a measurement exceeded :data:`NOISE_THRESHOLD`."""


@dataclass(frozen=True, kw_only=True)
class Measurement:
    """Timings of one operation: per-iteration seconds and their statistics.

    ``times_s`` holds one entry per sample, each the time of a single call
    (a batched sample of ``inner`` calls is divided by ``inner``).
    """

    label: str
    times_s: tuple[float, ...]
    warmup_n: int
    clock: str
    inner: int = 1
    sync: str = "none"
    flush: bool = False
    rotation: int = 1
    overhead_s: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    #: how sampling stopped: "converged" (median CI within rel_tol), "time_cap", "max_reps", or "budget"
    #: (a fixed budget without a convergence test, e.g. times taken elsewhere)
    stop_reason: str = "budget"
    rel_tol: float | None = None

    def __post_init__(self) -> None:
        if not self.times_s:
            raise ValueError("Measurement.times_s must hold at least one sample.")
        if self.inner < 1:
            raise ValueError("Measurement.inner must be >= 1.")

    # -- statistics ---------------------------------------------------------------
    @property
    def n(self) -> int:
        return len(self.times_s)

    @property
    def median_s(self) -> float:
        return float(statistics.median(self.times_s))

    @property
    def mean_s(self) -> float:
        return float(statistics.fmean(self.times_s))

    @property
    def min_s(self) -> float:
        return float(min(self.times_s))

    @property
    def max_s(self) -> float:
        return float(max(self.times_s))

    @property
    def q25_s(self) -> float:
        return float(np.percentile(self.times_s, 25))

    @property
    def q75_s(self) -> float:
        return float(np.percentile(self.times_s, 75))

    @property
    def iqr_s(self) -> float:
        return self.q75_s - self.q25_s

    @property
    def noise_ratio(self) -> float:
        """IQR / median (0 for a single sample)."""
        med = self.median_s
        return self.iqr_s / med if med > 0 else math.inf

    @property
    def median_ci_rel(self) -> float:
        """Half-width of the median's 95% CI relative to the median (inf below 6 samples)."""
        return median_ci_rel(self.times_s)

    @property
    def converged(self) -> bool | None:
        """Whether the median met its tolerance; None when no tolerance was asked for."""
        if self.rel_tol is None:
            return None
        return self.stop_reason == "converged"

    @property
    def noise_warning(self) -> bool:
        return self.n < 3 or self.noise_ratio > NOISE_THRESHOLD or self.converged is False

    @property
    def noise_message(self) -> str | None:
        if self.n < 3:
            return f"{self.label}: only {self.n} sample(s); no spread estimate"
        if self.noise_ratio > NOISE_THRESHOLD:
            return (
                f"{self.label}: IQR/median = {self.noise_ratio:.1%} > {NOISE_THRESHOLD:.0%}; "
                "the machine is noisy or the operation is unstable"
            )
        if self.converged is False:
            return (
                f"{self.label}: stopped at the {self.stop_reason.replace('_', ' ')} after {self.n} samples with the "
                f"median's 95% CI at +-{self.median_ci_rel:.1%} (asked for +-{self.rel_tol:.1%})"
            )
        return None

    def rate(self, amount: float) -> float:
        """``amount`` per second at the median time (e.g. FLOP/s given FLOPs)."""
        return amount / self.median_s

    # -- presentation ---------------------------------------------------------------
    def to_dict(self, *, raw: bool = True) -> dict[str, Any]:
        d: dict[str, Any] = {
            "label": self.label,
            "median_s": self.median_s,
            "iqr_s": self.iqr_s,
            "q25_s": self.q25_s,
            "q75_s": self.q75_s,
            "min_s": self.min_s,
            "mean_s": self.mean_s,
            "n": self.n,
            "warmup_n": self.warmup_n,
            "inner": self.inner,
            "clock": self.clock,
            "sync": self.sync,
            "flush": self.flush,
            "rotation": self.rotation,
            "overhead_s": self.overhead_s,
            "noise_ratio": self.noise_ratio,
            "noise_warning": self.noise_warning,
            "median_ci_rel": self.median_ci_rel if self.n >= 6 else None,
            "stop_reason": self.stop_reason,
            "rel_tol": self.rel_tol,
            "metadata": dict(self.metadata),
        }
        if raw:
            d["times_s"] = list(self.times_s)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Measurement:
        return cls(
            label=d["label"],
            times_s=tuple(d["times_s"]),
            warmup_n=d["warmup_n"],
            clock=d["clock"],
            inner=d.get("inner", 1),
            sync=d.get("sync", "none"),
            flush=d.get("flush", False),
            rotation=d.get("rotation", 1),
            overhead_s=d.get("overhead_s"),
            metadata=d.get("metadata", {}),
            stop_reason=d.get("stop_reason", "budget"),
            rel_tol=d.get("rel_tol"),
        )

    def __str__(self) -> str:
        med, iqr = self.median_s, self.iqr_s
        unit, scale = _time_unit(med)
        lines = [
            f"<Measurement {self.label}>",
            f"  median {med * scale:.3f} {unit}   IQR {iqr * scale:.3f} {unit}   "
            f"min {self.min_s * scale:.3f} {unit}",
            f"  {self.n} samples x {self.inner} call(s), {self.warmup_n} warm-up, "
            f"clock={self.clock}, sync={self.sync}, flush={self.flush}, rotation={self.rotation}",
        ]
        if self.noise_message:
            lines.append(f"  WARNING: {self.noise_message}")
        return "\n".join(lines)


def _time_unit(seconds: float) -> tuple[str, float]:
    if seconds >= 1:
        return "s", 1.0
    if seconds >= 1e-3:
        return "ms", 1e3
    if seconds >= 1e-6:
        return "us", 1e6
    return "ns", 1e9


# ---------------------------------------------------------------------------------
# synchronization
# ---------------------------------------------------------------------------------
Sync = Callable[[Any], None]


def _sync_none(_out: Any) -> None:
    return None


def _sync_torch_cuda(_out: Any) -> None:
    import torch

    torch.cuda.synchronize()


def _cuda_device_sync(device: str) -> Sync:
    """A synchronizer for one CUDA device (``torch.cuda.synchronize()`` alone waits
    on the *current* device, which is not the benchmarked one for ``cuda:1``)."""
    import torch

    dev = torch.device(device)

    def _sync_cuda_device(_out: Any) -> None:
        torch.cuda.synchronize(dev)

    return _sync_cuda_device


def _sync_jax(out: Any) -> None:
    import jax

    jax.block_until_ready(out)


SYNCS: dict[str, Sync] = {"none": _sync_none, "cuda": _sync_torch_cuda, "jax": _sync_jax}


def resolve_sync(sync: str | Sync) -> tuple[str, Sync]:
    """Name and callable of a synchronizer; ``sync`` may be a name or a callable."""
    if callable(sync):
        return getattr(sync, "__name__", "custom"), sync
    if sync not in SYNCS:
        from hwcore.errors import choices_error

        raise choices_error("sync", sync, SYNCS)
    return sync, SYNCS[sync]


# ---------------------------------------------------------------------------------
# cache flushing
# ---------------------------------------------------------------------------------
class CacheFlusher:
    """Evicts caches between samples by writing a buffer larger than the cache.

    On CPU the buffer is ``2 x`` the last-level cache (from the fingerprint);
    on CUDA it is ``2 x`` the device L2 (``torch.cuda.get_device_properties``),
    zeroed on the current stream so the flush is ordered before the timed call.
    """

    def __init__(self, device: str = "cpu", nbytes: int | None = None) -> None:
        self.device = device
        if device.startswith("cuda"):
            import torch

            if nbytes is None:
                props = torch.cuda.get_device_properties(torch.device(device))
                l2 = int(getattr(props, "L2_cache_size", 0) or 50 * 2**20)
                nbytes = 2 * l2
            self.nbytes = int(nbytes)
            self._buf = torch.empty(self.nbytes // 4, dtype=torch.int32, device=device)
        else:
            if nbytes is None:
                from hwcore.fingerprint import last_level_cache_bytes

                nbytes = 2 * last_level_cache_bytes()
            self.nbytes = int(nbytes)
            self._buf = np.empty(self.nbytes // 8, dtype=np.int64)
            self._counter = 0

    def __call__(self) -> None:
        if self.device.startswith("cuda"):
            self._buf.zero_()
        else:
            self._counter += 1
            self._buf.fill(self._counter)


# ---------------------------------------------------------------------------------
# the harness
# ---------------------------------------------------------------------------------
def benchmark(
    fn: Callable[..., Any],
    *,
    inputs: Sequence[tuple[Any, ...]] | None = None,
    label: str = "",
    warmup_ms: float = 25.0,
    measure_ms: float = 200.0,
    min_warmup: int = 1,
    min_reps: int = 5,
    max_reps: int = 100_000,
    rel_tol: float | None = REL_TOL,
    max_measure_ms: float | None = None,
    warmup_cap_ms: float | None = None,
    sync: str | Sync = "none",
    flush_cache: bool = False,
    flusher: Callable[[], None] | None = None,
    device: str = "cpu",
    cuda_events: bool | None = None,
    inner: int | None = None,
    timer: Callable[[], float] = time.perf_counter,
    overhead: bool = False,
    metadata: dict[str, Any] | None = None,
    warn: bool = True,
) -> Measurement:
    """Time ``fn(*inputs[i % len(inputs)])`` and return a :class:`Measurement`.

    ``inputs`` is the rotation: a list of argument tuples, one per buffer set;
    ``None`` calls ``fn()``. ``sync`` names a synchronizer (``none``, ``cuda``,
    ``jax``) or is a callable taking the call's output. On a CUDA ``device``
    the samples are timed with CUDA events unless ``cuda_events=False``.
    ``timer`` is injectable so the statistics can be tested on a synthetic clock.

    Stopping: ``measure_ms`` is the minimum measurement budget; past it,
    sampling goes on in blocks until the median's 95% CI half-width is within
    ``rel_tol`` of the median (``None``: no convergence test, the fixed budget
    only) or ``max_measure_ms`` (default ``max(5 x measure_ms, 1000)``) of
    sampling is spent. Warm-up: at least ``warmup_ms``, then until the last
    three calls agree within :data:`WARMUP_TOL` or ``warmup_cap_ms`` (default
    ``max(warmup_ms, 1000)``) is spent with at least three calls made (or ten times the
    cap is spent, whatever the count).
    """
    for name, v in (("warmup_ms", warmup_ms), ("measure_ms", measure_ms), ("rel_tol", rel_tol),
                    ("max_measure_ms", max_measure_ms), ("warmup_cap_ms", warmup_cap_ms)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v)):
            raise InputError(f"timing: {name} must be a finite number, got {v!r}")
    if warmup_ms < 0 or measure_ms <= 0:
        raise InputError("timing: warmup_ms must be >= 0 and measure_ms > 0")
    if rel_tol is not None and rel_tol <= 0:
        raise InputError(f"timing: rel_tol must be > 0 (or None for a fixed budget), got {rel_tol!r}")
    if min_reps < 1 or max_reps < min_reps:
        raise InputError("timing: need 1 <= min_reps <= max_reps")
    cap_s = (max_measure_ms if max_measure_ms is not None else max(5.0 * measure_ms, 1000.0)) * 1e-3
    warm_cap_s = (warmup_cap_ms if warmup_cap_ms is not None else max(warmup_ms, 1000.0)) * 1e-3
    sync_name, sync_fn = resolve_sync(sync)
    rotation = list(inputs) if inputs is not None else [()]
    if not rotation:
        raise InputError("timing: inputs must hold at least one argument tuple")
    use_events = device.startswith("cuda") if cuda_events is None else cuda_events
    if flush_cache and flusher is None:
        flusher = CacheFlusher(device)
    flushing = flusher is not None
    warm_sync = sync_fn
    if device.startswith("cuda"):
        dev_sync = _cuda_device_sync(device)
        if sync_name == "cuda":
            sync_fn = warm_sync = dev_sync
        elif use_events and sync_name == "none":
            # events need no per-sample sync, but the warm-up's per-call estimate
            # (which sizes reps) must wait for the GPU or it is only launch overhead
            warm_sync = dev_sync

    def call(i: int) -> Any:
        return fn(*rotation[i % len(rotation)])

    # ---- warm-up: min_warmup calls and warmup_ms of wall time, then until the rate is stable
    warm_n = 0
    warm_times: list[float] = []
    t0 = timer()
    while True:
        if flushing:
            flusher()
        tc = timer()
        warm_sync(call(warm_n))
        warm_times.append(timer() - tc)
        warm_n += 1
        elapsed = timer() - t0
        if warm_n < min_warmup or elapsed * 1e3 < warmup_ms:
            continue
        last = warm_times[-3:]
        med = statistics.median(last)
        stable = len(last) == 3 and max(abs(x - med) for x in last) <= WARMUP_TOL * med
        # the cap ends an unstable warm-up, but not before three calls (the stability test needs them)
        # unless a single call is itself far beyond the cap
        if stable or (elapsed >= warm_cap_s and warm_n >= 3) or elapsed >= 10 * warm_cap_s or warm_n >= max_reps:
            break
    # cost of one call: the stable calls' median, else (cap hit) the warm-up's mean
    per_call = max(statistics.median(warm_times[-3:]) if stable else (timer() - t0) / warm_n, 1e-9)

    # ---- batching of short calls (not when each call needs fresh cache state)
    if inner is None:
        if flushing or len(rotation) > 1 or use_events:
            inner = 1
        else:
            inner = max(1, math.ceil(MIN_SAMPLE_S / per_call))
    fit = math.floor((measure_ms * 1e-3) / (per_call * inner) * (1 + 1e-9))
    reps = int(min(max_reps, max(min_reps, fit)))

    times: list[float] = []
    if use_events:
        import torch

        # record on the benchmarked device's current stream (where its kernels run),
        # not on the current device's: they differ for device="cuda:1"
        dev = torch.device(device if device.startswith("cuda") else "cuda")
        stream = torch.cuda.current_stream(dev)
        clock = "cuda_event"
        ev_idx = 0

        def more(k: int) -> None:
            nonlocal ev_idx
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(k)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(k)]
            for r in range(k):
                if flushing:
                    flusher()
                starts[r].record(stream)
                for _ in range(inner):
                    call(ev_idx)
                ev_idx += 1
                ends[r].record(stream)
            torch.cuda.synchronize(dev)
            times.extend(x.elapsed_time(y) * 1e-3 / inner for x, y in zip(starts, ends, strict=True))

        more(reps)
    else:
        idx = 0

        def more(k: int) -> None:
            nonlocal idx
            for _ in range(k):
                if flushing:
                    flusher()
                start = timer()
                out = None
                for _ in range(inner):
                    out = call(idx)
                    idx += 1
                sync_fn(out)
                times.append((timer() - start) / inner)

        more(reps)
        clock = getattr(timer, "__name__", "custom")

    # ---- past the minimum budget: blocks of samples until the median converges or the cap
    stop_reason = "budget" if rel_tol is None else "converged"
    if rel_tol is not None:
        spent = sum(times) * inner
        while median_ci_rel(times) > rel_tol:
            if len(times) >= max_reps:
                stop_reason = "max_reps"
                break
            if spent >= cap_s:
                stop_reason = "time_cap"
                break
            per = max(statistics.median(times) * inner, 1e-9)
            # a block of ~25% more samples, at least 5, within what is left of the cap and max_reps
            k = int(min(max_reps - len(times), max(5, len(times) // 4), max(1, math.ceil((cap_s - spent) / per))))
            t_block = timer()
            more(k)
            spent += max(timer() - t_block, sum(times[-k:]) * inner)

    over = harness_overhead(timer=timer, sync=sync).median_s if overhead else None
    m = Measurement(
        label=label or getattr(fn, "__name__", "fn"),
        times_s=tuple(times),
        warmup_n=warm_n,
        clock=clock,
        inner=inner,
        sync=sync_name,
        flush=flushing,
        rotation=len(rotation),
        overhead_s=over,
        metadata=dict(metadata or {}),
        stop_reason=stop_reason,
        rel_tol=rel_tol,
    )
    if warn and m.noise_message:
        warnings.warn(m.noise_message, NoisyMeasurementWarning, stacklevel=2)
    return m


def _empty() -> None:
    return None


def harness_overhead(
    *, timer: Callable[[], float] = time.perf_counter, sync: str | Sync = "none", inner: int = 1
) -> Measurement:
    """Time an empty op through the harness: the floor under every measurement.

    ``inner=1`` (the default) gives the per-sample overhead a call of one
    invocation pays (clock reads + Python call + sync).
    """
    return benchmark(
        _empty,
        label="harness_overhead",
        warmup_ms=5,
        measure_ms=50,
        min_reps=100,
        inner=inner,
        sync=sync,
        timer=timer,
        warn=False,
        rel_tol=None,  # a floor estimate over a fixed budget; an empty op's spread is all clock noise
    )


def from_times(times_s: Sequence[float], *, label: str = "", clock: str = "external", warmup_n: int = 0,
               metadata: dict[str, Any] | None = None) -> Measurement:
    """A :class:`Measurement` over times taken elsewhere (e.g. per training step)."""
    return Measurement(
        label=label,
        times_s=tuple(float(t) for t in times_s),
        warmup_n=warmup_n,
        clock=clock,
        metadata=dict(metadata or {}),
    )
