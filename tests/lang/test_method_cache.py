"""Dataclass methods compiled once per machine (`gpudiv.lang.method_cache`): classes made
through the cache behave as classes made without it, the file is kept, damaged or
foreign files are ignored, and the console script reads what an earlier process wrote."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpudiv.lang import method_cache

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cached(tmp_path):
    """A cache on a fresh file, installed for the test only."""
    method_cache.uninstall()
    cache = method_cache.install(tmp_path / "methods.bin")
    assert cache is not None
    yield cache
    method_cache.uninstall()


def _make_classes():
    """Dataclasses of every kind gpudiv uses (each call makes new classes)."""
    @dataclasses.dataclass(frozen=True)
    class Point:
        x: int
        y: int = 0
        tags: tuple[str, ...] = ()

    @dataclasses.dataclass(order=True)
    class Item:
        key: str
        values: list[int] = dataclasses.field(default_factory=list)
        note: str = dataclasses.field(default="", compare=False)

        def __post_init__(self) -> None:
            self.values = sorted(self.values)

    @dataclasses.dataclass(slots=True)
    class Slotted:
        name: str
        count: int = 1

    return Point, Item, Slotted


def _behaviour(classes) -> list:
    """What the generated methods do, as plain values."""
    point, item, slotted = classes
    p = point(1, tags=("a",))
    seen = [repr(p), p == point(1, 0, ("a",)), hash(p) == hash(point(1, 0, ("a",))),
            p != point(2)]
    try:
        p.x = 5
    except dataclasses.FrozenInstanceError:
        seen.append("frozen")
    a, b = item("k", [3, 1]), item("k", [1, 3], note="other")
    seen += [repr(a), a == b, item("a") < item("b"), a.values,
             sorted([item("z"), item("y")])[0].key]
    s = slotted("n")
    seen += [repr(s), s == slotted("n", 1), hasattr(s, "__dict__")]
    try:
        item()
    except TypeError as error:
        seen.append(str(error))
    return seen


def test_classes_made_through_the_cache_behave_as_without(tmp_path):
    path = tmp_path / "methods.bin"
    method_cache.uninstall()
    expected = _behaviour(_make_classes())
    try:
        first = method_cache.install(path)
        assert _behaviour(_make_classes()) == expected
        assert first.compiled > 0
        first.save()
        method_cache.uninstall()
        again = method_cache.install(path)
        assert _behaviour(_make_classes()) == expected
        assert again.compiled == 0 and again.used  # every method came from the file
    finally:
        method_cache.uninstall()


def test_a_damaged_or_foreign_file_is_ignored(tmp_path):
    path = tmp_path / "methods.bin"
    path.write_bytes(b"\x00\x01garbage")
    assert method_cache.read(path) == {}
    cache = method_cache.MethodCache(path)
    namespace: dict = {}
    cache.exec("def f():\n    return 41 + 1\n", namespace)
    assert namespace["f"]() == 42 and cache.compiled == 1
    cache.save()
    assert len(method_cache.read(path)) == 1
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # the checksum no longer matches
    path.write_bytes(bytes(data))
    assert method_cache.read(path) == {}


def test_only_the_methods_a_process_makes_are_unmarshalled_and_kept_first(monkeypatch,
                                                                         tmp_path):
    path = tmp_path / "methods.bin"
    first = method_cache.MethodCache(path)
    sources = [f"def f{k}():\n    return {k}\n" for k in range(6)]
    for source in sources:
        first.exec(source, {})
    first.save()
    monkeypatch.setattr(method_cache, "MAX_ENTRIES", 4)
    second = method_cache.MethodCache(path)
    assert len(second.stored) == 6 and not second.codes
    space: dict = {}
    second.exec(sources[5], space)
    second.exec("def g():\n    return 'new'\n", space)
    assert space["f5"]() == 5 and space["g"]() == "new"
    assert len(second.codes) == 2 and second.compiled == 1  # f5 came from the file
    second.save()
    kept = {source for _, source in method_cache.read(path)}
    assert len(kept) == 4 and {sources[5], "def g():\n    return 'new'\n"} <= kept


def test_the_file_is_named_after_the_python_build(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    name = os.path.basename(method_cache.cache_file())
    monkeypatch.setattr(sys, "version", sys.version + " (another build)")
    assert os.path.basename(method_cache.cache_file()) != name


def test_future_flags_of_the_caller_are_part_of_the_key(tmp_path):
    """`exec` compiles a string with its caller's `__future__` flags; so does the cache,
    and a source compiled under other flags is another entry."""
    cache = method_cache.MethodCache(tmp_path / "methods.bin")
    source = "def f(x: undefined_name) -> None:\n    pass\n"
    plain: dict = {"cache": cache}
    with pytest.raises(NameError):  # annotations evaluated: the name does not exist
        exec(compile("cache.exec(SOURCE, space)", "<test>", "exec", dont_inherit=True),
             {"cache": cache, "SOURCE": source, "space": plain})
    postponed: dict = {}
    exec(compile("cache.exec(SOURCE, space)", "<test>", "exec", dont_inherit=True,
                 flags=__import__("__future__").annotations.compiler_flag),
         {"cache": cache, "SOURCE": source, "space": postponed})
    assert postponed["f"].__annotations__ == {"x": "undefined_name", "return": "None"}
    assert cache.compiled == 2 and len(cache.codes) == 2


def test_without_namespaces_exec_runs_in_the_callers(tmp_path):
    cache = method_cache.MethodCache(tmp_path / "methods.bin")
    known = 7
    space = {"cache": cache, "known": known}
    exec("cache.exec('result = known * 6')", space)
    assert space["result"] == 42


def test_install_is_once_and_uninstall_gives_exec_back(cached, tmp_path):
    assert method_cache.install(tmp_path / "other.bin") is None
    assert dataclasses.exec == cached.exec
    method_cache.uninstall()
    assert "exec" not in vars(dataclasses)


@pytest.mark.slow  # two fresh interpreters
def test_the_console_script_writes_the_file_once_and_reads_it_after(tmp_path):
    cache, work = tmp_path / "cache", tmp_path / "work"
    work.mkdir()  # not the checkout (its gpudiv folder), nor the cache (a gpudiv folder too)
    env = {**os.environ, "GPUDIV_NO_DAEMON": "1", "XDG_CACHE_HOME": str(cache)}
    # `check` runs the interpreter, whose classes are dataclasses (`analyze` makes none)
    command = [sys.executable, "-c", "import sys; from gpudiv.command import run; "
               "sys.argv[0] = 'gpudiv'; run()", "check",
               str(ROOT / "samples" / "cuda" / "vector_ops.O3.ptx")]
    first = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120,
                           check=False, cwd=work)
    files = list((cache / "gpudiv").glob("methods-*.bin"))
    assert first.returncode == 0 and len(files) == 1, first.stderr[-500:]
    assert len(method_cache.read(files[0])) > 50
    written = files[0].stat().st_mtime_ns
    second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120,
                            check=False, cwd=work)
    def findings(done: subprocess.CompletedProcess) -> list[str]:
        return [line for line in done.stdout.splitlines() if "run summary" not in line]

    assert second.returncode == 0 and findings(second) == findings(first)
    assert files[0].stat().st_mtime_ns == written  # nothing new to compile: not rewritten


# In a fresh interpreter: `install` before anything imports `dataclasses`.
LATER_IMPORT = """
import sys
from gpudiv.lang import method_cache
pending = method_cache.install(sys.argv[1])
print(type(pending).__name__, "dataclasses" in sys.modules)
{body}
"""


def _fresh(tmp_path: Path, body: str) -> list[str]:
    """The lines `body` prints after a fresh interpreter installed the cache."""
    code = LATER_IMPORT.format(body=body)
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "methods.bin")],
                          capture_output=True, text=True, timeout=60, check=False,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-1500:]
    return done.stdout.split("\n")[:-1]


def test_the_cache_waits_for_the_first_import_of_dataclasses(tmp_path):
    body = """
