"""The kernel registry: declared parameters, correctness checks, FLOP/byte counts.

Every micro-benchmark is a :class:`Kernel`: typed, validated :class:`Param` s,
analytic ``flops(params)`` and ``bytes(params)`` (each module cites its
derivation), and a ``build(params, device) -> Setup`` that allocates fresh
random inputs and returns the callable to time plus a ``reference`` computed
in higher precision. :func:`run` checks the kernel against that reference
*before* timing (a wrong kernel raises :class:`KernelCheckError` and is
recorded as ``failed``), times it with :func:`hwcore.timing.benchmark`, and
returns a :class:`KernelResult` carrying achieved FLOP/s, bytes/s and
arithmetic intensity; the result goes to the store as ``Record(kind="kernel")``
(``"collective"`` for torch.distributed kernels).

Kernel modules register themselves (``register(Kernel(...))``); the registry
imports every module of the :mod:`kernels` package on first use, so a new file
such as ``kernels/triton_softmax.py`` needs no edit here. A module whose
optional dependency is missing is skipped with a warning.

Faults: a size that cannot fit (estimated bytes vs free memory, checked before
allocating) or an allocator failure gives a result with status ``oom``; a
parameter set the device cannot do raises :class:`Unsupported` (an
``InputError``) from :func:`run` and is recorded as ``skipped`` by :func:`sweep`,
which always goes on.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hwcore import telemetry
from hwcore.errors import Fault, InputError, OutOfMemory, choices_error
from hwcore.params import Float, Param, parse_mapping
from hwcore.records import KernelRecord
from hwcore.store import Record, Store
from hwcore.timing import Measurement, benchmark

#: Fraction of the free memory a kernel may plan to use before it is refused as ``oom``.
MEMORY_HEADROOM = 0.9
DEFAULT_WARMUP_MS = 25.0
DEFAULT_MEASURE_MS = 200.0
#: Time budgets: finite (an infinite warm-up never ends), at most an hour per measurement.
WARMUP_MS = Float(min=0, max=3_600_000, unit="ms")
MEASURE_MS = Float(min=0, min_open=True, max=3_600_000, unit="ms")


def check_budgets(warmup_ms: float, measure_ms: float) -> tuple[float, float]:
    """The harness's time budgets validated (``InputError`` naming ``warmup_ms`` / ``measure_ms``)."""
    return WARMUP_MS.parse(warmup_ms, "warmup_ms"), MEASURE_MS.parse(measure_ms, "measure_ms")


class KernelCheckError(Fault):
    """The kernel's output disagrees with the higher-precision reference."""

    status = "failed"


class Unsupported(InputError):
    """A parameter set this device (or stack) cannot run; ``sweep`` records it as ``skipped``."""


class KernelModuleSkipped(UserWarning):
    """A kernel module could not be imported (typically a missing optional dependency)."""


# ---------------------------------------------------------------------------------
# parameters
# ---------------------------------------------------------------------------------
# ``Param`` is the one parameter type of :mod:`hwcore.params` (shared with workloads, notebooks and plans):
# ``Param(name="m", type=int, default=1024, min=1)``; int sizes accept K/Ki/KiB, M, G suffixes.


# ---------------------------------------------------------------------------------
# setups and kernels
# ---------------------------------------------------------------------------------
def _identity(x: Any) -> Any:
    return x


def _noop() -> None:
    return None


@dataclass(kw_only=True)
class Setup:
    """What ``Kernel.build`` returns: the callable to time and how to check it.

    ``reference()`` returns the expected result of ``fn(*inputs[0])`` computed
    in higher precision; it is called *before* ``fn`` (so a kernel that updates
    its inputs in place, like an optimizer step, can be checked), then
    ``output(fn(*inputs[0]))`` is compared with it by normalized max error
    against ``tolerance``. ``inputs`` is the rotation handed to the harness.
    """

    fn: Callable[..., Any]
    inputs: list[tuple[Any, ...]] = field(default_factory=lambda: [()])
    reference: Callable[[], Any] | None = None
    output: Callable[[Any], Any] = _identity
    tolerance: float = 1e-4
    sync: Any = "none"
    flusher: Callable[[], None] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    cleanup: Callable[[], None] = _noop
    enter: Callable[[], None] = _noop  # re-applied before timing (e.g. math-mode flags)
    cuda_events: bool | None = None  # None: CUDA events on a CUDA device; False for JAX (own streams)


