"""The training-loop facts of one function that the GT5xx rules share.

:class:`LoopFacts` lists, for one function (or the module body), the calls that matter to a
training step — backward, optimizer step, ``zero_grad``, gradient clipping — with their
statements, and answers ordering questions about statements: "does ``a`` run before ``b``
in the same pass through their common block" (:meth:`LoopFacts.before`).

# NOTE [statement order]
Statements are placed by their *path*: the chain of (enclosing statement, body field, index)
from the function down. Two statements are ordered only when their paths part inside the same
body list (same parent, same field): then the lower index runs first, unless a ``return`` /
``raise`` / ``continue`` / ``break`` between them (or after ``a`` in one of ``a``'s own
blocks) can skip ``b``; so can an ``if`` whose every arm ends in such a jump (``if ok:
continue`` / ``else: raise``: :func:`~gradtrace.lint.statement_shapes.always_jumps`). Statements in the two branches of an ``if``, or in ``try`` and its
``except``, are never ordered. This keeps every ordering claim true on every path.
"""
from __future__ import annotations

import ast
import bisect
import re
from itertools import islice
from typing import TYPE_CHECKING, Any, Iterator, TypeVar

from gradtrace.lint.analysis.steps import (  # noqa: F401 (re-exported for the GT5 rules)
    Backward, Named, Step, calls_in, optimizer_like, step_calls,
)
from gradtrace.lint.analysis.paths import Path, statement_paths
from gradtrace.lint.context import LOOP_TYPES
from gradtrace.lint.statement_shapes import always_jumps
from gradtrace.lint.flow import OPTIMIZER, Binding
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.names import dotted

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

_T = TypeVar("_T", bound=Any)
JUMPS = (ast.Return, ast.Raise, ast.Continue, ast.Break)
# text meaning "gradients are cleared here" besides zero_grad()
MANUAL_ZERO_RE = re.compile(
    r"zero_grad|\.grad\s*=[^=]|\.grad\.(?:data\.)?(?:zero_|detach_|fill_|mul_)|set_to_none"
    r"|(?:clear|reset|zero|free)_?grad|grad_?(?:clear|reset|zero)", re.IGNORECASE)


