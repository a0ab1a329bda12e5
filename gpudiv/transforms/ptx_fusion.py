"""Vertical fusion of two PTX kernels, on their text (the PTX side of
`gpudiv.transforms.fusion`).

The fused `.entry` declares the first kernel's parameters, then the second's (renamed
`NAME_f2` when the names clash, as when a kernel is fused with itself); a pointer
parameter of the second kernel that receives the same host buffer as one of the first
is dropped and its `ld.param` reads the first's. The body is the first kernel's, each
`ret`/`exit` turned into `bra $FUSED_JOIN_fx…`, then that label and `bar.sync 0;`,
then the second kernel's body with its registers (`%r5` → `%r_fx5`, declared as
`%r_fx<N>`), labels and `.shared`/`.local` names given a suffix `_fx…` that neither
body uses yet. `.loc` lines are dropped (the fused kernel has no single source file).
The result is parsed back by the PTX front end, so the interpreter runs exactly the
text that is written out (and that `ptxas` checks).
"""

from __future__ import annotations

import re

from gpudiv import ir

_ENTRY = re.compile(r"(?:\.visible\s+|\.weak\s+)?\.entry\s+(?P<name>[\w$]+)\s*\(", re.S)
_REG = re.compile(r"^\s*\.reg\s+\.\w+\s+(%[\w$]+?)(<\d+>)?\s*;", re.M)
_VAR = re.compile(r"^\s*\.(?:shared|local)\s+(?:\.align\s+\d+\s+)?\.\w+\s+([\w$]+)", re.M)
_LABEL = re.compile(r"^\s*([\w$]+):", re.M)
_PARAM = re.compile(r"\.param\s+[^,)]*?([\w$]+)\s*(?:\[\d+\])?\s*(?:,|$)", re.S)
_RETURN = re.compile(r"\b(ret|exit)(\.uni)?\s*;")
_LOC = re.compile(r"^\s*\.loc\b[^\n]*\n", re.M)
_HEADER = re.compile(r"^\s*\.(version|target|address_size)\b[^\n]*", re.M)


class PtxFusionError(Exception):
    """A kernel whose text cannot be fused (not found, or not a plain `.entry`)."""


def entry_text(source: str, name: str) -> str:
    """The `.entry NAME(...) { ... }` of a kernel in a PTX module."""
    for match in _ENTRY.finditer(source):
        if match.group("name") != name:
            continue
        start = match.start()
        open_at = source.index("{", match.end())
        depth = 0
        for i in range(open_at, len(source)):
            depth += {"{": 1, "}": -1}.get(source[i], 0)
            if depth == 0:
                return source[start:i + 1]
    raise PtxFusionError(f"kernel {name}: no .entry in its PTX text")


def module_header(source: str) -> str:
    """The `.version`, `.target` and `.address_size` lines of a module (less `debug`:
    the fused module carries no DWARF sections)."""
    lines = [m.group(0).strip() for m in _HEADER.finditer(source)]
    return "\n".join(re.sub(r",\s*debug\b", "", line) for line in lines) + "\n"


def _split(entry: str) -> tuple[list[str], str]:
    """Parameter declarations and the body (between the outer braces) of an entry."""
    open_paren = entry.index("(")
    close_paren = entry.index(")", open_paren)
    params = [p.strip() for p in entry[open_paren + 1:close_paren].split(",") if p.strip()]
    body = entry[entry.index("{", close_paren) + 1:entry.rindex("}")]
    for directive in re.findall(r"\)\s*((?:\.\w+[^{]*?)?)\{", entry[close_paren:])[:1]:
        if directive.strip():
            raise PtxFusionError("a kernel with performance directives is not fused")
    return params, body


def _param_name(decl: str) -> str:
    """The name a `.param` declaration declares."""
    return re.sub(r"\[\d+\]$", "", decl.split()[-1])


def _rename_declarations(body: str, suffix: str) -> str:
    """`.reg .b32 %r<8>;` → `.reg .b32 %r_fx<8>;` (the uses are renamed afterwards)."""
    return re.sub(r"(^\s*\.reg\s+\.\w+\s+%[\w$]+?)(<\d+>)", lambda m: m.group(1) + suffix
                  + m.group(2), body, flags=re.M)


def fuse_ptx(first: ir.Kernel, first_text: str, second: ir.Kernel, second_text: str,
             shared: dict[str, str], name: str) -> str:
    """The text of the fused `.entry`. `shared`: parameter of the second kernel → the
    parameter of the first that receives the same host buffer."""
    params_a, body_a = _split(entry_text(first_text, first.name))
    params_b, body_b = _split(entry_text(second_text, second.name))
    taken = {_param_name(p) for p in params_a}
    renames: dict[str, str] = dict(shared)
    kept: list[str] = []
    for decl in params_b:
        old = _param_name(decl)
        if old in shared:
            continue
        new = old if old not in taken else f"{old}_f2"
        renames[old] = new
        taken.add(new)
        kept.append(re.sub(re.escape(old) + r"(?![\w$])", new, decl))
    k = 1
    while f"_f{'x' * k}" in body_a or f"_f{'x' * k}" in body_b:
        k += 1
    suffix = f"_f{'x' * k}"  # ends in a letter: `%r_fx<8>` declares %r_fx0 … %r_fx7
    join = f"$FUSED_JOIN{suffix}"
    body_b = _rename_declarations(body_b, suffix)
    body_b = _rename_body_uses(body_b, suffix, renames)
    body_a = _RETURN.sub(f"bra \t{join};", body_a)
    body = (_LOC.sub("", body_a).rstrip() + f"\n\n{join}:\n\tbar.sync \t0;\n"
            + _LOC.sub("", body_b))
    header = ",\n\t".join(params_a + kept)
    return f".visible .entry {name}(\n\t{header}\n)\n{{{body}}}\n"


_TOKEN = re.compile(r"(?<![\w$%])%?[A-Za-z_$][\w$]*")


def _rename_body_uses(body: str, suffix: str, params: dict[str, str]) -> str:
    """Rename, in one pass, the registers (declarations already renamed), labels,
    variables and parameters of the second body."""
    exact: dict[str, str] = dict(params)
    ranged: dict[str, str] = {}
    for name, is_range in _REG.findall(body):
        if is_range:
            ranged[name[:-len(suffix)]] = name
        else:
            exact[name] = name + suffix
    for found in set(_VAR.findall(body)) | set(_LABEL.findall(body)):
        exact[found] = found + suffix

    def rename(match: re.Match) -> str:
        token = match.group(0)
        if token in exact:
            return exact[token]
        digits = re.match(r"(.*?)(\d+)$", token)
        if digits and digits.group(1) in ranged:
            return ranged[digits.group(1)] + digits.group(2)
        return token
    return _TOKEN.sub(rename, body)
