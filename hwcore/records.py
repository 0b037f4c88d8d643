"""Typed records: one type per thing stored, one builder, one reader (STYLE.md 12).

The store keeps every result as one row of the generic schema in
:mod:`hwcore.store` (JSON columns ``params``, ``metrics``, ``units``,
``fingerprint``). Producers never build those rows by hand and consumers never
re-parse them: each kind of thing stored has a frozen dataclass here whose
``to_record()`` is the only builder of its row and whose ``from_row()`` is the
only reader, so a field renamed on one side is renamed on both.

=================  ====================  ===========================================
type               store ``kind``        ``name`` column
=================  ====================  ===========================================
``KernelRecord``   kernel / collective   the kernel (``gemm``, ``all_reduce`` ...)
``WorkloadRecord`` workload              the workload (``transformer_lm`` ...)
``CellRecord``     notebook              the notebook of one plan cell
``FitRecord``      fit                   the fitted model (``roofline``, ``scaling``...)
``ReportRecord``   report                ``procurement_report``
=================  ====================  ===========================================

:func:`read` returns the typed records of one kind from a store, decoding the
JSON columns once. :class:`Attempts` (:func:`current`) says which of a plan
cell's attempts counts when it ran more than once (killed, then resumed): the
readers that feed the analysis and ``hweval results`` use it; nothing is deleted.
"""

from __future__ import annotations

import json
import math
import os
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, TypeVar

from hwcore.store import Record, Store

T = TypeVar("T", bound="_Stored")


def _obj(v: Any) -> dict[str, Any]:
    """A JSON column's value as a dict (the store writes JSON text; frames may already hold dicts)."""
    if isinstance(v, Mapping):
        return dict(v)
    if isinstance(v, str) and v:
        try:
            out = json.loads(v)
        except json.JSONDecodeError:
            return {}
        return out if isinstance(out, dict) else {}
    return {}


def _opt_str(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def _time(v: Any) -> datetime | None:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    to_py = getattr(v, "to_pydatetime", None)  # pandas.Timestamp
    if to_py is not None:
        try:
            return to_py()
        except (TypeError, ValueError):  # NaT
            return None
    return v if isinstance(v, datetime) else None


@dataclass(frozen=True, kw_only=True)
class _Stored:
    """Fields every stored row has: outcome, provenance, timing."""

    KIND: ClassVar[tuple[str, ...]] = ()

    status: str = "ok"
    error: str | None = None
    run_id: str = ""
    plan: str | None = None
    notebook: str | None = None
    node_id: str | None = None
    fingerprint: Mapping[str, Any] | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    record_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    #: the plan cell whose attempt wrote it (store column ``cell_id``; written from ``$HWEVAL_CELL_ID`` when unset)
    cell_id: str | None = None

    def _record(self, *, kind: str, name: str, params: Mapping[str, Any], metrics: Mapping[str, Any],
                units: Mapping[str, str]) -> Record:
        return Record(kind=kind, name=name, params=dict(params), metrics=dict(metrics), units=dict(units),
                      status=self.status, error=self.error, run_id=self.run_id, plan=self.plan,
                      notebook=self.notebook, node_id=self.node_id,
                      fingerprint=dict(self.fingerprint) if self.fingerprint is not None else None,
                      started_at=self.started_at, finished_at=self.finished_at, record_id=self.record_id,
                      cell_id=self.cell_id)

    @staticmethod
    def _common(row: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "status": row.get("status") or "ok",
            "error": _opt_str(row.get("error")),
            "run_id": row.get("run_id") or "",
            "plan": _opt_str(row.get("plan")),
            "notebook": _opt_str(row.get("notebook")),
            "node_id": _opt_str(row.get("node_id")),
            "fingerprint": _obj(row.get("fingerprint")) or None,
            "started_at": _time(row.get("started_at")),
            "finished_at": _time(row.get("finished_at")),
            "record_id": row.get("record_id") or uuid.uuid4().hex,
            "cell_id": _opt_str(row.get("cell_id")),
        }

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True, kw_only=True)
class KernelRecord(_Stored):
    """One micro-benchmark measurement (:class:`kernels.registry.KernelResult`)."""

    KIND: ClassVar[tuple[str, ...]] = ("kernel", "collective")

    kernel: str
    kind: str = "kernel"
    device: str = "cpu"
    params: Mapping[str, Any] = field(default_factory=dict)
    metrics: Mapping[str, Any] = field(default_factory=dict)
    units: Mapping[str, str] = field(default_factory=dict)

    def to_record(self) -> Record:
        return self._record(kind=self.kind, name=self.kernel, params={**self.params, "device": self.device},
                            metrics=self.metrics, units=self.units)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> KernelRecord:
        params = _obj(row.get("params"))
        device = str(params.pop("device", "cpu"))
        return cls(kernel=row["name"], kind=row.get("kind") or "kernel", device=device, params=params,
                   metrics=_obj(row.get("metrics")), units=_obj(row.get("units")), **cls._common(row))


