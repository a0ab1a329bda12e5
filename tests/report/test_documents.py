"""Text reports: plain lines when not coloured, rich only for a terminal."""

import io
import subprocess
import sys
from pathlib import Path

from gpudiv.api import analyze
from gpudiv.report.documents import PlainConsole, render_analysis, text_console

SAMPLES = Path(__file__).parents[2] / "samples"
# A finding at line 100 (rich read `:100:` as an emoji code) and, with call summaries,
# functions whose heading is longer than 200 characters (rich wrapped it there).
STENCILS = SAMPLES / "cuda" / "stencils.G.ptx"
TEXTURES = SAMPLES / "cuda" / "textures.G.ptx"


def test_a_report_that_is_not_coloured_is_written_line_by_line(monkeypatch):
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    assert isinstance(text_console(io.StringIO(), None), PlainConsole)
    text = render_analysis([analyze(STENCILS)])
    assert "stencils.G.ptx:100:2) [gpudiv-divergent-branch]" in text
    assert "\N{HUNDRED POINTS SYMBOL}" not in text
    long = [line for line in render_analysis([analyze(TEXTURES, calls="summary")]).splitlines()
            if len(line) > 200]
    assert long and all(line.endswith("analysis affine2)") for line in long
                        if ": function " in line)


def test_colour_uses_rich_without_emoji():
    buffer = io.StringIO()
    render_analysis([analyze(STENCILS)], buffer, color=True)
    text = buffer.getvalue()
    assert "\x1b[" in text  # styled
    assert "\N{HUNDRED POINTS SYMBOL}" not in text


def test_a_piped_text_report_does_not_import_rich(tmp_path):
    probe = ("import sys; from gpudiv.cli.main import main; code = main(['analyze', "
             f"{str(STENCILS)!r}]); print('rich' in sys.modules, code, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env={"PATH": "/usr/bin:/bin"})
    assert done.stderr.split()[-2:] == ["False", "0"], done.stderr
    assert "kernel stencil_1d" in done.stdout


def test_colour_follows_the_same_environment_as_rich(monkeypatch):
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert text_console(io.StringIO(), None).is_terminal
    monkeypatch.setenv("TTY_COMPATIBLE", "0")
    assert isinstance(text_console(io.StringIO(), None), PlainConsole)
    assert not isinstance(text_console(io.StringIO(), True), PlainConsole)
