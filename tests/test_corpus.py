"""Corpus runs: folders searched recursively, parallel jobs, failures that never stop a run."""

import json
import shutil
from pathlib import Path

import pytest

from gpudiv.cli import main
from gpudiv.corpus import CorpusError, analyze_corpus, collect_inputs, suffixes, summarize
from gpudiv.load import LANGUAGES

SAMPLES = Path(__file__).parents[1] / "samples"


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """Two good files in nested folders, one with a syntax error, one unreadable, noise."""
    root = tmp_path / "corpus"
    (root / "deep" / "deeper").mkdir(parents=True)
    shutil.copy(SAMPLES / "musimd" / "sumTriangle.musimd", root / "a.musimd")
    shutil.copy(SAMPLES / "reports" / "bra_uni.ptx", root / "deep" / "deeper" / "b.ptx")
    (root / "deep" / "broken.musimd").write_text("kernel ok()\n stop\nkernel bad()\n x = = 1\n")
    (root / "deep" / "binary.musimd").write_bytes(b"\xff\xfe kernel")
    (root / "notes.txt").write_text("not a program")
    return root


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def test_suffixes_come_from_the_loader():
    assert suffixes() == sorted(LANGUAGES) and ".ptx" in suffixes()


def test_folders_are_searched_recursively(corpus):
    found = [Path(p).relative_to(corpus).as_posix() for p in collect_inputs([corpus])]
    assert found == ["a.musimd", "deep/binary.musimd", "deep/broken.musimd",
                     "deep/deeper/b.ptx"]


def test_empty_folder_is_an_error(tmp_path):
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    with pytest.raises(CorpusError, match="no .musimd/.ptx files in this folder"):
        collect_inputs([tmp_path / "empty"])


@pytest.mark.parametrize("jobs", [1, 2])
def test_failing_files_never_stop_the_run(corpus, jobs):
    run = analyze_corpus(collect_inputs([corpus]), jobs=jobs)
    assert run.jobs == jobs
    assert [Path(o.path).name for o in run.outcomes] == ["a.musimd", "binary.musimd",
                                                         "broken.musimd", "b.ptx"]
    failures = dict(run.failures)
    assert len(failures) == 2
    assert "not UTF-8 text" in failures[str(corpus / "deep" / "binary.musimd")]
    assert "unexpected '='" in failures[str(corpus / "deep" / "broken.musimd")]
    # the broken file keeps the kernel that parsed
    assert [k.name for f in run.files for k in f.kernels] == ["sumTriangle", "ok", "flagged"]


def test_parallel_and_serial_runs_agree():
    paths = collect_inputs([SAMPLES / "musimd", SAMPLES / "reports"])
    serial = analyze_corpus(paths, jobs=1)
    parallel = analyze_corpus(paths, jobs=2)
    assert parallel.jobs == 2
    one = summarize(serial.files, serial.failures, len(paths)).as_dict()
    two = summarize(parallel.files, parallel.failures, len(paths)).as_dict()
    for key in ("jobs", "wall_s"):
        one.pop(key), two.pop(key)
    assert one == two and one["files"] == len(paths) and one["failed"] == 0


def test_summary_counts(corpus):
    paths = collect_inputs([corpus])
    run = analyze_corpus(paths)
    summary = summarize(run.files, run.failures, len(paths), run.jobs, run.wall_s)
    assert (summary.files, summary.analysed, summary.failed, summary.kernels) == (4, 2, 2, 3)
    assert summary.variables == 24 + 0 + 14
    assert summary.uniform + summary.affine + summary.divergent == summary.variables
    assert summary.findings == {"gpudiv-divergent-branch": 3, "gpudiv-bra-uni-divergent": 1}
    assert summary.lines()[0].startswith("run summary: 4 files (2 analysed, 2 failed), "
                                         "3 kernels, ")


def test_analyze_folder_text_json_and_exit_status(corpus, capsys):
    code, out, err = run_cli(capsys, "analyze", "--brief", "--jobs", "2", str(corpus))
    assert code == 2
    assert "not UTF-8 text" in err and "unexpected '='" in err
    assert "[gpudiv-bra-uni-divergent]" in out
    assert "run summary: 4 files (2 analysed, 2 failed), 3 kernels" in out
    assert "  failures:" in out and "% uniform" in out
    code, out, _ = run_cli(capsys, "analyze", "--format", "json", str(corpus))
    document = json.loads(out)
    assert code == 2 and len(document["inputs"]) == 3
    summary = document["summary"]
    assert summary["files"] == 4 and summary["failed"] == 2
    assert {f["path"] for f in summary["failures"]} == {
        str(corpus / "deep" / "binary.musimd"), str(corpus / "deep" / "broken.musimd")}
    assert set(summary["percent"]) == {"uniform", "affine", "divergent"}


def test_single_file_json_keeps_its_shape(capsys):
    code, out, _ = run_cli(capsys, "analyze", "--format", "json",
                           str(SAMPLES / "musimd" / "sumTriangle.musimd"))
    assert code == 0 and set(json.loads(out)) == {"tool", "version", "inputs"}


@pytest.mark.parametrize(("args", "message"), [
    (["--format", "pdf"], "gpudiv analyze: error: argument --format: invalid choice: 'pdf'"),
    (["--jobs", "-1"], "error: --jobs must be 0 (one per CPU) or more"),
    (["-o", "/nonexistent-dir/report.html"], "cannot write: no such directory"),
])
def test_analyze_usage_errors_are_one_line(capsys, args, message):
    try:
        code, _, err = run_cli(capsys, "analyze", str(SAMPLES / "musimd"), *args)
    except SystemExit as stop:
        code, err = stop.code, capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err


def test_analyze_empty_folder(tmp_path, capsys):
    code, out, err = run_cli(capsys, "analyze", str(tmp_path))
    assert code == 2 and out == ""
    assert err.strip() == f"{tmp_path}: error: no .musimd/.ptx files in this folder"


def test_progress_bar_only_on_a_terminal(monkeypatch, capsys):
    import gpudiv.commands as commands

    assert main(["analyze", "--brief", str(SAMPLES / "musimd")]) == 0
    assert "analysing" not in capsys.readouterr().err  # piped: no bar
    real = commands.Console
    monkeypatch.setattr(commands, "Console",
                        lambda *a, **k: real(*a, **{**k, "force_terminal": True}))
    assert main(["analyze", "--brief", "--jobs", "2", str(SAMPLES / "musimd")]) == 0
    err = capsys.readouterr().err
    files = len(list((SAMPLES / "musimd").glob("*.musimd")))
    assert "analysing" in err and f"{files}/{files}" in err
