"""``hweval train WORKLOAD``: run one training workload and store its result.

``--set key=value`` sets any config field (``--set preset=tiny`` picks a
preset, default ``small``); ``--json`` prints one JSON object (the
:class:`~workloads.runner.TrainResult`). Bad input exits 2 with one line and
writes nothing; a run that ends diverged / oom / timeout / failed is stored
with that status and exits 1; ``--list`` prints the workloads.
"""

from __future__ import annotations

import os
import sys

import click

from hweval.commands.common import echo_json, open_store, parse_sets, store_option


@click.command()
@click.argument("workload", required=False)
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Config field (repeatable).")
@click.option("--target-loss", type=float, default=None, help="Eval-loss target (default: the preset's).")
@click.option("--max-steps", type=int, default=None, help="Step budget (the run never exceeds it).")
@click.option("--max-time-s", type=float, default=None, help="Wall-time budget; status timeout past it.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--list", "list_only", is_flag=True, help="List the workloads and exit.")
@click.option("--no-record", is_flag=True, help="Do not write to the store.")
@store_option
def train(workload, sets, target_loss, max_steps, max_time_s, as_json, list_only, no_record, store_path):
    """Train WORKLOAD on real data; report throughput, MFU and time to the target loss."""
    from workloads import registry, runner

    if not workload and not list_only:
        raise click.UsageError("missing WORKLOAD; valid choices: " + ", ".join(registry.list_workloads()))
    if list_only:
        rows = [registry.get(n).describe() for n in registry.list_workloads()]
        if as_json:
            echo_json({"workloads": rows})
        else:
            for r in rows:
                click.echo(f"{r['name']:24s} {r['description']} (presets: {', '.join(r['presets'])})")
        return
    params = parse_sets(sets)
    store = None if no_record else open_store(store_path, write=True)
    result = runner.run(workload, params, target_loss=target_loss, max_steps=max_steps, max_time_s=max_time_s,
                        store=store, record=not no_record)
    rank = os.environ.get("RANK") or os.environ.get("SLURM_PROCID") or "0"
    if rank == "0":
        if as_json:
            echo_json(result.to_json())
        else:
            click.echo(result.summary())
    if result.status != "ok":
        sys.exit(1)  # a stored fault: not bad input (2), not success
