"""``hweval run``: not implemented yet (filled by issue #6)."""

from __future__ import annotations

import click


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
def run() -> None:
    """[not implemented yet: issue #6] ."""
    raise click.UsageError("'hweval run' is not implemented yet (issue #6)")
