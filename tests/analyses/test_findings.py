"""Findings as data: kinds, locations (CUDA origin and PTX place), explanations, text/JSON."""

import hashlib
import json
import re
from pathlib import Path

import pytest

import gpudiv
from gpudiv.analyses.findings import (
    KINDS,
    SEARCH_BUDGET,
    BraUniDivergent,
    DivergentBranch,
    _fingerprint,
    file_findings,
    kind_by_id,
)
from gpudiv.cli import main

SAMPLES = Path(__file__).parents[2] / "samples"
SUM_TRIANGLE = SAMPLES / "musimd" / "sumTriangle.musimd"
BRA_UNI = SAMPLES / "reports" / "bra_uni.ptx"


def findings_of(path: Path):
    analysed = gpudiv.analyze(path)
    return file_findings(analysed.path, analysed.kernels)


def test_every_kind_has_stable_metadata():
    ids = [kind.id for kind in KINDS]
    assert len(ids) == len(set(ids))
    assert set(ids) == {"gpudiv-divergent-branch", "gpudiv-bra-uni-divergent"}
    for kind in KINDS:
        assert re.fullmatch(r"gpudiv-[a-z-]+", kind.id)
        assert kind.name and kind.short_description and kind.full_description and kind.help
        assert kind.level in ("error", "warning", "note")
        assert "{condition}" in kind.message_format
        assert kind_by_id(kind.id) is kind


def test_sum_triangle_divergent_branches_with_locations_and_reasons():
    findings = findings_of(SUM_TRIANGLE)
    assert [(f.kind, f.location.line, f.location.column, f.block) for f in findings] == [
        (DivergentBranch, 9, 7, "bb1"), (DivergentBranch, 16, 7, "LOOP")]
    assert all(f.origin is None and f.location == f.input_location for f in findings)
    first = findings[0]
    assert dict(first.arguments)["condition"] == "g#1"
    assert first.message == ("divergent branch on 'g#1' in kernel sumTriangle: "
                             "g#1 ← tid (tid differs between lanes)")


def test_explanation_ends_at_a_join_or_a_loop_exit():
    text = ("kernel k(n)\n a = tid\n x = 0\n bz a, J\n x = 1\nJ: sync\n"
            " bz x, E\n y = 1\nE: sync\n stop\n")
    analysed = gpudiv.analyze_text(text, "join.musimd")
    (_, second) = file_findings(analysed.path, analysed.kernels)
    assert second.message.endswith("(x#3 merges values after the divergent branch at bb1)")


def expectations(path: Path) -> list[tuple[str, str, str, str]]:
    """The `// expect: RULE CUDA-PLACE PTX-PLACE CONDITION` lines of a sample."""
    return [tuple(line.split("expect:", 1)[1].split())
            for line in path.read_text().splitlines() if "// expect:" in line]


def test_bra_uni_sample_golden():
    expected = expectations(BRA_UNI)
    assert len(expected) == 2
    found = [(f.rule_id, f"{Path(f.location.path).name}:{f.location.line}:{f.location.column}",
              f"{Path(f.input_location.path).name}:{f.input_location.line}:"
              f"{f.input_location.column}", dict(f.arguments)["condition"])
             for f in findings_of(BRA_UNI)]
    assert found == expected
    flagged = findings_of(BRA_UNI)[0]
    assert flagged.kind is BraUniDivergent
    # the CUDA file is named relative to the PTX file and exists next to it
    assert Path(flagged.origin.path).resolve() == (SAMPLES / "reports" / "bra_uni.cu").resolve()


def test_text_report_prints_compiler_style_findings(capsys):
    assert main(["analyze", str(BRA_UNI)]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if "[gpudiv-" in line]
    assert len(lines) == 2
    pattern = (r"^(?P<file>\S+\.cu):(?P<line>\d+):(?P<col>\d+): warning: (?P<msg>.*) "
               r"\(at (?P<ptx>\S+\.ptx:\d+:\d+)\) \[(?P<rule>gpudiv-[a-z-]+)\]$")
    first, second = (re.match(pattern, line) for line in lines)
    assert first and second
    assert (first["line"], first["rule"]) == ("5", "gpudiv-bra-uni-divergent")
    assert first["msg"].startswith("branch marked uniform (bra.uni) on '%p1#1'")
    assert first["ptx"].endswith("bra_uni.ptx:34:2")
    assert (second["line"], second["rule"]) == ("9", "gpudiv-divergent-branch")


