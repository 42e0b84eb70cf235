"""Data-flow facts of one function (or module body), in one place that rules query.

A :class:`Scope` answers, for the statements of one function (nested defs and classes
excluded):

* which names are bound where, and to what *kind* of value (:data:`KINDS`): a tensor that may
  be on the graph, a Python number, a NumPy array, a detached tensor, a new leaf tensor, a
  module, a parameter, a parameter iterator, an optimizer, or ``None`` returned by a method;
* which statements run under ``no_grad`` / ``inference_mode`` / ``set_grad_enabled(False)``;
* inside which loops each statement sits, in source order;
* the method calls made on each receiver (``opt.zero_grad()``, ``loss.backward()``, ...).

It is built lazily, once per function, the first time a rule asks (``ctx.scope()``).
The analysis is flow-insensitive within a statement and ordered by source position: the value
of a name at a line is its last binding at or before that line.
"""
from __future__ import annotations

import ast
import bisect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

from gradtrace.lint.grad_modes import FUNCTION_TYPES, LOOP_TYPES, disabling_node, grad_mode_of
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import BODY_FIELDS, walk
from gradtrace.lint.flow_kinds import (  # noqa: F401 - re-exported: the kinds and their tables
    GRAPH, NUMBER, NUMPY, DETACHED, LEAF, MODULE, PARAMETER, PARAMS, OPTIMIZER, NONE, KINDS,
    SAME_KIND, NUMPY_FUNCS, FACTORY_FUNCS, COPY_FUNCS, NEW_TENSOR_FUNCS, ScopeKinds)

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


@dataclass(frozen=True)
class Binding:
    """One assignment of a name: where, to what, and the kind of the value."""

    name: str
    stmt: ast.stmt
    value: ast.expr | None
    kind: str | None
    line: int
    no_grad: bool


@dataclass(frozen=True)
class MethodCall:
    """A call ``<receiver>.<method>(...)`` with the receiver's dotted spelling."""

    receiver: str
    method: str
    call: ast.Call
    stmt: ast.stmt


