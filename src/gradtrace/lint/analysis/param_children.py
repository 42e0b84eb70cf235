"""The attributes through which a module class of the file holds all its parameters.

# NOTE [parameter children]
``class Sam(nn.Module)`` whose ``__init__`` builds ``self.encoder = nn.Sequential(...)``,
``self.prompt = nn.Conv2d(...)`` and ``self.decoder = Decoder()`` (and numbers, flags, plain
tensors) registers every parameter of an instance under one of those three attributes: a loop
over ``sam.encoder.parameters()`` that freezes them, another over ``sam.prompt``'s and
``sam.decoder``'s, freeze the whole model as surely as ``sam.requires_grad_(False)`` does
(``model.net.requires_grad_(False)`` with ``net`` the only child that holds weights, too).
:func:`param_children` names those attributes, or None when the class may hold a parameter
elsewhere: a base class other than ``nn.Module`` (it may register its own), a registration
the code spells at run time (``register_parameter``, ``add_module``, ``setattr``), an
attribute built outside ``__init__`` or rebound, or a value of unknown kind that the class
runs as a module. A value it cannot tell is counted as a child that holds parameters: that
child must then be frozen too (the answer errs toward "not everything is frozen").
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.grad_values import weighted
from gradtrace.lint.analysis.params import module_ctor
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.analysis.modules import ClassInfo
    from gradtrace.lint.context import Context

MODULE_BASES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module"})
DYNAMIC = frozenset({"register_parameter", "add_module", "register_module", "__setattr__"})
CONTAINERS = frozenset({"torch.nn.Sequential", "torch.nn.ModuleList", "torch.nn.ModuleDict",
                        "torch.nn.ParameterList", "torch.nn.ParameterDict"})
PLAIN = (ast.Constant, ast.JoinedStr, ast.Compare, ast.BoolOp, ast.UnaryOp)


def param_children(ctx: Context, cls: str | None) -> tuple[str, ...] | None:
    """The attributes of the module class ``cls`` of the file that hold its parameters
    (NOTE [parameter children]), or None when not known."""
    info = ctx.analysis.classes.get(cls) if cls else None
    if info is None or not info.is_module:
        return None
    return ctx.memo("param-children", info.node, lambda: _children(ctx, info))


def _children(ctx: Context, info: ClassInfo) -> tuple[str, ...] | None:
    if not info.node.bases or any(ctx.qualified_name(b) not in MODULE_BASES
                                  for b in info.node.bases):
        return None
    init = info.methods.get("__init__")
    if init is None:
        return None
    for n in walk(info.node):
        if isinstance(n, ast.Call) and (
                isinstance(n.func, ast.Attribute) and n.func.attr in DYNAMIC
                or isinstance(n.func, ast.Name) and n.func.id == "setattr"):
            return None
    called: set[str] = set()  # `self.x(...)`, `self.x.parameters()`: run as a module
    for n in walk(info.node):
        f = n.func if isinstance(n, ast.Call) else None
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Attribute):
            f = f.value
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                and f.value.id == "self":
            called.add(f.attr)
    out: list[str] = []
    for name, a in info.attrs.items():
        if a.buffer:
            continue
        holds = _holds(ctx, a.value, name in called)
        if a.method is not init or a.later:
            if holds or a.later and any(_holds(ctx, getattr(s, "value", None), True)
                                        for s in a.later):
                return None  # built or rebound elsewhere
            continue
        if holds:
            out.append(name)
    return tuple(out) if out else None


def _holds(ctx: Context, v: ast.AST | None, run: bool) -> bool:
    """Whether the value ``v`` of an attribute may hold parameters (``run``: the class calls
    the attribute, as a module is called)."""
    if v is None or isinstance(v, PLAIN):
        return False
    if isinstance(v, (ast.List, ast.Tuple, ast.Set, ast.Dict)):
        parts = v.values if isinstance(v, ast.Dict) else v.elts
        return any(_holds(ctx, p, run) for p in parts)
    if isinstance(v, ast.BinOp):
        return _holds(ctx, v.left, run) or _holds(ctx, v.right, run)
    if isinstance(v, ast.Call):
        q = ctx.qualified_name(v.func) or ""
        if q == "torch.nn.Parameter" or q in CONTAINERS:
            return True
        if module_ctor(v, ctx):
            name = v.func.id if isinstance(v.func, ast.Name) else q
            known = q.startswith("torch.nn.") or name in ctx.analysis.classes
            return not known or weighted(ctx, name, v)
        if q.startswith("torch.") and q.rpartition(".")[2][:1].islower() \
                and not q.startswith("torch.nn."):
            return False  # a plain tensor (`torch.zeros(...)`): no parameter
        return True
    return run  # a name or attribute: a module when the class runs it