@dataclass(frozen=True, kw_only=True)
class WorkloadRecord(_Stored):
    """One training run (:class:`workloads.runner.TrainResult`): its config and measured metrics."""

    KIND: ClassVar[tuple[str, ...]] = ("workload",)

    workload: str
    params: Mapping[str, Any] = field(default_factory=dict)
    metrics: Mapping[str, Any] = field(default_factory=dict)
    units: Mapping[str, str] = field(default_factory=dict)

    def to_record(self) -> Record:
        return self._record(kind="workload", name=self.workload, params=self.params, metrics=self.metrics,
                            units=self.units)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> WorkloadRecord:
        return cls(workload=row["name"], params=_obj(row.get("params")), metrics=_obj(row.get("metrics")),
                   units=_obj(row.get("units")), **cls._common(row))

    def metric(self, key: str) -> float | None:
        """A numeric metric, or None when absent or not a finite number."""
        v = self.metrics.get(key)
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            return None
        return float(v)


@dataclass(frozen=True, kw_only=True)
class CellRecord(_Stored):
    """The outcome of one plan cell (a notebook run by the runner or by a Slurm task)."""

    KIND: ClassVar[tuple[str, ...]] = ("notebook",)

    cell_id: str
    notebook_name: str
    node: str
    parameters: Mapping[str, Any] = field(default_factory=dict)
    output: str | None = None
    is_report: bool = False
    wall_s: float | None = None
    timeout_s: float | None = None
    slurm_job: str | None = None
    slurm_state: str | None = None

    def to_record(self) -> Record:
        params: dict[str, Any] = {"cell_id": self.cell_id, "node": self.node, "parameters": dict(self.parameters),
                                  "output": self.output, "is_report": self.is_report}
        if self.slurm_job is not None:
            params.update(slurm_job=self.slurm_job, slurm_state=self.slurm_state)
        metrics = {k: v for k, v in (("wall_s", self.wall_s), ("timeout_s", self.timeout_s)) if v is not None}
        return self._record(kind="notebook", name=self.notebook_name, params=params, metrics=metrics,
                            units={k: "s" for k in metrics})

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> CellRecord:
        p, m = _obj(row.get("params")), _obj(row.get("metrics"))
        common = cls._common(row)
        common["cell_id"] = str(p.get("cell_id") or common["cell_id"] or "")
        return cls(notebook_name=row["name"], node=str(p.get("node") or ""),
                   parameters=p.get("parameters") or {}, output=_opt_str(p.get("output")),
                   is_report=bool(p.get("is_report", False)), wall_s=m.get("wall_s"), timeout_s=m.get("timeout_s"),
                   slurm_job=_opt_str(p.get("slurm_job")), slurm_state=_opt_str(p.get("slurm_state")), **common)


@dataclass(frozen=True, kw_only=True)
class FitRecord(_Stored):
    """A fitted model's summary, parameters and intervals, as the analysis computed it."""

    KIND: ClassVar[tuple[str, ...]] = ("fit",)

    fit: str
    summary: str = ""
    values: Mapping[str, Any] = field(default_factory=dict)
    inputs: Mapping[str, Any] = field(default_factory=dict)

    def to_record(self) -> Record:
        return self._record(kind="fit", name=self.fit, params={"summary": self.summary, **self.inputs},
                            metrics=self.values, units={})

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> FitRecord:
        p = _obj(row.get("params"))
        summary = str(p.pop("summary", "") or "")
        return cls(fit=row["name"], summary=summary, values=_obj(row.get("metrics")), inputs=p, **cls._common(row))


