"""Options and helpers shared by the subcommands."""

from __future__ import annotations

import json
import math
from typing import Any

import click

from hwcore.errors import InputError
from hwcore.store import ENV_VAR, Store

store_option = click.option(
    "--store",
    "store_path",
    envvar=ENV_VAR,
    type=click.Path(file_okay=False, dir_okay=True),
    default=None,
    help=f"Results store directory (default: ${ENV_VAR} or data/results).",
)


def open_store(path: str | None, *, write: bool) -> Store:
    store = Store(path)
    if write:
        store.check_writable()
    else:
        store.check_readable()
    return store


def parse_sets(pairs: tuple[str, ...]) -> dict[str, str]:
    """``--set key=value`` pairs into a dict of raw strings (typed by the registry)."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, val = pair.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--set: expected key=value, got {pair!r}")
        out[key.strip()] = val.strip()
    return out


def _clean(o: Any) -> Any:
    if isinstance(o, float) and not math.isfinite(o):
        return None if math.isnan(o) else ("inf" if o > 0 else "-inf")
    if isinstance(o, dict):
        return {k: _clean(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [_clean(v) for v in o]
    return o


def echo_json(obj: Any) -> None:
    """One JSON object on stdout (NaN/inf mapped to valid JSON)."""
    click.echo(json.dumps(_clean(obj), default=str, sort_keys=False))
