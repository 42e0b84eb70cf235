"""The call that turns on the ``self`` flag a module's code path waits for.

# NOTE [flag turned on by a call]
``if self.gradient_checkpointing and self.training: h = checkpoint(block, h)`` in ``forward``,
``self.gradient_checkpointing = False`` in ``__init__`` and ``def
gradient_checkpointing_enable(self): self.gradient_checkpointing = True``: the branch runs only
once the script calls ``model.gradient_checkpointing_enable()``. :func:`enabling_call` gives
that call for a statement of a method of a module class of the file: the innermost ``if`` of
the method around the statement (in its body) whose test is ``self.<flag>``, alone or in an
``and`` of ``self`` attributes; ``__init__`` sets the flag to a constant False (or None); one
other method of the class sets it to a constant True as a statement of its body, and nothing
else of the class writes it; the file calls that method on an instance of the class (the
kinds layer says so), once. None otherwise.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import function_scopes, scope_nodes

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


def enabling_call(ctx: Context, fn: ast.AST, stmt: ast.stmt) -> ast.Call | None:
    """The call turning on the flag that guards ``stmt`` in the method ``fn``
    (NOTE [flag turned on by a call]); None when not known."""
    info = ctx.analysis.class_of(fn)
    if info is None or not info.is_module:
        return None
    guard = None
    for n in scope_nodes(fn):
        if isinstance(n, ast.If) and any(stmt is x for b in n.body for x in ast.walk(b)) \
                and (guard is None or n.lineno > guard.lineno):
            guard = n
    flags = _flags(guard.test) if guard is not None else []
    for flag in flags:
        setter = _setter(info, flag)
        if setter is None:
            continue
        calls = [(c, f) for f in function_scopes(ctx.tree) if ctx.analysis.class_of(f) is not info
                 for c in scope_nodes(f) if isinstance(c, ast.Call)
                 and isinstance(c.func, ast.Attribute) and c.func.attr == setter]
        if len(calls) != 1:
            continue
        c, f = calls[0]
        k = ctx.analysis.kind_in(c.func.value, f, c.lineno)  # type: ignore[attr-defined]
        if k is not None and k.what == MODULE and (k.cls or "").rpartition(".")[2] == info.name:
            return c
    return None


def _flags(test: ast.expr) -> list[str]:
    vals = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) \
        else [test]
    if not all(isinstance(v, ast.Attribute) and dotted(v.value) == "self" for v in vals):
        return []
    return [v.attr for v in vals]  # type: ignore[attr-defined]


def _setter(info: object, flag: str) -> str | None:
    """The one method (not ``__init__``) setting ``self.<flag>`` to True, when ``__init__``
    sets it to False/None and no other method writes it."""
    init_off, setter = False, None
    for name, m in info.methods.items():  # type: ignore[attr-defined]
        for n in scope_nodes(m):
            if not isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                continue
            ts = n.targets if isinstance(n, ast.Assign) else [n.target]
            if not any(dotted(t) == "self." + flag for t in ts):
                continue
            v = getattr(n, "value", None)
            const = v.value if isinstance(v, ast.Constant) and not isinstance(
                n, ast.AugAssign) else ...
            if name == "__init__" and const in (False, None) and n in m.body:
                init_off = True
            elif name != "__init__" and const is True and n in m.body and setter is None:
                setter = name
            else:
                return None
    return setter if init_off else None
