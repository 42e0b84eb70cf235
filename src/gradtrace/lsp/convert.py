"""Findings as LSP diagnostics, fixes and ``# noqa`` as code actions (lsprotocol types only).

Positions: gradtrace's lines are 1-based and its columns count code points; LSP lines are
0-based and its columns count the negotiated position encoding's units (UTF-16 unless the
client offers another). Lines end where Python's tokenizer ends them (\\n, \\r\\n, \\r), which
is also where LSP ends them (``str.splitlines`` would also split at form feeds).
"""
from __future__ import annotations

import io
import os
import tokenize
from typing import Sequence

from lsprotocol import types

from gradtrace.findings import Edit, Finding
from gradtrace.lint.context import LINE_END, source_lines
from gradtrace.lint.engine import NOQA_RE

SOURCE = "gradtrace"
FIX_ALL_KIND = f"{types.CodeActionKind.SourceFixAll.value}.gradtrace"
SEVERITY = {"error": types.DiagnosticSeverity.Error, "warning": types.DiagnosticSeverity.Warning,
            "info": types.DiagnosticSeverity.Information}
ENGINE = ("GT000", "GT001")  # not rules: no noqa (the engine reports them regardless)


class Positions:
    """Converts gradtrace's (1-based line, code-point column) to LSP positions of one text."""

    def __init__(self, text: str, encoding: str = "utf-16") -> None:
        self.lines = source_lines(text)
        self.encoding = str(encoding)

    def units(self, line: str) -> int:
        if self.encoding == "utf-8":
            return len(line.encode("utf-8"))
        if self.encoding == "utf-32":
            return len(line)
        return len(line.encode("utf-16-le")) // 2

    def position(self, line: int, column: int | None) -> types.Position:
        """``column`` None: the end of the line."""
        if line > len(self.lines):
            return types.Position(line=len(self.lines), character=0)
        text = self.lines[line - 1] if line >= 1 else ""
        col = len(text) if column is None else min(max(column, 0), len(text))
        return types.Position(line=max(line - 1, 0), character=self.units(text[:col]))

    def range(self, line: int, column: int, end_line: int | None, end_column: int | None
              ) -> types.Range:
        """A finding's range; without an end, to the end of its line (at least one character)."""
        start = self.position(line, column)
        if end_line is None or (end_line, end_column or 0) < (line, column):
            end = self.position(line, None)
        else:
            end = self.position(end_line, end_column)
        if end == start and line <= len(self.lines) and column < len(self.lines[line - 1]):
            end = self.position(line, column + 1)
        return types.Range(start=start, end=end)

    def edit(self, e: Edit) -> types.TextEdit:
        return types.TextEdit(range=types.Range(start=self.position(e.line, e.column),
                                                end=self.position(e.end_line, e.end_column)),
                              new_text=e.content)


def diagnostic(f: Finding, uri: str, pos: Positions, related: bool = True,
               docs: str | None = None) -> types.Diagnostic:
    """One finding as a diagnostic: code, link to the rule's docs, severity, related places."""
    info = None
    if related and f.related:
        info = []
        for r in f.related:
            where = uri if r.path == f.path else _file_uri(r.path)
            rng = pos.range(r.line, r.column, None, None) if where == uri else types.Range(
                start=types.Position(line=max(r.line - 1, 0), character=0),
                end=types.Position(line=max(r.line - 1, 0), character=0))
            info.append(types.DiagnosticRelatedInformation(
                location=types.Location(uri=where, range=rng), message=r.message))
    message = f.message
    if f.fix is not None:
        unsafe = " (unsafe fix)" if f.fix.edits and f.fix.safety == "unsafe" else ""
        message += f"\nhelp: {f.fix.title}{unsafe}"
    return types.Diagnostic(
        range=pos.range(f.line, f.column, f.end_line, f.end_column), message=message,
        severity=SEVERITY.get(f.severity, types.DiagnosticSeverity.Error), code=f.code,
        code_description=types.CodeDescription(href=docs) if docs else None,
        source=SOURCE, related_information=info)


def _file_uri(path: str) -> str:
    from pathlib import Path

    return Path(os.path.abspath(path)).as_uri()


