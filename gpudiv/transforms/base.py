"""Passes and pipelines.

A pass is a small class with a `name`, a one-line `description`, `options` and
`run(kernel) -> kernel` (or `run_program` for a pass over a whole file). It edits the
kernel it is given through a `Rewriter` (the pipeline hands it a copy) and asks for
analysis results with `analysis(kernel, name)` rather than computing them itself.
Passes register by name (`register`); `Pipeline` runs several in order on a copy of a
program and calls a hook after each (tests verify the IR there; `--verify` compares
runs at the end).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from gpudiv import ir
from gpudiv.analyses import get_analysis
from gpudiv.analyses.results import KernelResult
from gpudiv.analyses.solve import RuleError
from gpudiv.transforms.builder import clone_program


class PassError(Exception):
    """A pass that cannot be found, configured or applied."""


class Pass(ABC):
    """One rewrite. Subclasses set `name` and `description` and define `run`."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""

    def __init__(self, **options: object):
        self.options = options

    @abstractmethod
    def run(self, kernel: ir.Kernel) -> ir.Kernel:
        """Rewrite one kernel (in place or not) and return the result."""

    def run_program(self, program: ir.Program, kernels: set[str] | None = None) -> None:
        """Rewrite the program's kernels (only `kernels` when given) in place."""
        program.kernels = [self.run(k) if kernels is None or k.name in kernels else k
                           for k in program.kernels]

    @staticmethod
    def analysis(kernel: ir.Kernel, name: str = "affine2") -> KernelResult:
        """The result of a registered analysis (the rules) on the kernel as it is now."""
        (result,) = get_analysis(name).run([kernel])
        if isinstance(result, RuleError):
            raise PassError(f"kernel {kernel.name}: analysis {name} failed: {result}")
        return result


PASSES: dict[str, type[Pass]] = {}


def register(cls: type[Pass]) -> type[Pass]:
    """Class decorator: make a pass available by its name."""
    if not cls.name or cls.name in PASSES:
        raise ValueError(f"pass name '{cls.name}' missing or taken")
    PASSES[cls.name] = cls
    return cls


def kernel_language(kernel: ir.Kernel) -> str:
    """`ptx` for a kernel read from PTX (register types recorded, or PTX opcodes), else
    `musimd`."""
    ptx = "reg_types" in kernel.attrs or any("opcode" in i.attrs for i in kernel.instructions())
    return "ptx" if ptx else "musimd"


def get_pass(name: str, **options: object) -> Pass:
    """A configured pass by name; PassError lists the known names."""
    if name not in PASSES:
        raise PassError(f"unknown pass '{name}' (known: {', '.join(sorted(PASSES))})")
    return PASSES[name](**options)


def available() -> list[tuple[str, str]]:
    """(name, one-line description) of every registered pass, by name."""
    return [(name, PASSES[name].description) for name in sorted(PASSES)]


Hook = Callable[[Pass, ir.Program], None]


@dataclass
class Pipeline:
    """Passes run in order; `hook(pass, program)` after each one."""

    passes: list[Pass]
    hook: Hook | None = None
    kernels: set[str] | None = field(default=None)

    @classmethod
    def parse(cls, spec: str, hook: Hook | None = None,
              options: dict[str, dict[str, object]] | None = None) -> Pipeline:
        """A pipeline from `name,name,…` (`options`: pass name → its options)."""
        names = [n.strip() for n in spec.split(",") if n.strip()]
        if not names:
            raise PassError("no pass given")
        options = options or {}
        return cls([get_pass(n, **options.get(n, {})) for n in names], hook)

    def run(self, program: ir.Program) -> ir.Program:
        """The transformed copy of `program` (the original is left as it is)."""
        result = clone_program(program)
        for one in self.passes:
            one.run_program(result, self.kernels)
            if self.hook is not None:
                self.hook(one, result)
        return result
