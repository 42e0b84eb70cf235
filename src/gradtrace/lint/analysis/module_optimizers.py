"""Optimizers a script builds at module level that nothing in the file ever steps.

# NOTE [a module optimizer never stepped]
A script often builds its model, optimizer and scheduler at module level and trains in a
function that reads them as globals (``def train(): ... opt.zero_grad(); loss.backward();
opt.step()``). The function's loop then clears a name it never binds, which a reading of the
function alone cannot call an optimizer. The facts that decide it are read over the file: the
name has one binding, a module-level ``torch.optim`` optimizer; nothing else in the file
binds it or declares it ``global``; and every read of it anywhere in the file is one of the
optimizer's own methods, the optimizer handed to a ``torch.optim.lr_scheduler`` class (which
never steps it), or handed to a function of the file that reads its parameter only those ways
(``def show_lr(optimizer): ... optimizer.param_groups``). Any other read (a step, a call
out of sight, a store, a return) may step it, and the loop is left alone. Known limit:
another file that imports the name and steps it is not looked for.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.file_parents import file_parents
from gradtrace.lint.analysis.kinds import OPTIMIZER
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

SCHEDULERS = "torch.optim.lr_scheduler."
FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def module_unstepped(ctx: Context, fn: ast.AST, name: str, own: frozenset[str]) -> bool:
    """``name``, cleared in the function ``fn`` that never binds it, is a module-level
    optimizer of the file that nothing in the file steps.

    See NOTE [a module optimizer never stepped]."""
    if not isinstance(fn, FUNCS) or ctx.scope(fn).bindings.get(name) \
            or name in _arg_names(fn):
        return False
    return ctx.memo("module-unstepped:" + name + ":" + ",".join(sorted(own)), ctx.tree,
                    lambda: _unstepped(ctx, name, own))


def _unstepped(ctx: Context, name: str, own: frozenset[str]) -> bool:
    """The file-wide half of :func:`module_unstepped`, once per name."""
    bs = ctx.scope(ctx.tree).bindings.get(name, ())
    if len(bs) != 1 or bs[0].kind != OPTIMIZER or not isinstance(bs[0].value, ast.Call):
        return False
    funcs = {d.name: d for d in ctx.tree.body if isinstance(d, FUNCS)}
    parents = file_parents(ctx)
    stores = 0
    for n in walk(ctx.tree):
        if isinstance(n, ast.Global) and name in n.names or isinstance(n, ast.arg) \
                and n.arg == name:
            return False
        if not isinstance(n, ast.Name) or n.id != name:
            continue
        if not isinstance(n.ctx, ast.Load):
            stores += 1
            if stores > 1:
                return False
            continue
        if not _own_read(ctx, n, parents, own) and not _handed_to_reader(
                ctx, n, parents, own, funcs):
            return False
    return True


def _arg_names(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    a = fn.args
    out = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
    return out | {x.arg for x in (a.vararg, a.kwarg) if x is not None}


def _own_read(ctx: Context, n: ast.Name, parents: dict[int, ast.AST],
              own: frozenset[str]) -> bool:
    """``n`` is read as ``n.<one of own>`` or handed to a learning-rate scheduler class."""
    p = parents.get(id(n))
    return isinstance(p, ast.Attribute) and p.attr in own or isinstance(p, ast.Call) \
        and n in p.args and (ctx.qualified_name(p.func) or "").startswith(SCHEDULERS)


def _handed_to_reader(ctx: Context, n: ast.Name, parents: dict[int, ast.AST],
                      own: frozenset[str], funcs: dict[str, ast.AST]) -> bool:
    """``n`` is a positional argument of a call of a module-level function of the file whose
    parameter at that position is only read as ``<param>.<one of own>``, never rebound."""
    p = parents.get(id(n))
    if not (isinstance(p, ast.Call) and isinstance(p.func, ast.Name) and n in p.args):
        return False
    d = funcs.get(p.func.id)
    if not isinstance(d, FUNCS):
        return False
    i = p.args.index(n)
    params = [*d.args.posonlyargs, *d.args.args]
    if i >= len(params) or any(isinstance(a, ast.Starred) for a in p.args[:i]):
        return False
    param = params[i].arg
    if ctx.scope(d).bindings.get(param):
        return False
    for m in walk(d):
        if isinstance(m, ast.Name) and m.id == param and not _own_read(ctx, m, parents, own):
            return False
    return True
