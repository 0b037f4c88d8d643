"""Submitted job arrays that outlive their submitter: :class:`Ledger` and :func:`reconcile`.

``hweval run --backend slurm`` writes one line per job array to
``<store>/.hweval-slurm-<plan>.json`` right after ``sbatch`` accepts it (job
id, run id, group folder, notebooks folder, and the array index -> cell
mapping); the file is replaced atomically (temporary file, ``fsync``,
``os.replace``) and only the holder of the plan's
:class:`~hweval.runner.PlanLock` writes it. A task leaves the ledger once its
outcome is in the store. So when the submitter is killed (its jobs go on
running: batch semantics) the next ``hweval run`` of the plan on that store
finds the tasks it left and :func:`reconcile` sorts them, before cells are
selected:

* pending or running (``squeue``): *adopted*, never resubmitted; the Slurm
  backend waits for them like for its own tasks (records carry the run id they
  were submitted under); the local backend, which cannot wait for them,
  refuses with one line naming the cell and job when it would start that cell;
* ended (``squeue``, the jobcomp log or ``sacct``): recorded once by the
  poller's rules: an abnormal end (``TIMEOUT``, ``CANCELLED``, ...) gets its
  record; a job that recorded its own outcome gets none; one that ended
  without a visible record is waited for (the poller's grace) by the Slurm
  backend, recorded ``failed`` by the local one;
* gone from every state source: ended long ago; recorded ``failed`` when it
  wrote no record of its run;
* already recorded by a poller (a record with its ``slurm_job``): dropped.

Where Slurm cannot be asked (no ``squeue`` on PATH, or it fails), a run that
would start such a cell refuses with one line naming the cell and job.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from hwcore.errors import InputError
from hwcore.store import Store
from hweval.slurm.scripts import Group
from hweval.slurm.spec import SlurmSpec

__all__ = ["LEDGER_PREFIX", "Ledger", "Reconciled", "SlurmJobLive", "reconcile"]

LEDGER_PREFIX = ".hweval-slurm-"  # <store>/.hweval-slurm-<plan>.json


class SlurmJobLive(InputError):
    """A cell this run would start is (or may be) running as a Slurm job of an earlier run."""


@dataclass(kw_only=True)
class Ledger:
    """The submitted, not yet recorded job arrays of one plan on one store (module docstring)."""

    store: Store
    plan_name: str
    path: Path = field(init=False)

    def __post_init__(self) -> None:
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", self.plan_name) or "_"
        self.path = Path(self.store.path) / f"{LEDGER_PREFIX}{safe}.json"

    def load(self) -> list[dict[str, Any]]:
        """The job entries: ``{job_id, run_id, group, dir, notebooks_out, submitted_at, tasks: {index: cell}}``."""
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            raise InputError(f"store: cannot read the Slurm job ledger {self.path} ({exc}); it names jobs of plan "
                             f"{self.plan_name} that may still run: check squeue, then remove it") from None
        jobs = data.get("jobs") if isinstance(data, dict) else None
        return [j for j in jobs if isinstance(j, dict) and j.get("tasks")] if isinstance(jobs, list) else []

    def _write(self, jobs: list[dict[str, Any]]) -> None:
        jobs = [j for j in jobs if j.get("tasks")]
        if not jobs:
            self.path.unlink(missing_ok=True)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{uuid.uuid4().hex[:6]}.tmp")
        try:
            with open(tmp, "w") as fh:
                json.dump({"plan": self.plan_name, "jobs": jobs}, fh, indent=1, default=str)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:  # clean up, then re-raise (Ctrl-C included)
            tmp.unlink(missing_ok=True)
            raise

    def add(self, group: Group, *, run_id: str, notebooks_out: Path, submitted_at: datetime) -> None:
        """Record a job array sbatch just accepted (``group.job_id``)."""
        assert group.job_id, "add() needs the submitted job id"
        entry = {"job_id": group.job_id, "run_id": run_id, "group": group.name, "node": group.node,
                 "dir": str(group.dir), "notebooks_out": str(notebooks_out), "submitted_at": submitted_at.isoformat(),
                 "tasks": {str(i): _cell_json(c) for i, c in enumerate(group.cells)}}
        self._write([j for j in self.load() if j.get("job_id") != group.job_id] + [entry])

    def scratch_dirs(self) -> list[Path]:
        """The cell scratch folders the ledger's tasks may be using now (a sweep must leave them alone)."""
        from hweval.runner import WORK_PREFIX

        return [Path(j.get("notebooks_out") or ".") / f"{WORK_PREFIX}{c.get('cell_id')}"
                for j in self.load() for c in j["tasks"].values()]

    def resolve(self, keys: list[tuple[str, int]]) -> None:
        """Drop tasks whose outcome is now in the store."""
        if not keys:
            return
        gone: dict[str, set[str]] = {}
        for job, idx in keys:
            gone.setdefault(job, set()).add(str(idx))
        jobs = self.load()
        for j in jobs:
            j["tasks"] = {i: c for i, c in j["tasks"].items() if i not in gone.get(str(j.get("job_id")), set())}
        self._write(jobs)


