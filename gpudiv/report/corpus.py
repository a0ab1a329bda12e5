"""Corpus runs: analyse many files (folders searched recursively), in parallel processes.

`gpudiv analyze DIR… --jobs N` runs here. Inputs are expanded with `collect_inputs` (a
folder contributes every file below it whose suffix `gpudiv.lang.load` can read; a folder with
none is an error); `analyze_corpus` analyses each file in a worker process and gives the
outcomes back in input order. A file that cannot be read, does not parse, or makes the
analysis fail is a failure with a one-line reason; it never stops the run. `summarize`
adds up files, kernels, variable classes, branches and findings for the end-of-run summary.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable

from gpudiv.analyses import DEFAULT_ANALYSIS
from gpudiv.analyses.launch_shape import BlockShape, as_shape
from gpudiv.api import FileAnalysis, analyze
from gpudiv.ir.record import Record, replace
from gpudiv.lang.load import LANGUAGES, LoadError, load, path_text, suffix_of
from gpudiv.lang.regex_cache import LazyPattern

TYPE_CHECKING = False  # (typing is not imported: an analysis never needs it)
if TYPE_CHECKING:  # loads with `--cache`
    from pathlib import Path  # (and pathlib with a folder: paths are strings here)

    from gpudiv.report.corpus_cache import CorpusCache


class CorpusError(Exception):
    """Inputs that cannot make a run (an empty folder); the message is one line."""


def suffixes() -> list[str]:
    """File suffixes a corpus run picks up in folders (those `gpudiv.lang.load` can read)."""
    return sorted(LANGUAGES)


def collect_inputs(paths: list[str | Path]) -> list[str]:
    """Files named directly, then every readable file below each folder, sorted."""
    found: list[str] = []
    wanted = set(suffixes())
    for path in paths:
        path = path_text(path)
        if not os.path.isdir(path):
            found.append(path)
            continue
        from pathlib import Path  # (folders only: a file's run does without pathlib)

        files = sorted(str(p) for p in Path(path).rglob("*")
                       if p.suffix.lower() in wanted and p.is_file())
        if not files:
            raise CorpusError(f"{path}: error: no {'/'.join(sorted(wanted))} files in this "
                              "folder")
        found += files
    return list(dict.fromkeys(found))


class FileOutcome(Record):
    """What happened to one file: its analysis (possibly partial) and a failure reason.
    `cached`: read back from the cache (`--cache`) instead of analysed."""

    path: str
    analysis: FileAnalysis | None
    failure: str | None
    seconds: float
    cached: bool

    def __init__(self, path: str, analysis: FileAnalysis | None, failure: str | None,
                       seconds: float, cached: bool = False) -> None:
        self.path = path
        self.analysis = analysis
        self.failure = failure
        self.seconds = seconds
        self.cached = cached


def analyze_file(path: str, analysis: str = DEFAULT_ANALYSIS, lean: bool = False,
                 block: BlockShape | None = None,
                 on_progress: Callable[[str, int, int], None] | None = None,
                 kernel_timeout: float | None = None, calls: str = "inline") -> FileOutcome:
    """Analyse one file; never raises (a problem becomes the outcome's failure).

    `lean`: drop the SSA forms and solved relations once the findings are computed
    (`FileAnalysis.lean`), which makes the outcome several times cheaper to send back
    from a worker process; reports other than HTML need nothing more. `kernel_timeout`:
    seconds each kernel may take, `calls` how calls are analysed (`api.analyze`).
    """
    return analyze_part(path, analysis, lean, block, 0, 1, on_progress, kernel_timeout,
                        calls)


def analyze_part(path: str, analysis: str = DEFAULT_ANALYSIS, lean: bool = False,
                 block: BlockShape | None = None, part: int = 0, parts: int = 1,
                 on_progress: Callable[[str, int, int], None] | None = None,
                 kernel_timeout: float | None = None, calls: str = "inline") -> FileOutcome:
    """Analyse the `part`-th of `parts` runs of consecutive kernels of a file
    (`kernel_parts`); the diagnostics of reading the file go with part 0. Never raises.
    With call summaries (`calls="summary"`) a file is one part: its functions serve all
    its kernels."""
    start = time.perf_counter()
    try:
        if calls == "summary":
            result = analyze(path, analysis, block, on_progress, kernel_timeout, calls)
            return _outcome(path, result.lean() if lean else result, start)
        if on_progress is not None:
            on_progress("reading", 0, 0)
        program = load(path)
        if parts > 1:
            chosen = kernel_parts([k.instruction_count for k in program.kernels], parts)[part]
            program = replace(program, kernels=[program.kernels[i] for i in chosen],
                              diagnostics=program.diagnostics if part == 0 else [])
        result = analyze(program, analysis, block, on_progress, kernel_timeout)
    except (LoadError, ValueError) as error:
        return FileOutcome(path, None, str(error), time.perf_counter() - start)
    except RecursionError:
        return FileOutcome(path, None, f"{path}: error: input nested too deeply",
                           time.perf_counter() - start)
    except Exception as error:  # noqa: BLE001 - one bad file must not stop a corpus run
        return FileOutcome(path, None, f"{path}: internal error: {type(error).__name__}: "
                           f"{error}", time.perf_counter() - start)
    if lean:
        result = result.lean()
    return _outcome(path, result, start)


def _outcome(path: str, result: FileAnalysis, start: float) -> FileOutcome:
    return FileOutcome(path, result, _failure(result), time.perf_counter() - start)


def _failure(result: FileAnalysis) -> str | None:
    """The failure line of an analysis with errors (the first, and how many more)."""
    errors = result.errors
    if not errors:
        return None
    more = f" (and {len(errors) - 1} more errors)" if len(errors) > 1 else ""
    return f"{errors[0]}{more}"


def kernel_parts(sizes: list[int], parts: int) -> list[list[int]]:
    """Kernel indices cut into `parts` runs of consecutive kernels with about equal total
    size (IR instructions); a run may be empty when there are fewer kernels than parts."""
    total = sum(sizes) or 1
    out: list[list[int]] = [[] for _ in range(parts)]
    done = 0
    for index, size in enumerate(sizes):
        # the part whose share of the total this kernel's middle falls in
        middle = (done + size / 2) * parts / total
        out[min(parts - 1, int(middle))].append(index)
        done += size
    return out


def merge_parts(path: str, pieces: list[FileOutcome]) -> FileOutcome:
    """The outcome of a whole file from the outcomes of its parts, in part order (the
    kernels and their diagnostics come out in the order of a run of the whole file)."""
    if len(pieces) == 1:
        return pieces[0]
    seconds = max(p.seconds for p in pieces)
    unread = [p for p in pieces if p.analysis is None]
    if unread:
        return FileOutcome(path, None, unread[0].failure, seconds)
    first = pieces[0].analysis
    lean = all(p.analysis.cached_findings is not None for p in pieces)
    merged = FileAnalysis(
        path, first.language, [k for p in pieces for k in p.analysis.kernels],
        [d for p in pieces for d in p.analysis.diagnostics], dict(first.parse_ms),
        [f for p in pieces for f in p.analysis.cached_findings] if lean else None)
    return FileOutcome(path, merged, _failure(merged), seconds)


class CorpusRun(Record):
    """The outcomes of a run, in input order, with its wall time and parallelism."""

    outcomes: list[FileOutcome]
    jobs: int
    wall_s: float

    def __init__(self, outcomes: list[FileOutcome], jobs: int, wall_s: float) -> None:
        self.outcomes = outcomes
        self.jobs = jobs
        self.wall_s = wall_s

    @property
    def files(self) -> list[FileAnalysis]:
        """Every analysis (files that failed to parse keep the kernels that did parse)."""
        return [o.analysis for o in self.outcomes if o.analysis is not None]

    @property
    def failures(self) -> list[tuple[str, str]]:
        """(path, reason) of each failed file."""
        return [(o.path, o.failure) for o in self.outcomes if o.failure]

    @property
    def cached(self) -> int:
        """How many files were read back from the cache."""
        return sum(o.cached for o in self.outcomes)


def job_count(jobs: int) -> int:
    """`--jobs`: 0 means one per CPU."""
    return max(1, os.cpu_count() or 1) if jobs <= 0 else jobs


# A task of a parallel run: a file, and which of how many runs of its kernels.
Task = tuple[str, int, int]
_KERNEL_HEADS = {"ptx": LazyPattern(rb"\.entry\s"),
                 "musimd": LazyPattern(rb"^[ \t]*kernel\s", re.M)}


def plan_tasks(paths: list[str], jobs: int, split: bool = True) -> list[Task]:
    """The tasks of a parallel run, largest first: one per file, except that a file larger
    than a fair share of all the bytes (total / jobs) is cut into runs of its kernels,
    about one per share it holds, so that one big file does not keep one worker busy
    while the others wait (unless `split` is false)."""
    sizes = {p: _size(p) for p in paths}
    share = sum(sizes.values()) / max(jobs, 1)
    tasks: list[tuple[float, Task]] = []
    for path in paths:
        parts = 1
        if split and jobs > 1 and share and sizes[path] > share:
            parts = min(jobs, _kernel_estimate(path), max(2, round(sizes[path] / share)))
        tasks += [(sizes[path] / parts, (path, part, parts)) for part in range(parts)]
    tasks.sort(key=lambda t: -t[0])
    return [task for _, task in tasks]


def _kernel_estimate(path: str) -> int:
    """How many kernels a file seems to have (its kernel headers), at least 1."""
    language = LANGUAGES.get(suffix_of(path).lower())
    pattern = _KERNEL_HEADS.get(language or "")
    try:
        if pattern is None:
            return 1
        with open(path, "rb") as file:
            return max(1, len(pattern.findall(file.read())))
    except OSError:
        return 1


def analyze_corpus(paths: list[str], analysis: str = DEFAULT_ANALYSIS, jobs: int = 1,
                   on_done: Callable[[FileOutcome], None] | None = None,
                   on_started: Callable[[], None] | None = None,
                   lean: bool = False, block: BlockShape | None = None,
                   on_progress: Callable[[str, str, int, int], None] | None = None,
                   cache: CorpusCache | None = None,
                   kernel_timeout: float | None = None, calls: str = "inline") -> CorpusRun:
    """Analyse every path (files, as `collect_inputs` gives them) with `jobs` processes.

    `on_done` is called with each outcome as it completes (in completion order);
    `on_started` once every task is queued (worker processes exist by then, so a caller
    may start threads, e.g. a progress display, without forking under them). `block`:
    the block shape every launch has (`gpudiv.analyses.launch_shape`);
    `on_progress(path, stage, done, total)` with the stages of each file
    (`api.analyze`), when the files are analysed in this process (one job). `cache`:
    outcomes found there are not analysed again, new ones are stored
    (`gpudiv.report.corpus_cache`). `kernel_timeout`: seconds each kernel may take.
    `calls`: "inline" or "summary" (`api.analyze`).
    """
    start = time.perf_counter()
    outcomes: dict[str, FileOutcome] = {}
    keys = {p: cache.key(p, analysis, block, lean, calls) for p in paths} if cache else {}
    found = {p: hit for p in paths if cache and (hit := _from_cache(cache, keys[p]))}
    todo = [p for p in paths if p not in found]

    def finished(outcome: FileOutcome) -> None:
        outcomes[outcome.path] = outcome
        if cache is not None and not outcome.cached:
            cache.put(keys.get(outcome.path), outcome)
        if on_done:
            on_done(outcome)

    tasks = (plan_tasks(todo, job_count(jobs), split=calls == "inline")
             if job_count(jobs) > 1 else [])
    jobs = min(job_count(jobs), max(len(tasks), 1))
    if jobs == 1:
        if on_started:
            on_started()
        for path in paths:
            if path in found:
                finished(found[path])
                continue
            stages = (None if on_progress is None else
                      lambda stage, done, total, path=path: on_progress(path, stage, done, total))
            finished(analyze_file(path, analysis, lean, block, stages, kernel_timeout,
                                  calls))
    else:
        _parallel(tasks, analysis, jobs, finished, on_started, lean, block, kernel_timeout,
                  [found[p] for p in paths if p in found], calls)
    return CorpusRun([outcomes[p] for p in paths], jobs, time.perf_counter() - start)


def _from_cache(cache: CorpusCache, key: str | None) -> FileOutcome | None:
    """A file's stored outcome, marked as read from the cache, or None."""
    hit = cache.get(key)
    if not isinstance(hit, FileOutcome):
        return None
    return replace(hit, cached=True)


def _parallel(tasks: list[Task], analysis: str, jobs: int,
              finished: Callable[[FileOutcome], None],
              on_started: Callable[[], None] | None, lean: bool,
              block: BlockShape | None, kernel_timeout: float | None,
              found: list[FileOutcome], calls: str = "inline") -> None:
    # imported here: 15 ms of start-up that a one-job run does not need
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else None
    context = multiprocessing.get_context(method)
    pieces: dict[str, dict[int, FileOutcome]] = {}
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        # Largest tasks first: a big one started last would leave the other workers idle.
        futures: dict[Future, Task] = {
            pool.submit(analyze_part, path, analysis, lean, block, part, parts, None,
                        kernel_timeout, calls): (path, part, parts)
            for path, part, parts in tasks}
        if on_started:
            on_started()
        for outcome in found:
            finished(outcome)
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                path, part, parts = futures[future]
                try:
                    outcome = future.result()
                except BrokenProcessPool:
                    outcome = FileOutcome(path, None, f"{path}: internal error: the worker "
                                          "process analysing it died", 0.0)
                own = pieces.setdefault(path, {})
                own[part] = outcome
                if len(own) == parts:
                    finished(merge_parts(path, [own[i] for i in range(parts)]))


def _size(path: str) -> int:
    """Bytes of a file (0 if it cannot be read: it fails fast anyway)."""
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def analyze_paths(paths: list[str | Path], analysis: str = DEFAULT_ANALYSIS,
                  jobs: int = 1, block: BlockShape | str | tuple[int, ...] | None = None,
                  cache: str | Path | None = None, kernel_timeout: float | None = None,
                  calls: str = "inline") -> tuple[CorpusRun, CorpusSummary]:
    """Files and folders → the run and its summary (the API of `gpudiv analyze DIR…`);
    `cache`: a folder of stored outcomes (`--cache`), `kernel_timeout` seconds per kernel,
    `calls`: "inline" or "summary" (`api.analyze`)."""
    from gpudiv.report.corpus_cache import CorpusCache

    files = collect_inputs(paths)
    run = analyze_corpus(files, analysis, jobs, block=as_shape(block),
                         cache=CorpusCache(cache) if cache is not None else None,
                         kernel_timeout=kernel_timeout, calls=calls)
    return run, summarize(run.files, run.failures, len(files), run.jobs, run.wall_s,
                          run.cached)


class CorpusSummary(Record):
    """Totals of a run for its end-of-run summary."""

    files: int
    analysed: int
    failed: int
    kernels: int
    variables: int
    uniform: int
    affine: int
    divergent: int
    branches: int
    divergent_branches: int
    findings: dict[str, int]
    failures: list[tuple[str, str]]
    jobs: int
    wall_s: float
    cached: int

    def __init__(self, files: int = 0, analysed: int = 0, failed: int = 0, kernels: int = 0,
                       variables: int = 0, uniform: int = 0, affine: int = 0, divergent: int = 0,
                       branches: int = 0, divergent_branches: int = 0,
                       findings: dict[str, int] | None = None,
                       failures: list[tuple[str, str]] | None = None, jobs: int = 1,
                       wall_s: float = 0.0, cached: int = 0) -> None:
        self.files = files
        self.analysed = analysed
        self.failed = failed
        self.kernels = kernels
        self.variables = variables
        self.uniform = uniform
        self.affine = affine
        self.divergent = divergent
        self.branches = branches
        self.divergent_branches = divergent_branches
        self.findings = {} if findings is None else findings
        self.failures = [] if failures is None else failures
        self.jobs = jobs
        self.wall_s = wall_s
        self.cached = cached

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
                "jobs": self.jobs, "wall_s": round(self.wall_s, 3), "cached": self.cached}

    def lines(self) -> list[str]:
        """The summary as text lines."""
        cached = f", {self.cached} from the cache" if self.cached else ""
        out = [f"run summary: {_count(self.files, 'file')} ({self.analysed} analysed, "
               f"{self.failed} failed{cached}), {_count(self.kernels, 'kernel')}, "
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
              jobs: int = 1, wall_s: float = 0.0, cached: int = 0) -> CorpusSummary:
    """Add up the results of a run (`cached`: how many files came from the cache)."""
    summary = CorpusSummary(files=total_files, failed=len(failures),
                            failures=list(failures), jobs=jobs, wall_s=wall_s, cached=cached)
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
