"""Which names of one of its methods a class's ``self`` fields hold when they are unpacked from
that method's returned tuple.

# NOTE [fields unpacked from a method's tuple]
``self._generator, self._discriminator, self._g_optim, self._d_optim = self._load_model()``
with ``_load_model`` ending ``return generator, discriminator, g_optim, d_optim`` (and ``d_optim
= optim.Adam(discriminator.parameters())`` in it): ``self._d_optim`` holds what the method's
``d_optim`` held and ``self._discriminator`` its ``discriminator``. Read only when the fields
are assigned by that one statement in the class and every ``return`` of the method (of the
class, not a generator) is a tuple of names as wide as the target; anything else gives
nothing. The method is read once per (class, field) asked.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def unpacked_names(cls: ast.ClassDef | None, fields: tuple[str, ...], ctx: Context
                   ) -> tuple[ast.AST, tuple[str, ...]] | None:
    """(the method, the names its returns give each of ``fields``) when one statement of
    ``cls`` unpacks all of ``fields`` from ``self.<method>(...)``; None otherwise:
    NOTE [fields unpacked from a method's tuple]."""
    if cls is None:
        return None
    sites = [n for n in walk(cls) if isinstance(n, ast.Assign) and any(
        dotted(t) in fields for tt in n.targets for t in walk(tt))]
    if len(sites) != 1 or len(sites[0].targets) != 1 \
            or not isinstance(sites[0].targets[0], ast.Tuple):
        return None
    st, target = sites[0], sites[0].targets[0]
    places = [next((i for i, e in enumerate(target.elts) if dotted(e) == f), None)
              for f in fields]
    v = st.value
    if any(p is None for p in places) or not isinstance(v, ast.Call) \
            or not (dotted(v.func) or "").startswith("self.") \
            or (dotted(v.func) or "").count(".") != 1:
        return None
    name = (dotted(v.func) or "").partition(".")[2]
    fn = next((m for m in cls.body if isinstance(m, FUNCS) and m.name == name), None)
    if fn is None:
        return None
    own = [n for n in walk(fn) if isinstance(n, (ast.Return, ast.Yield, ast.YieldFrom))]
    width = len(target.elts)
    if not own or any(not isinstance(r, ast.Return) or not isinstance(r.value, ast.Tuple)
                      or len(r.value.elts) != width for r in own):
        return None
    got: list[str] = []
    for p in places:
        names = {getattr(r.value.elts[p], "id", None) for r in own}  # type: ignore[union-attr]
        if len(names) != 1 or None in names:
            return None
        got.append(names.pop())  # type: ignore[arg-type]
    return fn, tuple(got)