def test_json_report_has_findings_per_kernel(capsys):
    assert main(["analyze", "--format", "json", str(BRA_UNI)]) == 0
    (kernel,) = json.loads(capsys.readouterr().out)["inputs"][0]["kernels"]
    rules = [f["rule"] for f in kernel["findings"]]
    assert rules == ["gpudiv-bra-uni-divergent", "gpudiv-divergent-branch"]
    first = kernel["findings"][0]
    assert first["location"]["line"] == 5 and first["location"]["path"].endswith("bra_uni.cu")
    assert first["input_location"] == {"path": str(BRA_UNI), "line": 34, "column": 2}
    assert first["level"] == "warning" and first["kernel"] == "flagged"
    assert first["arguments"]["condition"] == "%p1#1"


@pytest.mark.parametrize("name", ["vector_ops.O3.ptx", "control_flow.G.ptx"])
def test_nvcc_ptx_findings_point_at_cuda_lines(name):
    findings = findings_of(SAMPLES / "cuda" / name)
    assert findings and all(f.origin is not None for f in findings)
    source = (SAMPLES / "cuda" / name.split(".")[0]).with_suffix(".cu").read_text().splitlines()
    for f in findings:
        assert f.origin.path.endswith(".cu")
        assert re.search(r"\b(if|for|while|switch|case|return|break|do)\b|[?}]",
                         source[f.origin.line - 1]), source[f.origin.line - 1]


def test_fingerprints_ignore_line_moves(tmp_path):
    moved = tmp_path / "moved.musimd"
    moved.write_text("\n\n# two lines more\n" + SUM_TRIANGLE.read_text())
    before = [(f.rule_id, f.fingerprint, f.location.line) for f in findings_of(SUM_TRIANGLE)]
    after = [(f.rule_id, f.fingerprint, f.location.line) for f in findings_of(moved)]
    assert [b[:2] for b in before] == [a[:2] for a in after]
    assert [b[2] + 3 for b in before] == [a[2] for a in after]
    assert len({f for _, f, _ in before}) == len(before)


def test_branch_table_and_json_show_ptx_line_beside_cuda_line(capsys):
    ptx = str(SAMPLES / "cuda" / "grid_stride.O3.ptx")
    assert main(["analyze", "--analysis", "simple", ptx]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()
            if line.strip().startswith(("bb1 ", "bb2 "))]
    # block, PTX line, CUDA place, condition, class
    assert rows[0][:2] == ["bb1", "41"] and rows[0][2].endswith("grid_stride.cu:9:5")
    assert main(["analyze", "--format", "json", ptx]) == 0
    kernels = json.loads(capsys.readouterr().out)["inputs"][0]["kernels"]
    branch = kernels[0]["branches"][0]
    assert branch["line"] == 41
    assert branch["source_location"]["path"].endswith("grid_stride.cu")
    assert branch["source_location"]["line"] == 9
    assert gpudiv.analyze(SUM_TRIANGLE).kernels[0].branches[0].origin is None


def test_absolute_cuda_path_of_another_machine_resolves_beside_the_ptx(tmp_path):
    """nvcc records the compile machine's absolute path; a moved checkout still finds the .cu."""
    ptx = (SAMPLES / "cuda" / "grid_stride.O3.ptx").read_text()
    recorded = re.search(r'\.file\s+1\s+"([^"]+)"', ptx).group(1)
    elsewhere = "/no/such/checkout/samples/cuda/grid_stride.cu"
    (tmp_path / "grid_stride.O3.ptx").write_text(ptx.replace(recorded, elsewhere))
    (tmp_path / "grid_stride.cu").write_text((SAMPLES / "cuda" / "grid_stride.cu").read_text())
    findings = findings_of(tmp_path / "grid_stride.O3.ptx")
    assert findings and {f.origin.path for f in findings} == {str(tmp_path / "grid_stride.cu")}
    (tmp_path / "grid_stride.cu").unlink()  # nothing beside it: the recorded path is kept
    findings = findings_of(tmp_path / "grid_stride.O3.ptx")
    assert {f.origin.path for f in findings} == {elsewhere}


