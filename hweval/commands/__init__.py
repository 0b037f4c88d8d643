"""One module per ``hweval`` subcommand (see :data:`hweval.cli.COMMANDS`)."""