@dataclass(frozen=True, kw_only=True)
class Kernel:
    """A registered micro-benchmark.

    ``flops``/``bytes`` give analytic counts for a validated parameter dict;
    ``memory_bytes`` the peak footprint (checked against free memory before
    anything is allocated); ``supports(params, device)`` returns ``None`` or
    ``(param_name, reason)`` for a parameter set the device cannot run;
    ``check_params`` raises ``InputError`` for inconsistent parameters;
    ``runner`` replaces the build/check/time path for kernels that launch
    their own processes or search (collectives, ``gemm_max``): it takes a list
    of validated parameter dicts and returns one :class:`KernelResult` each.
    """

    name: str
    family: str
    help: str
    params: tuple[Param, ...]
    flops: Callable[[dict[str, Any]], float] | None = None
    bytes: Callable[[dict[str, Any]], float] | None = None
    build: Callable[[dict[str, Any], str], Setup] | None = None
    frameworks: tuple[str, ...] = ("torch",)
    kind: str = "kernel"
    memory_bytes: Callable[[dict[str, Any]], float] | None = None
    supports: Callable[[dict[str, Any], str], tuple[str, str] | None] | None = None
    check_params: Callable[[dict[str, Any]], None] | None = None
    runner: Callable[..., list[KernelResult]] | None = None
    extra_metrics: Callable[[dict[str, Any], Measurement], dict[str, float]] | None = None
    module: str = ""

    def __post_init__(self) -> None:
        names = [p.name for p in self.params]
        if len(set(names)) != len(names):
            raise ValueError(f"kernel {self.name!r}: duplicate parameter names")
        if self.build is None and self.runner is None:
            raise ValueError(f"kernel {self.name!r}: needs a build or a runner")

    @property
    def param_names(self) -> list[str]:
        return [p.name for p in self.params]

    def defaults(self) -> dict[str, Any]:
        return {p.name: p.default for p in self.params}

    def describe(self) -> str:
        lines = [f"{self.name}  ({self.family}; frameworks: {', '.join(self.frameworks)})  {self.help}"]
        lines += [f"    {p.describe()}" for p in self.params]
        return "\n".join(lines)


# ---------------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------------
UNITS = {
    "median_s": "s",
    "iqr_s": "s",
    "min_s": "s",
    "flops": "FLOP",
    "bytes": "B",
    "flops_per_s": "FLOP/s",
    "bytes_per_s": "B/s",
    "intensity": "FLOP/B",
    "algbw_Bps": "B/s",
    "busbw_Bps": "B/s",
}


def _rate(amount: float | None, seconds: float | None) -> float | None:
    if amount is None or seconds is None or not seconds > 0:
        return None
    return amount / seconds


