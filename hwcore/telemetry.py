"""GPU telemetry around a measurement: clocks, power, temperature, throttle reasons.

Samples NVML (``nvidia-ml-py``, imported as ``pynvml``) once before the
measured region, every ``interval_s`` from a background thread while it runs,
and once after, then checks for throttling *under load*:

* the median SM clock over the samples taken while the GPU was busy
  (utilization >= ``load_util_pct``) below ``clock_ratio`` (default 0.90) of
  the device's maximum SM clock (``nvmlDeviceGetMaxClockInfo``), or
* a performance-limiting clock-event reason active in any loaded sample
  (software power cap, hardware slowdown, thermal slowdowns, power brake).

Idle samples are excluded: an idle GPU parks its clocks low (reason
``gpu_idle``), which is not throttling. Either condition sets
``throttle_warning`` and warns with :class:`ThrottlingWarning`, so numbers
taken on a power- or heat-limited card are never silently compared with a
datasheet.

Where NVML is absent (no ``pynvml`` module, no driver, no GPU) every entry
point returns a :class:`TelemetryResult` with ``available=False`` and the
reason; nothing raises. Tests inject a fake NVML module (``nvml=``).

Usage::

    with Telemetry(device=0) as tel:
        m = benchmark(fn, device="cuda", ...)
    tel.result.metrics()  # flat dict for Record.metrics
"""

from __future__ import annotations

import statistics
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hwcore.errors import InputError

#: Median loaded SM clock below this fraction of the max SM clock is throttling.
#: 10% is well outside the few-percent wobble of boost clocks under a steady load.
DEFAULT_CLOCK_RATIO = 0.90
#: GPU utilization (percent of the sample period a kernel ran, per NVML) above
#: which a sample counts as "under load".
DEFAULT_LOAD_UTIL_PCT = 50.0
DEFAULT_INTERVAL_S = 0.1

#: NVML clock-event ("throttle") reason bits, from ``nvml.h``
#: (``nvmlClocksEventReason*``, formerly ``nvmlClocksThrottleReason*``).
REASON_BITS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
#: Reasons that mean the card runs slower than it could for this load.
LIMITING_REASONS = frozenset(
    {"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}
)

_MHZ = 1e6  # NVML clocks are in MHz
_MW = 1e-3  # NVML power is in milliwatts


class ThrottlingWarning(UserWarning):
    """The GPU's clocks dropped under load, or a power/thermal limit was active."""


def decode_reasons(mask: int) -> tuple[str, ...]:
    """Names of the NVML clock-event reason bits set in ``mask``."""
    names = [name for bit, name in REASON_BITS.items() if mask & bit]
    unknown = mask & ~sum(REASON_BITS)
    if unknown:
        names.append(f"other_0x{unknown:x}")
    return tuple(names)


@dataclass(frozen=True, kw_only=True)
class GpuSample:
    """One NVML reading of one GPU. SI units: Hz, W, degrees Celsius, percent."""

    t_s: float  # seconds since the Telemetry started
    phase: str  # "before" | "during" | "after"
    index: int
    sm_clock_hz: float | None
    mem_clock_hz: float | None
    power_w: float | None
    temperature_c: float | None
    util_pct: float | None
    reasons: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "t_s": self.t_s,
            "phase": self.phase,
            "index": self.index,
            "sm_clock_hz": self.sm_clock_hz,
            "mem_clock_hz": self.mem_clock_hz,
            "power_w": self.power_w,
            "temperature_c": self.temperature_c,
            "util_pct": self.util_pct,
            "reasons": list(self.reasons),
        }


