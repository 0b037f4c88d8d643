"""Waiting for the job arrays: :class:`StatePoller` (squeue, then the jobcomp log, then sacct) and :func:`wait`,
which records the cells Slurm ended abnormally or that ended without writing a result."""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from hwcore.store import Record
from hweval.runner import cell_record
from hweval.slurm import scheduler
from hweval.slurm.scheduler import ABNORMAL, FINAL_STATUS, PENDING_STATES, TaskState, scancel

__all__ = ["LOST_AFTER_POLLS", "POLL_S", "RECORD_GRACE_S", "StatePoller", "record_for", "wait"]

#: Seconds between polls (``HWEVAL_SLURM_POLL_S`` overrides).
POLL_S = 2.0
#: Seconds a finished task's record may take to become visible in the store
#: (shared-filesystem attribute caching, e.g. NFS ``actimeo`` defaults to 3-60 s)
#: before the poller records the task as having written nothing
#: (``HWEVAL_SLURM_RECORD_GRACE_S`` overrides).
RECORD_GRACE_S = 10.0
#: Polls a task may be missing from every state source before it counts as lost.
LOST_AFTER_POLLS = 5


class StatePoller:
    """Task states of our arrays from squeue, then the jobcomp log, then sacct."""

    def __init__(self, job_ids: Sequence[str]) -> None:
        self.job_ids = list(job_ids)
        conf = scheduler.scontrol_config()
        loc = conf.get("JobCompLoc", "")
        self.jobcomp = Path(loc) if conf.get("JobCompType", "").endswith("filetxt") and loc else None
        self.accounting = conf.get("AccountingStorageType", "accounting_storage/none") != "accounting_storage/none"

    def poll(self, wanted: set[tuple[str, int]]) -> dict[tuple[str, int], TaskState]:
        states = scheduler.squeue_states(self.job_ids)
        missing = {k for k in wanted if k not in states}
        if missing and self.jobcomp is not None:
            states.update({k: v for k, v in scheduler.jobcomp_states(self.jobcomp, {k[0] for k in missing}).items()
                           if k in missing})
            missing = {k for k in wanted if k not in states}
        if missing and self.accounting:
            found = scheduler.sacct_states(sorted({k[0] for k in missing}))
            states.update({k: v for k, v in found.items() if k in missing})
        return states


def record_for(cell: Any, *, plan_name: str, run_id: str, status: str, error: str, job: str,
                state: TaskState, notebooks_out: Path, submitted_at: datetime) -> Record:
    import socket

    # the compute node's fingerprint is unknown here: name where the job ran and who recorded it
    fp = {"node_id": None, "slurm_nodelist": state.nodelist,
          "recorded_by": f"hweval.slurm poller on {socket.gethostname()}"}
    return cell_record(cell, plan_name=plan_name, run_id=run_id, status=status, error=error,
                       output=notebooks_out / f"{cell.cell_id}.ipynb", started_at=submitted_at, fingerprint=fp,
                       slurm_job=job, slurm_state=state.state, timeout_s=cell.timeout_s)


def record_interrupted(tasks, done, *, plan, st, run_id, notebooks_out, submitted_at, on_resolved=None) -> None:
    """Ctrl-C: cancel every job array of ``tasks`` still queued or running, so no orphaned job writes later, and
    record each task without an outcome in ``done`` (``{cell_id: status}``) failed, "hweval run interrupted" (the
    poller is gone; ``--resume`` picks them up). A store that cannot be written is warned about, never raised:
    the interrupt must propagate, and the unrecorded cells rerun on ``--resume``."""
    scancel(sorted({k[0] for k in tasks}))
    recs, keys = [], []
    for k, (g, c) in tasks.items():
        if c.cell_id not in done:
            keys.append(k)
            recs.append(record_for(c, plan_name=plan.name, run_id=g.run_id or run_id, status="failed",
                                   error=f"slurm job {k[0]}_{k[1]} cancelled: hweval run interrupted",
                                   job=f"{k[0]}_{k[1]}", state=TaskState(state="CANCELLED", source="hweval"),
                                   notebooks_out=g.notebooks_out or notebooks_out,
                                   submitted_at=g.submitted_at or submitted_at))
    try:
        if recs:
            st.append(recs)
        if on_resolved is not None and keys:
            on_resolved(keys)
    except Exception as exc:  # noqa: BLE001 - see the docstring
        warnings.warn(f"could not record the {len(recs)} cancelled cell(s) ({type(exc).__name__}: {exc}); "
                      "--resume runs them again", RuntimeWarning, stacklevel=2)