@dataclass(frozen=True, kw_only=True)
class KernelResult:
    """One kernel measurement (or fault) with its analytic counts and rates."""

    kernel: str
    params: dict[str, Any]
    device: str
    kind: str = "kernel"
    family: str = ""
    status: str = "ok"
    error: str | None = None
    measurement: Measurement | None = None
    flops: float | None = None
    bytes: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    node_id: str = ""
    started_at: datetime | None = None
    finished_at: datetime | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def framework(self) -> str:
        return str(self.params.get("framework", "torch"))

    @property
    def dtype(self) -> str | None:
        d = self.params.get("dtype")
        return None if d is None else str(d)

    @property
    def median_s(self) -> float | None:
        return self.measurement.median_s if self.measurement else None

    @property
    def iqr_s(self) -> float | None:
        return self.measurement.iqr_s if self.measurement else None

    @property
    def n(self) -> int:
        return self.measurement.n if self.measurement else 0

    @property
    def noise_warning(self) -> bool | None:
        return self.measurement.noise_warning if self.measurement else None

    @property
    def flops_per_s(self) -> float | None:
        return _rate(self.flops, self.median_s)

    @property
    def bytes_per_s(self) -> float | None:
        return _rate(self.bytes, self.median_s)

    @property
    def intensity(self) -> float | None:
        """Arithmetic intensity, FLOP per byte of (analytic) memory traffic."""
        if self.flops is None or not self.bytes:
            return None
        return self.flops / self.bytes

    def metrics(self) -> dict[str, Any]:
        m: dict[str, Any] = {
            "median_s": self.median_s,
            "iqr_s": self.iqr_s,
            "n": self.n,
            "flops": self.flops,
            "bytes": self.bytes,
            "flops_per_s": self.flops_per_s,
            "bytes_per_s": self.bytes_per_s,
            "intensity": self.intensity,
            "noise_warning": self.noise_warning,
        }
        m.update(self.extra)
        return m

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "kernel": self.kernel,
            "kind": self.kind,
            "family": self.family,
            "status": self.status,
            "error": self.error,
            "framework": self.framework,
            "dtype": self.dtype,
            "device": self.device,
            "params": dict(self.params),
        }
        d.update(self.metrics())
        d["noise_message"] = self.measurement.noise_message if self.measurement else None
        d["measurement"] = self.measurement.to_dict(raw=False) if self.measurement else None
        d["node_id"] = self.node_id
        return d

    def to_record(self) -> Record:
        metrics = self.metrics()
        if self.measurement is not None:
            metrics["measurement"] = self.measurement.to_dict(raw=True)
        return KernelRecord(
            kernel=self.kernel,
            kind=self.kind,
            device=self.device,
            params=self.params,
            metrics=metrics,
            units={k: v for k, v in UNITS.items() if k in metrics},
            status=self.status,
            error=self.error,
            node_id=self.node_id or None,
            started_at=self.started_at,
            finished_at=self.finished_at,
        ).to_record()

    def __str__(self) -> str:
        head = f"{self.kernel} {self.params} on {self.device}: {self.status}"
        if not self.ok:
            return f"{head} ({self.error})"
        lines = [head, str(self.measurement)]
        rates = []
        if self.flops:
            rates.append(f"{self.flops_per_s / 1e9:.2f} GFLOP/s")
        if self.bytes:
            rates.append(f"{self.bytes_per_s / 1e9:.2f} GB/s")
        if self.intensity is not None:
            rates.append(f"intensity {self.intensity:.3g} FLOP/B")
        for k, v in self.extra.items():
            if k.endswith("_Bps") and isinstance(v, float):
                rates.append(f"{k[:-4]} {v / 1e9:.3f} GB/s")
        if rates:
            lines.append("  " + ", ".join(rates))
        return "\n".join(lines)


# ---------------------------------------------------------------------------------
# the registry
# ---------------------------------------------------------------------------------
_KERNELS: dict[str, Kernel] = {}
_DISCOVERED = False
SKIPPED_MODULES: dict[str, str] = {}


def register(obj: Any) -> Any:
    """Register a :class:`Kernel` (returned) or, as a decorator, the Kernel(s) a function returns."""
    if isinstance(obj, Kernel):
        kernels = [obj]
    elif callable(obj):
        made = obj()
        kernels = [made] if isinstance(made, Kernel) else list(made)
    else:
        raise TypeError("register() takes a Kernel or a function returning Kernel(s)")
    for k in kernels:
        if not isinstance(k, Kernel):
            raise TypeError(f"register(): {k!r} is not a Kernel")
        old = _KERNELS.get(k.name)
        if old is not None and old.module and k.module and old.module != k.module:
            raise ValueError(f"kernel {k.name!r} registered twice ({old.module} and {k.module})")
        _KERNELS[k.name] = k
    return obj


def unregister(name: str) -> None:
    _KERNELS.pop(name, None)


