"""Running one kernel: the correctness check, out-of-memory handling, timing and the store write.

:func:`run` checks the kernel against its reference *before* timing (a wrong
kernel raises :class:`KernelCheckError` and is recorded as ``failed``), times
it with :func:`hwcore.timing.benchmark` and appends the result to the store.
A size that cannot fit (estimated bytes vs free memory, checked before
allocating) or an allocator failure gives a result with status ``oom``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hwcore import telemetry
from hwcore.errors import OutOfMemory
from hwcore.params import Float
from hwcore.store import Store
from hwcore.timing import benchmark
from kernels.registry.result import KernelResult
from kernels.registry.spec import Kernel, KernelCheckError, Setup, get, validate_params

__all__ = ["DEFAULT_MEASURE_MS", "DEFAULT_WARMUP_MS", "MEASURE_MS", "MEMORY_HEADROOM", "WARMUP_MS", "check",
           "check_budgets", "check_fits", "execute", "is_oom", "make_result", "record_failure", "run", "time_kernel"]

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


def as_store(store: Store | str | Path | None) -> Store:
    return store if isinstance(store, Store) else Store(store)


def record_failure(st: Store | None, kernel: Kernel, params: dict[str, Any], device: str,
                   exc: KernelCheckError) -> None:
    """A failed correctness check recorded as a ``failed`` result (``st`` None: not recording)."""
    if st is not None:
        st.append(make_result(kernel, params, device, status="failed", error=str(exc)).to_record())


def execute(kernel: Kernel, plist: list[dict[str, Any]], device: str, warmup_ms: float, measure_ms: float,
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
    st = as_store(store) if record else None
    if st is not None:
        st.check_writable()
    try:
        (res,) = execute(kernel, [p], device, warmup_ms, measure_ms, check)
    except KernelCheckError as exc:
        record_failure(st, kernel, p, device, exc)
        raise
    if st is not None:
        st.append(res.to_record())
    return res

