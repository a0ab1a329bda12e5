"""Transformations: passes over the IR, registered by name (`PASSES`), run in a
`Pipeline`; the `Rewriter` (builder.py) is how they edit kernels and `traits` what they
must respect. docs/design.md, "Transformations", says how to add one."""

from __future__ import annotations

from gpudiv.transforms import (  # noqa: F401 (importing registers the passes)
    canonical,
    canonicalize,
    critical_edges,
    dedicated_exits,
    identity,
    lcm,
    regalloc,
    srqp,
    sscm,
    ssde,
    structurize,
)
from gpudiv.transforms.base import PASSES, Pass, PassError, Pipeline, available, get_pass, register
from gpudiv.transforms.builder import RewriteError, Rewriter, clone_kernel, clone_program

__all__ = ["PASSES", "Pass", "PassError", "Pipeline", "RewriteError", "Rewriter",
           "available", "clone_kernel", "clone_program", "get_pass", "register"]