def _cell_json(cell: Any) -> dict[str, Any]:
    to_json = getattr(cell, "to_json", None)
    if callable(to_json):
        return to_json()
    return {k: getattr(cell, k, None) for k in ("cell_id", "node", "notebook", "params", "timeout_s", "is_report")}


def _cell(plan: Any, stored: dict[str, Any]) -> Any:
    """The plan's cell for a ledger entry, or one rebuilt from the entry (the plan changed since)."""
    cid = stored.get("cell_id")
    for c in plan.cells():
        if c.cell_id == cid:
            return c
    return SimpleNamespace(cell_id=cid, node=stored.get("node") or "", notebook=stored.get("notebook") or "",
                           params=stored.get("params") or {}, timeout_s=stored.get("timeout_s"),
                           is_report=bool(stored.get("is_report")))


@dataclass(kw_only=True)
class Reconciled:
    """What :func:`reconcile` found: tasks to wait for (adopted) and the records it wrote."""

    adopted: dict[tuple[str, int], tuple[Group, Any]] = field(default_factory=dict)
    recorded: dict[str, str] = field(default_factory=dict)  # cell_id -> status recorded now

    @property
    def cell_ids(self) -> set[str]:
        return {c.cell_id for _, c in self.adopted.values()}


def reconcile(plan: Any, store: Store, *, can_wait: bool, wanted: set[str] | None = None) -> Reconciled:
    """Sort the ledger's tasks (module docstring); returns the ones still to wait for.

    ``can_wait`` false (the local backend): a task that is still pending or
    running and whose cell is in ``wanted`` (cells the run would start; None:
    every cell) raises :class:`SlurmJobLive`, one line naming the cell and job.
    Without ``squeue`` every ledger task of a wanted cell raises it.
    """
    from hweval.slurm import poller, scheduler

    ledger = Ledger(store=store, plan_name=plan.name)
    jobs = ledger.load()
    out = Reconciled()
    if not jobs:
        return out
    tasks: dict[tuple[str, int], tuple[Group, Any]] = {}
    for j in jobs:
        g = Group(name=str(j.get("group") or j["job_id"]), node=str(j.get("node") or ""), spec=SlurmSpec(),
                  time_limit_min=None, cells=[], dir=Path(j.get("dir") or "."), job_id=str(j["job_id"]),
                  run_id=str(j.get("run_id") or ""), notebooks_out=Path(j.get("notebooks_out") or "."),
                  submitted_at=_parse_time(j.get("submitted_at")))
        for idx, stored in sorted(j["tasks"].items(), key=lambda kv: int(kv[0])):
            c = _cell(plan, stored)
            g.cells.append(c)
            tasks[(g.job_id, int(idx))] = (g, c)

    def wants(c: Any) -> bool:
        return wanted is None or c.cell_id in wanted

    def refuse(key: tuple[str, int], why: str) -> SlurmJobLive:
        g, c = tasks[key]
        return SlurmJobLive(f"plan {plan.name}: cell {c.cell_id} {why} as Slurm job {key[0]}_{key[1]} (run {g.run_id}); "
                            "wait for it with --backend slurm, or scancel it and run again")

    try:
        scheduler.require_slurm()
        live = scheduler.squeue_states(sorted({k[0] for k in tasks}), check=True)
    except (InputError, RuntimeError, OSError) as exc:
        first = next((k for k, (_, c) in tasks.items() if wants(c)), None)
        if first is None:
            return out
        raise refuse(first, f"may still be running (Slurm cannot be asked here: {str(exc).splitlines()[0]})") from None
    found = dict(live)
    missing = {k for k in tasks if k not in found}
    if missing:
        found.update(poller.StatePoller(sorted({k[0] for k in missing})).poll(missing))

    done = poller_records(store, plan.name)
    states = cell_states_by_run(store, plan.name)
    resolved: list[tuple[str, int]] = []
    new_records = []
    for key, (g, c) in tasks.items():
        job = f"{key[0]}_{key[1]}"
        if job in done:  # a poller recorded it already (an earlier reconcile or wait killed before the ledger update)
            resolved.append(key)
            continue
        s = found.get(key)
        if s is not None and s.state in scheduler.PENDING_STATES:
            if not can_wait and wants(c):
                raise refuse(key, f"is still {s.state.lower()}")
            out.adopted[key] = (g, c)
            continue
        own = states.get((c.cell_id, g.run_id))
        if s is not None and s.state not in scheduler.ABNORMAL and own is None and can_wait:
            out.adopted[key] = (g, c)  # ended without a visible record: the poller's grace applies
            continue
        if own is not None and (s is None or s.state not in scheduler.ABNORMAL):
            resolved.append(key)  # the job recorded its own outcome
            continue
        if s is None:
            s = scheduler.TaskState(state="LOST", source="hweval")
            why = "is no longer known to Slurm (squeue, jobcomp, sacct) and wrote no result"
        elif s.state in scheduler.ABNORMAL:
            why = f"ended {s.state}" + (f" (exit {s.exit_code})" if s.exit_code else "")
            if own and own.get("error"):
                why += f"; runner said: {own['error'].splitlines()[0]}"
        else:
            why = f"ended {s.state} without writing a result"
        status = scheduler.FINAL_STATUS.get(s.state, "failed") if s.state in scheduler.ABNORMAL else "failed"
        new_records.append(poller.record_for(
            c, plan_name=plan.name, run_id=g.run_id, status=status,
            error=f"slurm job {job} {why} (found by a later run; the submitter was gone); log: {g.log(key[1])}",
            job=job, state=s, notebooks_out=g.notebooks_out or Path("."),
            submitted_at=g.submitted_at or datetime.now(UTC)))
        out.recorded[c.cell_id] = status
        resolved.append(key)
    if new_records:
        store.append(new_records)
    ledger.resolve(resolved)
    if not can_wait:
        out.adopted = {}  # live tasks of cells this run does not start stay in the ledger for a run that can wait
    return out


def _parse_time(v: Any) -> datetime | None:
    if not isinstance(v, str):
        return None
    with contextlib.suppress(ValueError):
        return datetime.fromisoformat(v)
    return None


def poller_records(store: Store, plan_name: str) -> set[str]:
    """``slurm_job`` of every notebook record a poller wrote for ``plan_name``."""
    from hwcore import records
    from hwcore.records import CellRecord

    return {r.slurm_job for r in records.read(store, CellRecord, plan=plan_name) if r.slurm_job}


def cell_states_by_run(store: Store, plan_name: str) -> dict[tuple[str, str], dict[str, Any]]:
    """``{(cell_id, run_id): {status, error}}``: the latest notebook record of each cell and run of ``plan_name``."""
    from hwcore import records
    from hwcore.records import CellRecord

    return {(r.cell_id, r.run_id): {"status": r.status, "error": r.error}
            for r in records.read(store, CellRecord, plan=plan_name)}
