"""Parse once, walk statements once, dispatch to the rules' ``visit_<Node>`` methods.

See NOTE [triggers] in :mod:`gradtrace.lint.rule` for why expression visitors only run on
statements whose lines carry one of the rule's trigger words. The words are searched in the
code only, never in comments or strings (NOTE [code text] in :mod:`gradtrace.lint.code_text`).

# NOTE [quiet subtrees]
Most statements of a file hold no trigger word at all (87% on the benchmark corpus: the
methods of a model class rarely mention ``backward`` or ``requires_grad``). When no line of a
statement (decorators and bodies included) holds one, no gated statement visitor and no
expression visitor can run anywhere inside it, so the walker skips the whole subtree (the words
of a rule whose only visitor is ``visit_Module`` do not count: nothing of it runs inside). Three
things stop that: an active rule with ``gate_statements = False`` and a visitor of a statement
type that spells no keyword (it must see every such statement; the lines of a keyword such as
``class`` or ``for`` are hit lines instead: NOTE [keyword lines] in
:mod:`gradtrace.lint.visitors`); one with ``gate_statements = "function"``, outside
functions (unless the rule has ``function_requires``: it finds nothing there,
NOTE [function requires] in :mod:`gradtrace.lint.function_gate`) and in a function whose lines
hold its words (only a nested def, and a statement without a body of a type no such rule
visits, are skipped there); and imports, which the walk records in order: a quiet subtree
whose lines mention ``import`` is still searched for import statements.

# NOTE [gated lines]
A statement of fewer than :data:`SHORT` lines finds the rules with ``gate_statements = True``
whose trigger lines it holds in a per-file table (line -> rules), and its visitors in a memo
per visitor list and rule set: a few look-ups instead of one bisection per gated visitor. A
longer statement (a class, a function) bisects rule by rule. The same visitors, same order.
"""
from __future__ import annotations

import ast
import bisect
import logging
import os
from functools import lru_cache
from typing import Callable, Iterable, Sequence

from gradtrace.env import strict
from gradtrace.errors import RuleError
from gradtrace.findings import Finding
from gradtrace.lint.context import FUNCTION_TYPES, Context, grad_mode_of
from gradtrace.lint.engine_setup import CheckerSetup
from gradtrace.lint.names import Imports
from gradtrace.lint.noqa import NOQA_RE, noqa_filter  # noqa: F401 - the engine's API
from gradtrace.lint.rule import Rule
from gradtrace.lint.visitors import Shape as _Shape, reversed_fields as _reversed_fields
from gradtrace.lint.visitors import shape as _shape
from gradtrace.lint.words import holds as _holds

LOG = logging.getLogger(__name__)

Visitor = Callable[[ast.AST, Context], Iterable[Finding]]
SHORT = 8  # NOTE [gated lines]: statements of fewer lines look their gated rules up per line


# the leaves of expressions (no child node: NOTE [leaf fields] in gradtrace.lint.nodes)
_LEAVES = frozenset({ast.Name, ast.Constant})


def _node_types(t: type = ast.AST) -> set[type]:
    out = {t}
    for sub in t.__subclasses__():
        out |= _node_types(sub)
    return out


_NODE_TYPES = frozenset(_node_types())
_KNOWN = _NODE_TYPES | {type(None)}
_REVERSED: dict[type, tuple[str, ...]] = {t: _reversed_fields(t) for t in _NODE_TYPES}


@lru_cache(maxsize=64)
def _walked(skip: frozenset[type]) -> frozenset[type]:
    """The node types an expression walk pushes when it leaves out ``skip``
    (NOTE [walked types]).

    # NOTE [walked types]
    A child field holds a node, a list of them, or None; the expression walk asked
    ``isinstance(x, ast.AST)`` of each value, then whether its type is left out. The node
    types of :mod:`ast` known at import are looked up in one set instead; a value of another
    type than those and None (a node of a class made later) is asked the old question
    (:func:`_other`): the same children, in the same order."""
    return _NODE_TYPES - skip


def _other(x: object, skip: frozenset[type]) -> bool:
    """Whether a child outside :data:`_NODE_TYPES` is walked (NOTE [walked types])."""
    return isinstance(x, ast.AST) and x.__class__ not in skip


