"""Names a function reads but does not bind: the module's (NOTE [module constants]) and the
``nonlocal`` counters of its enclosing function (:func:`nonlocal_numbers`), and the numbers a
relative import takes from the user's package (:func:`imported_number`).

# NOTE [module constants]
A function that reads a name it does not bind reads the module's binding of it (when the
function is defined at the top of the file or in a class there: no enclosing function binds
it). ``W_target = torch.randn(4, 1) * 5`` at module level is then as dead inside ``f(x)`` as it
is at the top: no graph. Said only when no function declares the name ``global`` (rebinding it
at run time) and every module-level binding of it is a plain assignment.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from gradtrace.lint.analysis.cuts import DEAD, LIVE, Trace
from gradtrace.lint.context import Context
from gradtrace.lint.nodes import of_types, walk

if TYPE_CHECKING:  # (origins imports this module)
    from gradtrace.lint.analysis.origins import Tracer


def module_level_functions(ctx: Context) -> frozenset[int]:
    """ids of the functions defined at the top of the file or in its top-level classes."""
    def make() -> frozenset[int]:
        out = []
        for s in ctx.tree.body:  # type: ignore[attr-defined]
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append(id(s))
            elif isinstance(s, ast.ClassDef):
                out.extend(id(m) for m in s.body
                           if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)))
        return frozenset(out)
    return ctx.memo("module-level-functions", ctx.tree, make)


def declared_global(ctx: Context) -> frozenset[str]:
    """Names some function of the file declares ``global`` or ``nonlocal``."""
    def make() -> frozenset[str]:
        # the statements need their keyword in the code (NOTE [code text]): most files have
        # none, and a walk of the whole tree per file cost ~3% of the check on library code
        if not ctx.mentions("global", "nonlocal"):
            return frozenset()
        return frozenset(n for s in of_types(ctx.tree, (ast.Global, ast.Nonlocal))
                         for n in s.names)  # type: ignore[attr-defined]
    return ctx.memo("declared-global", ctx.tree, make)


def module_value(top: Tracer, name: str) -> Trace:
    """What the module's name ``name`` holds when a function reads it (``top``: the module's
    origins tracer): DEAD when every module-level binding of it is a plain assignment of a
    dead value and no function rebinds it; LIVE (unknown) otherwise."""
    if name in declared_global(top.ctx):
        return LIVE
    bs = top.scope.bindings.get(name)
    if name in top.ctx.imports.package and imported_number(top.ctx, name):
        return DEAD
    if not bs or not all(isinstance(b.stmt, (ast.Assign, ast.AnnAssign)) and
                         b.value is not None for b in bs):
        return LIVE
    for b in bs:
        t = top.binding_trace(b)
        if t.live or t.cuts:
            return LIVE
    return LIVE if top.made_trainable(name) else DEAD


def nonlocal_numbers(t: Tracer) -> frozenset[str]:
    """``nonlocal n`` names the enclosing function binds only to Python numbers (``n = 0``,
    ``n += 1``): a call counter of a stub loss in a test, never a tensor on the graph."""
    hit = t._nonlocals
    if hit is None:
        hit = t._nonlocals = frozenset(_nonlocal_numbers(t))
    return hit


def _nonlocal_numbers(t: Tracer) -> Iterator[str]:
    if not t.ctx.mentions("nonlocal"):
        return  # the keyword is spelt in the code (NOTE [code text]): no walk of the body
    node = t.scope.node
    names = {n for s in getattr(node, "body", ()) for x in walk(s)
             if isinstance(x, ast.Nonlocal) for n in x.names}
    if not names:
        return
    defs = (ast.FunctionDef, ast.AsyncFunctionDef)
    outer = next((s for s in reversed(t.ctx.stmts) if isinstance(s, defs)
                  and any(b is node for b in s.body)), None)
    if outer is None:
        outer = next((f for f in walk(t.ctx.tree) if isinstance(f, defs)
                      and any(b is node for b in f.body)), None)
    if outer is None:
        return
    bindings = t.ctx.scope(outer).bindings
    for n in names:
        values = [b.value for b in bindings.get(n, ())]
        if values and all(isinstance(v, ast.Constant) and type(v.value) in (int, float)
                          for v in values):
            yield n


def imported_number(ctx: Context, name: str) -> bool:
    """``from ..config import eps`` where the project's ``config.py`` binds ``eps`` at its top
    only to Python numbers (``eps = 1e-8``) and declares it ``global`` nowhere: a constant of
    the user's package, as dead as one bound in the file (NOTE [module constants]; an absolute
    import is dead already). wassname/world-models-sonic-pytorch's ``loss -= np.log(eps)``
    (unseen40) is arithmetic on a number, not a tensor handed to NumPy."""
    from gradtrace.lint.analysis.project_files import imports_of, module_context
    spec = imports_of(ctx).get(name)
    if spec is None or not spec[0] or spec[2] is None:
        return False
    octx = module_context(ctx, spec[0], spec[1])
    if octx is None or spec[2] in declared_global(octx):
        return False
    bs = octx.scope(octx.tree).bindings.get(spec[2])
    return bool(bs) and all(isinstance(b.stmt, ast.Assign) and _number(b.value) for b in bs)


def _number(v: ast.expr | None) -> bool:
    if isinstance(v, ast.UnaryOp) and isinstance(v.op, (ast.USub, ast.UAdd)):
        v = v.operand
    return isinstance(v, ast.Constant) and type(v.value) in (int, float)
