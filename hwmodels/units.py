"""Unit suffixes used in catalog and CSV field names, and their SI factors.

A field named ``bandwidth_TBps`` holds terabytes per second; on load it is
multiplied by ``UNITS["TBps"]`` and stored as bytes per second. Decimal
prefixes (k=1e3, M=1e6, G=1e9, T=1e12, P=1e15) follow SI / IEC 80000-13;
binary ones (KiB, MiB, GiB = 2**30) follow IEC 80000-13. Link rates quoted in
bits (``Gbps``) are divided by 8 bits per byte.
"""

from __future__ import annotations

from hwmodels.errors import ModelInputError

#: suffix -> (SI factor, SI unit name)
UNITS: dict[str, tuple[float, str]] = {
    # compute
    "gflops": (1e9, "flop/s"),
    "tflops": (1e12, "flop/s"),
    "pflops": (1e15, "flop/s"),
    # memory sizes
    "GB": (1e9, "B"),
    "GiB": (2.0**30, "B"),
    "MiB": (2.0**20, "B"),
    "TB": (1e12, "B"),
    # bandwidths
    "GBps": (1e9, "B/s"),
    "TBps": (1e12, "B/s"),
    "Gbps": (1e9 / 8, "B/s"),  # bits -> bytes
    # power, energy, money, time
    "watts": (1.0, "W"),
    "kW": (1e3, "W"),
    "usd": (1.0, "USD"),
    "usd_per_hour": (1.0, "USD/h"),
    "usd_per_kWh": (1.0, "USD/kWh"),
    "years": (365.25 * 24 * 3600.0, "s"),
    "GHz": (1e9, "1/s"),
    "fraction": (1.0, "1"),
    "count": (1.0, "1"),
    "ratio": (1.0, "1"),
}

HOURS_PER_YEAR = 365.25 * 24.0  # Julian year, as in IAU / ISO 80000-3


def split_unit(key: str) -> tuple[str, str]:
    """``"bandwidth_TBps"`` -> ``("bandwidth", "TBps")``; longest known suffix wins."""
    best = None
    for suffix in UNITS:
        if key.endswith("_" + suffix) and (best is None or len(suffix) > len(best)):
            best = suffix
    if best is None:
        raise ModelInputError(f"{key}: field name carries no known unit suffix; valid suffixes: {', '.join(sorted(UNITS))}")
    return key[: -len(best) - 1], best


def to_si(value: float, unit: str) -> float:
    try:
        return float(value) * UNITS[unit][0]
    except KeyError:
        raise ModelInputError(f"unit {unit!r}: unknown; valid choices: {', '.join(sorted(UNITS))}") from None