def discover() -> None:
    """Import every module of the ``kernels`` package once (each registers its kernels)."""
    global _DISCOVERED
    if _DISCOVERED:
        return
    _DISCOVERED = True
    import kernels

    for info in sorted(pkgutil.iter_modules(kernels.__path__), key=lambda i: i.name):
        if info.name.startswith("_") or info.name == "registry":
            continue
        modname = f"kernels.{info.name}"
        try:
            importlib.import_module(modname)
        except Exception as exc:  # noqa: BLE001 - an optional module must never break the registry
            SKIPPED_MODULES[modname] = f"{type(exc).__name__}: {exc}"
            warnings.warn(f"{modname} skipped: {type(exc).__name__}: {exc}", KernelModuleSkipped, stacklevel=2)


def list_kernels() -> list[Kernel]:
    discover()
    return [_KERNELS[n] for n in sorted(_KERNELS)]


def get(name: str) -> Kernel:
    discover()
    if name not in _KERNELS:
        raise InputError(f"kernel: no kernel named {name!r}; valid choices: {', '.join(sorted(_KERNELS))}")
    return _KERNELS[name]


def check_device(device: str) -> str:
    """``device`` validated: ``cpu``, ``cuda`` or ``cuda:N`` with such a device present."""
    if device == "cpu":
        return device
    if re.fullmatch(r"cuda(:[0-9]+)?", device or ""):
        from kernels._util import cuda_available

        if not cuda_available():
            raise InputError(f"device: {device!r} requested but no CUDA device is available; valid choices here: cpu")
        import torch

        idx = int(device.split(":")[1]) if ":" in device else 0
        if idx >= torch.cuda.device_count():
            raise InputError(f"device: {device!r} out of range; {torch.cuda.device_count()} CUDA device(s) present")
        return device
    raise choices_error("device", device, ("cpu", "cuda", "cuda:N"))


def validate_params(name: str, raw: dict[str, Any] | None = None, *, device: str | None = None,
                    strict: bool = False) -> dict[str, Any]:
    """Typed, complete parameters for kernel ``name`` from ``raw`` (strings or values).

    Unknown names, wrong types and bad choices raise a one-line ``InputError``
    naming ``kernel.param`` and the valid choices (:mod:`hwcore.params`;
    ``strict`` refuses text for non-text values, as in plans). With ``device`` the
    parameter set is also checked against what the device can do
    (:class:`Unsupported`, listing the values that would work).
    """
    kernel = get(name)
    out = parse_mapping(raw, kernel.params, where=name, strict=strict)
    if kernel.check_params is not None:
        kernel.check_params(out)
    if device is not None:
        check_device(device)
        _check_supported(kernel, out, device)
    return out


def _check_supported(kernel: Kernel, params: dict[str, Any], device: str) -> None:
    if kernel.supports is None:
        return
    bad = kernel.supports(params, device)
    if bad is None:
        return
    field_name, reason = bad
    value = params.get(field_name, device if field_name == "device" else None)
    msg = f"{kernel.name}.{field_name}={value!r} cannot run on {device}: {reason}"
    p = next((q for q in kernel.params if q.name == field_name), None)
    if p is not None and p.choices:
        ok = [c for c in p.choices if kernel.supports({**params, field_name: c}, device) is None]
        msg += f"; valid choices here: {', '.join(map(str, ok)) or '(none)'}"
    raise Unsupported(msg)


# ---------------------------------------------------------------------------------
# checking and running
# ---------------------------------------------------------------------------------
def check(kernel: Kernel, params: dict[str, Any], setup: Setup, device: str = "cpu") -> float | None:
    """Compare the kernel's output with its higher-precision reference; returns the error."""
    if setup.reference is None:
        return None
    from kernels._util import max_rel_error

    expected = setup.reference()
    out = setup.output(setup.fn(*setup.inputs[0]))
    if callable(setup.sync):
        setup.sync(out)
    elif setup.sync == "cuda":
        import torch

        torch.cuda.synchronize(torch.device(device) if device.startswith("cuda") else None)
    err = max_rel_error(out, expected)
    if not err <= setup.tolerance:
        raise KernelCheckError(
            f"{kernel.name} {params}: output differs from the fp64 reference "
            f"(normalized max error {err:.3g} > tolerance {setup.tolerance:.3g}); not timing a wrong kernel"
        )
    return err


_OOM_PATTERNS = ("out of memory", "can't allocate memory", "cannot allocate memory", "not enough memory",
                 "failed to allocate", "resource_exhausted")


