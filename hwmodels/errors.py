"""The one error class of :mod:`hwmodels`.

``ModelInputError`` is bad input to a model or the catalog (a missing column,
an unknown node id, a malformed catalog file). It subclasses ``ValueError`` so
plain Python callers can catch it without importing anything from hweval; the
hweval CLI re-raises it as :class:`hwcore.errors.InputError` (exit code 2).
"""

from __future__ import annotations

from collections.abc import Iterable


class ModelInputError(ValueError):
    """Bad input; the message names the (dotted) field and the valid choices."""


def choices_error(field: str, value: object, choices: Iterable[object]) -> ModelInputError:
    valid = ", ".join(sorted(str(c) for c in choices))
    return ModelInputError(f"{field}: unknown value {value!r}; valid choices: {valid}")
