"""`python -m gpudiv.cli`: the `gpudiv` command (through a running daemon, if any)."""

import sys

from gpudiv.command import main

sys.exit(main())
