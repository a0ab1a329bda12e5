"""SARIF 2.1.0 output: valid against the OASIS schema, rules metadata, locations, fingerprints.

tests/data/sarif-schema-2.1.0.json is the official OASIS SARIF 2.1.0 JSON schema (OASIS
Standard with Errata 01, `$id` https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/
schemas/sarif-schema-2.1.0.json), as kept in the OASIS TC repository oasis-tcs/sarif-spec,
file Schemata/sarif-schema-2.1.0.json (112,768 bytes; sha256 c3b4bb2d…2682e). It is test
data, a spec document, never modified.
"""

import json
import os
from pathlib import Path

import jsonschema
import pytest

from gpudiv.analyses.findings import KINDS
from gpudiv.cli import main

ROOT = Path(__file__).parents[2]
SCHEMA = Path(__file__).parents[1] / "data" / "sarif-schema-2.1.0.json"
SAMPLES = ROOT / "samples"


@pytest.fixture(scope="module")
def validator():
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    assert schema["id"].endswith("/sarif-schema-2.1.0.json")
    return jsonschema.Draft4Validator(schema)


def sarif(capsys, monkeypatch, cwd: Path, *paths: str) -> tuple[int, dict]:
    monkeypatch.chdir(cwd)
    code = main(["analyze", "--format", "sarif", *paths])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, json.loads(out)


def test_validator_rejects_a_broken_log(validator):
    assert not validator.is_valid({"version": "2.1.0", "runs": [{"tool": {}}]})
    assert not validator.is_valid({"version": "2.0.0", "runs": []})


def test_log_is_valid_and_complete(validator, capsys, monkeypatch):
    code, log = sarif(capsys, monkeypatch, ROOT, "samples/reports/bra_uni.ptx",
                      "samples/musimd/sumTriangle.musimd", "samples/cuda/vector_ops.O3.ptx")
    assert code == 0
    validator.validate(log)
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "gpudiv"
    assert [r["id"] for r in driver["rules"]] == [k.id for k in KINDS]
    for rule in driver["rules"]:
        assert {"name", "shortDescription", "fullDescription", "help",
                "defaultConfiguration"} <= set(rule)
    results = run["results"]
    assert {r["ruleId"] for r in results} == {k.id for k in KINDS}
    for r in results:
        assert r["level"] == "warning" and r["message"]["text"]
        assert driver["rules"][r["ruleIndex"]]["id"] == r["ruleId"]
        assert r["partialFingerprints"]["gpudiv/v1"]
        artifact = r["locations"][0]["physicalLocation"]["artifactLocation"]
        assert artifact["uriBaseId"] == "%SRCROOT%"
        assert not artifact["uri"].startswith(("/", "file:"))
    bra_uni = next(r for r in results if r["ruleId"] == "gpudiv-bra-uni-divergent")
    location = bra_uni["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "samples/reports/bra_uni.cu"
    assert location["region"] == {"startLine": 5, "startColumn": 5}
    related = bra_uni["relatedLocations"][0]["physicalLocation"]
    assert related["artifactLocation"]["uri"] == "samples/reports/bra_uni.ptx"
    assert related["region"] == {"startLine": 34, "startColumn": 2}
    triangle = [r for r in results if r["locations"][0]["physicalLocation"]
                ["artifactLocation"]["uri"] == "samples/musimd/sumTriangle.musimd"]
    assert [r["locations"][0]["physicalLocation"]["region"]["startLine"]
            for r in triangle] == [9, 16]
    assert run["invocations"][0]["executionSuccessful"] is True


def test_uris_are_relative_to_the_working_directory(validator, capsys, monkeypatch):
    _, log = sarif(capsys, monkeypatch, SAMPLES / "musimd", "sumTriangle.musimd")
    validator.validate(log)
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            for r in log["runs"][0]["results"]}
    assert uris == {"sumTriangle.musimd"}
    base = log["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"]
    assert base == (SAMPLES / "musimd").resolve().as_uri() + "/"


def test_files_outside_the_working_directory_get_absolute_uris(validator, capsys,
                                                               monkeypatch, tmp_path):
    _, log = sarif(capsys, monkeypatch, tmp_path, str(SAMPLES / "musimd" / "avgSquare.musimd"))
    validator.validate(log)
    artifact = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"][
        "artifactLocation"]
    assert artifact["uri"].startswith("file:///") and "uriBaseId" not in artifact


def test_failures_become_notifications(validator, capsys, monkeypatch, tmp_path):
    (tmp_path / "bad.musimd").write_text("kernel k()\n x = = 1\n stop\n")
    code, log = sarif(capsys, monkeypatch, tmp_path, "bad.musimd", "missing.musimd")
    assert code == 2
    validator.validate(log)
    invocation = log["runs"][0]["invocations"][0]
    assert invocation["executionSuccessful"] is False
    texts = [n["message"]["text"] for n in invocation["toolExecutionNotifications"]]
    assert len(texts) == 2
    assert any("unexpected '='" in t for t in texts)
    assert any("no such file" in t for t in texts)
    assert os.path.basename(invocation["toolExecutionNotifications"][0]["locations"][0][
        "physicalLocation"]["artifactLocation"]["uri"]) == "bad.musimd"
