"""``hweval bench``: run one micro-benchmark kernel from the registry (:mod:`kernels.registry`).

``hweval bench KERNEL [--set key=value ...] [--json] [--store DIR] [--device cpu|cuda]``
validates the parameters (one-line error, exit 2, nothing written), checks the
kernel against its higher-precision reference, times it, prints the
Measurement with FLOP/s, bytes/s and intensity (or one JSON object with
``--json``) and appends the result to the store. ``hweval bench --list``
lists kernels and their parameters. A result that is not ``ok`` (``oom``,
``timeout``, ``failed``) is recorded and printed, and the exit code is 1.
"""

from __future__ import annotations

import math

import sys
import warnings

import click

from hweval.commands.common import echo_json, open_store, parse_sets, store_option


@click.command()
@click.argument("kernel", required=False)
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Kernel parameter (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
@click.option("--list", "list_", is_flag=True, help="List kernels and their parameters.")
@click.option("--device", default="cpu", show_default=True, help="cpu, cuda or cuda:N.")
@click.option("--warmup-ms", type=float, default=None, help="Minimum warm-up budget in ms (default 25; warm-up then goes on until the rate is stable, up to 1 s).")
@click.option("--measure-ms", type=float, default=None, help="Minimum measurement budget in ms (default 200; sampling then goes on until the median's 95% CI is within 2%, up to max(5x, 1 s)).")
@click.option("--no-record", is_flag=True, help="Do not write the result to the store.")
@store_option
def bench(kernel: str | None, sets: tuple[str, ...], as_json: bool, list_: bool, device: str,
          warmup_ms: float | None, measure_ms: float | None, no_record: bool, store_path: str | None) -> None:
    """Run one micro-benchmark KERNEL and print its Measurement."""
    from hwcore.errors import InputError
    from kernels import registry as R

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", R.KernelModuleSkipped)
        kernels = R.list_kernels()
    if list_:
        if as_json:
            echo_json({"kernels": [{"name": k.name, "family": k.family, "kind": k.kind, "help": k.help,
                                    "frameworks": list(k.frameworks),
                                    "params": [{"name": p.name, "type": p.type_name, "default": p.default,
                                                "choices": list(p.choices) if p.choices else None,
                                                "min": p.min, "max": p.max, "help": p.help} for p in k.params]}
                                   for k in kernels], "skipped_modules": R.SKIPPED_MODULES})
            return
        for k in kernels:
            click.echo(k.describe())
        for mod, why in R.SKIPPED_MODULES.items():
            click.echo(f"(skipped {mod}: {why})")
        return
    if not kernel:
        raise InputError(f"bench: give a KERNEL or --list; valid choices: {', '.join(k.name for k in kernels)}")
    raw = parse_sets(sets)
    R.validate_params(kernel, raw, device=device)  # all input errors before anything runs
    if warmup_ms is not None and not (math.isfinite(warmup_ms) and warmup_ms >= 0):
        raise InputError(f"--warmup-ms: must be a finite number >= 0, got {warmup_ms}")
    if measure_ms is not None and not (math.isfinite(measure_ms) and measure_ms > 0):
        raise InputError(f"--measure-ms: must be a finite number > 0, got {measure_ms}")
    store = None if no_record else open_store(store_path, write=True)
    kw = {}
    if warmup_ms is not None:
        kw["warmup_ms"] = warmup_ms
    if measure_ms is not None:
        kw["measure_ms"] = measure_ms
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the noise warning is part of the output below
        try:
            res = R.run(kernel, raw, device=device, store=store, record=store is not None, **kw)
        except R.KernelCheckError as exc:
            click.echo(f"hweval: error: {exc}", err=True)
            sys.exit(1)
    if as_json:
        echo_json(res.to_json())
    else:
        click.echo(str(res))
    if not res.ok:
        sys.exit(1)  # recorded fault (oom, timeout, failed); click's Exit would be swallowed by main()
