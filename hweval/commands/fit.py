"""``hweval fit``: not implemented yet (filled by issue #5)."""

from __future__ import annotations

import click


@click.group()
def fit() -> None:
    """[not implemented yet: issue #5] Fit models to a CSV."""
