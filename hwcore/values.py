"""Spellings of typed values given as text (``--set key=value``, plan files).

One vocabulary for every registry (kernels, workloads), so ``--set flag=yes``
means the same to ``hweval bench`` and ``hweval train``.
"""

from __future__ import annotations

BOOL_TRUE = frozenset({"1", "true", "yes", "on", "y", "t"})
BOOL_FALSE = frozenset({"0", "false", "no", "off", "n", "f"})


def parse_bool(text: str) -> bool | None:
    """``True``/``False`` for a recognised spelling (case-insensitive), else ``None``."""
    s = text.strip().lower()
    if s in BOOL_TRUE:
        return True
    if s in BOOL_FALSE:
        return False
    return None
