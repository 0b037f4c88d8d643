"""``hweval train``: not implemented yet (filled by issue #4)."""

from __future__ import annotations

import click


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
def train() -> None:
    """[not implemented yet: issue #4] ."""
    raise click.UsageError("'hweval train' is not implemented yet (issue #4)")