@dataclass(frozen=True, kw_only=True)
class ReportRecord(_Stored):
    """One rendered procurement report: where it is and what it recommended."""

    KIND: ClassVar[tuple[str, ...]] = ("report",)

    path: str
    recommendation: str = ""
    charts: tuple[str, ...] = ()
    rows: int = 0
    candidates: tuple[str, ...] = ()

    def to_record(self) -> Record:
        return self._record(kind="report", name="procurement_report",
                            params={"plan": self.plan, "candidates": list(self.candidates)},
                            metrics={"path": self.path, "charts": list(self.charts), "rows": self.rows,
                                     "recommendation": self.recommendation}, units={})

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ReportRecord:
        p, m = _obj(row.get("params")), _obj(row.get("metrics"))
        return cls(path=str(m.get("path") or ""), recommendation=str(m.get("recommendation") or ""),
                   charts=tuple(m.get("charts") or ()), rows=int(m.get("rows") or 0),
                   candidates=tuple(p.get("candidates") or ()), **cls._common(row))


@dataclass(frozen=True, kw_only=True)
class MlperfRecord(_Stored):
    """One imported MLPerf Training run (``aggregate="run"``) or a benchmark result (``"olympic_mean"``).

    Built by :mod:`hweval.importers.mlperf`; ``provenance`` holds the source
    file(s), their sha256 and the importer version.
    """

    KIND: ClassVar[tuple[str, ...]] = ("mlperf",)

    benchmark: str
    system: str | None = None
    aggregate: str = "run"
    submission: Mapping[str, Any] = field(default_factory=dict)
    system_desc: Mapping[str, Any] = field(default_factory=dict)
    accelerators: int | None = None
    time_to_train_s: float | None = None
    global_batch_size: float | None = None
    seed: Any = None
    eval_curve: tuple[Mapping[str, Any], ...] | list[Mapping[str, Any]] = ()
    run_status: str | None = None
    olympic: Mapping[str, Any] = field(default_factory=dict)
    provenance: Mapping[str, Any] = field(default_factory=dict)

    def to_record(self) -> Record:
        params = {"system": self.system, "aggregate": self.aggregate, "submission": dict(self.submission),
                  "system_desc": dict(self.system_desc), "accelerators": self.accelerators,
                  "global_batch_size": self.global_batch_size, "seed": self.seed, **dict(self.provenance)}
        metrics: dict[str, Any] = {"time_to_train_s": self.time_to_train_s, "run_status": self.run_status,
                                   "eval_curve": [dict(e) for e in self.eval_curve]}
        if self.olympic:
            metrics["olympic"] = dict(self.olympic)
        return self._record(kind="mlperf", name=self.benchmark, params=params, metrics=metrics,
                            units={"time_to_train_s": "s"})

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> MlperfRecord:
        p, m = _obj(row.get("params")), _obj(row.get("metrics"))
        known = {"system", "aggregate", "submission", "system_desc", "accelerators", "global_batch_size", "seed"}
        return cls(benchmark=row["name"], system=_opt_str(p.get("system")), aggregate=str(p.get("aggregate") or "run"),
                   submission=p.get("submission") or {}, system_desc=p.get("system_desc") or {},
                   accelerators=p.get("accelerators"), time_to_train_s=m.get("time_to_train_s"),
                   global_batch_size=p.get("global_batch_size"), seed=p.get("seed"),
                   eval_curve=tuple(m.get("eval_curve") or ()), run_status=_opt_str(m.get("run_status")),
                   olympic=m.get("olympic") or {}, provenance={k: v for k, v in p.items() if k not in known},
                   **cls._common(row))


#: store kind -> its record type
BY_KIND: dict[str, type[_Stored]] = {k: cls for cls in (KernelRecord, WorkloadRecord, CellRecord, FitRecord,
                                                         ReportRecord, MlperfRecord) for k in cls.KIND}


def read(store: Store, cls: type[T], **filters: Any) -> list[T]:
    """Every stored record of ``cls``'s kind(s), oldest first, as ``cls`` instances.

    ``filters`` are equality filters on store columns (``plan=..., status="ok"``);
    ``None`` values are ignored.
    """
    out: list[T] = []
    for kind in cls.KIND:
        df = store.records(kind=kind, **filters)
        out.extend(cls.from_row(row) for row in df.to_dict("records"))
    if len(cls.KIND) > 1:
        out.sort(key=lambda r: r.finished_at.timestamp() if r.finished_at else 0.0)
    return out


# -- which attempt of a plan cell counts ------------------------------------------------------
def own_attempt() -> tuple[str, str] | None:
    """``(run_id, cell_id)`` of the plan cell this process runs in (``$HWEVAL_RUN_ID``, ``$HWEVAL_CELL_ID``)."""
    run, cell = os.environ.get("HWEVAL_RUN_ID"), os.environ.get("HWEVAL_CELL_ID")
    return (run, cell) if run and cell else None


