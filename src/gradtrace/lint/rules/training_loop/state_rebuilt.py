"""GT556: an optimizer's loaded state thrown away by building the optimizer again after the
load (NOTE [state loaded then rebuilt])."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.analysis.calls import ascii_code
from gradtrace.lint.analysis.kinds import MODULE, OPTIMIZER
from gradtrace.lint.analysis.steps import optimizer_like
from gradtrace.lint.context import Context
from gradtrace.lint.def_order import breadth_first_defs
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.training_loop._base import related_at
from gradtrace.lint.rules.training_loop._loop import LoopFacts, facts
from gradtrace.lint.words import holds

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _loads(f: LoopFacts) -> Iterator[tuple[ast.Call, ast.stmt, str]]:
    """``X.load_state_dict(...)`` of an optimizer ``X`` (by its binding, else its spelling;
    not a module), with its statement."""
    for st in f.scope.stmts:
        if isinstance(st, (*_DEFS, ast.ClassDef)) or not isinstance(st, (ast.Expr, ast.Assign)):
            continue
        for c in ast.walk(st):
            if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) \
                    and c.func.attr == "load_state_dict" and c.args \
                    and (x := dotted(c.func.value)) and optimizer_like(x, f.scope, c.lineno):
                k = f.ctx.analysis.kind(c.func.value, f.scope, c.lineno)
                if k is None or k.what != MODULE:
                    yield c, st, x
            elif isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) \
                    and (r := dotted(c.func.value)) and r != "self":
                for a in _method_loads(f.ctx, OptimizerRebuiltAfterStateLoad._methods(
                        f, f.ctx, r, c.func.attr)):
                    yield c, st, f"{r}.{a}"


# NOTE [GT556 text gates]
# ``visit_Module`` walked every method of every class for ``load_state_dict`` calls and read
# the code of every function of the file (``ast.walk`` of the whole tree): 14 ms a file on
# transformers' 13 files that spell the word. Both searches look for text that a function's
# lines must hold: ``code_of`` keeps the code's characters and only takes out literals and
# comments (NOTE [code text]: what replaces them joins no two words), so a function whose raw
# lines hold neither ``load_state_dict`` nor ``.m(`` for a loading method ``m`` has no such
# text in its code either; and a call whose attribute is ``load_state_dict`` spells the word on
# one of the lines of its method, decorators included, when the code is ASCII (a non-ASCII
# identifier may normalise to it: then every method is walked, as before). The functions come
# in ``ast.walk``'s order (:func:`breadth_first_defs`): the same findings, in the same order.
def _text_lines(ctx: Context, needles: tuple[str, ...]) -> list[int]:
    """The sorted lines of the file's raw text holding one of ``needles`` (none spans lines)."""
    return [i for i, line in enumerate(ctx.lines, 1) if any(n in line for n in needles)]


def _first_line(fn: ast.AST) -> int:
    """The first line of a def, its decorators included."""
    return min([fn.lineno, *(d.lineno for d in fn.decorator_list)])  # type: ignore[attr-defined]


def _method_loads(ctx: Context, methods: list[ast.AST]) -> list[str]:
    """The attributes ``a`` the one method given loads with ``self.<a>.load_state_dict(...)``
    on an optimizer-like ``self.<a>`` (``trainer.resume(ckpt)`` fills
    ``trainer.optimizer``)."""
    if len(methods) != 1:
        return []
    out: list[str] = []
    for c in ast.walk(methods[0]):
        if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) \
                and c.func.attr == "load_state_dict" and c.args:
            d = dotted(c.func.value) or ""
            if d.startswith("self.") and d.count(".") == 1 and optimizer_like(d) \
                    and d[5:] not in out:
                out.append(d[5:])
    return out


def _builds(ctx: Context, fn: ast.AST, v: ast.expr) -> bool:
    """``v`` builds a torch optimizer (NOTE [kinds])."""
    k = ctx.analysis.kind(v, ctx.scope(fn), v.lineno)
    return k is not None and k.what == OPTIMIZER and isinstance(v, ast.Call)


