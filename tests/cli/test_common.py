"""Helpers shared by the subcommands (gpudiv.cli.common)."""

import shutil

import pytest

from gpudiv.cli.common import terminal_columns


@pytest.mark.parametrize("columns", [None, "57", "0", "-3", "wide"])
def test_terminal_columns_are_shutils(monkeypatch, columns):
    """Help is as wide as argparse would make it with shutil (which start-up avoids)."""
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert terminal_columns() == shutil.get_terminal_size().columns
