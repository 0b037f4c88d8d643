"""``hweval run --plan FILE``: execute a plan's notebooks, then build its report (:func:`hweval.execute.run_plan`).

Completion state is the store's notebook records (latest per plan + cell_id,
see :mod:`hweval.runner`): by default only cells with no record run, so
rerunning a finished plan is a no-op; ``--resume`` also re-runs failed and
timed-out cells; ``--force`` re-runs everything. Executed notebooks go to
``OUT/runs/<run_id>/<cell_id>.ipynb`` (default OUT: ``out/<plan name>``), the
report to ``OUT/report/report.html``.
"""

from __future__ import annotations

import sys

import click

from hweval.commands.common import store_option


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
    from hweval.execute import run_plan

    outcome = run_plan(plan_path, out=out_dir, store=store_path, backend=backend, jobs=jobs, resume=resume,
                       force=force, timeout_s=timeout_s, dry_run=dry_run, progress=not no_progress,
                       wait_lock=wait_lock, log=lambda msg: click.echo(msg, err=True))
    if outcome.dry_run:
        for what, c in outcome.listing:
            click.echo(f"{what:14s} {c.cell_id}  {c.notebook}@{c.node} {c.params}")
        if outcome.report_html is not None:
            click.echo(f"{'report':14s} {outcome.report_cell_id}  -> {outcome.report_html}")
        return
    if outcome.report_html is not None and (outcome.nothing_to_do or outcome.report_html.exists()):
        click.echo(f"report: {outcome.report_html}")
    if not outcome.ok:
        sys.exit(1)
