"""Kernel specs: the :class:`Kernel` and :class:`Setup` dataclasses, registration, discovery, parameter validation.

Kernel modules register themselves (``register(Kernel(...))``); :func:`discover`
imports every module of the :mod:`kernels` package on first use, so a new file
such as ``kernels/triton_softmax.py`` needs no edit here. A module whose
optional dependency is missing is skipped with a warning.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hwcore.errors import Fault, InputError, choices_error
from hwcore.params import Param, parse_mapping
from hwcore.timing import Measurement

if TYPE_CHECKING:
    from kernels.registry.result import KernelResult

__all__ = ["Kernel", "KernelCheckError", "KernelModuleSkipped", "Param", "SKIPPED_MODULES", "Setup", "Unsupported",
           "check_device", "discover", "get", "list_kernels", "register", "unregister", "validate_params"]


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
        check_supported(kernel, out, device)
    return out


def check_supported(kernel: Kernel, params: dict[str, Any], device: str) -> None:
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

