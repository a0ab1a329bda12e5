"""The command line: `main` (the `gpudiv` entry point and its COMMANDS table, both
re-exported here) and one module per subcommand; the only place that prints or
formats errors."""

from gpudiv.cli.main import COMMANDS, main

__all__ = ["COMMANDS", "main"]
