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

The package's modules: :mod:`~kernels.registry.spec` (``Kernel``, ``Setup``,
registration, discovery, parameter validation), :mod:`~kernels.registry.result`
(``KernelResult``), :mod:`~kernels.registry.execute` (check, time, OOM, store
write) and :mod:`~kernels.registry.sweep`; this module re-exports their public
names (``from kernels import registry as R; R.run(...)``).
"""

from __future__ import annotations

from kernels.registry.execute import (
    DEFAULT_MEASURE_MS,
    DEFAULT_WARMUP_MS,
    MEASURE_MS,
    MEMORY_HEADROOM,
    WARMUP_MS,
    check,
    check_budgets,
    check_fits,
    is_oom,
    make_result,
    run,
    time_kernel,
)
from kernels.registry.result import UNITS, KernelResult, results_frame
from kernels.registry.spec import (
    SKIPPED_MODULES,
    Kernel,
    KernelCheckError,
    KernelModuleSkipped,
    Param,
    Setup,
    Unsupported,
    check_device,
    discover,
    get,
    list_kernels,
    register,
    unregister,
    validate_params,
)
from kernels.registry.sweep import sweep

__all__ = [
    "DEFAULT_MEASURE_MS", "DEFAULT_WARMUP_MS", "MEASURE_MS", "MEMORY_HEADROOM", "SKIPPED_MODULES", "UNITS",
    "WARMUP_MS", "Kernel", "KernelCheckError", "KernelModuleSkipped", "KernelResult", "Param", "Setup",
    "Unsupported", "check", "check_budgets", "check_device", "check_fits", "discover", "get", "is_oom",
    "list_kernels", "make_result", "register", "results_frame", "run", "sweep", "time_kernel", "unregister",
    "validate_params",
]