def _method_rebuilds(ctx: Context, cls_methods: list[ast.AST], attr: str) -> ast.stmt | None:
    """The statement of the one method given that binds ``self.<attr>`` to a new torch
    optimizer, outside an ``if`` that reads ``self.<attr>`` (``if self.optimizer is None:``)."""
    if len(cls_methods) != 1:
        return None
    m = cls_methods[0]
    parents: dict[int, ast.AST] = {}
    for n in ast.walk(m):
        for ch in ast.iter_child_nodes(n):
            parents[id(ch)] = n
    for n in ast.walk(m):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 \
                and dotted(n.targets[0]) == "self." + attr and _builds(ctx, m, n.value):
            p = parents.get(id(n))
            guarded = False
            while p is not None and p is not m:
                if isinstance(p, (ast.If, ast.While)) and any(
                        dotted(x) == "self." + attr for x in ast.walk(p.test)):
                    guarded = True
                p = parents.get(id(p))
            if not guarded:
                return n
    return None


class OptimizerRebuiltAfterStateLoad(Rule):
    """An optimizer's saved state is loaded, then the optimizer is built again: the new one
    starts from nothing.

    Why: `optimizer.load_state_dict(ckpt["optimizer"])` fills the optimizer object it is
    called on (Adam's moments, the step counts, each group's learning rate). Binding the name
    (or the attribute) to a new `torch.optim.X(...)` afterwards, here or in a method called
    after the load (`optim.set_parameters(model.named_parameters())` whose code does
    `self.optimizer = optim.Adam(...)`), drops that object: a resumed run restarts Adam from
    zero moments and the checkpoint's learning rates, silently. Build the optimizer first and
    load its state into the one that trains.
    The load may also be one call away (`runner.restore(ckpt)`, a method whose code runs
    `self.optimizer.load_state_dict(...)`, then `runner.setup(lr)` rebuilding it).
    Known limits: the load and the rebuild must be seen from one function (a method that
    loads or rebuilds is called on the holder of the optimizer, `X.m()` for `X.optimizer`,
    and is a method only one class of the file defines); a use of the optimizer or its holder
    between them (a step, a read) keeps it silent (NOTE [state loaded then rebuilt]).
    """

    code = "GT556"
    name = "optimizer-rebuilt-after-state-load"
    message = ("`{load}` (line {load_line}) fills `{opt}`, then {how} builds a new optimizer in "
               "its place: the loaded state (moments, step counts, learning rates) is thrown "
               "away; build the optimizer first, then load its state")
    triggers = ("load_state_dict",)
    examples = [
        Bad("""
            import torch
            def resume(model, ckpt):
                optimizer = torch.optim.Adam(model.parameters())
                optimizer.load_state_dict(ckpt["optimizer"])
                optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
                return optimizer
            """, at=(5, 4)),
        Good("""
            import torch
            def resume(model, ckpt):
                optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
                optimizer.load_state_dict(ckpt["optimizer"])
                return optimizer
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        """# NOTE [state loaded then rebuilt]
        For each function (not the module body: a notebook's cells reload a checkpoint to
        show it, then start another experiment) with ``X.load_state_dict(...)`` on an
        optimizer ``X``, or a call ``R.m(...)`` of a method (one class of the file defines
        it) that runs ``self.<a>.load_state_dict(...)`` (then ``X`` is ``R.<a>``): a later
        statement of the same pass (NOTE [statement order]) that
        binds ``X`` to a new torch optimizer, or calls ``R.m(...)`` where ``X`` is
        ``R.<a>`` and ``m`` (a method of ``R``'s class when ``R`` is ``self``, else the one
        method of that name in the file's classes) binds ``self.<a>`` to one outside a test
        of ``self.<a>``. Silent when ``X`` (or ``R``) is read between the two, or loaded again
        after the rebuild."""
        loads = _text_lines(ctx, ("load_state_dict",))  # NOTE [GT556 text gates]
        closed = ascii_code(ctx)  # a non-ASCII name may spell the attribute another way
        loaders = {name for c in ctx.analysis.classes.values()
                   for name, m in c.methods.items()
                   if (not closed or holds(loads, _first_line(m), m.end_lineno))
                   and _method_loads(ctx, [m])}
        hits = _text_lines(ctx, ("load_state_dict", *(f".{n}(" for n in loaders)))
        for fn in breadth_first_defs(node):  # `ast.walk`'s defs, in its order
            if not holds(hits, fn.lineno, fn.end_lineno):
                continue  # its code cannot spell what is searched below
            code = ctx.code_of(fn)
            if "load_state_dict" not in code and not any(f".{n}(" in code for n in loaders):
                continue
            f = facts(ctx, fn)
            for call, st, x in _loads(f):
                got = self._rebuild(f, ctx, st, x)
                if got is not None:
                    at, how = got
                    yield self.report(at, ctx, related=(
                        related_at(ctx, call, "the state is loaded here"),),
                        load=ctx.source(call), load_line=call.lineno, opt=x, how=how)
                    break

    def _rebuild(self, f: LoopFacts, ctx: Context, load: ast.stmt, x: str
                 ) -> tuple[ast.AST, str] | None:
        root, _, attr = x.rpartition(".")
        for st in f.scope.stmts:
            if st is load or not f.before(load, st) or isinstance(st, (*_DEFS, ast.ClassDef)):
                continue
            if isinstance(st, ast.Assign) and len(st.targets) == 1 \
                    and dotted(st.targets[0]) == x and _builds(ctx, f.node, st.value):
                return (st, "this line") if self._clean(f, load, st, x) else None
            if not isinstance(st, (ast.Expr, ast.Assign)) or not root:
                if self._reads(st, x, root):
                    return None
                continue
            for c in ast.walk(st):
                func = c.func if isinstance(c, ast.Call) else None
                if isinstance(func, ast.Attribute) and dotted(func.value) == root \
                        and (m := _method_rebuilds(ctx, self._methods(f, ctx, root, func.attr),
                                                    attr)) is not None:
                    if self._clean(f, load, st, x):
                        return c, f"`{ctx.source(c)}` (its line {m.lineno}: " \
                                  f"`{ctx.source(m)}`)"
                    return None
            if self._reads(st, x, root):
                return None
        return None

    @staticmethod
    def _methods(f: LoopFacts, ctx: Context, root: str, name: str) -> list[ast.AST]:
        """The method ``name`` of ``root``'s class: the enclosing class's for ``self``, else
        every class of the file that defines one."""
        if root == "self":
            cls = next((c for c in ctx.analysis.classes.values()
                        if any(m is f.node for m in c.methods.values())), None)
            m = cls.method(name) if cls is not None else None
            return [m] if m is not None else []
        return [c.methods[name] for c in ctx.analysis.classes.values() if name in c.methods]

    @staticmethod
    def _reads(st: ast.stmt, x: str, root: str) -> bool:
        """``st`` uses ``x`` (or its holder ``root``)."""
        return any(isinstance(n, (ast.Name, ast.Attribute)) and dotted(n) in (x, root)
                   for n in ast.walk(st)) if root != "self" else any(
            isinstance(n, ast.Attribute) and dotted(n) == x for n in ast.walk(st))

    def _clean(self, f: LoopFacts, load: ast.stmt, at: ast.stmt, x: str) -> bool:
        """Nothing between ``load`` and ``at`` uses ``x``, and no later load of it."""
        root = x.rpartition(".")[0]
        for st in f.scope.stmts:
            if isinstance(st, (*_DEFS, ast.ClassDef)):
                continue
            if f.before(load, st) and f.before(st, at) and st is not at and self._reads(
                    st, x, root):
                return False
            if f.before(at, st) and any(
                    isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                    and c.func.attr == "load_state_dict" and dotted(c.func.value) == x
                    for c in ast.walk(st)):
                return False
        return True
