"""Checks on users' rule files before clingo sees them (gpudiv.analyses.rulefile)."""

from pathlib import Path

import pytest

from gpudiv.analyses.rulefile import check_rule_file, scan_rules
from gpudiv.analyses.solve import RuleError, rules_dir


def test_scan_skips_comments_strings_and_script_bodies():
    text = ('%* a %* nested *% #script *%\n'
            'a("#script é"). % #include "x.lp" ü\n'
            '#script (python)\nx = "ü"\n#end.\n'
            '#include "other.lp".\n'
            '#script(lua) y = 1 #end.\n')
    scan = scan_rules(text, "f.lp")
    assert scan.scripts == ((3, 1), (7, 1))
    assert scan.includes == ("other.lp",)


@pytest.mark.parametrize("text, place", [("a :- b, ç.\n", "1:9"), ('a("x").\nb(µ).\n', "2:3"),
                                         ("%* open *% é.\n", "1:12")])
def test_scan_reports_the_first_stray_non_ascii_character(text, place):
    with pytest.raises(RuleError, match=f"^f.lp:{place}: error: unexpected character"):
        scan_rules(text, "f.lp")


def test_shipped_rule_files_pass_the_checks():
    for path in sorted(Path(rules_dir()).glob("*.lp")):
        check_rule_file(path, allow_scripts=False)


def test_too_large_rule_file(tmp_path, monkeypatch):
    from gpudiv.analyses import rulefile

    path = tmp_path / "big.lp"
    path.write_text("a.\n" * 100)
    monkeypatch.setattr(rulefile, "MAX_RULE_BYTES", 10)
    with pytest.raises(RuleError, match="rule file too large"):
        check_rule_file(path)