class FileChecker(CheckerSetup):
    """Checks one parsed file with a list of rule instances."""

    def __init__(self, path: str, text: str, tree: ast.Module,
                 rules: Sequence[Rule | type[Rule]], code: str | None = None) -> None:
        """``rules``: instances, or classes (only those active in the file are made)."""
        self.path = path
        self.text = text
        self.tree = tree
        self.imports = Imports()
        self._collect_top_imports(tree.body)
        self.imports.add_callable_aliases(tree.body)
        self.ctx = Context(path, text, tree, self.imports, code)
        self.errors: list[RuleError] = []
        self.findings: list[Finding] = []
        self._dead: set[int] = set()
        self._stmt_visitors: dict[type, list[tuple[int, Visitor]]] = {}
        self._gated_types: set[type] = set()  # statement types with a line-gated visitor
        self._expr_visitors: list[dict[type, Visitor]] = []
        self._combined: dict[frozenset[int], tuple[dict[type, list[tuple[int, Visitor]]],
                                                   frozenset[type]]] = {}
        self.rules: list[Rule] = []
        self._line_rules: dict[int, frozenset[int]] = {}
        self._rule_lines: list[list[int]] = []  # per active rule: sorted trigger lines
        self._hit_lines: list[int] = []  # every line holding a trigger word, sorted
        self._import_lines: list[int] = []  # lines mentioning "import", sorted
        self._skip_quiet = False  # NOTE [quiet subtrees]
        self._line_gated: list[bool] = []  # per active rule: gate_statements is True
        self._fn_lines: list[int] = []  # lines with words of gate_statements="function" rules
        self._fn_open: list[bool] = [False]  # per enclosing def: must its statements be seen
        self._fn_rules: list[tuple[int, list[int]]] = []  # "function" rules: sorted lines
        self._fn_types: set[type] = set()  # statement types "function" rules visit
        self._fn_ids: frozenset[int] = frozenset()  # the "function" rules
        self._leaf: tuple[dict[type, list[int] | None], ...] = ({}, {})  # NOTE [leaf lines]
        self._fn_closed: list[dict[type, list] | None] = [None]  # per def: visitors of the
        self._closed_tables: dict[frozenset[int], dict[type, list]] = {}  # rules open there
        self._gated_by_line: dict[int, frozenset[int]] = {}  # NOTE [gated lines]
        self._gated_memo: dict[tuple[int, frozenset[int] | None], list] = {}
        self._activate(rules)

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
                if strict():
                    raise
                self._dead.add(i)
                self.crashed(self.rules[i].code, exc, node)

    def crashed(self, code: str, exc: BaseException, node: ast.AST | None = None) -> None:
        """Record a crash of rule ``code`` (or of the engine) on this file: an error for the
        exit code and a GT002 finding at the node it was visiting (NOTE [internal errors])."""
        self.errors.append(RuleError(code, self.path, exc))
        line = getattr(node, "lineno", None)
        self.findings.append(internal_error(code, self.path, exc, line or 1,
                                            self.ctx.column(node) if line else 0))
        LOG.debug("rule %s crashed on %s", code, self.path, exc_info=exc)

    def _walk_body(self, body: list) -> None:
        """Walk the statements of a body, skipping the quiet ones (NOTE [quiet subtrees])."""
        if not self._skip_quiet:
            for s in body:
                self._walk_stmt(s)
            return
        hits, imports, open_ = self._hit_lines, self._import_lines, self._fn_open[-1]
        fn_types, leaf = self._fn_types, self._leaf[open_]
        n = len(hits)
        for s in body:  # inlined: most statements of a walked body are quiet
            first = getattr(s, "lineno", None)  # a match case has none
            if first is not None:
                cls = s.__class__
                if not open_ or cls in FUNCTION_TYPES or (
                        cls not in fn_types and not _shape(cls).bodies):
                    decorators = getattr(s, "decorator_list", None)
                    if decorators:
                        first = decorators[0].lineno
                    last = s.end_lineno
                    k = bisect.bisect_left(hits, first)
                    if k == n or hits[k] > last:
                        if _holds(imports, first, last):
                            self._add_imports(s, _shape(cls))
                        continue
                lines = leaf[cls] if cls in leaf else self._leaf_lines(cls, open_)
                if lines is not None and not _holds(lines, first, s.end_lineno):
                    continue  # NOTE [leaf lines]
            self._walk_stmt(s)

    def _leaf_lines(self, t: type, open_: bool) -> list[int] | None:
        """The sorted lines where a statement of type ``t`` without a body may be visited or
        have its expressions walked, in a function open (``open_``) to the rules with
        ``gate_statements = "function"`` or closed to all of them; None: any line
        (NOTE [leaf lines]).

        # NOTE [leaf lines]
        A statement without a body (an assignment, a call, a ``return``) that holds a trigger
        word may still hold none of the words of the rules that would look at it: the words of
        a gated rule that visits other statement types, of a ``visit_Module`` rule... Nothing
        runs on it unless one of its lines holds a word of a rule with expression visitors, or
        of a gated rule visiting its type; the walker skips it otherwise (an import is
        recorded, and a type that a rule with ``gate_statements`` False visits is always
        walked: None; so is one that a ``"function"`` rule visits, in a function whose lines
        hold the words of such a rule: NOTE [quiet subtrees]).
        """
        shape = _shape(t)
        got: list[int] | None = None
        if not shape.bodies and not shape.is_import:
            visitors = [i for i, _ in self._stmt_visitors.get(t, ())
                        if open_ or i not in self._fn_ids]  # closed: not called
            if all(self._line_gated[i] for i in visitors):
                lines = set(self._line_rules)
                for i in visitors:
                    lines.update(self._rule_lines[i])
                got = sorted(lines)
        self._leaf[open_][t] = got
        return got

    def _walk_stmt(self, s: ast.AST) -> None:
        ctx = self.ctx
        cls = s.__class__
        shape = _shape(cls)
        ctx.stmts.append(s)  # type: ignore[arg-type]
        pushed = 0
        try:
            if shape.is_import:
                self.imports.add(s)  # type: ignore[arg-type]
            visitors = self._stmt_visitors.get(cls)
            if visitors:
                table = self._fn_closed[-1]  # NOTE [triggers]: gate_statements="function"
                if table is not None and not shape.is_def:
                    got = table.get(cls)
                    if got is None:  # the visitors of the rules open in this def, once per type
                        got = table[cls] = [v for v in visitors if v[0] not in table[None]]
                    visitors = got
                if visitors:
                    self._call(self._gated(visitors, s, shape) if cls in self._gated_types
                               else visitors, s)
            lr = self._line_rules
            if lr:  # a one-line statement without a body and without a hit: nothing to walk
                first = getattr(s, "lineno", None)
                if shape.bodies or first is None or lr.get(first) or \
                        s.end_lineno != first:  # type: ignore[attr-defined]
                    self._walk_header(s, shape)
            if shape.is_def:
                first, last = self._span(s, shape)
                self._fn_open.append(_holds(self._fn_lines, first, last))
                closed = frozenset(i for i, lines in self._fn_rules
                                   if not _holds(lines, first, last)) if self._fn_rules else None
                self._fn_closed.append(self._closed_tables.setdefault(
                    closed, {None: closed}) if closed else None)  # type: ignore[dict-item]
                decorators = s.decorator_list  # type: ignore[attr-defined]
                ctx.grad_frames.append(
                    [(d, m) for d in decorators if (m := grad_mode_of(d, self.imports))]
                    if decorators else [])
            elif shape.is_with:
                for item in s.items:  # type: ignore[attr-defined]
                    mode = grad_mode_of(item.context_expr, self.imports)
                    if mode:
                        ctx.grad_frames[-1].append((s, mode))
                        pushed += 1
            for field in shape.bodies:
                sub = getattr(s, field)
                if sub:
                    self._walk_body(sub)
        finally:
            if shape.is_def:
                ctx.grad_frames.pop()
                self._fn_open.pop()
                self._fn_closed.pop()
            if pushed:
                del ctx.grad_frames[-1][-pushed:]
            ctx.stmts.pop()

    @staticmethod
    def _span(s: ast.AST, shape: _Shape) -> tuple[int, int]:
        """First and last line of a statement, decorators included."""
        first = s.lineno  # type: ignore[attr-defined]
        if shape.is_def or shape.is_class:
            for d in s.decorator_list:  # type: ignore[attr-defined]
                first = min(first, d.lineno)
        return first, s.end_lineno  # type: ignore[attr-defined]

    def _add_imports(self, s: ast.AST, shape: _Shape) -> None:
        """Record the imports in a skipped subtree, in walk order (NOTE [quiet subtrees])."""
        if shape.is_import:
            self.imports.add(s)  # type: ignore[arg-type]
        for field in shape.bodies:
            for child in getattr(s, field):
                self._add_imports(child, _shape(type(child)))

    def _gated(self, visitors: list[tuple[int, Visitor]], s: ast.AST, shape: _Shape
               ) -> list[tuple[int, Visitor]]:
        """Statement visitors of rules with a trigger word inside the statement (all its lines).

        Rules with ``gate_statements = False`` (the default) see every statement of an active file.
        """
        first = getattr(s, "lineno", None)
        if first is None:
            return visitors
        last = getattr(s, "end_lineno", first)
        if shape.is_def or shape.is_class:
            for d in s.decorator_list:  # type: ignore[attr-defined]
                first = min(first, d.lineno)
        if last - first < SHORT:  # NOTE [gated lines]
            by_line = self._gated_by_line
            hit: frozenset[int] | None = by_line.get(first)
            for line in range(first + 1, last + 1):
                r = by_line.get(line)
                if r is not None:
                    hit = r if hit is None else hit | r
            memo_key = (id(visitors), hit)
            got = self._gated_memo.get(memo_key)
            if got is None:
                line_gated = self._line_gated
                got = self._gated_memo[memo_key] = [
                    v for v in visitors if not line_gated[v[0]] or (hit and v[0] in hit)]
            return got
        out = []
        rule_lines, line_gated = self._rule_lines, self._line_gated
        for i, fn in visitors:
            if line_gated[i]:
                lines = rule_lines[i]
                k = bisect.bisect_left(lines, first)
                if k == len(lines) or lines[k] > last:
                    continue
            out.append((i, fn))
        return out

    def _walk_header(self, s: ast.AST, shape: _Shape) -> None:
        first = getattr(s, "lineno", None)
        if first is None:
            return
        if shape.bodies:
            sub = getattr(s, shape.bodies[0])
            head = sub[0] if sub else None
            line = getattr(head, "lineno", None) or getattr(getattr(head, "pattern", None),
                                                            "lineno", first + 1)
            last = max(first, line - 1)
            if shape.is_def or shape.is_class:
                for d in s.decorator_list:  # type: ignore[attr-defined]
                    first = min(first, d.lineno)
        else:
            last = s.end_lineno  # type: ignore[attr-defined]
        lr = self._line_rules
        if first == last:  # most statements: one line, its rules as they are
            hit: frozenset[int] | None = lr.get(first)
        else:
            hit = frozenset()
            for line in range(first, last + 1):
                r = lr.get(line)
                if r:
                    hit = hit | r
        if not hit:
            return
        key = hit
        got = self._combined.get(key)
        if got is None:
            table: dict[type, list[tuple[int, Visitor]]] = {}
            for i in sorted(key):
                for t, fn in self._expr_visitors[i].items():
                    table.setdefault(t, []).append((i, fn))
            got = self._combined[key] = (table, _LEAVES.difference(table))
        table, skip = got
        for field in shape.headers:
            value = getattr(s, field, None)
            if value is None:
                continue
            if value.__class__ is list:
                for v in value:
                    if isinstance(v, ast.AST):
                        self._walk_expr(v, table, skip)
            elif isinstance(value, ast.AST):
                self._walk_expr(value, table, skip)

    def _walk_expr(self, node: ast.AST, table: dict[type, list[tuple[int, Visitor]]],
                   skip: frozenset[type] = frozenset()) -> None:
        """Visit an expression tree in pre-order, keeping ``ctx.exprs`` (the enclosing
        expressions) up to date. Iterative: a chain of 1,000 calls nests 2,000 deep, past
        Python's recursion limit (NOTE [internal errors]). Children of the ``skip`` types
        (leaves no visitor of ``table`` looks at: a third of the nodes) are not visited: a
        leaf is nobody's enclosing expression, so no visit sees a difference."""
        exprs = self.ctx.exprs
        base = len(exprs)
        stack: list[tuple[ast.AST, int]] = [(node, base)]
        pop, push = stack.pop, stack.append
        walked = _walked(skip)
        fields = _REVERSED.get
        while stack:
            n, depth = pop()
            del exprs[depth:]
            exprs.append(n)
            cls = n.__class__
            visitors = table.get(cls)
            if visitors:
                self._call(visitors, n)
            depth += 1
            fs = fields(cls)
            for f in _reversed_fields(cls) if fs is None else fs:  # children last to first
                v = getattr(n, f, None)
                c = v.__class__
                if c is list:
                    for x in reversed(v):
                        c = x.__class__
                        if c in walked or (c not in _KNOWN and _other(x, skip)):
                            push((x, depth))
                elif c in walked or (c not in _KNOWN and _other(v, skip)):
                    push((v, depth))
        del exprs[base:]


