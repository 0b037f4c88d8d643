"""``hweval cost``: not implemented yet (filled by issue #5)."""

from __future__ import annotations

import click


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
def cost() -> None:
    """[not implemented yet: issue #5] ."""
    raise click.UsageError("'hweval cost' is not implemented yet (issue #5)")