class Scope(ScopeKinds):
    """Facts of one function or module body. Built once; read-only afterwards."""

    def __init__(self, node: ast.AST, ctx: Context) -> None:
        self.node = node
        self.ctx = ctx
        self.stmts: list[ast.stmt] = []                       # source order (pre-order)
        self.loops: dict[int, tuple[ast.stmt, ...]] = {}     # id(stmt) -> enclosing loops
        self.no_grad: dict[int, ast.AST] = {}                # id(stmt) -> disabling with/def
        self.branches: dict[int, tuple[tuple[int, bool], ...]] = {}  # id(stmt) -> if arms
        self.cases: dict[int, tuple[tuple[int, int], ...]] = {}  # id(stmt) -> match cases
        # built on first use (NOTE [lazy scope]): bindings; stmt_of, loads, method_calls
        self._bindings: dict[str, list[Binding]] | None = None
        self._stmt_of: dict[int, ast.stmt] | None = None      # id(expr) -> its statement
        self._loads: dict[str, list[ast.Name]] = {}
        self._method_calls: list[MethodCall] = []
        self._by_method: dict[str, list[MethodCall]] | None = None
        self._calls: dict[int, list[ast.Call]] = {}           # id(stmt) -> its own calls
        self._lines: dict[str, tuple[int, list[int] | None]] = {}  # name -> (count, lines)
        modes: list[tuple[ast.AST, str]] = []
        if isinstance(node, FUNCTION_TYPES):
            modes = [(d, m) for d in node.decorator_list if (m := grad_mode_of(d, ctx.imports))]
        body = node.body if isinstance(node, (ast.Module, *FUNCTION_TYPES)) else []
        self._walk(body, (), modes)

    # -- building ----------------------------------------------------------------------------
    def _walk(self, body: list[ast.stmt], loops: tuple[ast.stmt, ...],
              modes: list[tuple[ast.AST, str]], branch: tuple[tuple[int, bool], ...] = (),
              cases: tuple[tuple[int, int], ...] = ()) -> None:
        for s in body:
            self.stmts.append(s)
            self.loops[id(s)] = loops
            if branch:
                self.branches[id(s)] = branch
            if cases:
                self.cases[id(s)] = cases
            off = disabling_node(modes)
            if off is not None:
                self.no_grad[id(s)] = off
            if isinstance(s, (*FUNCTION_TYPES, ast.ClassDef)):
                continue
            inner = modes
            if isinstance(s, (ast.With, ast.AsyncWith)):
                extra = [(s, m) for it in s.items if (m := grad_mode_of(it.context_expr,
                                                                         self.ctx.imports))]
                inner = modes + extra
            sub_loops = loops + (s,) if isinstance(s, LOOP_TYPES) else loops
            truth = static_truth(s.test, self.ctx) if isinstance(s, ast.If) else None
            for field in ("body", "orelse", "finalbody"):
                sub = getattr(s, field, None)
                if sub and truth is not (field == "orelse"):  # a branch PyTorch never runs
                    arm = branch + ((id(s), field == "body"),) \
                        if isinstance(s, ast.If) and field != "finalbody" else branch
                    self._walk(sub, sub_loops if field == "body" else loops, inner, arm, cases)
            for h in getattr(s, "handlers", ()):
                self._walk(h.body, loops, inner, branch, cases)
            for k, case in enumerate(getattr(s, "cases", ())):  # one `case` of a match runs
                self._walk(case.body, loops, inner, branch, cases + ((id(s), k),))

    # NOTE [lazy scope]
    # The statement walk above (order, loops, grad mode, if arms) is all some rules need of a
    # function (GT437 reads only ``stmts``). The bindings (whose kinds cost a look at every
    # assigned value) and the expression index (``stmt_of``, ``loads``, ``method_calls``: a
    # walk of every expression) are each built on first use, by a pass over ``stmts`` in the
    # walk's order, so their contents and order are those of one eager walk.
    @property
    def bindings(self) -> dict[str, list[Binding]]:
        """name (dotted spelling) -> its bindings, in walk order."""
        if self._bindings is None:
            self._bindings = {}  # filled in order; kinds read the bindings made so far
            for s in self.stmts:
                if isinstance(s, (*FUNCTION_TYPES, ast.ClassDef)):
                    self._bind(s.name, s, None,
                               MODULE if _is_module_class(s, self.ctx) else None)
                else:
                    self._record_bindings(s, id(s) in self.no_grad)
        return self._bindings

    @property
    def stmt_of(self) -> dict[int, ast.stmt]:
        """id(expression) -> the statement holding it."""
        return self._index()

    @property
    def loads(self) -> dict[str, list[ast.Name]]:
        """name -> the places it is read, in walk order."""
        self._index()
        return self._loads

    @property
    def method_calls(self) -> list[MethodCall]:
        """Every ``<receiver>.<method>(...)`` call, in walk order."""
        self._index()
        return self._method_calls

    def own_calls(self, s: ast.stmt) -> list[ast.Call] | None:
        """The calls in the own expressions (not the body) of ``s``, a statement of this
        scope other than a def or class, in the order of
        :func:`gradtrace.lint.analysis.steps.calls_in` (None for other statements)."""
        if isinstance(s, (*FUNCTION_TYPES, ast.ClassDef)) or id(s) not in self.loops:
            return None
        self._index()
        return self._calls.get(id(s), [])

    def _index(self) -> dict[int, ast.stmt]:
        """The expression index (``stmt_of``, ``loads``, ``method_calls``), built once."""
        if self._stmt_of is None:
            self._stmt_of = {}
            for s in self.stmts:
                if not isinstance(s, (*FUNCTION_TYPES, ast.ClassDef)):
                    self._scan_exprs(s, self._stmt_of)
        return self._stmt_of

    def _scan_exprs(self, s: ast.stmt, stmt_of: dict[int, ast.stmt]) -> None:
        calls: list[ast.Call] = []
        loads, method_calls = self._loads, self._method_calls
        for field in s._fields:  # ast.iter_fields without its generator
            value = None if field in BODY_FIELDS else getattr(s, field, None)
            for v in value if value.__class__ is list else (value,):
                if isinstance(v, ast.AST):
                    for n in walk(v):
                        stmt_of[id(n)] = s
                        c = n.__class__  # the parser makes no subclasses of its node types
                        if c is ast.Name and n.ctx.__class__ is ast.Load:  # type: ignore
                            loads.setdefault(n.id, []).append(n)  # type: ignore[attr-defined]
                        elif c is ast.Call:
                            calls.append(n)  # type: ignore[arg-type]
                            f = n.func  # type: ignore[attr-defined]
                            if f.__class__ is ast.Attribute:
                                recv = dotted(f.value)
                                if recv is not None:
                                    method_calls.append(MethodCall(recv, f.attr, n, s))
        if calls:
            self._calls[id(s)] = calls

    def _record_bindings(self, s: ast.stmt, no_grad: bool) -> None:
        if isinstance(s, ast.Assign):
            kind = self.kind(s.value, s.lineno, no_grad)
            for t in s.targets:
                self._bind_target(t, s, s.value, kind, no_grad)
        elif isinstance(s, (ast.AnnAssign, ast.AugAssign)) and s.value is not None:
            if isinstance(s, ast.AugAssign):
                kind = self._combine(self.kind(s.target, s.lineno, no_grad),
                                     self.kind(s.value, s.lineno, no_grad))
            else:
                kind = self.kind(s.value, s.lineno, no_grad)
            self._bind_target(s.target, s, s.value, kind, no_grad)
        elif isinstance(s, (ast.For, ast.AsyncFor)):
            self._bind_target(s.target, s, None, None, no_grad)
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            for it in s.items:
                if it.optional_vars is not None:
                    self._bind_target(it.optional_vars, s, None, None, no_grad)

    def _bind_target(self, t: ast.AST, s: ast.stmt, value: ast.expr | None, kind: str | None,
                     no_grad: bool) -> None:
        if isinstance(t, (ast.Tuple, ast.List)):
            # `a, b = X(), Y()`: each name gets its own value and kind (a starred or unequal
            # unpacking, or any other right-hand side, stays unknown per element)
            vals = value.elts if isinstance(value, (ast.Tuple, ast.List)) else None
            pair = vals is not None and len(vals) == len(t.elts) and not any(
                isinstance(x, ast.Starred) for x in (*t.elts, *vals))
            for i, e in enumerate(t.elts):
                v = vals[i] if pair else None  # type: ignore[index]
                k = self.kind(v, s.lineno, no_grad) if v is not None else None
                self._bind_target(e, s, v, k, no_grad)
            return
        if isinstance(t, ast.Starred):
            return self._bind_target(t.value, s, None, None, no_grad)
        name = dotted(t)
        if name is not None:
            self._bind(name, s, value, kind, no_grad)

    def _bind(self, name: str, s: ast.stmt, value: ast.expr | None, kind: str | None,
              no_grad: bool = False) -> None:
        self.bindings.setdefault(name, []).append(Binding(name, s, value, kind, s.lineno, no_grad))

    # -- queries -----------------------------------------------------------------------------
    def binding_before(self, name: str, line: int) -> Binding | None:
        """The last binding of ``name`` (a dotted spelling) on a line before ``line``."""
        bs = self.bindings.get(name)
        if not bs:
            return None
        lines = self._sorted_lines(name, bs)
        if lines is not None:
            k = bisect.bisect_left(lines, line)
            return bs[k - 1] if k else None
        best = None
        for b in bs:
            if b.line < line:
                best = b
            else:
                break
        return best

    def bindings_before(self, name: str, line: int) -> list[Binding]:
        """The bindings of ``name`` on lines before ``line``, in order."""
        bs = self.bindings.get(name)
        if not bs:
            return []
        lines = self._sorted_lines(name, bs)
        if lines is not None:
            return bs[:bisect.bisect_left(lines, line)]
        return [b for b in bs if b.line < line]

    def bindings_within(self, name: str, first: int, last: int) -> list[Binding]:
        """The bindings of ``name`` on lines ``first`` to ``last``, in order (those of the
        statements nested in a loop: a binary search, not a scan of a long script's)."""
        bs = self.bindings.get(name)
        if not bs:
            return []
        lines = self._sorted_lines(name, bs)
        if lines is not None:
            return bs[bisect.bisect_left(lines, first):bisect.bisect_right(lines, last)]
        return [b for b in bs if first <= b.line <= last]

    def _sorted_lines(self, name: str, bs: list[Binding]) -> list[int] | None:
        """The lines of ``name``'s bindings when there are many and they are in order.

        Bindings are recorded in source order (but a ``try``'s ``else`` arm is walked before
        its handlers); a script binds a name such as ``model`` once per experiment, so a binary
        search keeps the lookups of a long module cheap.
        """
        if len(bs) < 8:
            return None
        got = self._lines.get(name)
        if got is None:
            lines = [b.line for b in bs]
            got = self._lines[name] = (len(bs), lines if lines == sorted(lines) else None)
        elif got[0] != len(bs):  # bindings added meanwhile (while the scope's bindings are
            lines = got[1]       # made): extended, not made again (quadratic on a script)
            if lines is not None:
                new = [b.line for b in bs[got[0]:]]
                if new == sorted(new) and new[0] >= lines[-1]:
                    lines.extend(new)
                else:
                    lines = None
            got = self._lines[name] = (len(bs), lines)
        return got[1]

    def calls_to(self, method: str) -> Iterator[MethodCall]:
        """Method calls ``x.<method>(...)`` in source order (indexed by method once: a
        long script asks for each of its loops)."""
        if self._by_method is None:
            self._by_method = {}
            for m in self.method_calls:
                self._by_method.setdefault(m.method, []).append(m)
        return iter(self._by_method.get(method, ()))

    def loops_of(self, node: ast.AST) -> tuple[ast.stmt, ...]:
        """Loops (outermost first) around the statement holding ``node``."""
        s = node if isinstance(node, ast.stmt) else self.stmt_of.get(id(node))
        return self.loops.get(id(s), ()) if s is not None else ()

    def statement_of(self, node: ast.AST) -> ast.stmt | None:
        return node if isinstance(node, ast.stmt) else self.stmt_of.get(id(node))

    def exclusive(self, a: ast.stmt, b: ast.stmt) -> bool:
        """Whether two statements sit in different arms of one ``if`` or in different cases
        of one ``match`` (never both run)."""
        arms = dict(self.branches.get(id(a), ()))
        got = dict(self.cases.get(id(a), ()))
        return any(arms.get(k, v) != v for k, v in self.branches.get(id(b), ())) or any(
            got.get(k, v) != v for k, v in self.cases.get(id(b), ()))

    def grad_off_at(self, node: ast.AST) -> ast.AST | None:
        """The with/decorator disabling grad around ``node``'s statement, or None."""
        s = self.statement_of(node)
        return self.no_grad.get(id(s)) if s is not None else None

    def uses_after(self, name: str, line: int) -> list[ast.Name]:
        """Loads of ``name`` strictly after ``line``."""
        return [n for n in self.loads.get(name, ()) if n.lineno > line]


def static_truth(test: ast.expr, ctx: Context) -> bool | None:
    """The value an ``if`` test always has on PyTorch, when the code says so: ``if False:``,
    ``if torch.__version__ == 'parrots':`` (a fork's name; PyTorch's version starts with a
    digit), ``!=`` the same. None when it depends on the run."""
    if isinstance(test, ast.Constant) and test.value in (False, None, 0, True, 1):
        return bool(test.value)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 \
            and isinstance(test.ops[0], (ast.Eq, ast.NotEq)):
        sides = (test.left, test.comparators[0])
        names = [n for n in sides if ctx.qualified_name(n) == "torch.__version__"]
        words = [n for n in sides if isinstance(n, ast.Constant) and isinstance(n.value, str)
                 and not n.value[:1].isdigit()]
        if names and words:
            return isinstance(test.ops[0], ast.NotEq)
    return None


def _is_module_class(node: ast.AST, ctx: Context) -> bool:
    if not isinstance(node, ast.ClassDef):
        return False
    for b in node.bases:
        q = ctx.qualified_name(b) or ""
        if q in ("torch.nn.Module", "nn.Module") or q.endswith(("Module", "LightningModule")):
            return True
    return False
