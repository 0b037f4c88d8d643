"""Sweeps: :func:`~kernels.registry.execute.run` over several parameter sets, every entry answered in order."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hwcore.store import Store
from kernels.registry.execute import (
    DEFAULT_MEASURE_MS,
    DEFAULT_WARMUP_MS,
    as_store,
    check_budgets,
    execute,
    make_result,
    record_failure,
)
from kernels.registry.result import KernelResult
from kernels.registry.spec import KernelCheckError, Unsupported, check_device, check_supported, get, validate_params

__all__ = ["sweep"]


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
    st = as_store(store) if record else None
    if st is not None:
        st.check_writable()
    results: list[KernelResult | None] = [None] * len(plist)
    runnable: list[int] = []
    for i, p in enumerate(plist):
        try:
            check_supported(kernel, p, device)
            runnable.append(i)
        except Unsupported as exc:
            results[i] = make_result(kernel, p, device, status="skipped", error=str(exc))
            if st is not None:
                st.append(results[i].to_record())
    if kernel.runner is not None:
        try:
            outs = execute(kernel, [plist[i] for i in runnable], device, warmup_ms, measure_ms, check)
        except KernelCheckError as exc:
            record_failure(st, kernel, plist[runnable[0]], device, exc)
            raise
        for i, r in zip(runnable, outs, strict=True):
            results[i] = r
        if st is not None and outs:
            st.append([r.to_record() for r in outs])
    else:
        for i in runnable:
            try:
                (r,) = execute(kernel, [plist[i]], device, warmup_ms, measure_ms, check)
            except KernelCheckError as exc:
                record_failure(st, kernel, plist[i], device, exc)
                raise
            results[i] = r
            if st is not None:
                st.append(r.to_record())
    return [r for r in results if r is not None]

