"""The installed package is the whole package: every folder of gpudiv with an
`__init__.py` is listed in pyproject.toml (a non-editable install, as CI does, would
otherwise leave it out and only the editable development install would work)."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[1]


def test_every_subpackage_is_installed():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts)
             for p in (ROOT / "gpudiv").rglob("__init__.py")}
    assert found <= listed, sorted(found - listed)
