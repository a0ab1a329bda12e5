"""Stages import only to their left: ir → lang → analyses → transforms → interp → verify
→ report → cli (docs/design.md, "Layout"). Every module of a stage folder (`gpudiv/ir/`,
`gpudiv/lang/`, …) takes its folder's stage; the few modules at the top of the package are
listed in MODULES, and a module that has no stage fails `test_every_module_has_a_stage`."""

import ast
import importlib.util
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "gpudiv"
STAGES = ["ir", "lang", "analyses", "transforms", "interp", "verify", "report", "cli"]
FOLDERS = {stage: stage for stage in STAGES}  # gpudiv/STAGE/ is STAGE
MODULES = {"api": "report", "command": "cli"}


def stage_of(module: str) -> str | None:
    """The stage of `gpudiv.x.y` (None for the package itself or an unplaced module)."""
    parts = module.split(".")[1:]
    if not parts:
        return None
    if parts[0] in FOLDERS:
        return FOLDERS[parts[0]]
    return MODULES.get(parts[0])


def imported_modules(path: Path) -> set[str]:
    """The gpudiv modules a file imports (`from gpudiv import x` counts as gpudiv.x)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("gpudiv")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.startswith("gpudiv"):
            found.add(node.module)
            for alias in node.names:
                name = f"{node.module}.{alias.name}"
                if importlib.util.find_spec(node.module) and _is_module(name):
                    found.add(name)
    return found


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).with_suffix("")
        parts = [p for p in relative.parts if p != "__init__"]
        out.append((".".join(["gpudiv", *parts]), path))
    return out


@pytest.mark.parametrize("module,path", modules(), ids=lambda v: str(v))
def test_imports_only_to_the_left(module, path):
    own = stage_of(module)
    if own is None:
        return  # the package root re-exports the API
    for name in sorted(imported_modules(path)):
        other = stage_of(name)
        if other is None:
            continue
        assert STAGES.index(other) <= STAGES.index(own), \
            f"{module} ({own}) imports {name} ({other}), a later stage"


def test_a_later_import_is_caught(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from gpudiv import cli\nfrom gpudiv.interp.ptx import run_ptx_kernel\n")
    names = imported_modules(bad)
    assert {"gpudiv.cli", "gpudiv.interp.ptx"} <= names
    assert STAGES.index(stage_of("gpudiv.cli")) > STAGES.index(stage_of("gpudiv.ir.ssa"))


def test_every_module_has_a_stage():
    unplaced = [name for name, _ in modules() if name != "gpudiv" and stage_of(name) is None]
    assert not unplaced, f"modules without a stage (move them into a stage folder): {unplaced}"