def is_oom(exc: BaseException) -> bool:
    if isinstance(exc, OutOfMemory | MemoryError):
        return True
    try:
        import torch

        if isinstance(exc, torch.OutOfMemoryError):
            return True
    except ImportError:
        pass
    text = str(exc).lower()
    return isinstance(exc, RuntimeError | ValueError) and any(p in text for p in _OOM_PATTERNS)


def check_fits(kernel: Kernel, params: dict[str, Any], device: str) -> None:
    """Raise ``OutOfMemory`` when the kernel's estimated footprint exceeds free memory."""
    if kernel.memory_bytes is None:
        return
    from kernels._util import free_memory_bytes

    need = float(kernel.memory_bytes(params))
    free = free_memory_bytes(device)
    if need > MEMORY_HEADROOM * free:
        raise OutOfMemory(
            f"{kernel.name}: needs ~{need / 2**30:.2f} GiB but only {free / 2**30:.2f} GiB is free on {device} "
            f"(limit {MEMORY_HEADROOM:.0%} of free)"
        )


def _now() -> datetime:
    return datetime.now(UTC)


def _node_id() -> str:
    from hwcore.fingerprint import node_id

    return node_id()


def make_result(kernel: Kernel, params: dict[str, Any], device: str, **kw: Any) -> KernelResult:
    flops = kw.pop("flops", None)
    nbytes = kw.pop("bytes", None)
    if flops is None and kernel.flops is not None:
        flops = float(kernel.flops(params))
    if nbytes is None and kernel.bytes is not None:
        nbytes = float(kernel.bytes(params))
    return KernelResult(kernel=kernel.name, params=dict(params), device=device, kind=kernel.kind,
                        family=kernel.family, flops=flops, bytes=nbytes, node_id=_node_id(), **kw)


def time_kernel(
    kernel: Kernel,
    params: dict[str, Any],
    device: str,
    *,
    warmup_ms: float = DEFAULT_WARMUP_MS,
    measure_ms: float = DEFAULT_MEASURE_MS,
    do_check: bool = True,
) -> KernelResult:
    """Build, check and time one validated parameter set (no store, no validation).

    Out-of-memory (estimated or raised by the allocator) gives a result with
    status ``oom``; a wrong kernel raises :class:`KernelCheckError`.
    """
    assert kernel.build is not None
    started = _now()
    setup: Setup | None = None
    try:
        check_fits(kernel, params, device)
        setup = kernel.build(params, device)
        err = check(kernel, params, setup, device) if do_check else None
        setup.enter()
        with telemetry.for_device(device) as tel:
            m = benchmark(
                setup.fn,
                inputs=setup.inputs,
                label=f"{kernel.name}",
                warmup_ms=warmup_ms,
                measure_ms=measure_ms,
                sync=setup.sync,
                flusher=setup.flusher,
                device=device,
                cuda_events=setup.cuda_events,
                metadata={**setup.metadata, "check_error": err},
            )
    except KernelCheckError:
        raise
    except Exception as exc:  # noqa: BLE001 - only out-of-memory is turned into a result
        if not is_oom(exc):
            raise
        return make_result(kernel, params, device, status="oom", error=f"{type(exc).__name__}: {exc}".splitlines()[0],
                           started_at=started, finished_at=_now())
    finally:
        if setup is not None:
            setup.cleanup()
        del setup
        _release(device)
    extra = kernel.extra_metrics(params, m) if kernel.extra_metrics else {}
    if tel.result.available:  # clocks, power, temperature and the throttle flag on CUDA
        extra.update(tel.result.metrics())
    return make_result(kernel, params, device, measurement=m, extra=extra, started_at=started, finished_at=_now())


