"""`python -m gpudiv.cli`: the `gpudiv` command."""

import sys

from gpudiv.cli.main import main

sys.exit(main())
