"""The result of one kernel run: :class:`KernelResult` (measurement, analytic counts, rates) and its record."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from hwcore.records import KernelRecord
from hwcore.store import Record
from hwcore.timing import Measurement

__all__ = ["UNITS", "KernelResult", "results_frame"]


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