class LoopFacts:
    """Backward/step/zero_grad/clip calls of one function and the order of its statements."""

    def __init__(self, node: ast.AST, ctx: Context) -> None:
        self.node = node
        self.ctx = ctx
        self.scope = ctx.scope(node)
        index = statement_paths(ctx, node)
        self.paths: dict[int, Path] = index.paths
        self.blocks: dict[tuple[int, str], list[ast.stmt]] = index.blocks
        self._jump_counts: dict[tuple[int, str], list[int]] = {}
        calls = step_calls(ctx, node)
        self.backwards: list[Backward] = calls.backwards
        self.steps: list[Step] = calls.steps
        self.zero_grads: list[Named] = calls.zero_grads
        self.clips: list[Named] = calls.clips
        self.unscales: list[Named] = calls.unscales
        self.updates: list[Named] = calls.updates

    # -- structure -------------------------------------------------------------------------
    def loops_of(self, s: ast.stmt) -> tuple[ast.stmt, ...]:
        return self.scope.loops.get(id(s), ())

    def inside(self, s: ast.stmt, outer: ast.stmt) -> bool:
        """``s`` is ``outer`` or nested in it."""
        ps, po = self.paths.get(id(s)), self.paths.get(id(outer))
        return ps is not None and po is not None and ps[:len(po)] == po

    def within(self, outer: ast.stmt) -> list[ast.stmt]:
        """The statements of ``scope.stmts`` that are ``outer`` or nested in it, in order.

        The scope lists statements in pre-order, so they are one run of the list starting at
        ``outer``: found without a scan of the whole function (a script's module body runs
        hundreds of loops, and a question per loop over every statement was quadratic)."""
        memo = self.__dict__.setdefault("_within", {})
        got = memo.get(id(outer))
        if got is None:
            order = self.__dict__.get("_order")
            if order is None:
                order = self.__dict__["_order"] = {
                    id(x): i for i, x in enumerate(self.scope.stmts)}
            stmts = self.scope.stmts
            k = order.get(id(outer))
            if k is None:
                got = [x for x in stmts if self.inside(x, outer)]
            else:
                end = k
                while end < len(stmts) and self.inside(stmts[end], outer):
                    end += 1
                got = stmts[k:end]
            memo[id(outer)] = got
        return got

    def calls_of(self, stmt: ast.stmt) -> list[ast.Call] | Iterator[ast.Call]:
        """:func:`calls_in` of a statement, from the scope's expression index when it has
        it (one walk of each statement shared by the rules, not one per rule)."""
        own = self.scope.own_calls(stmt)
        return calls_in(stmt) if own is None else own

    def between(self, items: list[_T], first: int, last: int) -> list[_T]:
        """The ``items`` (backward, step, zero_grad... calls of this function: anything with a
        ``stmt``) whose statement starts on lines ``first`` to ``last``, in their order: the
        calls inside one loop of a long script without a scan of all of them (indexed by line
        once per list)."""
        index = self.__dict__.setdefault("_between", {})
        got = index.get(id(items))
        if got is None or got[0] is not items:
            order = sorted((x.stmt.lineno, i) for i, x in enumerate(items))
            got = index[id(items)] = (items, [ln for ln, _ in order], [i for _, i in order])
        _, lines, at = got
        picked = at[bisect.bisect_left(lines, first):bisect.bisect_right(lines, last)]
        return [items[i] for i in sorted(picked)]

    def stmts_between(self, first: int, last: int) -> list[ast.stmt]:
        """The statements of ``scope.stmts`` that start on lines ``first`` to ``last``, in
        their order (indexed by line once: a question per call over a script's whole module
        body was quadratic)."""
        got = self.__dict__.get("_stmt_lines")
        if got is None:
            order = sorted((x.lineno, i) for i, x in enumerate(self.scope.stmts))
            got = self.__dict__["_stmt_lines"] = ([ln for ln, _ in order], [i for _, i in order])
        lines, at = got
        stmts = self.scope.stmts
        picked = at[bisect.bisect_left(lines, first):bisect.bisect_right(lines, last)]
        return [stmts[i] for i in sorted(picked)]

    def block_end(self, s: ast.stmt) -> int | None:
        """The last line of the block (body list) holding ``s`` (None: not placed)."""
        path = self.paths.get(id(s))
        if not path:
            return None
        pid, field, _ = path[-1]
        last = self.blocks[(pid, field)][-1]
        return getattr(last, "end_lineno", None) or last.lineno

    def bindings_at(self, stmt: ast.stmt) -> list[Binding]:
        """The bindings made by ``stmt``, in the order of ``scope.bindings`` (indexed once)."""
        index = self.__dict__.get("_bindings_at")
        if index is None:
            index = self.__dict__["_bindings_at"] = {}
            for bs in self.scope.bindings.values():
                for b in bs:
                    index.setdefault(id(b.stmt), []).append(b)
        return index.get(id(stmt), [])

    def innermost_loop(self, *stmts: ast.stmt) -> ast.stmt | None:
        """The innermost loop enclosing all ``stmts`` (None: not all in one loop)."""
        common: ast.stmt | None = None
        for loop in self.loops_of(stmts[0]):
            if all(loop in self.loops_of(s) for s in stmts[1:]):
                common = loop
        return common

    def before(self, a: ast.stmt, b: ast.stmt) -> bool:
        """``a`` runs, then ``b`` runs, in one pass through their common block.

        See NOTE [statement order].
        """
        pa, pb = self.paths.get(id(a)), self.paths.get(id(b))
        if pa is None or pb is None:
            return False
        k = 0
        while k < len(pa) and k < len(pb) and pa[k] == pb[k]:
            k += 1
        if k == len(pa) or k == len(pb):
            return False
        (ida, fa, ia), (idb, fb, ib) = pa[k], pb[k]
        if (ida, fa) != (idb, fb) or ia >= ib:
            return False
        jumps = self._jumps((ida, fa))
        if jumps[ib] - jumps[ia + 1]:
            return False
        for j in range(k + 1, len(pa)):
            pid, f, i = pa[j]
            jumps = self._jumps((pid, f))
            if jumps[-1] - jumps[i + 1]:
                return False
        return True

    def _jumps(self, key: tuple[int, str]) -> list[int]:
        """Running count of the jumps (return, raise, continue, break) in a block: the jumps
        between two statements in one subtraction, not a scan (a script's module body holds
        thousands of statements)."""
        counts = self._jump_counts.get(key)
        if counts is None:
            counts = [0]
            for x in self.blocks[key]:
                counts.append(counts[-1] + always_jumps(x))
            self._jump_counts[key] = counts
        return counts

    def dominates(self, a: ast.stmt, b: ast.stmt) -> bool:
        """``a`` runs before ``b`` whenever ``b`` runs (``a`` sits in a block enclosing ``b``)."""
        pa, pb = self.paths.get(id(a)), self.paths.get(id(b))
        if pa is None or pb is None or len(pa) > len(pb):
            return False
        return pa[:-1] == pb[:len(pa) - 1] and pa[-1][:2] == pb[len(pa) - 1][:2] \
            and pa[-1][2] < pb[len(pa) - 1][2] and self.before(a, b)

    def text(self, node: ast.AST) -> str:
        """Source lines of ``node`` (cheap: no tokenizing)."""
        lines = self.ctx.code_lines[node.lineno - 1:node.end_lineno]  # type: ignore[attr-defined]
        return "\n".join(lines)

    def loop_rebinds(self, loop: ast.stmt, names: set[str]) -> bool:
        """Whether ``loop`` (re)binds any of ``names`` (a fresh model/optimizer per pass);
        an inner ``for opt in optimizers:`` only walks existing ones and does not count."""
        end = getattr(loop, "end_lineno", None) or loop.lineno
        for n in names:  # a statement nested in the loop lies within the loop's lines
            for b in self.scope.bindings_within(n, loop.lineno, end):
                if b.stmt is not loop and self.inside(b.stmt, loop) and \
                        not isinstance(b.stmt, LOOP_TYPES):
                    return True
        return False


