"""Whether ``param.part`` in a function is a submodule, read from the callers in other files.

# NOTE [submodule by callers]
``def freeze_backbone(model): model.backbone.requires_grad = False`` in ``models.py`` says
nothing by itself of what ``model`` is; ``train.py`` does: ``freeze_backbone(Classifier())``
(or a name bound to ``Classifier(...)`` there). When every call of the top-level function in
the project's other files (NOTE [reverse index]) hands, for that parameter, an instance of one
module class of the function's own file, and that class's ``__init__`` binds the attribute
to a module constructor, ``model.backbone`` is a submodule. One attribute deep; no call, a
starred argument, a value of another kind, two classes, or a class of another file: unknown.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.callers import foreign_sites
from gradtrace.lint.analysis.params import module_ctor
from gradtrace.lint.grad_modes import FUNCTION_TYPES
from gradtrace.lint.names import dotted

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


def _class_name(octx: Context, arg: ast.AST | None, where: ast.AST, line: int) -> str | None:
    """The name of the class ``arg`` constructs (``Classifier()``, or a name bound to it)."""
    if isinstance(arg, ast.Name):
        b = octx.scope(where).binding_before(arg.id, line)
        arg = b.value if b is not None and isinstance(b.stmt, ast.Assign) else None
    while isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) \
            and arg.func.attr in ("to", "cuda", "cpu", "train", "eval", "float"):
        arg = arg.func.value
    if not isinstance(arg, ast.Call):
        return None
    name = dotted(arg.func)
    return name.rpartition(".")[2] if name else None


def submodule_by_callers(ctx: Context, name: str) -> bool:
    """NOTE [submodule by callers]: ``name`` (``model.backbone``) is a submodule of the
    instance every other file's call of the enclosing function passes for ``model``."""
    root, _, attr = name.partition(".")
    fn = ctx.function
    if not attr or "." in attr or not isinstance(fn, FUNCTION_TYPES) \
            or fn not in ctx.tree.body or root not in {a.arg for a in fn.args.args}:
        return False
    sites = foreign_sites(ctx, fn)
    if not sites:
        return False
    names = {_class_name(s.ctx, s.ctx.analysis.arguments(fn, s.call).get(root), s.where,
                         s.call.lineno) for s in sites}
    if len(names) != 1:
        return False
    cls = ctx.analysis.classes.get(names.pop() or "")
    if cls is None or not cls.is_module or cls.node not in ctx.tree.body \
            or any(_imports(s.ctx, cls.name) is False for s in sites):
        return False
    init = cls.init_attrs.get(attr)
    return init is not None and init.value is not None and module_ctor(init.value, ctx)


def _imports(octx: Context, name: str) -> bool:
    """The calling file binds ``name`` by an import (so it is not a class of its own)."""
    return name not in octx.analysis.classes
