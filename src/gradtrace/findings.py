"""The one findings model shared by the static checker and the runtime.

A :class:`Finding` is a frozen value. Inside gradtrace lines are 1-based and columns are
0-based (as in :mod:`ast`); the public JSON schema and the text/SARIF formats use 1-based
columns, converted only in :meth:`Finding.to_dict` / :meth:`Finding.from_dict` and the
formatters.

JSON schema (public interface, version 1)::

    {"tool": "gradtrace", "version": "...",
     "findings": [{"code", "name", "severity", "message", "path", "line", "column",
                   "end_line", "end_column", "related": [{"path", "line", "column", "message"}],
                   "fix": null | {"title", "safety", "edits": [{"line", "column", "end_line",
                                                               "end_column", "content"}]},
                   "source": "static" | "runtime" | "static+runtime"}]}

``"static+runtime"``: a static finding that a runtime symptom confirmed (NOTE [ranking] in
:mod:`gradtrace.runtime.fuse`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Literal

Severity = Literal["error", "warning", "info"]
Safety = Literal["safe", "unsafe"]
SEVERITIES: tuple[str, ...] = ("error", "warning", "info")
SAFETIES: tuple[str, ...] = ("safe", "unsafe")


@dataclass(frozen=True)
class Edit:
    """Replace the text between two positions (line 1-based, column 0-based, in characters)."""

    line: int
    column: int
    end_line: int
    end_column: int
    content: str

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.line, "column": self.column + 1, "end_line": self.end_line,
                "end_column": self.end_column + 1, "content": self.content}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Edit:
        return cls(d["line"], d["column"] - 1, d["end_line"], d["end_column"] - 1, d["content"])


@dataclass(frozen=True)
class Fix:
    """A suggested change: a title, its safety, and the text edits that make it."""

    title: str
    safety: Safety = "safe"
    edits: tuple[Edit, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"title": self.title, "safety": self.safety,
                "edits": [e.to_dict() for e in self.edits]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Fix:
        return cls(d["title"], d.get("safety", "safe"),
                   tuple(Edit.from_dict(e) for e in d.get("edits", ())))


@dataclass(frozen=True)
class Related:
    """Another place that explains a finding, e.g. "the value left the graph here"."""

    path: str
    line: int
    message: str
    column: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "column": self.column + 1,
                "message": self.message}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Related:
        return cls(d["path"], d["line"], d["message"], max(d.get("column", 1) - 1, 0))


@dataclass(frozen=True)
class Finding:
    """One problem: what (code, name, message), where, why (related), and how to fix it."""

    code: str
    name: str
    message: str
    path: str
    line: int
    column: int = 0
    end_line: int | None = None
    end_column: int | None = None
    severity: Severity = "error"
    related: tuple[Related, ...] = ()
    fix: Fix | None = None
    source: Literal["static", "runtime", "static+runtime"] = "static"

    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.path, self.line, self.column, self.code)

    def to_dict(self) -> dict[str, Any]:
        """The public JSON shape (1-based lines and columns)."""
        return {
            "code": self.code,
            "name": self.name,
            "severity": self.severity,
            "message": self.message,
            "path": self.path,
            "line": self.line,
            "column": self.column + 1,
            "end_line": self.end_line if self.end_line is not None else self.line,
            "end_column": (self.end_column if self.end_column is not None else self.column) + 1,
            "related": [r.to_dict() for r in self.related],
            "fix": self.fix.to_dict() if self.fix else None,
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Finding:
        """Inverse of :meth:`to_dict`."""
        return cls(
            code=d["code"], name=d["name"], message=d["message"], path=d["path"],
            line=d["line"], column=d.get("column", 1) - 1,
            end_line=d.get("end_line"),
            end_column=d["end_column"] - 1 if d.get("end_column") is not None else None,
            severity=d.get("severity", "error"),
            related=tuple(Related.from_dict(r) for r in d.get("related", ())),
            fix=Fix.from_dict(d["fix"]) if d.get("fix") else None,
            source=d.get("source", "static"),
        )


def findings_document(findings: Iterable[Finding]) -> dict[str, Any]:
    """The top-level JSON document: ``{"tool", "version", "findings"}``."""
    from gradtrace._version import __version__

    return {"tool": "gradtrace", "version": __version__,
            "findings": [f.to_dict() for f in findings]}

