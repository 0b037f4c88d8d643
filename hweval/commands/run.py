"""``hweval run --plan FILE``: execute a plan's notebooks, then build its report.

Completion state is the store's notebook records (latest per plan + cell_id,
see :mod:`hweval.runner`): by default only cells with no record run, so
rerunning a finished plan is a no-op; ``--resume`` also re-runs failed and
timed-out cells; ``--force`` re-runs everything. Executed notebooks go to
``OUT/runs/<run_id>/<cell_id>.ipynb`` (default OUT: ``out/<plan name>``), the
report to ``OUT/report/report.html``.
"""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path

import click

from hweval.commands.common import open_store, store_option
from hwcore.errors import InputError


def _report_html(report_dir: Path) -> Path:
    return report_dir / "report.html"


@click.command()
@click.option("--plan", "plan_path", required=True, type=click.Path(dir_okay=False), help="Plan YAML file.")
@click.option("--out", "out_dir", default=None, type=click.Path(file_okay=False),
              help="Output directory (default: out/<plan name>).")
@click.option("--jobs", "-j", default=1, show_default=True, type=click.IntRange(min=1),
              help="Notebooks run in parallel (local backend).")
@click.option("--resume", is_flag=True, help="Also re-run cells whose last run failed or timed out.")
@click.option("--force", is_flag=True, help="Re-run every cell, even finished ones.")
@click.option("--backend", default="local", show_default=True, type=click.Choice(["local", "slurm"]),
              help="Where cells run.")
@click.option("--timeout-s", default=None, type=click.FloatRange(min=0, min_open=True),
              help="Override every cell's timeout (seconds).")
@click.option("--dry-run", is_flag=True, help="List the cells and what would run; run nothing.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--wait-lock", is_flag=True,
              help="If another `hweval run` of this plan holds this store, wait for it instead of refusing.")
@store_option
def run(plan_path, out_dir, jobs, resume, force, backend, timeout_s, dry_run, no_progress, wait_lock,
        store_path) -> None:
    """Execute a plan's notebooks (locally or on Slurm) and build its report."""
    from hweval.plan import load_plan
    from hweval.runner import PlanLock
    from hwcore.store import new_run_id

    plan = load_plan(plan_path)
    store = open_store(store_path, write=True)
    out = Path(out_dir) if out_dir else Path("out") / plan.name
    if out.exists() and not out.is_dir():
        raise InputError(f"--out: {out} exists and is not a directory")
    if backend == "slurm" and importlib.util.find_spec("hweval.slurm") is None:
        raise InputError("--backend: 'slurm' needs the module hweval.slurm, which is not installed in this checkout")
    lock = PlanLock(store, plan.name)
    run_id = new_run_id()
    if dry_run:
        if lock.is_held_elsewhere():
            click.echo(f"note: plan {plan.name} is running now ({lock.holder()}); its cells may change", err=True)
        _run(plan, store, out, jobs, resume, force, backend, timeout_s, True, no_progress, run_id)
        return
    # one run of a plan per store: a second run (or --resume) never runs a cell a live run is running
    lock.acquire(wait=wait_lock, run_id=run_id,
                 on_wait=lambda who: click.echo(f"plan {plan.name}: waiting for the run holding the lock ({who})",
                                                err=True))
    with lock:
        _run(plan, store, out, jobs, resume, force, backend, timeout_s, False, no_progress, run_id)


def _run(plan, store, out, jobs, resume, force, backend, timeout_s, dry_run, no_progress, run_id) -> None:  # noqa: ANN001
    from hweval.runner import cell_states, run_cell, run_local, select_cells, sweep_scratch

    cells = plan.cells()
    skipped_remote = []
    if backend == "local":
        skipped_remote = [c for c in cells if not c.local]
        cells = [c for c in cells if c.local]
    states = cell_states(store, plan.name)
    todo, kept = select_cells(cells, states, resume=resume, force=force)
    report_dir = (out / "report").resolve()
    report_cell = plan.report_cell(report_dir=report_dir)
    report_state = states.get(report_cell.cell_id) if report_cell else None

    echo = lambda msg: click.echo(msg, err=True)  # noqa: E731
    for c in skipped_remote:
        echo(f"skip {c.cell_id}: node {c.node} is not local (local: false); use --backend slurm")
    if kept["failed"]:
        echo(f"{len(kept['failed'])} cell(s) failed earlier and are not re-run; use --resume to re-run them")

    if dry_run:
        for c in cells:
            what = "run" if c in todo else ("done" if c in kept["done"] else "failed (kept)")
            click.echo(f"{what:14s} {c.cell_id}  {c.notebook}@{c.node} {c.params}")
        if report_cell:
            click.echo(f"{'report':14s} {report_cell.cell_id}  -> {_report_html(report_dir)}")
        return

    if out.is_dir():
        sweep_scratch(out)  # scratch of a runner killed earlier (we hold the lock: no live runner owns it)
    need_report = report_cell is not None and (
        bool(todo) or force or report_state is None or report_state["status"] != "ok"
        or not _report_html(report_dir).exists()
    )
    if not todo and not need_report:
        echo(f"plan {plan.name}: nothing to do ({len(kept['done'])} cell(s) already done; --force re-runs them)")
        if report_cell is not None:
            click.echo(f"report: {_report_html(report_dir)}")
        return

    echo(f"plan {plan.name}: run {run_id}: {len(todo)} cell(s) to run, {len(kept['done'])} already done; "
         f"notebooks -> {out / 'runs' / run_id}")
    statuses: dict[str, str] = {}
    if todo:
        if backend == "slurm":
            from hweval.slurm import run_plan

            res = run_plan(plan, todo, out_dir=out, store=store, run_id=run_id, resume=resume, force=force,
                           progress=not no_progress)
            if isinstance(res, dict):
                statuses.update({k: str(v) for k, v in res.items()})
            else:  # the backend only wrote records: read them back
                fresh = cell_states(store, plan.name)
                statuses.update({c.cell_id: fresh.get(c.cell_id, {}).get("status", "failed") for c in todo})
        else:
            statuses.update(
                run_local(plan, todo, out_dir=out, store=store, run_id=run_id, jobs=jobs,
                          progress=not no_progress, timeout_s=timeout_s)
            )
    counts = Counter(statuses.values())
    failed = {k: v for k, v in statuses.items() if v != "ok"}
    if statuses:
        echo("cells: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    if failed:
        fresh = cell_states(store, plan.name)
        for cid, st in failed.items():
            err = (fresh.get(cid, {}).get("error") or "").splitlines()
            echo(f"  {st}: {cid}: {err[0] if err else ''}")

    report_status = None
    if report_cell is not None and need_report:
        report_status = run_cell(report_cell, out_dir=out / "runs" / run_id, store=store, plan_name=plan.name,
                                 run_id=run_id, timeout_s=timeout_s)
        if report_status != "ok":
            err = (cell_states(store, plan.name).get(report_cell.cell_id, {}).get("error") or "").splitlines()
            echo(f"report notebook {report_status}: {err[0] if err else ''}")
    if report_cell is not None:
        html = _report_html(report_dir)
        if html.exists():
            click.echo(f"report: {html}")
        else:
            echo(f"no report was written (see {out / 'runs' / run_id / (report_cell.cell_id + '.ipynb')})")
    if failed or (report_status not in (None, "ok")):
        sys.exit(1)
