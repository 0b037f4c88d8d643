"""``hweval train WORKLOAD``: run one training workload and store its result.

``--set key=value`` sets any config field (``--set preset=tiny`` picks a
preset, default ``small``); ``--json`` prints one JSON object (the
:class:`~workloads.runner.TrainResult`). Bad input exits 2 with one line and
writes nothing; a run that ends diverged / oom / timeout / failed is stored
with that status and exits 1; ``--list`` prints the workloads.

``--profile`` records a ``torch.profiler`` trace of a few steady-state steps
(after the warm-up steps: wait / warmup / active schedule, :mod:`workloads.profile`)
as Chrome/Perfetto JSON under ``--profile-dir`` (default: ``profiles/`` inside the
store, or ``out/profiles`` with ``--no-record``), prints the per-op-class table
(GEMM, attention, memory-bound, optimizer, communication, other: self time per
step and fraction of the step) and stores both in the workload record
(``profile_trace``, ``profile_breakdown_s``, ``profile``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

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
@click.option("--profile", is_flag=True, help="Record a torch.profiler trace of a few steady-state steps and a "
              "per-op-class breakdown.")
@click.option("--profile-dir", default=None, metavar="DIR",
              help="Where the trace goes (default: <store>/profiles, or out/profiles with --no-record).")
@store_option
def train(workload, sets, target_loss, max_steps, max_time_s, as_json, list_only, no_record, profile, profile_dir,
          store_path):
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
    if profile_dir and not profile:
        raise click.UsageError("--profile-dir needs --profile")
    pdir = None
    if profile:
        pdir = Path(profile_dir) if profile_dir else (store.path / "profiles" if store is not None
                                                      else Path("out") / "profiles")
    result = runner.run(workload, params, target_loss=target_loss, max_steps=max_steps, max_time_s=max_time_s,
                        store=store, record=not no_record, profile_dir=pdir)
    rank = os.environ.get("RANK") or os.environ.get("SLURM_PROCID") or "0"
    if rank == "0":
        if as_json:
            echo_json(result.to_json())
        else:
            click.echo(result.summary())
            if profile:
                _profile_table(result.profile, result.profile_trace)
    if result.status != "ok":
        sys.exit(1)  # a stored fault: not bad input (2), not success


def _profile_table(prof: dict[str, Any], trace: str | None) -> None:
    """The per-op-class table of a profiled run (``TrainResult.profile``)."""
    from rich.console import Console
    from rich.table import Table

    con = Console(width=None if sys.stdout.isatty() else 120)
    if "per_step_s" not in prof:
        con.print(f"profile: {prof.get('error', 'no breakdown')}")
        return
    kind = {"self_device": "self device", "device_kernels": "device kernel"}.get(prof.get("time_kind"), "self CPU")
    t = Table(title=f"op classes over {prof['steps']} profiled step(s), {kind} time; profiled step "
                    f"{prof['step_s'] * 1e3:.3g} ms")
    for col in ("class", "ms / step", "fraction of step"):
        t.add_column(col, justify="left" if col == "class" else "right")
    for k, v in prof["per_step_s"].items():
        t.add_row(k, f"{v * 1e3:.3g}", f"{prof['fraction_of_step'][k]:.1%}")
    t.add_row("total", f"{prof['classified_total_s'] * 1e3:.3g}",
              f"{prof['classified_total_s'] / prof['step_s']:.1%}" if prof["step_s"] else "n/a")
    con.print(t)
    if trace:
        con.print(f"trace: {trace} (chrome://tracing or ui.perfetto.dev)")