def quick_fix(f: Finding, diag: types.Diagnostic, pos: Positions, edit: WorkspaceEditMaker
              ) -> types.CodeAction | None:
    """The rule's fix as a quick fix (an unsafe one says so and is never preferred)."""
    if f.fix is None or not f.fix.edits:
        return None
    unsafe = f.fix.safety == "unsafe"
    return types.CodeAction(
        title=f"{f.fix.title} ({f.code}{', unsafe' if unsafe else ''})",
        kind=types.CodeActionKind.QuickFix, diagnostics=[diag], is_preferred=not unsafe,
        edit=edit([pos.edit(e) for e in f.fix.edits]))


def comment_lines(text: str) -> set[int] | None:
    """1-based lines after which a comment may go (they end in NEWLINE or NL; not inside a
    string, not continued by a backslash). None when the text does not tokenize."""
    out: set[int] = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in (tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT):
                out.add(tok.start[0])
    except (tokenize.TokenError, SyntaxError, ValueError):
        return None
    return out


def noqa(f: Finding, diag: types.Diagnostic, pos: Positions, allowed: set[int] | None,
         edit: WorkspaceEditMaker) -> types.CodeAction | None:
    """``# noqa: GTnnn`` on the finding's line (added to an existing ``# noqa: ...``)."""
    if f.code in ENGINE or allowed is None or f.line not in allowed or f.line > len(pos.lines):
        return None
    line = pos.lines[f.line - 1]
    m = NOQA_RE.search(line) if "#" in line else None
    if m is not None and not m.group("codes"):
        return None  # a bare noqa already silences everything
    if m is not None:
        col, text = m.end("codes"), f", {f.code}"
    else:
        col = len(line.rstrip())
        text = f"{'  ' if col else ''}# noqa: {f.code}"
        if col < len(line):  # replace trailing blanks
            return _noqa_action(f, diag, edit, types.TextEdit(
                range=types.Range(start=pos.position(f.line, col), end=pos.position(f.line, None)),
                new_text=text))
    at = pos.position(f.line, col)
    return _noqa_action(f, diag, edit, types.TextEdit(range=types.Range(start=at, end=at),
                                                      new_text=text))


def _noqa_action(f: Finding, diag: types.Diagnostic, edit: WorkspaceEditMaker,
                 te: types.TextEdit) -> types.CodeAction:
    return types.CodeAction(title=f"Ignore {f.code} on this line (# noqa)",
                            kind=types.CodeActionKind.QuickFix, diagnostics=[diag],
                            edit=edit([te]))


def whole_text_edit(old: str, new: str, encoding: str) -> types.TextEdit:
    """One edit turning ``old`` into ``new``: the changed middle only (common ends kept)."""
    start = 0
    limit = min(len(old), len(new))
    while start < limit and old[start] == new[start]:
        start += 1
    if 0 < start < len(old) and old[start - 1:start + 1] == "\r\n":
        start -= 1  # a position cannot fall inside a line end
    end = 0
    while end < limit - start and old[len(old) - 1 - end] == new[len(new) - 1 - end]:
        end += 1
    if 0 < end < len(old) and old[len(old) - 1 - end:len(old) + 1 - end] == "\r\n":
        end -= 1
    pos = Positions(old, encoding)
    a, b = _line_col(old, start), _line_col(old, len(old) - end)
    return types.TextEdit(range=types.Range(start=pos.position(*a), end=pos.position(*b)),
                          new_text=new[start:len(new) - end])


def _line_col(text: str, offset: int) -> tuple[int, int]:
    """(1-based line, code-point column) of an offset, lines ending as the tokenizer ends them."""
    line, last = 1, 0
    for m in LINE_END.finditer(text, 0, offset):
        if m.end() > offset:  # inside \r\n
            break
        line, last = line + 1, m.end()
    return line, offset - last


class WorkspaceEditMaker:
    """Builds a WorkspaceEdit for one document version, as the client can take it."""

    def __init__(self, uri: str, version: int | None, document_changes: bool) -> None:
        self.uri = uri
        self.version = version
        self.document_changes = document_changes

    def __call__(self, edits: Sequence[types.TextEdit]) -> types.WorkspaceEdit:
        if self.document_changes:
            return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(
                text_document=types.OptionalVersionedTextDocumentIdentifier(
                    uri=self.uri, version=self.version),
                edits=list(edits))])
        return types.WorkspaceEdit(changes={self.uri: list(edits)})


def wanted(kind: str, only: Sequence[str] | None) -> bool:
    """Whether a code action of ``kind`` answers a request limited to ``only`` kinds."""
    if not only:
        return True
    return any(kind == k or kind.startswith(f"{k}.") for k in map(str, only))
