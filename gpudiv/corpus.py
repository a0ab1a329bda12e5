"""Corpus runs: analyse many files (folders searched recursively), in parallel processes.

`gpudiv analyze DIR… --jobs N` runs here. Inputs are expanded with `collect_inputs` (a
folder contributes every file below it whose suffix `gpudiv.load` can read; a folder with
none is an error); `analyze_corpus` analyses each file in a worker process and gives the
outcomes back in input order. A file that cannot be read, does not parse, or makes the
analysis fail is a failure with a one-line reason; it never stops the run. `summarize`
adds up files, kernels, variable classes, branches and findings for the end-of-run summary.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path

from gpudiv.analyses import DEFAULT_ANALYSIS
from gpudiv.api import FileAnalysis, analyze
from gpudiv.launch_shape import BlockShape, as_shape
from gpudiv.load import LANGUAGES, LoadError


class CorpusError(Exception):
    """Inputs that cannot make a run (an empty folder); the message is one line."""


def suffixes() -> list[str]:
    """File suffixes a corpus run picks up in folders (those `gpudiv.load` can read)."""
    return sorted(LANGUAGES)


def collect_inputs(paths: list[str | Path]) -> list[str]:
    """Files named directly, then every readable file below each folder, sorted."""
    found: list[str] = []
    wanted = set(suffixes())
    for path in paths:
        path = Path(path)
        if not path.is_dir():
            found.append(str(path))
            continue
        files = sorted(str(p) for p in path.rglob("*")
                       if p.suffix.lower() in wanted and p.is_file())
        if not files:
            raise CorpusError(f"{path}: error: no {'/'.join(sorted(wanted))} files in this "
                              "folder")
        found += files
    return list(dict.fromkeys(found))


@dataclass
class FileOutcome:
    """What happened to one file: its analysis (possibly partial) and a failure reason."""

    path: str
    analysis: FileAnalysis | None
    failure: str | None
    seconds: float


def analyze_file(path: str, analysis: str = DEFAULT_ANALYSIS, lean: bool = False,
                 block: BlockShape | None = None,
                 on_progress: Callable[[str, int, int], None] | None = None
                 ) -> FileOutcome:
    """Analyse one file; never raises (a problem becomes the outcome's failure).

    `lean`: drop the SSA forms and solved relations once the findings are computed
    (`FileAnalysis.lean`), which makes the outcome several times cheaper to send back
    from a worker process; reports other than HTML need nothing more.
    """
    start = time.perf_counter()
    try:
        result = analyze(path, analysis, block, on_progress)
    except LoadError as error:
        return FileOutcome(path, None, str(error), time.perf_counter() - start)
    except RecursionError:
        return FileOutcome(path, None, f"{path}: error: input nested too deeply",
                           time.perf_counter() - start)
    except Exception as error:  # noqa: BLE001 - one bad file must not stop a corpus run
        return FileOutcome(path, None, f"{path}: internal error: {type(error).__name__}: "
                           f"{error}", time.perf_counter() - start)
    if lean:
        result = result.lean()
    errors = result.errors
    failure = None
    if errors:
        more = f" (and {len(errors) - 1} more errors)" if len(errors) > 1 else ""
        failure = f"{errors[0]}{more}"
    return FileOutcome(path, result, failure, time.perf_counter() - start)


@dataclass
class CorpusRun:
    """The outcomes of a run, in input order, with its wall time and parallelism."""

    outcomes: list[FileOutcome]
    jobs: int
    wall_s: float

    @property
    def files(self) -> list[FileAnalysis]:
        """Every analysis (files that failed to parse keep the kernels that did parse)."""
        return [o.analysis for o in self.outcomes if o.analysis is not None]

    @property
    def failures(self) -> list[tuple[str, str]]:
        """(path, reason) of each failed file."""
        return [(o.path, o.failure) for o in self.outcomes if o.failure]


def job_count(jobs: int) -> int:
    """`--jobs`: 0 means one per CPU."""
    return max(1, os.cpu_count() or 1) if jobs <= 0 else jobs


def analyze_corpus(paths: list[str], analysis: str = DEFAULT_ANALYSIS, jobs: int = 1,
                   on_done: Callable[[FileOutcome], None] | None = None,
                   on_started: Callable[[], None] | None = None,
                   lean: bool = False, block: BlockShape | None = None,
                   on_progress: Callable[[str, str, int, int], None] | None = None
                   ) -> CorpusRun:
    """Analyse every path (files, as `collect_inputs` gives them) with `jobs` processes.

    `on_done` is called with each outcome as it completes (in completion order);
    `on_started` once every task is queued (worker processes exist by then, so a caller
    may start threads, e.g. a progress display, without forking under them). `block`:
    the block shape every launch has (`gpudiv.launch_shape`);
    `on_progress(path, stage, done, total)` with the stages of each file
    (`api.analyze`), when the files are analysed in this process (one job).
    """
    jobs = min(job_count(jobs), max(len(paths), 1))
    start = time.perf_counter()
    outcomes: dict[str, FileOutcome] = {}
    if jobs == 1:
        if on_started:
            on_started()
        for path in paths:
            stages = (None if on_progress is None else
                      lambda stage, done, total, path=path: on_progress(path, stage, done, total))
            outcomes[path] = analyze_file(path, analysis, lean, block, stages)
            if on_done:
                on_done(outcomes[path])
    else:
        _parallel(paths, analysis, jobs, outcomes, on_done, on_started, lean, block)
    return CorpusRun([outcomes[p] for p in paths], jobs, time.perf_counter() - start)


def _parallel(paths: list[str], analysis: str, jobs: int, outcomes: dict[str, FileOutcome],
              on_done: Callable[[FileOutcome], None] | None,
              on_started: Callable[[], None] | None, lean: bool,
              block: BlockShape | None = None) -> None:
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else None
    context = multiprocessing.get_context(method)
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        # Largest files first: a big file started last would leave the other workers idle.
        futures: dict[Future, str] = {pool.submit(analyze_file, p, analysis, lean, block): p
                                      for p in sorted(paths, key=_size, reverse=True)}
        if on_started:
            on_started()
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                path = futures[future]
                try:
                    outcome = future.result()
                except BrokenProcessPool:
                    outcome = FileOutcome(path, None, f"{path}: internal error: the worker "
                                          "process analysing it died", 0.0)
                outcomes[path] = outcome
                if on_done:
                    on_done(outcome)


def _size(path: str) -> int:
    """Bytes of a file (0 if it cannot be read: it fails fast anyway)."""
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def analyze_paths(paths: list[str | Path], analysis: str = DEFAULT_ANALYSIS,
                  jobs: int = 1, block: BlockShape | str | tuple[int, ...] | None = None
                  ) -> tuple[CorpusRun, CorpusSummary]:
    """Files and folders → the run and its summary (the API of `gpudiv analyze DIR…`)."""
    files = collect_inputs(paths)
    run = analyze_corpus(files, analysis, jobs, block=as_shape(block))
    return run, summarize(run.files, run.failures, len(files), run.jobs, run.wall_s)


@dataclass
class CorpusSummary:
    """Totals of a run for its end-of-run summary."""

    files: int = 0
    analysed: int = 0
    failed: int = 0
    kernels: int = 0
    variables: int = 0
    uniform: int = 0
    affine: int = 0
    divergent: int = 0
    branches: int = 0
    divergent_branches: int = 0
    findings: dict[str, int] = field(default_factory=dict)
    failures: list[tuple[str, str]] = field(default_factory=list)
    jobs: int = 1
    wall_s: float = 0.0

    def percent(self, count: int) -> float:
        """`count` as a percentage of the variables."""
        return 100.0 * count / self.variables if self.variables else 0.0

    def as_dict(self) -> dict:
        """JSON form (the `summary` of a corpus run's JSON document)."""
        return {"files": self.files, "analysed": self.analysed, "failed": self.failed,
                "kernels": self.kernels, "variables": self.variables,
                "uniform": self.uniform, "affine": self.affine, "divergent": self.divergent,
                "percent": {"uniform": round(self.percent(self.uniform), 2),
                            "affine": round(self.percent(self.affine), 2),
                            "divergent": round(self.percent(self.divergent), 2)},
                "branches": self.branches, "divergent_branches": self.divergent_branches,
                "findings": dict(self.findings),
                "failures": [{"path": p, "reason": r} for p, r in self.failures],
                "jobs": self.jobs, "wall_s": round(self.wall_s, 3)}

    def lines(self) -> list[str]:
        """The summary as text lines."""
        out = [f"run summary: {_count(self.files, 'file')} ({self.analysed} analysed, "
               f"{self.failed} failed), {_count(self.kernels, 'kernel')}, "
               f"{self.wall_s:.2f} s with {_count(self.jobs, 'job')}",
               f"  variables: {self.variables}: {self.percent(self.uniform):.1f}% uniform, "
               f"{self.percent(self.affine):.1f}% affine, "
               f"{self.percent(self.divergent):.1f}% divergent",
               f"  branches: {self.branches}, {self.divergent_branches} divergent"]
        if self.findings:
            out.append("  findings: " + ", ".join(f"{n} {rule}"
                                                  for rule, n in sorted(self.findings.items())))
        if self.failures:
            out.append("  failures:")
            out += [f"    {reason}" for _, reason in self.failures]
        return out


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def summarize(files: list[FileAnalysis], failures: list[tuple[str, str]], total_files: int,
              jobs: int = 1, wall_s: float = 0.0) -> CorpusSummary:
    """Add up the results of a run."""
    summary = CorpusSummary(files=total_files, failed=len(failures),
                            failures=list(failures), jobs=jobs, wall_s=wall_s)
    summary.analysed = total_files - len(failures)
    for analysed in files:
        for kernel in analysed.kernels:
            counts = kernel.summary
            summary.kernels += 1
            summary.variables += counts["variables"]
            summary.uniform += counts["uniform"]
            summary.affine += counts["affine"]
            summary.divergent += counts["divergent"]
            summary.branches += counts["branches"]
            summary.divergent_branches += counts["divergent_branches"]
        for finding in analysed.findings():
            summary.findings[finding.rule_id] = summary.findings.get(finding.rule_id, 0) + 1
    return summary
