"""Error tiers for hweval.

``InputError`` is bad user input (unknown names, wrong types, malformed files,
impossible sizes): the CLI prints its one-line message and exits with code 2,
having written nothing. ``Fault`` subclasses are failures of a run that are
recorded in the store with a status (``oom``, ``diverged``, ``timeout``,
``failed``). ``assert`` is kept for internal invariants only.
"""

from __future__ import annotations

from collections.abc import Iterable


class HwevalError(Exception):
    """Base class of every error hweval raises on purpose."""


class InputError(HwevalError, ValueError):
    """Bad input from the user; the message names the field and valid choices."""

    exit_code = 2


class Fault(HwevalError, RuntimeError):
    """A run that failed; ``status`` is the store status it is recorded under."""

    status = "failed"


class OutOfMemory(Fault):
    status = "oom"


class Diverged(Fault):
    status = "diverged"


class Timeout(Fault):
    status = "timeout"


def choices_error(field: str, value: object, choices: Iterable[object]) -> InputError:
    """``InputError`` for a value not among ``choices``, listing the valid ones.

    Mirrors papermill's registries: ``No engine named 'x' found``.
    """
    valid = ", ".join(sorted(str(c) for c in choices))
    return InputError(f"{field}: unknown value {value!r}; valid choices: {valid}")
