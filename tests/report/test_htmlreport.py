"""`gpudiv analyze --format html`: one self-contained page that renders without errors."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gpudiv.cli import main

SAMPLES = Path(__file__).parents[2] / "samples"
CHROMIUM = Path("/usr/bin/chromium")


def write_report(tmp_path: Path, *paths: Path) -> Path:
    out = tmp_path / "report.html"
    assert main(["analyze", "--format", "html", "-o", str(out), *map(str, paths)]) == 0
    return out


def test_page_is_self_contained_with_summary_tables_and_findings(tmp_path):
    page = write_report(tmp_path, SAMPLES / "musimd" / "sumTriangle.musimd",
                        SAMPLES / "reports" / "bra_uni.ptx").read_text()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "<h2>Summary</h2>" in page and "<h2>Findings (4)</h2>" in page
    assert "kernel <code>sumTriangle</code>" in page and "kernel <code>flagged</code>" in page
    assert "[gpudiv-bra-uni-divergent]" in page
    assert "<th>condition</th>" in page and "<th>ssa</th>" in page
    # nothing is fetched: no scripts, no external style sheets or images
    assert "<script" not in page
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", page)
    if shutil.which("dot"):
        assert page.count("<svg") == 2
    else:
        assert "install Graphviz for CFG pictures" in page


def console_messages(page: Path, tmp_path: Path) -> tuple[str, str]:
    """Load a page in headless Chromium; its DOM and every console message it logged."""
    done = subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
         "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=False)
    messages = "\n".join(line for line in done.stderr.splitlines() if ":CONSOLE" in line)
    return done.stdout, messages


@pytest.mark.slow  # starts a browser
@pytest.mark.skipif(not CHROMIUM.exists(), reason="headless Chromium is not installed")
def test_page_renders_in_headless_chromium_without_console_errors(tmp_path):
    broken = tmp_path / "broken.html"
    broken.write_text("<!DOCTYPE html><html><body><script>console.error('boom');"
                      "missing();</script></body></html>")
    _, messages = console_messages(broken, tmp_path)
    assert "boom" in messages and "missing is not defined" in messages  # the probe works
    page = write_report(tmp_path, SAMPLES / "musimd", SAMPLES / "reports" / "bra_uni.ptx")
    dom, messages = console_messages(page, tmp_path)
    assert messages == ""
    assert "<h1>gpudiv report</h1>" in dom and "kernel <code>avgSquare</code>" in dom
