"""The ``hweval`` command line.

Subcommands live one per module in :mod:`hweval.commands` and are imported
lazily, so ``hweval info`` does not pay for importing JAX. Every
:class:`~hwcore.errors.InputError` becomes one line on stderr and exit code 2.
"""

from __future__ import annotations

import importlib
import sys
import warnings

import click

from hwcore.errors import InputError

#: name -> (module, attribute, one-line help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "info": ("hweval.commands.info", "info", "Print this node's fingerprint."),
    "results": ("hweval.commands.results", "results", "List, filter and export stored results."),
    "bench": ("hweval.commands.bench", "bench", "Run one micro-benchmark kernel."),
    "train": ("hweval.commands.train", "train", "Run one training workload."),
    "fit": ("hweval.commands.fit", "fit", "Fit roofline / scaling / comms / convergence models to a CSV."),
    "cost": ("hweval.commands.cost", "cost", "Rank node types by cost per convergence."),
    "predict": ("hweval.commands.predict", "predict", "Predict step time, throughput, MFU, memory and cost of a training job."),
    "catalog": ("hweval.commands.catalog", "catalog", "List, show and check the hardware catalog and its dated prices."),
    "run": ("hweval.commands.run", "run", "Execute a plan's notebooks (locally or on Slurm)."),
    "import": ("hweval.commands.import_", "import_", "Import nccl-tests logs or MLPerf Training results into the store."),
    "store": ("hweval.commands.store", "store", "Check the results store or quarantine its damaged parts."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, attr, _ = COMMANDS[name]
        return getattr(importlib.import_module(module), attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # list help without importing every module
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def resolve_command(self, ctx, args):  # noqa: ANN001 - click's signature
        name = args[0] if args else None
        if name is not None and not name.startswith("-") and name not in COMMANDS:
            valid = ", ".join(sorted(COMMANDS))
            raise click.UsageError(f"no command named {name!r}; valid choices: {valid}", ctx)
        return super().resolve_command(ctx, args)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="hweval")
def cli() -> None:
    """hweval: hardware evaluation and cost modelling for ML training infrastructure."""


def _one_line_warning(message, category, filename, lineno, line=None) -> str:  # noqa: ANN001 - warnings' hook
    """Warnings as one line naming what degraded (``hweval: warning: ...``), not Python's file:line + source."""
    text = " ".join(str(message).split())
    return f"hweval: warning: {text} ({category.__name__})\n"


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns the exit code (2 for bad input)."""
    previous, warnings.formatwarning = warnings.formatwarning, _one_line_warning
    try:
        return _main(argv)
    finally:  # in-process callers (tests, notebooks) keep their own warning format
        warnings.formatwarning = previous


def _main(argv: list[str] | None) -> int:
    try:
        # with standalone_mode=False click returns (not raises) a command's ctx.exit(code)
        rc = cli.main(args=argv, prog_name="hweval", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        # one line, naming the problem (click's UsageError is exit 2)
        click.echo(f"hweval: error: {exc.format_message()}", err=True)
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("hweval: aborted", err=True)
        return 130
    except InputError as exc:
        click.echo(f"hweval: error: {exc}", err=True)
        return exc.exit_code
    except BrokenPipeError:
        return 0
    return rc if isinstance(rc, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
