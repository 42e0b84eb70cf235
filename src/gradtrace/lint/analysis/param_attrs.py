"""Parameters a module class registers in ``__init__`` and what its ``forward`` does to them.

# NOTE [trained parameter attributes]
``self.weight = nn.Parameter(...)`` in ``__init__`` makes ``self.weight`` a leaf that requires
grad for the module's whole life, read in every method. ``forward`` (and the methods it calls
through ``self``) runs with grad enabled in a file that trains (calls ``backward()``), so an
in-place write there (``self.weight /= self.weight.norm(...)``, ``self.scale.clamp_(...)``,
``self.mem[0] = ...``) is refused by autograd on the first call. The attribute must be
assigned once (in ``__init__``, its kind a Parameter through the analysis layer: NOTE [kinds]),
not made with ``requires_grad=False``, and the file must freeze nothing (no
``x.requires_grad = False``, no ``requires_grad_(False)``): a frozen parameter takes in-place
writes. Grad-mode blocks and decorators inside the method are the rule's to check.
"""
from __future__ import annotations

import ast
import weakref
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.calls import call_sites
from gradtrace.lint.analysis.kinds import PARAMETER
from gradtrace.lint.analysis.modules import ClassInfo
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

Fn = ast.FunctionDef | ast.AsyncFunctionDef


_FORWARD: weakref.WeakKeyDictionary[ClassInfo, list[Fn]] = weakref.WeakKeyDictionary()


def forward_methods(cls: ClassInfo) -> list[Fn]:
    """``forward`` and the methods it calls through ``self``, transitively (not
    ``__init__``); found once per class, several rules ask."""
    got = _FORWARD.get(cls)
    if got is None:
        out: list[Fn] = []
        todo, seen = ["forward"], set()
        while todo:
            m = cls.methods.get(todo.pop())
            if m is None or m.name in seen or m.name == "__init__":
                continue
            seen.add(m.name)
            out.append(m)
            todo.extend(n.func.attr for n in walk(m) if isinstance(n, ast.Call)
                        and isinstance(n.func, ast.Attribute) and dotted(n.func.value) == "self")
        got = _FORWARD[cls] = out
    return list(got)


def trained_parameter(ctx: Context, cls: ClassInfo, attr: str) -> ast.stmt | None:
    """The ``__init__`` statement that makes ``self.<attr>`` a Parameter that requires grad
    for good (NOTE [trained parameter attributes]); None: not known to be one."""
    info = cls.attrs.get(attr)
    if info is None or info.later or info.buffer or info.method.name != "__init__":
        return None
    k = cls.attr_kind(attr)
    if k is None or k.what != PARAMETER or asks_no_grad(info.value):
        return None
    if file_freezes(ctx) or not call_sites(ctx, "backward"):
        return None
    return info.stmt


def asks_no_grad(v: ast.expr | None) -> bool:
    return isinstance(v, ast.Call) and any(
        k.arg == "requires_grad" and not (isinstance(k.value, ast.Constant)
                                          and k.value.value is True) for k in v.keywords)


def file_freezes(ctx: Context) -> bool:
    """The file sets ``requires_grad`` to anything but True somewhere (a freeze)."""
    def make() -> bool:
        for n in walk(ctx.tree):
            if isinstance(n, ast.Assign) and any(
                    isinstance(t, ast.Attribute) and t.attr == "requires_grad"
                    for t in n.targets) and not _true(n.value):
                return True
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr == "requires_grad_" and n.args and not _true(n.args[0]):
                return True
        return False
    return ctx.memo("file-freezes", ctx.tree, make)


def _true(e: ast.expr) -> bool:
    return isinstance(e, ast.Constant) and e.value is True
