"""Whether a base class of another file of the project runs a method after a mode switch;
which method of a base class ``self.<name>(...)`` runs.

# NOTE [template callers]
A method that overrides one of its base class's (``nnUNetTrainerV2.run_iteration(self,
data_generator, do_backprop=True)``) is called by the base's own methods: the template method
of another file (``NetworkTrainer.run_training`` puts ``self.network.eval()`` before
``self.run_iteration(self.val_gen, False, True)``). Its callers are not in its file; when a
method of a base class of the project (followed through the project's files, three hops) calls
``self.<name>(...)`` and switches a module's mode in the same method (``x.eval()``,
``x.train(False)``), the phases it runs are switched there.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from gradtrace.lint.analysis.project import foreign_def
from gradtrace.lint.names import dotted

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

MAX_HOPS = 3


def inherited_method(ctx: Context, call: ast.Call, where: ast.AST
                     ) -> tuple[Context, ast.FunctionDef | ast.AsyncFunctionDef] | None:
    """``self.get_losses(...)`` in a method of a class of the file that does not define
    ``get_losses``: the (context, method) of the nearest base class defining it, of this file
    or (three hops) of another file of the project (a curious agent's ``learn`` computing its
    losses with ``ACAgent.get_losses``); None when not found or the class stores the name."""
    f = call.func
    cls = ctx.analysis.class_of(where)
    if not (isinstance(f, ast.Attribute) and dotted(f.value) == "self") or cls is None \
            or f.attr in cls.methods or f.attr in cls.attrs:
        return None
    return _base_method(ctx, cls.node, f.attr)


def callee_or_inherited(ctx: Context, call: ast.Call, where: ast.AST
                        ) -> tuple[Context, ast.AST | None]:
    """(context, function) ``call`` runs: a function of the file, else a base's method."""
    fn = ctx.analysis.callee(call, where)
    return (ctx, fn) if fn is not None else inherited_method(ctx, call, where) or (ctx, None)


def _base_method(ctx: Context, node: ast.ClassDef, name: str
                 ) -> tuple[Context, ast.FunctionDef | ast.AsyncFunctionDef] | None:
    for bctx, bnode in _ancestors(ctx, node, 0, set()):
        for m in bnode.body:
            if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name == name:
                return bctx, m
    return None


def _ancestors(ctx: Context, node: ast.ClassDef, hops: int, seen: set[int]
               ) -> Iterator[tuple[Context, ast.ClassDef]]:
    """The base classes of ``node`` (of this file, or followed into the project's files),
    nearest first, depth first, ``MAX_HOPS`` deep."""
    if hops > MAX_HOPS or id(node) in seen:
        return
    seen.add(id(node))
    for b in node.bases:
        own = ctx.analysis.classes.get(b.id) if isinstance(b, ast.Name) else None
        got = (ctx, own.node) if own is not None else foreign_def(ctx, b)
        if got is None or not isinstance(got[1], ast.ClassDef):
            continue
        yield got  # type: ignore[misc]
        yield from _ancestors(got[0], got[1], hops + 1, seen)


def base_switches_mode(ctx: Context, fn: ast.AST) -> bool:
    """A base class of ``fn``'s class, in another file of the project, calls ``self.<fn>``
    in a method that also switches a module to eval mode (NOTE [template callers])."""
    cls = ctx.analysis.class_of(fn)
    name = getattr(fn, "name", None)
    if cls is None or name is None:
        return False
    return _bases_switch(ctx, cls.node, name)


def _bases_switch(ctx: Context, node: ast.ClassDef, name: str) -> bool:
    return any(_calls_after_switch(m, name) for _, bnode in _ancestors(ctx, node, 0, set())
               for m in bnode.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)))


def _calls_after_switch(m: ast.AST, name: str) -> bool:
    calls = [n for n in ast.walk(m) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Attribute)]
    return any(n.func.attr == name and dotted(n.func.value) == "self"  # type: ignore
               for n in calls) and any(_eval_switch(n) for n in calls)


def _eval_switch(n: ast.Call) -> bool:
    f = n.func
    return isinstance(f, ast.Attribute) and not n.keywords and (
        f.attr == "eval" and not n.args or f.attr == "train" and len(n.args) == 1
        and not (isinstance(n.args[0], ast.Constant) and n.args[0].value is True))
