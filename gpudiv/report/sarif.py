"""SARIF 2.1.0 reports (`gpudiv analyze --format sarif`), the format CI code scanning reads.

One run per invocation: `tool.driver` lists every finding kind of `gpudiv.analyses.findings` as a
rule (id, name, short and full description, help, default level); every finding is one
result with its rule id, level, message, the physical location a developer should look at
(the CUDA source when `.loc` maps the instruction, else the analysed file) and, when those
differ, the analysed file's place as a related location. Artifact URIs are relative to
the run's working directory (`uriBaseId` `%SRCROOT%`), so results stay stable wherever the
repository is checked out; a file outside it gets an absolute `file:` URI.
`partialFingerprints["gpudiv/v1"]` hashes rule, kernel and condition variable (not the
line), so a result keeps its identity when code above it moves. Files that could not be
read or parsed become `toolExecutionNotifications` of the invocation.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

from gpudiv import __version__
from gpudiv.analyses.findings import KINDS, Finding, SourceLocation
from gpudiv.api import FileAnalysis

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
SRCROOT = "%SRCROOT%"


def artifact_location(path: str, root: Path) -> dict:
    """`artifactLocation` of a file: relative to `root` when inside it, else absolute."""
    absolute = Path(os.path.abspath(path))
    try:
        relative = absolute.relative_to(root)
    except ValueError:
        return {"uri": absolute.as_uri()}
    return {"uri": quote(relative.as_posix()), "uriBaseId": SRCROOT}


def _physical(location: SourceLocation, root: Path) -> dict:
    return {"physicalLocation": {
        "artifactLocation": artifact_location(location.path, root),
        "region": {"startLine": location.line, "startColumn": location.column}}}


def rules_metadata(kinds: tuple = KINDS) -> list[dict]:
    """`tool.driver.rules`: one reportingDescriptor per finding kind."""
    return [{"id": kind.id, "name": kind.name,
             "shortDescription": {"text": kind.short_description},
             "fullDescription": {"text": kind.full_description},
             "help": {"text": kind.help},
             "defaultConfiguration": {"level": kind.level},
             "properties": {"tags": ["gpu", "divergence", "performance"]}}
            for kind in kinds]


def result(finding: Finding, root: Path, kinds: tuple = KINDS) -> dict:
    """One SARIF result."""
    location = _physical(finding.location, root)
    location["logicalLocations"] = [{"name": finding.kernel, "kind": "function"}]
    entry = {"ruleId": finding.rule_id,
             "ruleIndex": [k.id for k in kinds].index(finding.rule_id),
             "level": finding.level,
             "message": {"text": finding.message},
             "locations": [location],
             "partialFingerprints": {"gpudiv/v1": finding.fingerprint},
             "properties": {"kernel": finding.kernel, "block": finding.block}}
    if finding.origin is not None:
        related = _physical(finding.input_location, root)
        related["id"] = 1
        related["message"] = {"text": "the instruction in the analysed file"}
        entry["relatedLocations"] = [related]
    return entry


def sarif_log(files: list[FileAnalysis], failures: list[tuple[str, str]] | None = None,
              root: str | Path | None = None, kinds: tuple = KINDS) -> dict:
    """The SARIF log of an analysis run; `failures` are (path, reason) of unread files.
    `files` need `findings()`, `diagnostics` and `errors` (`gpudiv deadlock` passes its
    own reports and `DEADLOCK_KINDS`)."""
    base = Path(os.path.abspath(root or os.getcwd()))
    results = [result(f, base, kinds) for analysed in files for f in analysed.findings()]
    notifications = []
    for analysed in files:
        for d in analysed.diagnostics:
            notifications.append({
                "level": "error" if d.severity == "error" else "warning",
                "message": {"text": d.message},
                "locations": [_physical(SourceLocation(d.path, d.line, d.column), base)]})
    for path, reason in failures or []:
        notifications.append({"level": "error", "message": {"text": reason},
                              "locations": [{"physicalLocation": {
                                  "artifactLocation": artifact_location(path, base)}}]})
    failed = bool(failures) or any(a.errors for a in files)
    return {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "gpudiv", "version": __version__,
                                "semanticVersion": __version__,
                                "rules": rules_metadata(kinds)}},
            "originalUriBaseIds": {SRCROOT: {"uri": base.as_uri().rstrip("/") + "/"}},
            "invocations": [{"executionSuccessful": not failed,
                             "toolExecutionNotifications": notifications}],
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    }
