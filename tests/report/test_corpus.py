"""Corpus runs: folders searched recursively, parallel jobs, failures that never stop a run."""

import json
import shutil
from pathlib import Path

import pytest

from gpudiv.cli import main
from gpudiv.lang.load import LANGUAGES
from gpudiv.report.corpus import (
    CorpusError,
    analyze_corpus,
    collect_inputs,
    kernel_parts,
    plan_tasks,
    suffixes,
    summarize,
)
from gpudiv.report.corpus_cache import CorpusCache

SAMPLES = Path(__file__).parents[2] / "samples"


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
    (["--kernel-timeout", "0"], "error: --kernel-timeout must be a number of seconds above 0"),
    (["--kernel-timeout", "nan"], "error: --kernel-timeout must be a number of seconds"),
    (["--cache", "/dev/null/cache"], "/dev/null/cache: error: cannot use as the cache folder"),
    (["--cache", str(SAMPLES / "reports" / "bra_uni.cu")], "cache folder: not a folder"),
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
    import gpudiv.cli.common as commands

    assert main(["analyze", "--brief", str(SAMPLES / "musimd")]) == 0
    assert "analysing" not in capsys.readouterr().err  # piped: no bar
    real = commands.Console
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich is not even imported for a pipe
    monkeypatch.setattr(commands, "Console",
                        lambda *a, **k: real(*a, **{**k, "force_terminal": True}))
    assert main(["analyze", "--brief", "--jobs", "2", str(SAMPLES / "musimd")]) == 0
    err = capsys.readouterr().err
    files = len(list((SAMPLES / "musimd").glob("*.musimd")))
    assert "analysing" in err and f"{files}/{files}" in err


def _classes(run) -> list:
    """Every kernel's variable and branch classes and every diagnostic, in order."""
    return [(f.path, [(k.name, [(v.name, v.klass, v.value) for v in k.variables],
                       [(b.label, b.divergent) for b in k.branches]) for k in f.kernels],
             [str(d) for d in f.diagnostics], [fd.rule_id for fd in f.findings()])
            for f in run.files]


def test_cache_reanalyses_only_the_edited_file(corpus, tmp_path, capsys):
    paths = collect_inputs([corpus])
    cache = CorpusCache(tmp_path / "cache")
    first = analyze_corpus(paths, cache=cache, lean=True)
    # every file's outcome is stored (failures to read or parse are decided by the text)
    assert first.cached == 0 and cache.stored == len(paths)
    again = analyze_corpus(paths, cache=CorpusCache(tmp_path / "cache"), lean=True)
    assert again.cached == len(paths) and _classes(again) == _classes(first)
    assert again.failures == first.failures
    edited = corpus / "a.musimd"
    edited.write_text(edited.read_text().replace("d = 0", "d = tid"))
    third = analyze_corpus(paths, cache=CorpusCache(tmp_path / "cache"), lean=True)
    assert [o.cached for o in third.outcomes] == [p != str(edited) for p in paths]
    assert third.files[0].kernels[0].variable("d#1").klass != "constant"
    # a damaged entry is a miss, not an error; another analysis has its own entries
    for entry in (tmp_path / "cache").rglob("*.pickle"):
        entry.write_bytes(b"damaged")
    fourth = analyze_corpus(paths, cache=CorpusCache(tmp_path / "cache"), lean=True)
    assert fourth.cached == 0 and _classes(fourth) == _classes(third)
    other = analyze_corpus(paths, "simple", cache=CorpusCache(tmp_path / "cache"), lean=True)
    assert other.cached == 0
    # from the command line, the summary says how many files came from the cache
    code, out, _ = run_cli(capsys, "analyze", "--brief", "--cache", str(tmp_path / "cache"),
                           str(corpus))
    assert code == 2 and "(2 analysed, 2 failed, 4 from the cache)" in out


def test_kernel_timeout_reports_kernels_not_analysed(corpus, tmp_path):
    paths = collect_inputs([corpus])
    cache = CorpusCache(tmp_path / "cache")
    # no kernel's analysis (fork, CFG, SSA, solve) fits in a microsecond
    run = analyze_corpus(paths, kernel_timeout=1e-6, cache=cache)
    reasons = dict(run.failures)
    assert "not analysed: its analysis took more than 1e-06 s" in reasons[str(corpus /
                                                                            "a.musimd")]
    assert run.files[0].kernels == [] and "kernel sumTriangle" in reasons[paths[0]]
    # only the file that cannot be read is stored, never one with a kernel that timed out
    assert cache.stored == 1 and "(and 1 more errors)" in reasons[str(corpus / "deep" /
                                                                       "broken.musimd")]
    roomy = analyze_corpus(paths, kernel_timeout=600)
    assert _classes(roomy) == _classes(analyze_corpus(paths))


def test_kernel_parts_are_runs_of_consecutive_kernels_of_equal_size():
    assert kernel_parts([10, 10, 10, 10], 2) == [[0, 1], [2, 3]]
    assert kernel_parts([100, 1, 1, 1], 2) == [[0], [1, 2, 3]]
    assert sum(kernel_parts([5], 3), []) == [0] and len(kernel_parts([5], 3)) == 3
    parts = kernel_parts(list(range(1, 40)), 4)
    assert sum(parts, []) == list(range(39)) and all(parts)


def test_a_dominating_file_is_cut_by_kernels(tmp_path):
    big = SAMPLES / "ptx" / "texture_object_coords.ptx"
    small = tmp_path / "small.musimd"
    shutil.copy(SAMPLES / "musimd" / "avgSquare.musimd", small)
    tasks = plan_tasks([str(small), str(big)], 2)
    assert tasks[:2] == [(str(big), 0, 2), (str(big), 1, 2)] and tasks[2][0] == str(small)
    assert plan_tasks([str(small), str(big)], 1) == [(str(big), 0, 1), (str(small), 0, 1)]
    serial = analyze_corpus([str(big)], jobs=1, lean=True)
    parallel = analyze_corpus([str(big)], jobs=2, lean=True)
    assert parallel.jobs == 2 and len(serial.files[0].kernels) == 5
    assert _classes(parallel) == _classes(serial)


def test_a_cache_folder_that_cannot_be_written_never_stops_the_run(tmp_path):
    cache = CorpusCache(tmp_path / "cache")
    shutil.rmtree(tmp_path / "cache")
    (tmp_path / "cache").write_text("a file where the folder was")
    run = analyze_corpus([str(SAMPLES / "musimd" / "avgSquare.musimd")], cache=cache)
    assert run.failures == [] and cache.stored == 0 and run.cached == 0
