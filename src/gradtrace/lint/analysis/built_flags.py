"""The ``if`` arms of a module class that one construction of it rules out.

# NOTE [arms a construction rules out]
``net = Decoder(d, kind=Kind.FIXED)`` and, in ``Decoder.__init__``, ``self.kind = kind``
(the argument not bound again in ``__init__``; no other statement of the file assigns an
attribute ``kind``, on ``self`` or on any object): for that instance ``self.kind`` is
``Kind.FIXED`` whatever runs, so an arm of a method of the class (or of a base of the file)
under ``if self.kind == Kind.LEARNED:`` never runs for it (:func:`.flag_truth.truth_under`:
the values are constants and members of the file's enums, NOTE [enum flags], given at the call
or defaulted). The instance is the call itself, or a name bound to it (through ``.to(...)``,
``.cuda()``...) in the function that hands it on.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.enum_members import enum_members
from gradtrace.lint.analysis.flag_truth import truth_under
from gradtrace.lint.analysis.init_arguments import init_arguments
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import parent_map, walk

if TYPE_CHECKING:
    from gradtrace.lint.analysis.modules import ClassInfo
    from gradtrace.lint.context import Context

_MOVES = frozenset({"to", "cuda", "cpu", "float", "double", "half", "train"})


def construction(e: ast.AST, owner: ast.AST, line: int, ctx: Context,
                 info: ClassInfo) -> ast.Call | None:
    """The call building ``info`` that ``e`` (read at ``line`` in ``owner``) holds."""
    for _ in range(4):
        while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
                and e.func.attr in _MOVES:
            e = e.func.value
        if isinstance(e, ast.Call):
            got = ctx.analysis.classes.get(dotted(e.func) or "")
            return e if got is info else None
        if not isinstance(e, ast.Name):
            return None
        b = ctx.scope(owner).binding_before(e.id, line)
        if b is None or b.value is None:
            return None
        e, line = b.value, b.line
    return None


def construction_flags(ctx: Context, info: ClassInfo, call: ast.Call) -> dict[str, object]:
    """``self.<attr>`` (as ``attr``) -> its value for the instance ``call`` builds, plus the
    file's enum members (``"Kind.FIXED"``) for the tests, and ``__init__``'s arguments
    (``$name``); empty when nothing is known (NOTE [arms a construction rules out])."""
    init = info.methods.get("__init__")
    if init is None:
        return {}
    members = enum_members(ctx)
    values: dict[str, object] = {}
    for p, v in init_arguments(info, call, None):
        if isinstance(v, ast.Constant):
            values[p] = v.value
        elif isinstance(v, ast.Attribute) and (dotted(v) or "") in members:
            values[p] = members[dotted(v)]  # type: ignore[index]
    rebound = {n.id for n in walk(init) if isinstance(n, ast.Name)
               and isinstance(n.ctx, ast.Store)}
    stored = _stored_attrs(ctx)
    if stored.get("?"):  # `setattr(...)`: any attribute may change
        return {}
    out: dict[str, object] = {}
    for name, attr in info.attrs.items():
        v = attr.value
        if attr.later or attr.method is not init or not isinstance(v, ast.Name) \
                or v.id not in values or v.id in rebound or stored.get(name, 0) != 1:
            continue
        out[name] = values[v.id]
    given = {"$" + p: v for p, v in values.items() if p not in rebound}  # `__init__`'s tests
    return {**members, **given, **out} if out else {}


def _stored_attrs(ctx: Context) -> dict[str, int]:
    """Attribute name -> how many stores of ``<anything>.<name>`` the file makes."""
    def make() -> dict[str, int]:
        out: dict[str, int] = {}
        for n in walk(ctx.tree):
            if isinstance(n, ast.Attribute) and isinstance(n.ctx, (ast.Store, ast.Del)):
                out[n.attr] = out.get(n.attr, 0) + 1
            elif isinstance(n, ast.Call) and dotted(n.func) in ("setattr", "object.__setattr__"):
                out["?"] = out.get("?", 0) + 1
        return out
    return ctx.memo("built-flags-stored", ctx.tree, make)


def ruled_out(node: ast.AST, method: ast.AST, flags: dict[str, object], ctx: Context) -> bool:
    """``node`` of ``method`` lies in an ``if`` arm that ``flags`` decide is not taken."""
    parents = ctx.memo("built-flags-parents", method, lambda: parent_map(method))
    child, p = node, parents.get(id(node))
    while p is not None and p is not method:
        if isinstance(p, (ast.If, ast.IfExp)) and child is not p.test:
            t = truth_under(p.test, flags)
            if t is not None and (child in p.body if isinstance(p, ast.If)
                                  else child is p.body) != t:
                return True
        child, p = p, parents.get(id(p))
    return False