import dataclasses
@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: int = 0
print(Point(1) == Point(1, 0), hash(Point(2)) == hash(Point(2, 0)), repr(Point(3)))
print(dataclasses.exec == pending.cache.exec, pending.cache.compiled > 0,
      pending in sys.meta_path, dataclasses.__spec__.name)
pending.save()
print(len(method_cache.read(sys.argv[1])) > 0)
"""
    assert _fresh(tmp_path, body) == ["_InstallOnImport False", "True True Point(x=3, y=0)",
                                      "True True False dataclasses", "True"]
    # the next process finds every method in the file
    again = body.replace("pending.cache.compiled > 0", "pending.cache.compiled == 0")
    assert _fresh(tmp_path, again)[2] == "True True False dataclasses"


def test_a_small_analysis_neither_imports_dataclasses_nor_reads_the_file(tmp_path):
    (tmp_path / "methods.bin").write_bytes(b"not read")
    sample = ROOT / "samples" / "cuda" / "kfcm_pipeline.O3.ptx"
    body = f"""
from gpudiv.cli.main import main
main(["analyze", {str(sample)!r}, "--format", "json", "-o", "out.json"])
print("dataclasses" in sys.modules, "inspect" in sys.modules, pending.cache)
pending.save()
method_cache.uninstall()
print(pending in sys.meta_path)
"""
    assert _fresh(tmp_path, body) == ["_InstallOnImport False", "False False None", "False"]
    assert (tmp_path / "methods.bin").read_bytes() == b"not read"
