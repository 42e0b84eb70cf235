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


def own_gradients(scope: Scope, a: str, b: str) -> bool:
    """# NOTE [each step its own gradient]
    Two optimizers over the same weights stepped in one pass of a loop each apply the same
    gradient twice only when nothing between the two steps makes a new one. DANN's
    ``net_opt.zero_grad(); class_loss.backward(); net_opt.step()`` then
    ``enc_opt.zero_grad(); dom_loss.backward(); enc_opt.step()`` (both over
    ``net.parameters()``) clears the shared gradients with one of the two optimizers and
    backpropagates another loss before the second step: each step applies its own loss's
    gradient, by design (torch 2.13: ``zero_grad()`` sets every ``.grad`` it holds to None, the
    second ``backward()`` fills them anew). True when, in every block that steps both, each
    pair of steps (in block order) has such a clear (a ``zero_grad()`` of ``a`` or ``b``)
    followed by a ``backward()`` between them."""
    def calls(s: ast.stmt, attr: str) -> list[ast.Call]:
        return [c for c in walk(s) if isinstance(c, ast.Call)
                and isinstance(c.func, ast.Attribute) and c.func.attr == attr]

    steps = {id(m.stmt): m.receiver for m in scope.calls_to("step") if m.receiver in (a, b)}
    seen = False
    for n in walk(scope.node):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(n, field, None)
            if not isinstance(block, list):
                continue
            at = [(i, steps[id(s)]) for i, s in enumerate(block) if id(s) in steps]
            if {r for _, r in at} != {a, b}:
                continue
            seen = True
            for (i, _), (j, _) in zip(at, at[1:]):
                cleared = False
                for s in block[i + 1:j]:
                    if any(dotted(c.func.value) in (a, b) for c in calls(s, "zero_grad")):
                        cleared = True
                    elif cleared and calls(s, "backward"):
                        break
                else:
                    return False
    return seen
