"""The content-hash cache of corpus runs (`gpudiv analyze DIR… --cache DIR`).

An entry is the outcome of analysing one file, stored under a SHA-256 key of everything
that decides it: the file's path and bytes (its kernels' text), the analysis, the text of
its rule files, the block shape, whether the outcome is lean, and gpudiv itself (the text
of every module, grammar and rule file of the installed package, and clingo's version). A
re-run after editing one file analyses that file again and reads every other one back.

Entries are pickles written atomically (a temporary file renamed into place), so that
parallel runs sharing a folder never read half an entry; an entry that cannot be read is a
miss. Outcomes with a kernel that was not analysed for want of time or because its process
died are never stored: another run, with more time, may analyse it.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from functools import lru_cache
from importlib import resources
from pathlib import Path

import clingo

from gpudiv.analyses import get_analysis
from gpudiv.analyses.isolation import NOT_ANALYSED
from gpudiv.analyses.launch_shape import BlockShape

CACHE_FORMAT = "gpudiv-corpus-cache-1"
_PACKAGE = Path(__file__).resolve().parents[1]
_CODE_SUFFIXES = {".py", ".lp", ".lark", ".json"}


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """A hash of the installed gpudiv package (code, grammar, rules) and clingo's version."""
    digest = hashlib.sha256(f"{CACHE_FORMAT} clingo {clingo.__version__}".encode())
    # the grammar and rule folders are found as resources: an editable install maps them
    # to folders outside the package's own
    folders = [_PACKAGE, *(Path(str(resources.files(f"gpudiv.{name}")))
                           for name in ("grammar", "rules"))]
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.suffix in _CODE_SUFFIXES and path.is_file() \
                    and "__pycache__" not in path.parts:
                digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _rules_text(analysis: str) -> bytes:
    """The bytes of the analysis' rule files, in order (a user's as much as shipped ones)."""
    out = []
    for path in get_analysis(analysis).rule_files:
        out.append(str(path).encode() + b"\0" + Path(path).read_bytes() + b"\0")
    return b"".join(out)


class CorpusCache:
    """Outcomes of files by content hash, in one folder (created when missing)."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.hits = 0
        self.stored = 0

    def key(self, path: str, analysis: str, block: BlockShape | None, lean: bool,
            calls: str = "inline") -> str | None:
        """The key of a file's outcome, or None when the file cannot be read (no entry)."""
        try:
            data = Path(path).read_bytes()
        except OSError:
            return None
        digest = hashlib.sha256(code_fingerprint().encode())
        for part in (path.encode(), analysis.encode(), repr(block).encode(),
                     b"lean" if lean else b"full", calls.encode(), _rules_text(analysis)):
            digest.update(len(part).to_bytes(8, "big") + part)
        digest.update(hashlib.sha256(data).digest())
        return digest.hexdigest()

    def _entry(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.pickle"

    def get(self, key: str | None):
        """The stored outcome for a key, or None (no entry, or one that cannot be read)."""
        if key is None:
            return None
        try:
            with open(self._entry(key), "rb") as entry:
                outcome = pickle.load(entry)
        except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError,
                TypeError, ValueError):
            return None
        self.hits += 1
        return outcome

    def put(self, key: str | None, outcome) -> bool:
        """Store an outcome (not one with a kernel skipped for time or a dead process);
        whether it was stored."""
        if key is None or not cacheable(outcome):
            return False
        entry = self._entry(key)
        try:
            entry.parent.mkdir(exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=entry.parent, suffix=".part")
        except OSError:  # a read-only or full cache folder: the run goes on without it
            return False
        try:
            with os.fdopen(handle, "wb") as out:
                pickle.dump(outcome, out, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(temporary, entry)
        except (OSError, pickle.PicklingError, RecursionError):
            Path(temporary).unlink(missing_ok=True)
            return False
        self.stored += 1
        return True


def cacheable(outcome) -> bool:
    """Whether an outcome may be stored: no internal error and no kernel left unanalysed
    for want of time or because its process died (another run may analyse it)."""
    if outcome.failure and "internal error" in outcome.failure:
        return False
    analysis = outcome.analysis
    return analysis is None or not any(NOT_ANALYSED in d.message
                                       for d in analysis.errors)
