"""Whether a module built in a function holds another module of that function as a part.

# NOTE [held parts]
``model = nn.Sequential(backbone, head)`` (also ``nn.ModuleList([a, b])``, ``nn.ModuleDict(
{"enc": enc})``, ``.to(device)`` after it) registers the very module objects it is given:
``model.parameters()`` yields ``backbone``'s parameters (torch 2.13: the same objects). So does
a module class of the file whose ``__init__`` stores the argument on ``self``
(``self.backbone = backbone``). A flag set on ``backbone``'s parameters is then a flag on
parameters an optimizer built over ``model.parameters()`` may hold. Only the latest binding of
the owner before the line counts; anything else answers False.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.objects import ctor_arguments
from gradtrace.lint.names import dotted

if TYPE_CHECKING:
    from gradtrace.lint.flow import Scope

CONTAINERS = frozenset({"torch.nn.Sequential", "torch.nn.ModuleList", "torch.nn.ModuleDict"})
_MOVES = frozenset({"to", "cuda", "cpu", "train", "float", "double", "half"})


def holds_part(scope: Scope, owner: str, part: str, line: int) -> bool:
    """Whether the module named ``owner`` at ``line`` was built from the module ``part``
    (a plain name) as one of its parts (NOTE [held parts])."""
    if "." in owner or "[" in owner or not part.isidentifier():
        return False
    b = scope.binding_before(owner, line)
    v = b.value if b is not None else None
    while isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr in _MOVES:
        v = v.func.value
    if not isinstance(v, ast.Call):
        return False
    ctx = scope.ctx
    if ctx.call_name(v) in CONTAINERS:
        args = [*v.args, *(k.value for k in v.keywords)]
        return any(isinstance(n, ast.Name) and n.id == part
                   for a in args for n in _elements(a))
    cls = ctx.analysis.classes.get(v.func.id) if isinstance(v.func, ast.Name) else None
    init = cls.methods.get("__init__") if cls is not None else None
    pairs = ctor_arguments(init, v) if init is not None else None
    if not pairs:
        return False
    params = {p for p, a in pairs.items() if isinstance(a, ast.Name) and a.id == part}
    return any(isinstance(n, ast.Assign) and len(n.targets) == 1
               and (dotted(n.targets[0]) or "").startswith("self.")
               and isinstance(n.value, ast.Name) and n.value.id in params
               for n in ast.walk(init))


def _elements(e: ast.expr) -> list[ast.expr]:
    """``e`` itself, or the items of a list, tuple or dict literal (``*``-unpacked too)."""
    if isinstance(e, (ast.List, ast.Tuple)):
        return [x.value if isinstance(x, ast.Starred) else x for x in e.elts]
    if isinstance(e, ast.Dict):
        return [x for x in e.values if x is not None]
    return [e]