def _release(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


def _as_store(store: Store | str | Path | None) -> Store:
    return store if isinstance(store, Store) else Store(store)


def _execute(kernel: Kernel, plist: list[dict[str, Any]], device: str, warmup_ms: float, measure_ms: float,
             do_check: bool) -> list[KernelResult]:
    if kernel.runner is not None:
        return list(kernel.runner(kernel, plist, device=device, warmup_ms=warmup_ms, measure_ms=measure_ms,
                                  do_check=do_check))
    return [time_kernel(kernel, p, device, warmup_ms=warmup_ms, measure_ms=measure_ms, do_check=do_check)
            for p in plist]


def run(
    name: str,
    params: dict[str, Any] | None = None,
    *,
    device: str = "cpu",
    store: Store | str | Path | None = None,
    record: bool = True,
    warmup_ms: float = DEFAULT_WARMUP_MS,
    measure_ms: float = DEFAULT_MEASURE_MS,
    check: bool = True,
) -> KernelResult:
    """Validate, check against the reference, time and (``record=True``) store one kernel run.

    Bad input raises ``InputError`` before anything is written; a parameter set
    the device cannot do raises :class:`Unsupported`; out-of-memory returns a
    result with status ``oom`` (recorded); a wrong kernel is recorded as
    ``failed`` and raises :class:`KernelCheckError`.
    """
    kernel = get(name)
    p = validate_params(name, params, device=device)
    warmup_ms, measure_ms = check_budgets(warmup_ms, measure_ms)
    st = _as_store(store) if record else None
    if st is not None:
        st.check_writable()
    try:
        (res,) = _execute(kernel, [p], device, warmup_ms, measure_ms, check)
    except KernelCheckError as exc:
        if st is not None:
            st.append(make_result(kernel, p, device, status="failed", error=str(exc)).to_record())
        raise
    if st is not None:
        st.append(res.to_record())
    return res


def sweep(
    name: str,
    params_list: Iterable[dict[str, Any]],
    *,
    device: str = "cpu",
    store: Store | str | Path | None = None,
    record: bool = True,
    warmup_ms: float = DEFAULT_WARMUP_MS,
    measure_ms: float = DEFAULT_MEASURE_MS,
    check: bool = True,
) -> list[KernelResult]:
    """:func:`run` over several parameter sets; every entry gets a result, in order.

    All sets are type-checked up front (a typo fails before anything runs).
    A set the device cannot do becomes a ``skipped`` result with the reason,
    an out-of-memory one an ``oom`` result; each is recorded as it finishes
    and the sweep goes on. A failed correctness check is recorded and raised.
    """
    kernel = get(name)
    check_device(device)
    plist = [validate_params(name, raw) for raw in params_list]
    warmup_ms, measure_ms = check_budgets(warmup_ms, measure_ms)
    st = _as_store(store) if record else None
    if st is not None:
        st.check_writable()
    results: list[KernelResult | None] = [None] * len(plist)
    runnable: list[int] = []
    for i, p in enumerate(plist):
        try:
            _check_supported(kernel, p, device)
            runnable.append(i)
        except Unsupported as exc:
            results[i] = make_result(kernel, p, device, status="skipped", error=str(exc))
            if st is not None:
                st.append(results[i].to_record())
    if kernel.runner is not None:
        try:
            outs = _execute(kernel, [plist[i] for i in runnable], device, warmup_ms, measure_ms, check)
        except KernelCheckError as exc:
            if st is not None:
                st.append(make_result(kernel, plist[runnable[0]], device, status="failed", error=str(exc)).to_record())
            raise
        for i, r in zip(runnable, outs, strict=True):
            results[i] = r
        if st is not None and outs:
            st.append([r.to_record() for r in outs])
    else:
        for i in runnable:
            try:
                (r,) = _execute(kernel, [plist[i]], device, warmup_ms, measure_ms, check)
            except KernelCheckError as exc:
                if st is not None:
                    st.append(make_result(kernel, plist[i], device, status="failed", error=str(exc)).to_record())
                raise
            results[i] = r
            if st is not None:
                st.append(r.to_record())
    return [r for r in results if r is not None]


def results_frame(results: Sequence[KernelResult]):  # -> pandas.DataFrame
    """One row per result (``to_json`` flattened, params as columns) for notebooks."""
    import pandas as pd

    rows = []
    for r in results:
        d = r.to_json()
        d.pop("measurement", None)
        params = d.pop("params")
        rows.append({**{f"p_{k}": v for k, v in params.items()}, **d})
    return pd.DataFrame(rows)
