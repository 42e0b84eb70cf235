"""A tensor the caller marked as requiring grad, read by the function it is handed to.

# NOTE [marked by the caller]
``state.positions.requires_grad_(True)`` (or ``x.requires_grad_()``, ``x.requires_grad =
True``) as a statement of a function's own body, then ``model(state)`` later in that body: the
tensor that path names requires grad when the call runs, unless the path's root is rebound
(or the path assigned) between the mark and the call. A function reading
``state.positions`` from its parameter ``state`` (through the graph-keeping methods of
:data:`~.grad_values.KEEPS`: ``state.positions.cpu()``) then reads a tensor that requires grad
whenever one call of the file passes such an object, with grad enabled in a function the file
runs with grad enabled (:func:`~.grad_values.runs_with_grad`). Only marks in the function's own
top-level statements count (not under an ``if`` or a loop, where they may not run), and only
a true or absent flag. A module class's ``forward`` is called by the calls of its instances
(NOTE [instance calls]).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.callees import function_sites, module_sites
from gradtrace.lint.analysis.grad_values import KEEPS, runs_with_grad
from gradtrace.lint.context import FUNCTION_TYPES
from gradtrace.lint.names import dotted

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

MAX_PATH = 3  # attributes after the parameter: ``state.atoms.positions``


def marked_before(ctx: Context, where: ast.AST, path: str, line: int) -> ast.AST | None:
    """The mark (NOTE [marked by the caller]) of the tensor ``path`` names in ``where``'s own
    top-level statements, before ``line``, with nothing rebinding it in between."""
    if not isinstance(where, FUNCTION_TYPES):
        return None
    mark = None
    for st in where.body:
        if st.lineno >= line:
            break
        if _marks(st, path):
            mark = st
        elif mark is not None and _rebinds(st, path):
            mark = None
    if mark is None:
        return None
    root = path.split(".")[0]
    b = ctx.scope(where).binding_before(root, line)
    return mark if b is None or b.line < mark.lineno else None


def _marks(st: ast.stmt, path: str) -> bool:
    if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
        c = st.value
        f = c.func
        if not (isinstance(f, ast.Attribute) and f.attr == "requires_grad_"
                and dotted(f.value) == path):
            return False
        flag = c.args[0] if c.args else next(
            (k.value for k in c.keywords if k.arg == "requires_grad"), None)
        return flag is None or isinstance(flag, ast.Constant) and flag.value is True
    if isinstance(st, ast.Assign) and len(st.targets) == 1:
        t = st.targets[0]
        return isinstance(t, ast.Attribute) and t.attr == "requires_grad" \
            and dotted(t.value) == path and isinstance(st.value, ast.Constant) \
            and st.value.value is True
    return False


def _rebinds(st: ast.stmt, path: str) -> bool:
    """``st`` assigns ``path`` or a prefix of it (``state = ...``, ``state.positions = ...``)."""
    targets = st.targets if isinstance(st, ast.Assign) else \
        [st.target] if isinstance(st, (ast.AnnAssign, ast.AugAssign)) else []
    for t in targets:
        for n in ast.walk(t):
            d = dotted(n) if isinstance(n, (ast.Name, ast.Attribute)) else None
            if d is not None and (path == d or path.startswith(d + ".")):
                return True
    return False


def peeled_path(e: ast.expr) -> str | None:
    """The dotted path of the tensor ``e`` reads through :data:`KEEPS` methods
    (``state.positions.cpu()`` -> ``state.positions``)."""
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr in KEEPS:
        e = e.func.value
    d = dotted(e) if isinstance(e, (ast.Name, ast.Attribute)) else None
    return d if d is not None and d.count(".") <= MAX_PATH else None


def parameter_path(where: ast.AST, e: ast.expr) -> tuple[str, str] | None:
    """(parameter, attribute path after it, maybe empty) for ``state.positions.cpu()`` read
    in a function whose parameter is ``state``."""
    d = peeled_path(e)
    if d is None or not isinstance(where, FUNCTION_TYPES):
        return None
    root, _, rest = d.partition(".")
    a = where.args
    if root in ("self", "cls") or root not in {
            x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)}:
        return None
    return root, rest


def passed_marked(ctx: Context, where: ast.AST, e: ast.expr
                  ) -> tuple[ast.AST, list[ast.Call]] | None:
    """(the mark, [the call]) when ``e``, read in ``where``, is a tensor of a parameter that a
    call of the file hands in marked as requiring grad (NOTE [marked by the caller])."""
    got = parameter_path(where, e)
    if got is None:
        return None
    param, rest = got
    for call, w in _sites(ctx, where):
        arg = _argument(ctx, where, call, param)
        d = dotted(arg) if isinstance(arg, (ast.Name, ast.Attribute)) else None
        if d is None or ctx.scope(w).grad_off_at(call) is not None:
            continue
        mark = marked_before(ctx, w, f"{d}.{rest}" if rest else d, call.lineno)
        if mark is not None and runs_with_grad(ctx, w):
            return mark, [call]
    return None


def _sites(ctx: Context, fn: ast.AST) -> list[tuple[ast.Call, ast.AST]]:
    a = ctx.analysis
    sites = function_sites(a, fn) or []  # type: ignore[arg-type]
    cls = a.class_of(fn)
    if not sites and cls is not None and cls.is_module and cls.methods.get("forward") is fn:
        sites = module_sites(a, cls.name)  # `model(state)` runs `Model.forward`
    return sites


def _argument(ctx: Context, fn: ast.AST, call: ast.Call, param: str) -> ast.expr | None:
    a = fn.args  # type: ignore[attr-defined]
    names = [x.arg for x in (*a.posonlyargs, *a.args)]
    kw = next((k.value for k in call.keywords if k.arg == param), None)
    if kw is not None:
        return kw
    if names[:1] == ["self"]:
        names = names[1:]  # `model(state)`, `obj.method(state)`: the instance is `self`
    args = dict(zip(names, call.args))
    v = args.get(param)
    return None if isinstance(v, ast.Starred) else v
