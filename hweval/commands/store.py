"""``hweval store check|repair``: find and move aside damaged parts of the results store.

``check`` reads every part in full (``--quick``: footers and schemas only) and
reports damaged parts (zero-length, truncated, not Parquet, foreign schema,
unreadable data) and hidden ``.tmp`` files left by killed writers; it changes
nothing and exits 0 when the store is clean, 1 when something was found.
``repair`` moves each damaged part to ``<store>/quarantine/`` beside a
``.reason.txt`` (its bytes are kept) and deletes ``.tmp`` files older than the
grace period; queries quarantine damaged parts by themselves too, so repair is
only needed to clean up ahead of time.
"""

from __future__ import annotations

import sys

import click

from hwcore.store import DEFAULT_TMP_GRACE_S, TMP_GRACE_ENV, StoreScan
from hweval.commands.common import open_store, store_option

_grace_option = click.option(
    "--tmp-grace-s", type=click.FloatRange(min=0), default=None,
    help=f"Age in seconds past which a hidden .tmp file is stale (default: ${TMP_GRACE_ENV} or {DEFAULT_TMP_GRACE_S:g}).",
)
_quick_option = click.option("--quick", is_flag=True, help="Check Parquet footers and schemas only, not every row.")


def _rel(scan: StoreScan, p) -> str:  # noqa: ANN001 - a Path
    try:
        return str(p.relative_to(scan.store))
    except ValueError:
        return str(p)


def _report(scan: StoreScan, *, repaired: bool) -> None:
    for d in scan.damaged:
        where = f" -> {_rel(scan, d.moved_to)}" if d.moved_to else (" (could not be moved)" if repaired else "")
        click.echo(f"damaged  {_rel(scan, d.path)}: {d.reason}{where}")
    for t in scan.stale_tmp:
        click.echo(f"{'removed' if scan.removed_tmp else 'stale':8s} {_rel(scan, t)}")
    for t in scan.fresh_tmp:
        click.echo(f"tmp      {_rel(scan, t)} (recent: kept, may belong to a live writer)")
    click.echo(
        f"store {scan.store}: {len(scan.parts)} part(s) ok, {len(scan.damaged)} damaged"
        f"{' (quarantined)' if repaired and scan.damaged else ''}, "
        f"{len(scan.stale_tmp)} stale tmp{' removed' if scan.removed_tmp else ''}, "
        f"{len(scan.fresh_tmp)} recent tmp, {len(scan.quarantined)} in quarantine"
    )


@click.group()
def store() -> None:
    """Check the results store, or quarantine its damaged parts."""


@store.command()
@store_option
@_quick_option
@_grace_option
def check(store_path, quick, tmp_grace_s) -> None:
    """Report damaged parts and stale .tmp files; change nothing (exit 1 if any)."""
    st = open_store(store_path, write=False)
    scan = st.check(deep=not quick, tmp_grace_s=tmp_grace_s)
    _report(scan, repaired=False)
    if scan.damaged or scan.stale_tmp:
        sys.exit(1)


@store.command()
@store_option
@_quick_option
@_grace_option
def repair(store_path, quick, tmp_grace_s) -> None:
    """Move damaged parts to <store>/quarantine/ and delete stale .tmp files."""
    st = open_store(store_path, write=True)
    scan = st.repair(deep=not quick, tmp_grace_s=tmp_grace_s)
    _report(scan, repaired=True)
    if any(d.moved_to is None for d in scan.damaged):
        sys.exit(1)