def test_a_kernel_looks_each_source_path_up_once(monkeypatch):
    """A kernel's branches name the same .cu hundreds of times; the file system is asked
    once per recorded path, and every branch still gets its resolved place."""
    from gpudiv.analyses import findings

    analysed = gpudiv.analyze(SAMPLES / "cuda" / "sorting.O3.ptx", analysis="simple")
    kernel = max(analysed.kernels, key=lambda k: len(k.branches))
    expected = [findings._origin(b.origin, analysed.path, {}) for b in kernel.branches]
    asked: list[str] = []
    real = findings.resolve_source_path
    monkeypatch.setattr(findings, "resolve_source_path",
                        lambda path, ptx: asked.append(path) or real(path, ptx))
    assert findings.branch_origins(analysed.path, kernel) == expected
    recorded = {b.origin[0] for b in kernel.branches if b.origin}
    assert len(kernel.branches) > 10 * len(recorded)
    assert sorted(asked) == sorted(recorded)


@pytest.mark.parametrize("budget", [SEARCH_BUDGET, 0], ids=["searches", "one-pass"])
def test_chains_equal_one_search_per_variable(monkeypatch, budget):
    """`Chains` (one pass) finds the chain a breadth-first search from each variable finds,
    and so does `Chains` given some starts, whether their own searches answer or (no
    budget) the pass over what they reach."""
    import random

    from gpudiv.analyses import findings
    from gpudiv.analyses.findings import Chains, shortest_chain
    monkeypatch.setattr(findings, "SEARCH_BUDGET", budget)
    rng = random.Random(16)
    answered = 0  # how many times the starts' own searches answered
    for _ in range(200):
        names = [f"v{i}" for i in range(rng.randint(1, 9))]
        reasons = {}
        for name in names:
            listed = [(rng.choice(("operand", "operand", "join", "source")), rng.choice(names))
                      for _ in range(rng.randint(0, 3))]
            if listed:
                reasons[name] = sorted(listed)
        chains = Chains(reasons)
        starts = rng.sample(names, rng.randint(1, len(names)))
        reached = Chains(reasons, starts=starts)
        answered += reached.measured is None
        for name in names:
            assert chains.chain(name) == shortest_chain(name, reasons), (name, reasons)
            assert chains.end(name) == chains.chain(name)[0][-1]
        for name in starts + names:  # any variable, a start or not
            assert reached.chain(name) == chains.chain(name), (name, starts, reasons)
            assert reached.shown(name, 2) == chains.shown(name, 2), (name, starts, reasons)
            assert reached.end(name) == chains.end(name)
    assert answered > 150 if budget else answered == 0


