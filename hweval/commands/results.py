"""``hweval results``: list, filter and export stored results."""

from __future__ import annotations

import sys

import click

from hweval.commands.common import open_store, store_option
from hwcore.errors import InputError
from hwcore.store import KINDS, STATUSES

LIST_COLUMNS = ["finished_at", "run_id", "kind", "name", "status", "node_id", "plan", "notebook", "error"]


@click.command()
@store_option
@click.option("--kind", type=click.Choice(KINDS), default=None, help="Only this kind of record.")
@click.option("--name", default=None, help="Only this kernel / workload / fit name.")
@click.option("--status", type=click.Choice(STATUSES), default=None, help="Only this status.")
@click.option("--run-id", default=None, help="Only this run id.")
@click.option("--plan", default=None, help="Only this plan.")
@click.option("--node-id", default=None, help="Only this node.")
@click.option("--sql", default=None,
              help="One read-only DuckDB SELECT over the view 'results' (overrides the filters); COPY, ATTACH, "
                   "INSTALL, LOAD, SET, PRAGMA, ... and other files are refused.")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False, allow_dash=True), default=None,
              help="Export the selection as CSV to this file ('-' for stdout).")
@click.option("--json", "as_json", is_flag=True, help="Print the selection as JSON records.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Show at most N rows (newest).")
@click.option("--all-attempts", is_flag=True,
              help="Also the rows of plan-cell attempts that do not count (killed or failed attempts superseded "
                   "by a later one); by default they are set aside, as the analysis does.")
def results(store_path, kind, name, status, run_id, plan, node_id, sql, csv_path, as_json, limit,
            all_attempts) -> None:
    """List, filter and export results (DuckDB over the Parquet store).

    Without --sql, a plan cell that ran more than once (a killed runner, then
    --resume) shows the rows of its one counted attempt only
    (hwcore.records.Attempts); how many rows were set aside is said on stderr.
    --all-attempts and --sql see every row.
    """
    store = open_store(store_path, write=False)
    if sql:
        df = store.query(sql)
    else:
        df = store.records(kind=kind, name=name, status=status, run_id=run_id, plan=plan, node_id=node_id)
        if not all_attempts and not df.empty:
            df = _counted(store, df)
    if limit is not None:
        df = df.tail(limit)
    if csv_path:
        if csv_path == "-":
            df.to_csv(sys.stdout, index=False)
        else:
            try:
                df.to_csv(csv_path, index=False)
            except OSError as exc:
                raise InputError(f"--csv: cannot write {csv_path}: {exc.strerror}") from exc
            click.echo(f"wrote {len(df)} rows to {csv_path}", err=True)
        return
    if as_json:
        click.echo(df.to_json(orient="records", date_format="iso"))
        return
    if df.empty:
        click.echo(f"no results in {store.path}")
        return
    from rich.console import Console
    from rich.table import Table

    cols = [c for c in LIST_COLUMNS if c in df.columns] if not sql else list(df.columns)
    table = Table(title=f"{len(df)} result(s) in {store.path}")
    for c in cols:
        table.add_column(c, overflow="fold")
    for _, row in df[cols].iterrows():
        table.add_row(*["" if v is None else str(v) for v in row.tolist()])
    Console().print(table)


def _counted(store, df):  # (Store, DataFrame) -> DataFrame
    """``df`` without the rows of cell attempts that do not count; says on stderr how many were set aside."""
    from hwcore import records
    from hwcore.records import Attempts, CellRecord

    if "cell_id" not in df.columns or not df["cell_id"].notna().any():
        return df
    plans = {p for p in df["plan"].dropna().unique()}
    cells = [c for c in records.read(store, CellRecord) if c.plan in plans]
    rows = list(df.itertuples(index=False))
    att = Attempts.of(rows, cells)
    keep = [att.counts(r) for r in rows]
    aside = len(keep) - sum(keep)
    if aside:
        click.echo(f"{aside} row(s) of plan-cell attempts that do not count (killed or failed, superseded by a "
                   "later attempt) set aside; --all-attempts shows them", err=True)
    return df[keep]
