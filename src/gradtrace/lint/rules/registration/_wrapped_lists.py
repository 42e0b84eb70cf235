"""A container built in a method from a list the method fills with parameter-free modules.

# NOTE [container of parameter-free wrappers]
``self.net = []``, then ``self.net.append(IntervalDense(layer))`` for each layer of the model
it is handed, then ``self.net = nn.Sequential(*self.net)``: the ``Sequential`` holds what the
list holds, and when every element put there is an instance of a class of the file that
creates no parameter (``param_free_classes``: a wrapper that keeps the caller's layer and
reads its weight), the container creates none either (symbolic interval analysis wraps a
trained network this way, once per call of ``forward``: no new random weights). Every way
the list gets an element must be seen in the method: the list literal it is bound to, its
``append``/``extend``/``insert`` and ``+=`` (a call of a name bound nowhere in the file, a
dead branch's ``NameError``, adds nothing); anything else (another element, the list passed
to a call, an element from a call of something else) leaves the container an owner.
"""
from __future__ import annotations

import ast
import builtins
from typing import TYPE_CHECKING

from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

CONTAINER_CTORS = frozenset({"torch.nn.Sequential", "torch.nn.ModuleList"})
FILLING = frozenset({"append", "extend", "insert"})


def wraps_free(call: ast.Call, fn: ast.AST, free: set[str] | frozenset[str],
               ctx: Context) -> bool:
    """``call`` is ``nn.Sequential(*xs)`` or ``nn.ModuleList(xs)`` over a list ``xs`` that
    the function ``fn`` fills only with instances of the classes ``free``
    (NOTE [container of parameter-free wrappers])."""
    if ctx.call_name(call) not in CONTAINER_CTORS or len(call.args) != 1 or call.keywords:
        return False
    arg = call.args[0]
    inner = arg.value if isinstance(arg, ast.Starred) else arg
    name = dotted(inner)
    if name is None:
        return False
    seen = 0
    for n in walk(fn):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and dotted(n.func.value) == name:
            if n.func.attr not in FILLING:
                return False
            items = n.args[1:] if n.func.attr == "insert" else n.args
            if not all(_free_item(a, free, n.func.attr == "extend", ctx) for a in items):
                return False
            seen += 1
        elif isinstance(n, (ast.Assign, ast.AugAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            if any(dotted(t) == name for t in targets) and n.value is not call \
                    and not _free_item(n.value, free, True, ctx):
                return False
        elif isinstance(n, ast.Call) and n is not call and any(
                dotted(a.value if isinstance(a, ast.Starred) else a) == name
                for a in [*n.args, *(k.value for k in n.keywords)]):
            return False  # handed to another call: filled out of sight
    return seen > 0


def _free_item(e: ast.AST, free: set[str] | frozenset[str], many: bool, ctx: Context) -> bool:
    """An instance of a class of ``free`` (``many``: a list or tuple literal of them), or a
    call of a name the file binds nowhere (no import, definition or assignment, no star
    import, no builtin): it raises ``NameError`` before anything is added."""
    if many:
        return isinstance(e, (ast.List, ast.Tuple)) and all(
            _free_item(x, free, False, ctx) for x in e.elts)
    return isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and (
        e.func.id in free or _unbound(e.func.id, ctx))


def _unbound(name: str, ctx: Context) -> bool:
    if hasattr(builtins, name) or ctx.imports.is_imported(name):
        return False
    for n in walk(ctx.tree):
        if isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) or \
                isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load) or \
                isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and n.name == name or isinstance(n, ast.arg) and n.arg == name:
            return False
    return True