class _Recorded(dict):
    """A dict of reasons that records which variables were looked up."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.asked: set[str] = set()

    def get(self, key, default=None):
        self.asked.add(key)
        return super().get(key, default)

    def __getitem__(self, key):
        self.asked.add(key)
        return super().__getitem__(key)


@pytest.mark.parametrize("budget", [SEARCH_BUDGET, 0], ids=["searches", "one-pass"])
def test_chains_from_starts_search_only_what_the_starts_reach(monkeypatch, budget):
    """Given the branch conditions, the chains look at none of the unrelated variables."""
    from gpudiv.analyses import findings
    from gpudiv.analyses.findings import Chains
    monkeypatch.setattr(findings, "SEARCH_BUDGET", budget)
    reasons = _Recorded({"p": [("operand", "a")], "a": [("operand", "b"), ("source", "a")],
                         "b": [("source", "b")], "x": [("operand", "y")],
                         "y": [("source", "y")]})
    chains = Chains(reasons, starts=["p"])
    assert chains.chain("p") == (["p", "a"], ("source", "a"))
    assert reasons.asked <= {"p", "a", "b"}
    if budget:
        assert chains.searched == {"p": (["p", "a"], ("source", "a"))}
    else:
        assert chains.measured == {"p", "a", "b"} and chains.distance == {"p": 1, "a": 0, "b": 0}


def test_chains_shared_by_many_starts_take_one_pass():
    """Starts along one long chain would search it once each (quadratic): past the budget
    the one pass answers, with the same chains."""
    from gpudiv.analyses.findings import Chains, shortest_chain
    reasons = {f"v{i}": [("operand", f"v{i + 1}")] for i in range(100)}
    reasons["v100"] = [("source", "tid")]
    starts = [f"v{i}" for i in range(101)]
    chains = Chains(reasons, starts=starts)
    assert chains.measured == set(reasons) and not chains.searched
    assert all(chains.chain(s) == shortest_chain(s, reasons) for s in starts)
    assert Chains(reasons, starts=["v90", "v95"]).measured is None


def test_one_search_far_beyond_its_share_gives_up_early():
    """A condition whose chain crosses the kernel among many short ones: its search would
    stay under the budget of all, but not under its share of it; the pass answers."""
    from gpudiv.analyses.findings import SEARCH_BUDGET, SEARCH_SHARE, Chains
    reasons = {f"v{i}": [("operand", f"v{i + 1}")] for i in range(100)}
    reasons["v100"] = [("source", "tid")]
    reasons.update({f"w{i}": [("source", "tid")] for i in range(20)})
    starts = [f"w{i}" for i in range(20)] + ["v0"]
    assert 20 + 101 < SEARCH_BUDGET * len(reasons)  # the budget of all would allow it
    assert 101 > SEARCH_SHARE * SEARCH_BUDGET * len(reasons) // len(starts)
    chains = Chains(reasons, starts=starts)
    assert chains.measured is not None and chains.chain("v0")[0][-1] == "v100"
    assert Chains(reasons, starts=starts[:-1]).measured is None


def test_findings_work_is_linear_in_the_kernel():
    """Explanations were computed per finding over the whole kernel (quadratic on a nest of
    divergent ifs); doubling the nest now doubles the work."""
    import sys

    from tests.test_sizes import executed_lines
    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    from size_inputs import nested_ifs
    counts = []
    for depth in (30, 60):
        analysed = gpudiv.analyze_text(nested_ifs(depth), "nest.musimd", "simple")
        counts.append(executed_lines(lambda a=analysed: file_findings(a.path, a.kernels)))
    assert counts[1] / counts[0] < 2.3, counts


def test_long_chains_are_abbreviated_and_keep_their_end():
    from gpudiv.analyses.findings import CHAIN_SHOWN, Chains
    reasons = {f"v{i}": [("operand", f"v{i + 1}")] for i in range(100)}
    reasons["v100"] = [("source", "tid")]
    chains = Chains(reasons)
    path, more, terminal = chains.shown("v0", CHAIN_SHOWN)
    assert path == [f"v{i}" for i in range(CHAIN_SHOWN)] + ["v100"]
    assert more == 101 - CHAIN_SHOWN - 1 and terminal == ("source", "tid")
    assert chains.shown("v60", CHAIN_SHOWN) == (chains.chain("v60")[0], 0, ("source", "tid"))
    assert chains.end("v3") == "v100" and chains.end("v100") == "v100"


def test_fingerprints_are_sha256_of_what_a_finding_is_about():
    """Fingerprints stay SHA-256 whichever module computes it (built-in or hashlib)."""
    seen: dict[str, int] = {}
    first = _fingerprint("gpudiv-divergent-branch", "k", "%p1", seen)
    second = _fingerprint("gpudiv-divergent-branch", "k", "%p1", seen)
    assert first == hashlib.sha256(b"gpudiv-divergent-branch|k|%p1|1").hexdigest()[:32]
    assert second == hashlib.sha256(b"gpudiv-divergent-branch|k|%p1|2").hexdigest()[:32]


def _with_pathlib(path: str, input_path: str) -> str:
    """`resolve_source_path` as it was written with pathlib (the reference)."""
    folder = Path(input_path).parent
    if not Path(path).is_absolute():
        candidate = folder / path
        return str(candidate) if candidate.exists() else path
    if Path(path).exists():
        return path
    beside = folder / Path(path).name
    return str(beside) if beside.exists() else path


def test_source_paths_resolve_as_with_pathlib(tmp_path, monkeypatch):
    """The analysis resolves `.file` paths with strings (pathlib is not imported on the
    way to an analysis); the answers are pathlib's, relative, moved or present."""
    monkeypatch.chdir(tmp_path)
    for name in ("k.cu", "sub/k.cu", "sub/inner/k.cu"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    cases = [("k.cu", "x.ptx"), ("k.cu", "sub/x.ptx"), ("k.cu", "./sub/x.ptx"),
             ("k.cu", "sub//x.ptx"), ("./k.cu", "sub/x.ptx"), ("../k.cu", "sub/inner/x.ptx"),
             ("inner/k.cu", "sub/x.ptx"), ("missing.cu", "sub/x.ptx"),
             ("/nowhere/k.cu", "sub/x.ptx"), ("/nowhere/k.cu", "x.ptx"),
             ("/nowhere/other.cu", "sub/x.ptx"), (str(tmp_path / "k.cu"), "sub/x.ptx")]
    from gpudiv.analyses import findings

    got = [findings.resolve_source_path(path, ptx) for path, ptx in cases]
    assert got == [_with_pathlib(path, ptx) for path, ptx in cases]
    assert got[1] == "sub/k.cu" and got[8] == "sub/k.cu" and got[7] == "missing.cu"
