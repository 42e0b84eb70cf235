"""Parse once, walk statements once, dispatch to the rules' ``visit_<Node>`` methods.

See NOTE [triggers] in :mod:`gradtrace.lint.rule` for why expression visitors only run on
statements whose lines carry one of the rule's trigger words.
"""
from __future__ import annotations

import ast
import bisect
import logging
import os
import re
from typing import Callable, Iterable, Iterator

from gradtrace.errors import RuleError
from gradtrace.findings import Finding
from gradtrace.lint.context import FUNCTION_TYPES, Context, grad_mode_of
from gradtrace.lint.names import Imports
from gradtrace.lint.nodes import children
from gradtrace.lint.rule import Rule

LOG = logging.getLogger(__name__)

Visitor = Callable[[ast.AST, Context], Iterable[Finding]]
BODY_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")
NOQA_RE = re.compile(r"#\s*noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]*(?:[,\s]+[A-Z]+[0-9]*)*))?",
                     re.IGNORECASE)
WORD_RE = re.compile(r"\w+")


def _strict() -> bool:
    return os.environ.get("GRADTRACE_STRICT", "") not in ("", "0")


def _visitors(rule: Rule) -> dict[type, Visitor]:
    out: dict[type, Visitor] = {}
    for attr in dir(type(rule)):
        if attr.startswith("visit_"):
            node_type = getattr(ast, attr[6:], None)
            if isinstance(node_type, type) and issubclass(node_type, ast.AST):
                out[node_type] = getattr(rule, attr)
    return out


def _is_stmt_type(t: type) -> bool:
    return issubclass(t, (ast.stmt, ast.Module, ast.excepthandler, ast.match_case))