def _when(r: Any) -> float:
    t = _time(getattr(r, "started_at", None)) or _time(getattr(r, "finished_at", None))
    return t.timestamp() if t else 0.0


@dataclass(frozen=True)
class Attempts:
    """Which attempt of each plan cell counts, from the cells' notebook records.

    A cell that ran more than once (a runner killed mid-cell, then ``--resume``;
    a failed or timed-out cell resumed; ``--force``) has rows from several
    attempts, an attempt being the cell's rows of one run id (the store's
    ``cell_id`` and ``run_id`` columns). Per (plan, cell) exactly one attempt
    counts:

    1. the attempt of the reader itself, when it runs inside that cell
       (:func:`own_attempt`: a notebook analysing what it just measured);
    2. else the latest attempt whose notebook record says ``ok``;
    3. else (none ended ok) the latest attempt, recorded or not (a cell still
       running, or killed and not resumed yet).

    So a killed attempt's rows are set aside once an attempt of the cell ends
    ok, and a plan re-run with ``--force`` is analysed from its new rows. Rows
    without a ``cell_id`` (written outside a plan cell, or before the column
    existed) and the notebook records themselves always count. Nothing is
    deleted: the store keeps every row (``hweval results --all-attempts``,
    ``--sql``).
    """

    counted: Mapping[tuple[str | None, str], str]  # (plan, cell_id) -> the run_id that counts

    @classmethod
    def of(cls, rows: Iterable[Any], cells: Iterable[CellRecord],
           own: tuple[str, str] | None | bool = True) -> Attempts:
        """From the measurement ``rows`` (anything with ``plan``, ``cell_id``, ``run_id``, timestamps) and
        the notebook records ``cells``; ``own`` True: :func:`own_attempt`."""
        me = own_attempt() if own is True else (own or None)
        first: dict[tuple[str | None, str], dict[str, float]] = {}  # cell -> run_id -> its earliest timestamp
        status: dict[tuple[tuple[str | None, str], str], str] = {}
        for r in rows:
            cid = getattr(r, "cell_id", None)
            if cid and getattr(r, "kind", None) not in CellRecord.KIND:
                runs = first.setdefault((getattr(r, "plan", None), cid), {})
                runs[r.run_id] = min(runs.get(r.run_id, math.inf), _when(r))
        for c in sorted(cells, key=lambda c: _time(c.finished_at).timestamp() if _time(c.finished_at) else 0.0):
            key = (c.plan, c.cell_id)
            if key in first:
                status[(key, c.run_id)] = c.status  # the latest notebook record of that attempt wins
                runs = first[key]
                runs[c.run_id] = min(runs.get(c.run_id, math.inf), _when(c))
        counted = {}
        for key, runs in first.items():
            order = sorted(runs, key=lambda run: (runs[run], run))
            ok = [run for run in order if status.get((key, run)) == "ok"]
            if me is not None and me[1] == key[1] and me[0] in runs:
                counted[key] = me[0]
            else:
                counted[key] = ok[-1] if ok else order[-1]
        return cls(counted=counted)

    def counts(self, row: Any) -> bool:
        """Does this row count? (Rows without a cell, and notebook records, always do.)"""
        cid = getattr(row, "cell_id", None)
        if not cid or getattr(row, "kind", None) in CellRecord.KIND:
            return True
        run = self.counted.get((getattr(row, "plan", None), cid))
        return run is None or run == row.run_id


def current(recs: Sequence[T], cells: Iterable[CellRecord], own: tuple[str, str] | None | bool = True
            ) -> tuple[list[T], list[T]]:
    """``(counted, set aside)``: ``recs`` split by :class:`Attempts` (one attempt per plan cell counts)."""
    att = Attempts.of(recs, cells, own=own)
    kept, aside = [], []
    for r in recs:
        (kept if att.counts(r) else aside).append(r)
    return kept, aside


def from_row(row: Mapping[str, Any]) -> _Stored:
    """The typed record of one stored row, whatever its kind."""
    kind = row.get("kind")
    if kind not in BY_KIND:
        raise KeyError(f"record kind {kind!r} has no typed record; known: {', '.join(sorted(BY_KIND))}")
    return BY_KIND[kind].from_row(row)
