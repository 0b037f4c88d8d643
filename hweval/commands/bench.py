"""``hweval bench``: not implemented yet (filled by issue #3)."""

from __future__ import annotations

import click


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
def bench() -> None:
    """[not implemented yet: issue #3] ."""
    raise click.UsageError("'hweval bench' is not implemented yet (issue #3)")