class FileChecker:
    """Checks one parsed file with a list of rule instances."""

    def __init__(self, path: str, text: str, tree: ast.Module, rules: list[Rule]) -> None:
        self.path = path
        self.text = text
        self.tree = tree
        self.imports = Imports()
        self._collect_top_imports(tree.body)
        self.ctx = Context(path, text, tree, self.imports)
        self.rules = [r for r in rules if any(t in text for t in r.triggers)]
        self.errors: list[RuleError] = []
        self.findings: list[Finding] = []
        self._dead: set[int] = set()
        self._stmt_visitors: dict[type, list[tuple[int, Visitor]]] = {}
        self._expr_visitors: list[dict[type, Visitor]] = []
        for i, rule in enumerate(self.rules):
            exprs: dict[type, Visitor] = {}
            for t, fn in _visitors(rule).items():
                if _is_stmt_type(t):
                    self._stmt_visitors.setdefault(t, []).append((i, fn))
                else:
                    exprs[t] = fn
            self._expr_visitors.append(exprs)
        self._line_rules = self._trigger_lines()
        self._combined: dict[frozenset[int], dict[type, list[tuple[int, Visitor]]]] = {}

    # -- set-up ------------------------------------------------------------------------------
    def _collect_top_imports(self, body: list[ast.stmt]) -> None:
        for s in body:
            if isinstance(s, (ast.Import, ast.ImportFrom)):
                self.imports.add(s)
            elif isinstance(s, (ast.If, ast.Try)):
                self._collect_top_imports(s.body)
                self._collect_top_imports(getattr(s, "orelse", []))
                for h in getattr(s, "handlers", []):
                    self._collect_top_imports(h.body)

    def _trigger_lines(self) -> dict[int, frozenset[int]]:
        """line -> indexes of rules with an expression visitor whose trigger is on that line."""
        words: dict[str, list[int]] = {}
        for i, rule in enumerate(self.rules):
            if not self._expr_visitors[i]:
                continue
            ws = set(rule.triggers)
            for local, qual in self.imports.aliases.items():
                if local != qual.rpartition(".")[2] and any(t in qual for t in rule.triggers):
                    ws.add(local)
            for w in ws:
                words.setdefault(w, []).append(i)
        if not words:
            return {}
        starts = [0] + [m.end() for m in re.finditer("\n", self.text)]
        per_line: dict[int, set[int]] = {}
        for w, idx in words.items():
            pos = self.text.find(w)
            while pos != -1:
                line = bisect.bisect_right(starts, pos)
                per_line.setdefault(line, set()).update(idx)
                pos = self.text.find(w, pos + len(w))
        return {k: frozenset(v) for k, v in per_line.items()}

    # -- running -----------------------------------------------------------------------------
    def run(self) -> list[Finding]:
        """All findings for this file (noqa not yet applied)."""
        if not self.rules:
            return []
        self._call(self._stmt_visitors.get(ast.Module, ()), self.tree)
        self._walk_body(self.tree.body)
        return self.findings

    def _call(self, visitors: Iterable[tuple[int, Visitor]], node: ast.AST) -> None:
        for i, fn in visitors:
            if i in self._dead:
                continue
            try:
                for f in fn(node, self.ctx) or ():
                    self.findings.append(f)
            except Exception as exc:  # noqa: BLE001 - a rule crash must not stop the run
                if _strict():
                    raise
                self._dead.add(i)
                self.errors.append(RuleError(self.rules[i].code, self.path, exc))
                LOG.debug("rule %s crashed on %s", self.rules[i].code, self.path, exc_info=exc)

    def _walk_body(self, body: list) -> None:
        for s in body:
            self._walk_stmt(s)

    def _walk_stmt(self, s: ast.AST) -> None:
        ctx = self.ctx
        ctx.stmts.append(s)  # type: ignore[arg-type]
        is_def = isinstance(s, FUNCTION_TYPES)
        pushed = 0
        try:
            if isinstance(s, (ast.Import, ast.ImportFrom)):
                self.imports.add(s)
            visitors = self._stmt_visitors.get(type(s))
            if visitors:
                self._call(visitors, s)
            if self._line_rules:
                self._walk_header(s)
            if is_def:
                ctx.grad_frames.append(
                    [(d, m) for d in s.decorator_list  # type: ignore[attr-defined]
                     if (m := grad_mode_of(d, self.imports))])
            elif isinstance(s, (ast.With, ast.AsyncWith)):
                for item in s.items:
                    mode = grad_mode_of(item.context_expr, self.imports)
                    if mode:
                        ctx.grad_frames[-1].append((s, mode))
                        pushed += 1
            for field in BODY_FIELDS:
                sub = getattr(s, field, None)
                if sub:
                    self._walk_body(sub)
        finally:
            if is_def:
                ctx.grad_frames.pop()
            for _ in range(pushed):
                ctx.grad_frames[-1].pop()
            ctx.stmts.pop()

    def _walk_header(self, s: ast.AST) -> None:
        first = getattr(s, "lineno", None)
        if first is None:
            return
        body = getattr(s, "body", None)
        if body and isinstance(body, list) and isinstance(body[0], ast.AST):
            last = max(first, body[0].lineno - 1)
            decorators = getattr(s, "decorator_list", None)
            if decorators:
                first = min(first, min(d.lineno for d in decorators))
        else:
            last = s.end_lineno  # type: ignore[attr-defined]
        hit: set[int] = set()
        lr = self._line_rules
        for line in range(first, last + 1):
            r = lr.get(line)
            if r:
                hit |= r
        if not hit:
            return
        key = frozenset(hit)
        table = self._combined.get(key)
        if table is None:
            table = {}
            for i in sorted(key):
                for t, fn in self._expr_visitors[i].items():
                    table.setdefault(t, []).append((i, fn))
            self._combined[key] = table
        for field, value in ast.iter_fields(s):
            if field in BODY_FIELDS:
                continue
            if isinstance(value, ast.AST):
                self._walk_expr(value, table)
            elif isinstance(value, list):
                for v in value:
                    if isinstance(v, ast.AST):
                        self._walk_expr(v, table)

    def _walk_expr(self, node: ast.AST, table: dict[type, list[tuple[int, Visitor]]]) -> None:
        exprs = self.ctx.exprs
        exprs.append(node)
        visitors = table.get(type(node))
        if visitors:
            self._call(visitors, node)
        for child in children(node):
            self._walk_expr(child, table)
        exprs.pop()


def noqa_filter(findings: list[Finding], lines: list[str]) -> Iterator[Finding]:
    """Drop findings whose line carries ``# noqa`` or ``# noqa: CODE[,PREFIX...]``."""
    cache: dict[int, tuple[str, ...] | None] = {}
    for f in findings:
        if f.line not in cache:
            text = lines[f.line - 1] if 0 < f.line <= len(lines) else ""
            m = NOQA_RE.search(text) if "#" in text else None
            if m is None:
                cache[f.line] = None
            else:
                codes = m.group("codes")
                cache[f.line] = tuple(c.upper() for c in re.split(r"[,\s]+", codes) if c) \
                    if codes else ()
        codes = cache[f.line]
        if codes is None or (codes and not any(f.code.startswith(c) for c in codes)):
            yield f
