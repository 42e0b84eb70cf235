"""Functions of another file: one file cannot see what they return.

# NOTE [foreign functions]
``acc += accuracy(y, out)`` with ``accuracy`` imported from the project's ``metrics.py`` (or
reached through ``from evaluation import *``, or bound nowhere in the file): whether its result keeps the graph of ``out``
is decided in that file (a metric returns ``(pred == y).float().mean().item()``, a Python
number). A rule that claims a graph through such a call states what it cannot know; it
stays silent unless the function is spelled like a loss (``compute_loss``, ``dice_loss``:
the vocabulary's last resort) or like a model; and then only for what the spelling speaks
of: of a result unpacked into several names (``loss, mask, stats = consistency_loss(...)``),
the first is the loss, the others are by-products the file cannot see. Functions of torch (``F.mse_loss``,
``torch.cat``), of this file, builtins, and attribute calls are not foreign.
"""
from __future__ import annotations

import ast
import builtins
from typing import TYPE_CHECKING, Callable

from gradtrace.lint.analysis.vocabulary import (
    IMAGE_LIBRARIES, LOSS_CALLABLE_RE, OTHER_FRAMEWORKS, model_spelling)
from gradtrace.lint.context import Context
from gradtrace.lint.nodes import of_types, statements

if TYPE_CHECKING:
    from gradtrace.lint.flow import Scope

_BUILTINS = frozenset(dir(builtins))


def foreign_call(ctx: Context, spelled: bool = False) -> Callable[[ast.Call], bool]:
    """The (cached per file) test: ``call`` runs a function imported from another file
    (NOTE [foreign functions]); with ``spelled``, also one spelled like a loss."""
    def make() -> Callable[[ast.Call], bool]:
        own = {s.name for s in statements(ctx.tree)
               if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        imports = ctx.imports
        stored: set[str] = set()  # every name the file binds (a local callable is not foreign)
        for n in of_types(ctx.tree, (ast.Name, ast.arguments)):  # (the file's typed index)
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
                stored.add(n.id)
            elif isinstance(n, ast.arguments):
                stored.update(a.arg for a in n.posonlyargs + n.args + n.kwonlyargs)
                stored.update(a.arg for a in (n.vararg, n.kwarg) if a is not None)

        def test(call: ast.Call) -> bool:
            f = call.func
            if not isinstance(f, ast.Name) or f.id in own or f.id in _BUILTINS \
                    or not spelled and LOSS_CALLABLE_RE.match(f.id) or model_spelling(f.id):
                return False
            if f.id in imports.package:
                return True
            q = imports.aliases.get(f.id)
            if q is not None:
                return "." in q and not q.startswith(("torch.", "numpy.", "math."))
            return f.id not in stored  # `from metrics import *`, or not bound at all
        return test
    return ctx.memo("gt5-foreign-calls-spelled" if spelled else "gt5-foreign-calls", ctx.tree,
                    make)


def other_framework(ctx: Context, scope: Scope, call: ast.Call) -> bool:
    """``call`` runs a function of another array framework (``tf.reduce_mean(x)``) or a method
    of an object one made (``with tf.Session() as sess: ... sess.run([train_op, loss_op])``):
    it hands back that framework's values (``Session.run`` gives NumPy arrays), never a torch
    tensor with a graph, whatever torch-looking names its arguments read. So does an image or
    plotting library (``PIL.Image.fromarray(pose_img)``: an image, collected for a GIF)."""
    made: ast.AST | None = call
    f = call.func
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
        b = scope.binding_before(f.value.id, call.lineno)
        made = b.value if b is not None else None
        if b is not None and isinstance(b.stmt, (ast.With, ast.AsyncWith)):
            made = next((it.context_expr for it in b.stmt.items
                         if isinstance(it.optional_vars, ast.Name)
                         and it.optional_vars.id == f.value.id), None)
        if not isinstance(made, ast.Call):
            made = call
    root = (ctx.call_name(made) or "").partition(".")[0]
    return root in OTHER_FRAMEWORKS or root in IMAGE_LIBRARIES  # (PIL's image of an array)