def internal_error(code: str, path: str, exc: BaseException, line: int = 1,
                   column: int = 0) -> Finding:
    """The GT002 finding for a crash of rule ``code`` (or ``engine``) on ``path``.

    # NOTE [internal errors]
    A rule that raises on a file must not cost the findings of the other rules or of the other
    files: the engine catches it, stops running that rule on that file, and reports it where
    the user sees findings (``GT002 internal error in GT201 at gradtrace/.../_deps.py:140``,
    at the line the rule was visiting), in the CLI, the flake8 plugin and the editor alike;
    the CLI exits 2 at the end. The engine's own walks are iterative, so no nesting that
    ``ast.parse`` accepts can exhaust the recursion limit there; a parse that does is GT000.
    """
    where = "?"
    tb = exc.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename.replace(os.sep, "/")
        if "/gradtrace/" in name:
            where = f"gradtrace/{name.rpartition('/gradtrace/')[2]}:{tb.tb_lineno}"
        tb = tb.tb_next
    what = "the engine" if code == "engine" else code
    detail = str(exc).splitlines()[0][:200] if str(exc) else ""
    message = (f"internal error in {what} at {where}: {type(exc).__name__}"
               f"{': ' + detail if detail else ''}; {what} was not run on the rest of this file "
               "(please report it)")
    return Finding(code="GT002", name="internal-error", message=message, path=path,
                   line=line, column=column)