def _owners(f: LoopFacts, expr: ast.AST | None, line: int) -> frozenset[str]:
    """The dotted owners of the parameters an optimizer expression was built over (empty:
    not known to be an optimizer, or over something we cannot name)."""
    if expr is None:
        return frozenset()
    k = f.ctx.analysis.kind(expr, f.scope, line)
    return k.over if k is not None and k.what == OPTIMIZER else frozenset()


def _disjoint(a: frozenset[str], b: frozenset[str]) -> bool:
    """No owner of ``a`` is, contains or is contained in an owner of ``b``."""
    return all(x != y and not x.startswith(y + ".") and not y.startswith(x + ".")
               for x in a for y in b)


def _part_only(over: frozenset[str], cleared: frozenset[str]) -> bool:
    """Every owner ``cleared`` names is a submodule of one of ``over`` (``ae.encoder`` of
    ``ae``): the rest of what the optimizer holds is never cleared by it."""
    return all(any(y.startswith(x + ".") for x in over) for y in cleared)


def _stepped_expr(s: Step) -> ast.AST | None:
    func = s.call.func
    if isinstance(func, ast.Attribute) and func.attr == "step" and not (
            s.call.args and dotted(s.call.args[0]) == s.optimizer):
        return func.value
    return s.call.args[0] if s.call.args else None


def uncleared_optimizers(f: LoopFacts, text: str) -> set[str]:
    """The optimizers stepped here that no gradient clearing of ``text`` can reach.

    # NOTE [one optimizer never cleared]
    A GAN or encoder/discriminator loop that clears one optimizer (``opt_e.zero_grad()``) but
    steps another that is never cleared (``opt_d.step()``) adds up the second one's gradients
    all the same. Said only when every clearing word of the text is a ``zero_grad()`` call of
    an optimizer whose parameters are known (``torch.optim.X(E.parameters())``) and share no
    owner with the stepped optimizer's (known too), or a module's ``zero_grad()`` on a
    submodule of what the stepped optimizer holds (``ae.encoder.zero_grad()``, the optimizer
    over ``ae.parameters()``: the decoder's gradients add up); any other module's
    ``zero_grad()``, a ``.grad = None``, a helper that clears: the stepped optimizer is taken
    as cleared."""
    n = len(f.zero_grads) + sum(  # `zero_grad(set_to_none=True)` says two clearing words
        1 for z in f.zero_grads for k in z.call.keywords if k.arg == "set_to_none")
    # clearing words counted up to n + 1 only: a script's text is the
    if sum(1 for _ in islice(MANUAL_ZERO_RE.finditer(text), n + 1)) != n:  # whole file
        return set()
    cleared: list[frozenset[str]] = []
    for z in f.zero_grads:
        func = z.call.func
        recv = func.value if isinstance(func, ast.Attribute) else None
        over = _owners(f, recv, z.call.lineno) or _module_owner(f, recv, z.call.lineno)
        if not over:
            return set()
        cleared.append(over)
    out: set[str] = set()
    for s in f.steps:
        over = _owners(f, _stepped_expr(s), s.call.lineno)
        if over and all(_disjoint(over, c) or _part_only(over, c) for c in cleared):
            out.add(s.optimizer)
    return out


def _module_owner(f: LoopFacts, expr: ast.AST | None, line: int) -> frozenset[str]:
    """``{"netD"}`` for ``netD.zero_grad()`` on a module the analysis knows: a GAN's
    ``netD.zero_grad()`` clears the discriminator only (NOTE [one optimizer never cleared]),
    when it is the very model some optimizer stepped here was built over (a wrapper or an
    alias of it, ``DDP(model).zero_grad()``, is not known to hold other parameters)."""
    name = dotted(expr) if expr is not None else None
    k = f.ctx.analysis.kind(expr, f.scope, line) if name else None
    if k is None or k.what != MODULE or not any(
            name in over or any(name.startswith(o + ".") for o in over)  # a part of it
            for s in f.steps if (over := _owners(f, _stepped_expr(s), s.call.lineno))):
        return frozenset()
    return frozenset({name})  # type: ignore[arg-type]


def facts(ctx: Context, node: ast.AST) -> LoopFacts:
    """The (cached) :class:`LoopFacts` of a function or module node."""
    return ctx.memo("gt5-loop", node, lambda: LoopFacts(node, ctx))


def loop_types() -> tuple[type, ...]:
    return LOOP_TYPES
