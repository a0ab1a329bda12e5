"""`gpudiv rules`: the shipped rule files and what they derive."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path

from gpudiv.cli.common import EXIT_OK, _users, one_line_errors


@one_line_errors
def cmd_rules(args: argparse.Namespace) -> int:
    """List the shipped rule files and the relations each derives."""
    from gpudiv.analyses.schema import shipped_rule_files


    files = shipped_rule_files()
    if args.format == "json":
        json.dump([{"file": f.name, "summary": f.summary, "analyses": _users(f.name),
                    "derives": [{"relation": f"{n}/{a}", "meaning": m} for n, a, m in f.shows]}
                   for f in files], sys.stdout, indent=2)
        sys.stdout.write("\n")
        return EXIT_OK
    columns = 100
    for f in files:
        users = _users(f.name)
        print(f"{f.name}: {f.summary}"
              + (f" (used by: {', '.join(users)})" if users else ""))
        width = max((len(f"{n}/{a}") for n, a, _ in f.shows), default=0)
        for name, arity, meaning in f.shows:
            head = f"  {f'{name}/{arity}'.ljust(width)}  "
            print(textwrap.fill(meaning, columns, initial_indent=head,
                                subsequent_indent=" " * len(head)))
        print()
    print(f"(relations and facts are documented in {Path('rules') / 'SCHEMA.md'}; "
          f"the shipped files are in {files[0].path.parent if files else 'rules/'})")
    return EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:
    """Add `rules` to the `gpudiv` subcommand parser."""
    rules = sub.add_parser("rules", help="list the shipped rule files and what they derive")
    rules.add_argument("--format", choices=("text", "json"), default="text",
                       help="output format")
    rules.set_defaults(handler=cmd_rules)
