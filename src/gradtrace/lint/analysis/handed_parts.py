"""Whether a part a module class was handed at construction runs the same in both modes.

# NOTE [handed mode-free parts]
``self.autoencoder = pretrained_ae`` in ``__init__``, then ``self.autoencoder.eval()``: the
part is whatever the call that built the model passed for ``pretrained_ae``
(``LatentUNet(autoencoder, unet, head)`` after ``autoencoder = ChangeDetectionAE(3)``). When
that value was built, in the same function, by a class that is mode-free
(NOTE [mode-free modules]), of this file or of another file of the project
(NOTE [project index]: the class is read in its own file's context), putting it back in
training mode changes nothing. Anything
else (a value of unknown origin, a torch or package class, a ``*args`` call) is unknown and
answers False. Asked only where GT443 would report, so its cost is that of the findings.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.facts import unpacked_value
from gradtrace.lint.analysis.mode_free import mode_free_class
from gradtrace.lint.analysis.objects import ctor_arguments

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

# methods of nn.Module that return the module itself
_SELF_RETURNING = frozenset({"to", "cuda", "cpu", "float", "double", "half", "bfloat16",
                             "train", "eval", "requires_grad_", "type"})


def _built(e: ast.expr | None, scope: Scope, line: int) -> ast.Call | None:
    """The ``Cls(...)`` call that made the module ``e`` (a name read at ``line``, or a call
    in place), through ``.to(device)`` and the like and one plain name binding each."""
    for _ in range(4):
        while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
                and e.func.attr in _SELF_RETURNING:
            e = e.func.value
        if isinstance(e, ast.Call):
            return e if isinstance(e.func, (ast.Name, ast.Attribute)) else None
        if not isinstance(e, ast.Name):
            return None
        b = scope.binding_before(e.id, line)
        if b is None or isinstance(b.stmt, ast.AugAssign):
            return None
        e, line = unpacked_value(b, e.id), b.line
    return None


def class_mode_free(call: ast.Call, ctx: Context) -> bool:
    """``call`` builds an instance of a mode-free module class of this file or, through the
    project index, of another file of the project."""
    f = call.func
    if isinstance(f, ast.Name) and f.id in ctx.analysis.classes:
        return mode_free_class(f.id, ctx)
    from gradtrace.lint.analysis.project import foreign_def
    got = foreign_def(ctx, f)
    if got is None or not isinstance(got[1], ast.ClassDef):
        return False
    octx, node = got
    return octx.analysis.classes.get(node.name) is not None and mode_free_class(node.name, octx)


def handed_part_free(ev: ast.Call, holder: object, model: ast.expr, scope: Scope, line: int,
                     ctx: Context) -> bool:
    """Whether ``ev`` (``self.<attr>.eval()`` in ``holder``'s ``__init__``) switches a part
    that ``__init__`` took from one of its parameters, and the call that built ``model`` (read
    at ``line`` in ``scope``) passed a module of a mode-free class there."""
    recv = ev.func.value  # type: ignore[attr-defined]
    if not (isinstance(recv, ast.Attribute) and isinstance(recv.value, ast.Name)
            and recv.value.id == "self"):
        return False
    info = getattr(holder, "attrs", {}).get(recv.attr)
    v = info.value if info is not None and not info.later else None
    init = getattr(holder, "methods", {}).get("__init__")
    if not isinstance(v, ast.Name) or init is None:
        return False
    call = _built(model, scope, line)
    args = ctor_arguments(init, call) if call is not None else None
    given = args.get(v.id) if args is not None else None
    made = _built(given, scope, call.lineno) if given is not None else None  # type: ignore
    return made is not None and class_mode_free(made, ctx)
