"""`python -m gpudiv.cli`: the `gpudiv` command (through a running daemon, if any)."""

from gpudiv.command import run

run()
