"""``hweval info``: print the node fingerprint."""

from __future__ import annotations

import click

from hweval.commands.common import echo_json
from hwcore.fingerprint import fingerprint


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the whole fingerprint as one JSON object.")
def info(as_json: bool) -> None:
    """Print this node's fingerprint (hardware, software stack, node_id)."""
    fp = fingerprint()
    if as_json:
        echo_json(fp)
        return
    flags = ", ".join(k for k, v in fp["cpu_flags"].items() if v) or "-"
    gpus = ", ".join(f"{g['name']} ({g['memory_bytes'] / 2**30:.0f} GiB)" for g in fp["gpus"]) or "none"
    pk = fp["packages"]
    blas = ", ".join(f"{b.get('internal_api')} {b.get('version')} x{b.get('num_threads')}" for b in fp["blas"]) or "-"
    rows = [
        ("node_id", fp["node_id"]),
        ("stack_id", fp["stack_id"]),
        ("hostname", fp["hostname"]),
        ("cpu", f"{fp['cpu_model']} ({fp['cores_usable']} usable / {fp['cores_logical']} logical cores)"),
        ("cpu flags", flags),
        ("caches", ", ".join(f"{k} {v // 1024} KiB" for k, v in fp["caches_bytes"].items()) or "-"),
        ("memory", f"{fp['memory_bytes'] / 2**30:.1f} GiB"),
        ("gpus", gpus),
        ("gpu driver", fp["gpu_driver"] or "-"),
        ("os", fp["os"]),
        ("python", fp["python"]),
        ("torch / jax / numpy", f"{pk.get('torch')} / {pk.get('jax')} / {pk.get('numpy')}"),
        ("blas", blas),
        ("perf env", ", ".join(f"{k}={v}" for k, v in fp["env"].items()) or "-"),
        ("suite git", f"{fp['suite_git']['sha']}{' (dirty)' if fp['suite_git']['dirty'] else ''}"),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        click.echo(f"{k:<{width}}  {v}")
