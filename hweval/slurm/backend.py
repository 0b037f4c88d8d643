"""``run_plan``: submit a plan's selected cells as Slurm job arrays and wait for every one to have a record."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hwcore.errors import InputError
from hwcore.store import Record, Store
from hweval.slurm.ledger import Ledger
from hweval.slurm.poller import POLL_S, RECORD_GRACE_S, record_for, record_interrupted, wait
from hweval.slurm.scheduler import TaskState, require_slurm, sbatch_submit, sbatch_test, scancel
from hweval.slurm.scripts import Group, make_groups, python_executable, render_job_script

__all__ = ["run_plan"]


def _store_path(store: Store | str | os.PathLike[str] | None) -> Path:
    st = store if isinstance(store, Store) else Store(store)
    return Path(st.path).resolve()


def _env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        raise InputError(f"{name}: expected a number of seconds, got {os.environ.get(name)!r}") from None


def run_plan(
    plan: Any,
    cells: Sequence[Any],
    *,
    out_dir: str | os.PathLike[str],
    store: Store | str | os.PathLike[str] | None,
    run_id: str,
    resume: bool = False,
    force: bool = False,
    progress: bool = True,
    poll_s: float | None = None,
    adopted: dict[tuple[str, int], tuple[Group, Any]] | None = None,
) -> dict[str, str]:
    """Submit ``cells`` (already selected by the runner's resume/force rules) as job arrays and wait.

    Every job array sbatch accepts goes into the plan's job ledger at once
    (:class:`~hweval.slurm.ledger.Ledger`), and each task leaves it when its
    outcome is stored, so a run killed meanwhile leaves its live jobs findable.
    ``adopted``: tasks an earlier run submitted and left running
    (:func:`~hweval.slurm.ledger.reconcile`); they are waited for with the new ones.

    Returns ``{cell_id: status}`` once every task has finished and has a
    notebook record of this run in the store. ``resume``/``force`` are
    accepted for the caller's contract; the selection is made by the caller.
    Raises :class:`InputError` (nothing submitted, nothing written) for a bad
    ``slurm:`` mapping or a job ``sbatch --test-only`` refuses (unknown
    partition, constraint, GRES). A group sbatch then refuses to queue (a
    submit limit) is recorded ``failed`` with sbatch's message; the others run.
    """
    del resume, force  # the caller (hweval run) selects the cells with hweval.runner.select_cells
    from hweval.runner import cell_states

    out = Path(out_dir).resolve()
    store_path = _store_path(store)
    st = Store(store_path)
    poll = poll_s if poll_s is not None else _env_float("HWEVAL_SLURM_POLL_S", POLL_S)
    grace = _env_float("HWEVAL_SLURM_RECORD_GRACE_S", RECORD_GRACE_S)
    base = out / "slurm" / run_id
    notebooks_out = out / "runs" / run_id
    groups = make_groups(plan, cells, base) if cells else []  # validates every node's mapping first
    require_slurm()
    ledger = Ledger(store=st, plan_name=plan.name)
    python = python_executable()
    plan_path = Path(plan.path).resolve()
    from hweval.plan import REPO

    workdir = REPO  # the checkout (on a shared filesystem) the jobs import hweval from

    # render every script and have Slurm check it before anything is written or submitted
    scripts: dict[str, tuple[str, str | None]] = {}
    for g in groups:
        scripts[g.name] = render_job_script(g, plan_path=plan_path, plan_name=plan.name, notebooks_out=notebooks_out,
                                            store_path=store_path, run_id=run_id, workdir=workdir, python=python)
        sbatch_test(g, scripts[g.name][0])

    submitted_at = datetime.now(UTC)
    notebooks_out.mkdir(parents=True, exist_ok=True)
    adopted = dict(adopted or {})
    tasks: dict[tuple[str, int], tuple[Group, Any]] = {}
    refused: list[Record] = []
    done: dict[str, str] = {}  # cell_id -> status, filled by wait() as outcomes land
    try:
        for g in groups:
            (g.dir / "logs").mkdir(parents=True, exist_ok=True)
            g.cells_file.write_text("".join(f"{c.cell_id}\n" for c in g.cells))
            job_text, rank_text = scripts[g.name]
            if rank_text is not None:
                g.rank_script.write_text(rank_text)
                g.rank_script.chmod(0o755)
            g.script.write_text(job_text)
            try:
                g.job_id = sbatch_submit(g)
            except (RuntimeError, subprocess.SubprocessError) as exc:
                # e.g. a submit limit (QOSMaxSubmitJobPerUserLimit) hit after --test-only passed: these cells
                # failed to start; record them and go on with the other groups
                refused.extend(record_for(c, plan_name=plan.name, run_id=run_id, status="failed", error=str(exc),
                                           job="", state=TaskState(state="NOT_SUBMITTED", source="sbatch"),
                                           notebooks_out=notebooks_out, submitted_at=submitted_at)
                               for c in g.cells)
                continue
            for i, c in enumerate(g.cells):  # known at once: a Ctrl-C from here on cancels and records them
                tasks[(g.job_id, i)] = (g, c)
            ledger.add(g, run_id=run_id, notebooks_out=notebooks_out, submitted_at=submitted_at)
            (g.dir / "job_id").write_text(g.job_id + "\n")
        if refused:
            st.append(refused)
        waited = wait(adopted | tasks, plan=plan, st=st, run_id=run_id, poll_s=poll, grace_s=grace,
                      notebooks_out=notebooks_out, submitted_at=submitted_at, progress=progress,
                      cell_states=cell_states, on_resolved=ledger.resolve, adopted=len(adopted), done=done)
    except KeyboardInterrupt:
        # wherever Ctrl-C lands once a job array is queued (sbatch returned, the ledger being written, the poller
        # starting or polling), cancel and record what has no outcome yet
        record_interrupted(adopted | tasks, done, plan=plan, st=st, run_id=run_id, notebooks_out=notebooks_out,
                           submitted_at=submitted_at, on_resolved=ledger.resolve)
        raise
    except BaseException:  # clean up, then re-raise
        scancel([g.job_id for g in groups if g.job_id])
        raise
    return {r.params["cell_id"]: r.status for r in refused} | waited
