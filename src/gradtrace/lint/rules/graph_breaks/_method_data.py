"""GT105 across a method call: a module's method other than ``forward`` (``sample``,
``decode``, ``encode``) returns a value cut with ``.data``, and a ``forward`` of the file
keeps that result in what it returns (inversecooking's ``sample`` returning
``torch.stack(logits, 1).data`` whose logits make the losses ``forward`` returns)."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.reach import value_of
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.rules.graph_breaks._paths import LossPaths


def fed_to_forward(ctx: Context, fn: ast.FunctionDef, return_deps) -> bool:  # type: ignore[no-untyped-def]
    """Whether ``fn``, a method (not ``forward``) of a module class of the file, is called
    from the ``forward`` of a module class of the file (``self.decoder.sample(...)``,
    ``self.sample(...)``) with its result bound to a name that reaches what that ``forward``
    returns (``return_deps``: names a scope's return values are built from)."""
    if fn.name in ("forward", "__init__") or fn.name not in _kept_methods(ctx, return_deps):
        return False
    cls = ctx.analysis.class_of(fn)
    return cls is not None and cls.is_module


def _kept_methods(ctx: Context, return_deps) -> frozenset[str]:  # type: ignore[no-untyped-def]
    """Names of the methods called through ``self`` in some module's ``forward`` whose result
    is bound to a name that reaches what that ``forward`` returns (once per file)."""
    def make() -> frozenset[str]:
        out: set[str] = set()
        for other in ctx.analysis.classes.values():
            fwd = other.methods.get("forward") if other.is_module else None
            if fwd is None:
                continue
            calls = [s for s in walk(fwd) if isinstance(s, ast.Assign)
                     and isinstance(s.value, ast.Call)
                     and isinstance(s.value.func, ast.Attribute)
                     and (dotted(s.value.func.value) or "").startswith("self")]
            if not calls:
                continue
            deps = return_deps(ctx.scope(fwd))
            out.update(s.value.func.attr for s in calls  # type: ignore[union-attr]
                       if any(isinstance(n, ast.Name) and n.id in deps
                              for t in s.targets for n in walk(t)))
        return frozenset(out)
    return ctx.memo("gt105-kept-methods", ctx.tree, make)


def appended_layer_call(e: ast.AST, lp: LossPaths, layer_call) -> ast.Call | None:  # type: ignore[no-untyped-def]
    """A layer call one name away through a list the method fills with ``append``:
    ``torch.stack(logits, 1)`` after ``logits.append(out)`` and ``out, _ = self.forward(...)``."""
    if not isinstance(e, ast.Call):
        return None
    names = {a.id for a in e.args if isinstance(a, ast.Name)}
    for st in lp.scope.stmts:
        if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) \
                and isinstance(st.value.func, ast.Attribute) \
                and st.value.func.attr == "append" and dotted(st.value.func.value) in names:
            for a in st.value.args:
                found = layer_call(a, lp)
                if found is not None:
                    return found
    for n in names:
        for b in lp.scope.bindings.get(n, ()):
            v = value_of(b)
            if v is not None and v is not e:
                found = layer_call(v, lp)
                if found is not None:
                    return found
    return None
