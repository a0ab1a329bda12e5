"""`identity`: no change. `gpudiv transform --pass identity` is parse → IR → print, and
with `--verify` it checks the printer and the interpreter against each other."""

from __future__ import annotations

from gpudiv import ir
from gpudiv.transforms.base import Pass, register


@register
class Identity(Pass):
    """Leave every kernel as it is."""

    name = "identity"
    description = "no change: parse, build the IR and print it back"

    def run(self, kernel: ir.Kernel) -> ir.Kernel:
        """The kernel itself."""
        return kernel
