"""Output formats: text (ruff-like), json (the public schema), sarif (2.1.0), github.

Columns are 0-based inside gradtrace and 1-based in every format here.
"""
from __future__ import annotations

import json
from collections import Counter
from urllib.parse import quote
from typing import Callable, Iterable, Sequence

from gradtrace.findings import Finding, findings_document
from gradtrace.lint.context import source_lines

FORMATS = ("text", "json", "sarif", "github")
SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def _style(color: bool) -> Callable[[str, str], str]:
    codes = {"bold": "1", "red": "31", "cyan": "36", "blue": "34", "dim": "2", "yellow": "33"}

    def style(text: str, what: str) -> str:
        return f"\x1b[{codes[what]}m{text}\x1b[0m" if color else text

    return style


def to_text(findings: Sequence[Finding], sources: dict[str, str] | None = None,
            color: bool = False, show_source: bool = True) -> str:
    """ruff-style text: ``path:line:col: CODE message``, the line with a caret, related, help."""
    s = _style(color)
    out: list[str] = []
    lines_of: dict[str, list[str]] = {}
    for f in findings:
        head = f"{s(f.path, 'bold')}:{f.line}:{f.column + 1}: {s(f.code, 'red')} {f.message}"
        out.append(head)
        text = (sources or {}).get(f.path)
        if show_source and text is not None:
            lines = lines_of.setdefault(f.path, source_lines(text))
            if 0 < f.line <= len(lines):
                src = lines[f.line - 1].rstrip().expandtabs(1) if "\t" in lines[f.line - 1] \
                    else lines[f.line - 1].rstrip()
                width = len(str(f.line))
                end = f.end_column if f.end_line == f.line and f.end_column else len(src)
                carets = "^" * max(1, min(end, len(src)) - f.column)
                out.append(f"{' ' * width} {s('|', 'blue')}")
                out.append(f"{s(str(f.line), 'blue')} {s('|', 'blue')} {src}")
                out.append(f"{' ' * width} {s('|', 'blue')} {' ' * f.column}{s(carets, 'red')}")
        for r in f.related:
            out.append(f"  {s('-->', 'blue')} {r.path}:{r.line}:{r.column + 1}: {r.message}")
        if f.fix is not None:
            tag = " (unsafe fix)" if f.fix.edits and f.fix.safety == "unsafe" else ""
            out.append(f"  {s('help', 'cyan')}: {f.fix.title}{tag}")
        if show_source:
            out.append("")
    return "\n".join(out) + ("\n" if out and not show_source else "")


def summary_line(findings: Sequence[Finding], fixable: int = 0) -> str:
    """``Found 3 errors.`` plus a fixable hint, like ruff."""
    n = len(findings)
    if n == 0:
        return "All checks passed!"
    line = f"Found {n} error{'s' if n != 1 else ''}."
    if fixable:
        line += f"\n[*] {fixable} fixable with the `--fix` option."
    return line


def statistics(findings: Iterable[Finding]) -> str:
    """One line per code with its count, most frequent first."""
    counts = Counter((f.code, f.name) for f in findings)
    rows = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0][0]))
    width = max((len(str(c)) for c in counts.values()), default=1)
    return "".join(f"{n:>{width}}\t{code}\t{name}\n" for (code, name), n in rows)


def to_json(findings: Sequence[Finding]) -> str:
    """The public JSON document (see :mod:`gradtrace.findings`)."""
    return json.dumps(findings_document(findings), indent=2) + "\n"


def _escape_github(value: str, prop: bool = False) -> str:
    value = value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if prop:
        value = value.replace(":", "%3A").replace(",", "%2C")
    return value


def to_github(findings: Sequence[Finding]) -> str:
    """GitHub Actions workflow commands, one per finding."""
    level = {"error": "error", "warning": "warning", "info": "notice"}
    lines = []
    for f in findings:
        end = f",endLine={f.end_line}" if f.end_line and f.end_line != f.line else ""
        lines.append(
            f"::{level.get(f.severity, 'error')} file={_escape_github(f.path, True)},"
            f"line={f.line},col={f.column + 1}{end},title={f.code}::"
            f"{_escape_github(f'{f.code} {f.message}')}")
    return "".join(line + "\n" for line in lines)


def _rule_descriptors() -> list[dict]:
    """SARIF ``tool.driver.rules[]``: every code of the catalogue (:mod:`gradtrace.codes`)."""
    from gradtrace.codes import all_codes
    from gradtrace.docs import explain_code

    rules = []
    for c in all_codes():
        text = explain_code(c)
        rules.append({"id": c.code, "name": c.name, "shortDescription": {"text": c.summary},
                      "fullDescription": {"text": c.why or c.summary},
                      "help": {"text": text, "markdown": text},
                      "defaultConfiguration": {"level": SARIF_LEVEL[c.severity]}})
    return rules


def _artifact(path: str) -> dict:
    """A relative path is relative to ``%SRCROOT%`` (the folder checked from), so the URI does
    not depend on where the SARIF file is read; an absolute one is a ``file://`` URI."""
    import os
    from pathlib import Path

    if os.path.isabs(path):
        return {"uri": Path(path).as_uri()}
    return {"uri": quote(path.replace("\\", "/")), "uriBaseId": "%SRCROOT%"}


def _location(path: str, line: int, column: int, end_line: int | None = None,
              end_column: int | None = None) -> dict:
    region = {"startLine": line, "startColumn": column + 1}
    if end_line is not None:
        region["endLine"] = end_line
        if end_column is not None:
            region["endColumn"] = end_column + 1
    return {"physicalLocation": {"artifactLocation": _artifact(path), "region": region}}


def _sarif_fix(f: Finding) -> dict:
    """A SARIF ``fix``: the edits as replacements of regions (safety in the description)."""
    assert f.fix is not None
    return {"description": {"text": f"{f.fix.title} ({f.fix.safety} fix)"},
            "artifactChanges": [{"artifactLocation": _artifact(f.path), "replacements": [
                {"deletedRegion": {"startLine": e.line, "startColumn": e.column + 1,
                                   "endLine": e.end_line, "endColumn": e.end_column + 1},
                 "insertedContent": {"text": e.content}} for e in f.fix.edits]}]}


def to_sarif(findings: Sequence[Finding]) -> str:
    """SARIF 2.1.0 as GitHub code scanning reads it."""
    from pathlib import Path

    from gradtrace._version import __version__

    rules = _rule_descriptors()
    index = {r["id"]: i for i, r in enumerate(rules)}
    results = []
    for f in findings:
        res = {
            "ruleId": f.code,
            "level": SARIF_LEVEL.get(f.severity, "error"),
            "message": {"text": f.message},
            "locations": [_location(f.path, f.line, f.column, f.end_line, f.end_column)],
        }
        if f.code in index:
            res["ruleIndex"] = index[f.code]
        if f.fix is not None and f.fix.edits:
            res["fixes"] = [_sarif_fix(f)]
        if f.related:
            res["relatedLocations"] = [
                {"id": i, "message": {"text": r.message}, **_location(r.path, r.line, r.column)}
                for i, r in enumerate(f.related)]
        results.append(res)
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{"tool": {"driver": {"name": "gradtrace", "version": __version__,
                                      "rules": rules}},
                  "originalUriBaseIds": {"%SRCROOT%": {"uri": Path.cwd().as_uri() + "/"}},
                  "results": results}],
    }
    return json.dumps(doc, indent=2) + "\n"
