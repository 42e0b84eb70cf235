"""GT438: a module run through a method of its own class (NOTE [module run by its own method]).

# NOTE [module run by its own method]
``feats = encoder.encode_image(x)`` runs the module as surely as ``encoder(x)`` when
``encode_image`` is a method the module's class of the file defines (not one ``nn.Module``
brings) that calls the class's own layers (``self.visual(x)``) with grad on (no
``@torch.no_grad()`` on it), and its result is read (an assignment or an argument: a
statement of its own, ``ema.update(model)``, is the object's bookkeeping, not a run).
GT438's reading of "only called" counts such a call as a run of the module.
"""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.module_api import MODULE_METHODS
from gradtrace.lint.flow import Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

GRAD_OFF = ("no_grad", "inference_mode")


def method_run(n: ast.AST, name: str, scope: Scope) -> bool:
    """``n`` is ``name.<method>(...)``, a run of the module ``name`` through its own method."""
    if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and isinstance(n.func.value, ast.Name) and n.func.value.id == name):
        return False
    meth = n.func.attr
    if meth in MODULE_METHODS or meth.startswith("_"):
        return False
    stmt = scope.statement_of(n)
    if stmt is None or isinstance(stmt, ast.Expr) and stmt.value is n:
        return False
    an = scope.ctx.analysis
    k = an.kind(n.func.value, scope, n.lineno)
    info = an.classes.get(k.cls or "") if k is not None and k.is_module else None
    fn = info.method(meth) if info is not None else None
    if fn is None or any((dotted(d.func if isinstance(d, ast.Call) else d) or "").rpartition(
            ".")[2] in GRAD_OFF for d in fn.decorator_list):
        return False
    return any(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
               and dotted(c.func.value) == "self" and c.func.attr in info.attrs  # type: ignore
               for c in walk(fn))


# moves of a module that return it and say nothing about its training (not `eval`, `apply`...)
MOVES = frozenset({"to", "cuda", "cpu", "float", "double", "half", "bfloat16", "train"})


def moved_build(v: ast.Call) -> ast.Call:
    """The constructor call under moves: ``Net().to(device)`` is built by ``Net()``."""
    while isinstance(v.func, ast.Attribute) and v.func.attr in MOVES \
            and isinstance(v.func.value, ast.Call):
        v = v.func.value
    return v
