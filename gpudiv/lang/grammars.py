"""Lark parsers for the grammars in `gpudiv/grammar`, their LALR tables cached on disk.

Building the PTX parser (reading the grammar, the LALR analysis) took 0.05 s of processor
time in every `gpudiv` process, a sixth of the analysis of a small file (issue 16). Lark
can save the analysed tables and load them back in 0.007 s: they are kept in the user's
cache folder (`$XDG_CACHE_HOME/gpudiv`, else `~/.cache/gpudiv`), one file per grammar
text, Lark version and Python version. Lark checks a file's grammar digest before using
it and builds the parser as before when the file is missing, damaged or cannot be
written; a folder that cannot be created means no cache.
"""

from __future__ import annotations

import hashlib
import sys
from importlib import resources
from pathlib import Path

import lark
from lark import Lark

from gpudiv.lang.cache_files import cache_folder


def grammar_text(name: str) -> str:
    """The text of a grammar file of the package (`ptx.lark`, `musimd.lark`, …)."""
    return resources.files("gpudiv.grammar").joinpath(name).read_text()


def cache_file(name: str, text: str) -> str | None:
    """Where the analysed tables of grammar `name` with this text are kept (None: no
    cache folder can be made)."""
    folder = cache_folder()
    if folder is None:
        return None
    key = f"{text}\0{lark.__version__}\0{sys.version_info[:2]}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:20]
    return str(Path(folder) / f"{Path(name).stem}-{digest}.lark-cache")


def lalr_parser(name: str, **options) -> Lark:
    """The LALR parser (contextual lexer) of grammar file `name` with Lark `options`,
    loaded from the cache when it holds this grammar."""
    text = grammar_text(name)
    where = cache_file(name, text)
    return Lark(text, parser="lalr", lexer="contextual", cache=where or False, **options)