@dataclass(frozen=True, kw_only=True)
class GpuInfo:
    index: int
    name: str
    uuid: str | None
    max_sm_clock_hz: float | None
    max_mem_clock_hz: float | None
    power_limit_w: float | None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _median(xs: Sequence[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return float(statistics.median(vals)) if vals else None


def _max(xs: Sequence[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return float(max(vals)) if vals else None


@dataclass(frozen=True, kw_only=True)
class TelemetryResult:
    """Samples and the throttle verdict of one measured region."""

    available: bool
    reason: str | None = None
    devices: tuple[GpuInfo, ...] = ()
    samples: tuple[GpuSample, ...] = ()
    clock_ratio: float = DEFAULT_CLOCK_RATIO
    load_util_pct: float = DEFAULT_LOAD_UTIL_PCT
    throttle_warning: bool = False
    throttle_message: str | None = None
    errors: tuple[str, ...] = field(default_factory=tuple)

    def loaded(self, index: int | None = None) -> list[GpuSample]:
        """Samples taken during/after the region while the GPU was busy."""
        return [
            s
            for s in self.samples
            if s.phase != "before"
            and (index is None or s.index == index)
            and s.util_pct is not None
            and s.util_pct >= self.load_util_pct
        ]

    def metrics(self) -> dict[str, Any]:
        """Flat ``gpu_*`` metrics for a store Record (first device when several)."""
        out: dict[str, Any] = {"gpu_telemetry": self.available, "gpu_throttle_warning": self.throttle_warning}
        if not self.available or not self.devices:
            return out
        dev = self.devices[0]
        loaded = self.loaded(dev.index)
        every = [s for s in self.samples if s.index == dev.index]
        basis = loaded or [s for s in every if s.phase != "before"] or every
        med_sm = _median([s.sm_clock_hz for s in basis])
        out.update(
            {
                "gpu_samples": len(every),
                "gpu_loaded_samples": len(loaded),
                "gpu_sm_clock_hz_median": med_sm,
                "gpu_sm_clock_hz_max_spec": dev.max_sm_clock_hz,
                "gpu_sm_clock_ratio": (med_sm / dev.max_sm_clock_hz) if med_sm and dev.max_sm_clock_hz else None,
                "gpu_mem_clock_hz_median": _median([s.mem_clock_hz for s in basis]),
                "gpu_power_w_median": _median([s.power_w for s in basis]),
                "gpu_power_w_max": _max([s.power_w for s in every]),
                "gpu_power_limit_w": dev.power_limit_w,
                "gpu_temperature_c_max": _max([s.temperature_c for s in every]),
                "gpu_util_pct_median": _median([s.util_pct for s in basis]),
            }
        )
        return out

    def to_dict(self, *, samples: bool = True) -> dict[str, Any]:
        d: dict[str, Any] = {
            "available": self.available,
            "reason": self.reason,
            "devices": [g.to_dict() for g in self.devices],
            "clock_ratio": self.clock_ratio,
            "load_util_pct": self.load_util_pct,
            "throttle_warning": self.throttle_warning,
            "throttle_message": self.throttle_message,
            "errors": list(self.errors),
            "metrics": self.metrics(),
        }
        if samples:
            d["samples"] = [s.to_dict() for s in self.samples]
        return d


def unavailable(reason: str) -> TelemetryResult:
    return TelemetryResult(available=False, reason=reason)


def throttle_verdict(
    devices: Sequence[GpuInfo],
    samples: Sequence[GpuSample],
    *,
    clock_ratio: float = DEFAULT_CLOCK_RATIO,
    load_util_pct: float = DEFAULT_LOAD_UTIL_PCT,
) -> tuple[bool, str | None]:
    """Whether any device throttled under load, and a one-line explanation."""
    problems: list[str] = []
    for dev in devices:
        loaded = [
            s
            for s in samples
            if s.index == dev.index and s.phase != "before" and s.util_pct is not None and s.util_pct >= load_util_pct
        ]
        if not loaded:
            continue
        med = _median([s.sm_clock_hz for s in loaded])
        if med is not None and dev.max_sm_clock_hz:
            ratio = med / dev.max_sm_clock_hz
            if ratio < clock_ratio:
                problems.append(
                    f"GPU {dev.index} ({dev.name}): median SM clock under load {med / _MHZ:.0f} MHz = "
                    f"{ratio:.0%} of max {dev.max_sm_clock_hz / _MHZ:.0f} MHz (< {clock_ratio:.0%})"
                )
        limiting = sorted({r for s in loaded for r in s.reasons if r in LIMITING_REASONS})
        if limiting:
            n = sum(1 for s in loaded if LIMITING_REASONS.intersection(s.reasons))
            problems.append(
                f"GPU {dev.index} ({dev.name}): clock-limiting reasons {', '.join(limiting)} "
                f"in {n} of {len(loaded)} loaded samples"
            )
    if not problems:
        return False, None
    return True, "throttling: " + "; ".join(problems) + " - rates measured here understate the card"


# ---------------------------------------------------------------------------------
# NVML access
# ---------------------------------------------------------------------------------
def load_nvml() -> tuple[Any | None, str | None]:
    """``(pynvml module, None)`` after ``nvmlInit``, or ``(None, reason)``."""
    try:
        import pynvml  # provided by the nvidia-ml-py package
    except ImportError:
        return None, "pynvml not importable (pip install nvidia-ml-py; it is in the 'gpu' extra)"
    return _init(pynvml)


def _init(nvml: Any) -> tuple[Any | None, str | None]:
    try:
        nvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ...: the reason is recorded
        return None, f"nvmlInit failed: {type(exc).__name__}: {exc}"
    return nvml, None


def _call(nvml: Any, name: str, *args: Any) -> Any:
    fn = getattr(nvml, name, None)
    if fn is None:
        raise AttributeError(f"NVML has no {name}")
    return fn(*args)


def _decode(x: Any) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


def _torch_uuid(cuda_index: int) -> str | None:
    """UUID of torch's CUDA device ``cuda_index`` (CUDA and NVML order devices differently)."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        u = getattr(torch.cuda.get_device_properties(cuda_index), "uuid", None)
    except (ImportError, RuntimeError, AssertionError):  # no torch / CUDA init failed / bad ordinal: NVML order
        return None
    if u is None:
        return None
    u = str(u)
    return u if u.startswith(("GPU-", "MIG-")) else f"GPU-{u}"


def resolve_handles(nvml: Any, devices: Sequence[int] | None, *, by_cuda_index: bool = True) -> list[tuple[int, Any]]:
    """``(index, handle)`` per requested GPU.

    With ``by_cuda_index`` the indices are torch/CUDA ordinals (what
    ``device="cuda:1"`` means, after ``CUDA_VISIBLE_DEVICES``), mapped to NVML
    handles through the device UUID; NVML's own enumeration (PCI order, all
    GPUs of the node) is the fallback.
    """
    count = int(_call(nvml, "nvmlDeviceGetCount"))
    wanted = list(range(count)) if devices is None else list(devices)
    out = []
    for i in wanted:
        handle = None
        if by_cuda_index:
            uuid = _torch_uuid(i)
            if uuid is not None and hasattr(nvml, "nvmlDeviceGetHandleByUUID"):
                try:
                    handle = nvml.nvmlDeviceGetHandleByUUID(uuid.encode() if isinstance(uuid, str) else uuid)
                except Exception:  # noqa: BLE001 - NVML's error classes live in the loaded module; retry as str
                    try:
                        handle = nvml.nvmlDeviceGetHandleByUUID(uuid)
                    except Exception:  # noqa: BLE001 - fall back to NVML's own index (documented above)
                        handle = None
        if handle is None:
            if not 0 <= i < count:
                raise InputError(f"telemetry.device: index {i} out of range; NVML sees {count} GPU(s)")
            handle = _call(nvml, "nvmlDeviceGetHandleByIndex", i)
        out.append((i, handle))
    return out


def device_info(nvml: Any, index: int, handle: Any) -> GpuInfo:
    clock_sm = getattr(nvml, "NVML_CLOCK_SM", 1)
    clock_mem = getattr(nvml, "NVML_CLOCK_MEM", 2)

    def opt(name: str, *args: Any) -> Any:
        try:
            return _call(nvml, name, handle, *args)
        except Exception:  # noqa: BLE001 - NVMLError_NotSupported & co.: an unexposed value reads as None
            return None

    mx_sm, mx_mem, plim = opt("nvmlDeviceGetMaxClockInfo", clock_sm), opt("nvmlDeviceGetMaxClockInfo", clock_mem), opt(
        "nvmlDeviceGetEnforcedPowerLimit"
    )
    uuid = opt("nvmlDeviceGetUUID")
    return GpuInfo(
        index=index,
        name=_decode(opt("nvmlDeviceGetName") or "unknown"),
        uuid=_decode(uuid) if uuid is not None else None,
        max_sm_clock_hz=float(mx_sm) * _MHZ if mx_sm else None,
        max_mem_clock_hz=float(mx_mem) * _MHZ if mx_mem else None,
        power_limit_w=float(plim) * _MW if plim else None,
    )


def read_sample(nvml: Any, index: int, handle: Any, *, t_s: float, phase: str) -> GpuSample:
    """One reading; a counter the device does not expose reads as None."""
    clock_sm = getattr(nvml, "NVML_CLOCK_SM", 1)
    clock_mem = getattr(nvml, "NVML_CLOCK_MEM", 2)
    temp_gpu = getattr(nvml, "NVML_TEMPERATURE_GPU", 0)

    def opt(name: str, *args: Any) -> Any:
        try:
            return _call(nvml, name, handle, *args)
        except Exception:  # noqa: BLE001 - NVMLError_NotSupported & co.: a counter not exposed reads as None
            return None

    sm = opt("nvmlDeviceGetClockInfo", clock_sm)
    mem = opt("nvmlDeviceGetClockInfo", clock_mem)
    power = opt("nvmlDeviceGetPowerUsage")
    temp = opt("nvmlDeviceGetTemperature", temp_gpu)
    util = opt("nvmlDeviceGetUtilizationRates")
    mask = opt("nvmlDeviceGetCurrentClocksEventReasons")
    if mask is None:
        mask = opt("nvmlDeviceGetCurrentClocksThrottleReasons")
    return GpuSample(
        t_s=t_s,
        phase=phase,
        index=index,
        sm_clock_hz=float(sm) * _MHZ if sm is not None else None,
        mem_clock_hz=float(mem) * _MHZ if mem is not None else None,
        power_w=float(power) * _MW if power is not None else None,
        temperature_c=float(temp) if temp is not None else None,
        util_pct=float(getattr(util, "gpu", util)) if util is not None else None,
        reasons=decode_reasons(int(mask)) if mask is not None else (),
    )


class Telemetry:
    """Context manager sampling GPU telemetry around a measured region.

    ``device``: a CUDA ordinal, a ``"cuda:N"`` string, a list of ordinals, or
    None for every GPU NVML sees. ``nvml``: an NVML-like module (tests); by
    default ``pynvml``. ``warn``: emit :class:`ThrottlingWarning` on exit.
    """

    def __init__(
        self,
        device: int | str | Sequence[int] | None = 0,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        clock_ratio: float = DEFAULT_CLOCK_RATIO,
        load_util_pct: float = DEFAULT_LOAD_UTIL_PCT,
        nvml: Any = None,
        warn: bool = True,
        clock: Callable[[], float] = time.monotonic,
        by_cuda_index: bool = True,
    ) -> None:
        if interval_s <= 0:
            raise InputError(f"telemetry.interval_s: must be > 0, got {interval_s}")
        if not 0 < clock_ratio <= 1:
            raise InputError(f"telemetry.clock_ratio: must be in (0, 1], got {clock_ratio}")
        if not 0 <= load_util_pct <= 100:
            raise InputError(f"telemetry.load_util_pct: must be in [0, 100], got {load_util_pct}")
        self.devices = _parse_devices(device)
        self.interval_s = float(interval_s)
        self.clock_ratio = float(clock_ratio)
        self.load_util_pct = float(load_util_pct)
        self.warn = warn
        self._clock = clock
        self._nvml_in = nvml
        self._by_cuda_index = by_cuda_index
        self._nvml: Any = None
        self._handles: list[tuple[int, Any]] = []
        self._infos: list[GpuInfo] = []
        self._samples: list[GpuSample] = []
        self._errors: list[str] = []
        self._reason: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self._lock = threading.Lock()
        self.result: TelemetryResult | None = None

    # -- lifecycle ------------------------------------------------------------------
    def __enter__(self) -> Telemetry:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> None:
        self._t0 = self._clock()
        if self._nvml_in is not None:
            self._nvml, self._reason = _init(self._nvml_in)
        else:
            self._nvml, self._reason = load_nvml()
        if self._nvml is None:
            return
        try:
            self._handles = resolve_handles(self._nvml, self.devices, by_cuda_index=self._by_cuda_index)
            self._infos = [device_info(self._nvml, i, h) for i, h in self._handles]
        except InputError:
            self._shutdown()
            raise
        except Exception as exc:  # noqa: BLE001 - NVML errors: telemetry unavailable, the reason is recorded
            self._reason = f"NVML device lookup failed: {type(exc).__name__}: {exc}"
            self._shutdown()
            self._nvml = None
            return
        self._sample_all("before")
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="hweval-telemetry", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample_all("during")

    def _sample_all(self, phase: str) -> None:
        t = self._clock() - self._t0
        for i, h in self._handles:
            try:
                s = read_sample(self._nvml, i, h, t_s=t, phase=phase)
            except Exception as exc:  # noqa: BLE001 - never let telemetry break a measurement; the error is recorded
                with self._lock:
                    self._errors.append(f"{phase}: {type(exc).__name__}: {exc}")
                continue
            with self._lock:
                self._samples.append(s)

    def stop(self) -> TelemetryResult:
        if self.result is not None:
            return self.result
        if self._nvml is None:
            self.result = unavailable(self._reason or "NVML unavailable")
            return self.result
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, 10 * self.interval_s))
        self._sample_all("after")
        self._shutdown()
        with self._lock:
            samples = tuple(sorted(self._samples, key=lambda s: (s.t_s, s.index)))
            errors = tuple(self._errors)
        flag, msg = throttle_verdict(
            self._infos, samples, clock_ratio=self.clock_ratio, load_util_pct=self.load_util_pct
        )
        self.result = TelemetryResult(
            available=True,
            devices=tuple(self._infos),
            samples=samples,
            clock_ratio=self.clock_ratio,
            load_util_pct=self.load_util_pct,
            throttle_warning=flag,
            throttle_message=msg,
            errors=errors,
        )
        if flag and self.warn:
            warnings.warn(msg or "throttling", ThrottlingWarning, stacklevel=2)
        return self.result

    def _shutdown(self) -> None:
        try:
            if self._nvml is not None:
                self._nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - a failed NVML shutdown loses nothing: the readings are taken
            pass


def _parse_devices(device: int | str | Sequence[int] | None) -> list[int] | None:
    if device is None:
        return None
    if isinstance(device, bool):
        raise InputError(f"telemetry.device: expected a CUDA ordinal, 'cuda:N' or a list, got {device!r}")
    if isinstance(device, int):
        return [device]
    if isinstance(device, str):
        if device == "cuda":
            try:
                import torch

                return [torch.cuda.current_device()] if torch.cuda.is_available() else [0]
            except (ImportError, RuntimeError, AssertionError):  # no torch / CUDA init failed: device 0
                return [0]
        if device.startswith("cuda:") and device[5:].isdigit():
            return [int(device[5:])]
        raise InputError(f"telemetry.device: expected 'cuda' or 'cuda:N', got {device!r}")
    return [int(d) for d in device]


def snapshot(device: int | str | Sequence[int] | None = 0, *, nvml: Any = None) -> TelemetryResult:
    """One reading per device, no background thread (e.g. for a fingerprint)."""
    tel = Telemetry(device, nvml=nvml, warn=False)
    tel.start()
    tel._stop.set()
    return tel.stop()


def measure(fn: Callable[[], Any], **kwargs: Any) -> tuple[Any, TelemetryResult]:
    """Run ``fn()`` inside :class:`Telemetry`; returns ``(fn's result, telemetry)``."""
    tel = Telemetry(**kwargs)
    with tel:
        out = fn()
    assert tel.result is not None
    return out, tel.result


class _NoTelemetry:
    """Stand-in for :class:`Telemetry` on a non-CUDA device."""

    def __init__(self, reason: str) -> None:
        self.result = unavailable(reason)

    def __enter__(self) -> _NoTelemetry:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


def for_device(device: str, **kwargs: Any) -> Telemetry | _NoTelemetry:
    """A :class:`Telemetry` for a ``cuda[:N]`` device, a no-op otherwise.

    What a measurement loop wraps its timing in, so every CUDA measurement
    carries clocks/power/temperature and the throttle flag::

        with telemetry.for_device(device) as tel:
            m = benchmark(...)
        extra.update(tel.result.metrics())
    """
    if not device.startswith("cuda"):
        return _NoTelemetry(f"no GPU telemetry on device {device!r}")
    return Telemetry(device, **kwargs)
