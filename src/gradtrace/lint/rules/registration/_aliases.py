"""Submodules an object of a file class holds from its constructor's arguments (GT406)."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.flow import Scope
    from gradtrace.lint.analysis.modules import ClassInfo
    from gradtrace.lint.context import Context


def held_from_arguments(owner: ClassInfo, attr: str, ctx: Context) -> list[str]:
    """For ``self.<attr> = Cls(<args>)`` in ``owner``'s ``__init__``, with ``Cls`` a module
    class of the file whose ``__init__`` keeps an argument or a part of it
    (``self.encoder = critic.encoder``): the dotted spellings, in ``owner``'s terms, of what the
    new object holds (``self.critic.encoder``).
    # NOTE [held from arguments]: the object's ``parameters()`` include those modules' ones.
    """
    info = owner.attrs.get(attr)
    classes = ctx.analysis.classes
    if info is None or info.method.name != "__init__" or not isinstance(info.value, ast.Call) \
            or not isinstance(info.value.func, ast.Name) or info.value.func.id not in classes:
        return []
    cls = classes[info.value.func.id]
    init = cls.methods.get("__init__")
    if init is None or not cls.is_module:
        return []
    names = [a.arg for a in init.args.args][1:]
    given: dict[str, str] = {}
    for n, v in zip(names, info.value.args):
        if isinstance(v, ast.Starred):
            break
        d = dotted(v)
        if d:
            given[n] = d
    for k in info.value.keywords:
        d = dotted(k.value) if k.arg else None
        if d:
            given[k.arg] = d  # type: ignore[index]
    out = []
    for st in walk(init):
        if isinstance(st, ast.Assign) and len(st.targets) == 1 \
                and isinstance(st.targets[0], ast.Attribute) \
                and dotted(st.targets[0].value) == "self":
            src = dotted(st.value)
            if not src:
                continue
            head, _, rest = src.partition(".")
            if head in given and head not in ("self",):
                out.append(given[head] + ("." + rest if rest else ""))
    return out


def rebound_in(scope: Scope, e: ast.AST, start: int, end: int) -> bool:
    """Whether a name or ``self.<x>`` read in ``e`` is bound (or extended) between the lines."""
    read = {dotted(n) for n in walk(e) if isinstance(n, (ast.Name, ast.Attribute))} \
        - {None, "self"}
    for n in walk(scope.node):
        if start < getattr(n, "lineno", 0) < end:
            if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For)):
                tgts = n.targets if isinstance(n, ast.Assign) else [n.target]
                if any(dotted(t) in read for tg in tgts for t in walk(tg)
                       if isinstance(t, (ast.Name, ast.Attribute))):
                    return True
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and dotted(n.func.value) in read:
                return True  # params.append(...), params.extend(...)
    return False


def stepped_in_one_pass(scope: Scope, a: str, b: str) -> bool:
    """Both optimizers stepped by sibling statements of one block (not in phases, not in
    two branches)."""
    def stmts(opt: str) -> set[int]:
        return {id(m.stmt) for m in scope.calls_to("step") if m.receiver == opt}
    sa, sb = stmts(a), stmts(b)
    if not sa or not sb:
        return False
    for n in walk(scope.node):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(n, field, None)
            if isinstance(block, list) and {id(s) for s in block} & sa \
                    and {id(s) for s in block} & sb:
                return True
    return False
