"""A backward reached through calls of the file, and the function a call of a method runs.

# NOTE [backward through calls]
``ColorMatch().execute(image)`` then ``Inpaint().execute(pipe, image)``, whose method calls
``optimize(...)``, which runs ``loss.backward()``: grad mode is a setting of the thread, so
what one call leaves (``torch.set_grad_enabled(False)`` never undone) reaches every call made
after it, however deep. The function a call runs is read from the code: a function of the file
(``helper(...)``), a method of ``self``, of an object the analysis layer knows is an instance
of a class of the file (NOTE [kinds]), or of a fresh instance, ``Cls(...).method(...)``. A
function that turns grad back on anywhere (a setter given a true or unknown flag,
``torch.enable_grad()``, ``torch.inference_mode(False)``, as a call, a ``with`` or a decorator)
ends the search through it: its body may run with grad on. Followed ``MAX_DEPTH`` calls deep,
each function once.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Callable

from gradtrace.lint.analysis.callees import resolve
from gradtrace.lint.analysis.returned_closures import returned_closure
from gradtrace.lint.grad_modes import GRAD_CONTEXTS, FUNCTION_TYPES, grad_mode_of
from gradtrace.lint.nodes import bfs_walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

MAX_DEPTH = 3
Fn = ast.FunctionDef | ast.AsyncFunctionDef


def called_function(ctx: Context, where: ast.AST, call: ast.Call) -> Fn | None:
    """The function of this file ``call`` runs (see NOTE [backward through calls])."""
    got = resolve(ctx, where, call)
    if got is not None:
        return got[0]
    closure = returned_closure(ctx, where, call)  # NOTE [returned closure]
    if closure is not None and closure[0] is ctx:
        return closure[1]
    f = call.func
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Call) \
            and isinstance(f.value.func, ast.Name):
        cls = ctx.analysis.classes.get(f.value.func.id)
        fn = cls.method(f.attr) if cls is not None else None
        return fn if fn is not where else None
    return None


def turns_grad_on(fn: ast.AST, ctx: Context) -> bool:
    """``fn`` may turn grad back on somewhere in its text, its decorators included."""
    for n in bfs_walk(fn):
        if isinstance(n, ast.Call):
            mode = grad_mode_of(n, ctx.imports)
            if mode in ("on", "reset") or mode is None and GRAD_CONTEXTS.get(
                    ctx.qualified_name(n.func) or "") == "set":
                return True  # set_grad_enabled(flag): maybe on
    return False


def backward_through_calls(ctx: Context, call: ast.Call, where: ast.AST,
                           is_backward: Callable[[ast.Call], bool],
                           depth: int = MAX_DEPTH, seen: set[int] | None = None
                           ) -> ast.Call | None:
    """The first backward (in line order) that ``call`` runs through functions of the file,
    none of which turns grad back on (NOTE [backward through calls]); None if none is seen."""
    seen = set() if seen is None else seen
    fn = called_function(ctx, where, call)
    if fn is None or id(fn) in seen or depth <= 0:
        return None
    seen.add(id(fn))
    if turns_grad_on(fn, ctx):
        return None
    later = _later_ids(fn)
    inner = [n for n in bfs_walk(fn) if isinstance(n, ast.Call) and id(n) not in later]
    for c in sorted(inner, key=lambda c: (c.lineno, c.col_offset)):
        if is_backward(c):
            return c
        got = backward_through_calls(ctx, c, fn, is_backward, depth - 1, seen)
        if got is not None:
            return got
    return None


def _later_ids(fn: Fn) -> set[int]:
    """The nodes of ``fn``'s decorators and of the functions, lambdas and classes nested in
    it (run at another time, maybe never)."""
    out = {id(x) for d in fn.decorator_list for x in ast.walk(d)}
    for n in bfs_walk(fn):
        if n is not fn and isinstance(n, (*FUNCTION_TYPES, ast.ClassDef, ast.Lambda)):
            out.update(id(x) for x in ast.walk(n))
    return out