def wait(tasks, *, plan, st, run_id, poll_s, grace_s, notebooks_out, submitted_at, progress, cell_states,
         on_resolved=None, adopted=0, done=None):
    """Poll ``tasks`` (``{(job_id, index): (Group, cell)}``) until each has its outcome in the store.

    A group with its own ``run_id`` / ``notebooks_out`` / ``submitted_at`` (a job
    array of an earlier, killed run: :mod:`hweval.slurm.ledger`) is checked and
    recorded under those. ``on_resolved(keys)`` is called after each poll with
    the tasks whose outcome is now stored. Returns ``{cell_id: status}``, filled
    into ``done`` as outcomes arrive when the caller passes one (so that on
    Ctrl-C, whenever it lands, the caller knows what is left to record:
    :func:`record_interrupted`).
    """
    statuses: dict[str, str] = done if done is not None else {}
    if not tasks:
        return statuses
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    job_ids = sorted({k[0] for k in tasks})
    poller = StatePoller(job_ids)
    console = Console(stderr=True)
    if len(tasks) > adopted:
        console.print(f"slurm: submitted {len(tasks) - adopted} cell(s) as job array(s) "
                      f"{', '.join(sorted({k[0] for k, (g, _) in tasks.items() if g.run_id in (None, run_id)}))}")
    if adopted:
        console.print(f"slurm: waiting for {adopted} cell(s) an earlier run submitted and left running: job array(s) "
                      f"{', '.join(sorted({k[0] for k, (g, _) in tasks.items() if g.run_id not in (None, run_id)}))}")
    bar = Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TextColumn("{task.fields[info]}"), console=console, disable=not progress,
    )
    finished_at: dict[tuple[str, int], float] = {}  # when the task's final state was first seen
    final: dict[tuple[str, int], TaskState] = {}
    missing_polls: dict[tuple[str, int], int] = {}
    seen: set[tuple[str, int]] = set()
    try:
        with bar:
            bar_task = bar.add_task(f"slurm {plan.name}", total=len(tasks), info="")
            while len(statuses) < len(tasks):
                open_keys = {k for k in tasks if tasks[k][1].cell_id not in statuses}
                states = poller.poll(open_keys)
                counts: dict[str, int] = {}
                reasons: set[str] = set()
                for k in open_keys:
                    s = states.get(k)
                    if s is None:
                        if k in seen:
                            missing_polls[k] = missing_polls.get(k, 0) + 1
                            if missing_polls[k] >= LOST_AFTER_POLLS:
                                s = TaskState(state="LOST", source="poller")
                        if s is None:
                            counts["UNKNOWN"] = counts.get("UNKNOWN", 0) + 1
                            continue
                    seen.add(k)
                    if s.state in PENDING_STATES:
                        counts[s.state] = counts.get(s.state, 0) + 1
                        if s.state == "PENDING" and s.reason and s.reason != "None":
                            reasons.add(s.reason)  # e.g. Resources, Priority, ReqNodeNotAvail
                        continue
                    final[k] = s
                    finished_at.setdefault(k, time.monotonic())
                done_now = [k for k in open_keys if k in final]
                resolved = []
                if done_now:
                    recs = cell_states(st, plan.name)
                    new_records = []
                    for k in done_now:
                        g, c = tasks[k]
                        s = final[k]
                        rec = recs.get(c.cell_id)
                        task_run = g.run_id or run_id
                        mine = rec is not None and rec.get("run_id") == task_run
                        job = f"{k[0]}_{k[1]}"
                        where = f"slurm job {job} ended {s.state}" + (f" (exit {s.exit_code})" if s.exit_code else "")
                        log = g.log(k[1])
                        if s.state in ABNORMAL:
                            status = FINAL_STATUS.get(s.state, "failed")
                            error = f"{where}; log: {log}"
                            if mine and rec.get("error"):
                                error += f"; runner said: {rec['error'].splitlines()[0]}"
                        elif mine:
                            statuses[c.cell_id] = rec["status"]
                            resolved.append(k)
                            continue
                        elif time.monotonic() - finished_at[k] < grace_s:
                            continue  # the record may not be visible yet on a shared filesystem
                        else:
                            status = "failed"
                            error = f"{where} without writing a result; log: {log}\n{_tail(log)}"
                        new_records.append(record_for(c, plan_name=plan.name, run_id=task_run, status=status,
                                                       error=error, job=job, state=s,
                                                       notebooks_out=g.notebooks_out or notebooks_out,
                                                       submitted_at=g.submitted_at or submitted_at))
                        statuses[c.cell_id] = status
                        resolved.append(k)
                    if new_records:
                        st.append(new_records)
                if resolved and on_resolved is not None:
                    on_resolved(resolved)
                info = " ".join(f"{n} {s.lower()}" for s, n in sorted(counts.items()))
                if reasons:
                    info += f" (pending: {', '.join(sorted(reasons))})"
                bar.update(bar_task, completed=len(statuses), info=info)
                if len(statuses) < len(tasks):
                    time.sleep(poll_s)
    except KeyboardInterrupt:
        if done is None:  # a caller that passes ``done`` records the interrupt itself, wherever it lands
            record_interrupted(tasks, statuses, plan=plan, st=st, run_id=run_id, notebooks_out=notebooks_out,
                               submitted_at=submitted_at, on_resolved=on_resolved)
        raise
    return statuses


def _tail(path: Path, n: int = 10) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""
