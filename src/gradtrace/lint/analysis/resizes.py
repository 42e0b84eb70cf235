"""Statements that resize a module's tensors in place of themselves: model surgery, not
training.

# NOTE [resize is not training]
``m.pos.weight = nn.Parameter(m.pos.weight[:n])`` and ``blk.mask = blk.mask[:, :n]`` rebind an
attribute to a slice of its own value (wrapped again in a Parameter or Buffer, or not): the
tensor keeps its part in the model and stays as trainable as it was. A ``for`` loop over a
container whose body does nothing but such resizes on the loop variable (under ``if`` tests
that only ask ``hasattr``/``isinstance``/``getattr``) is one too. A freeze, an EMA update, an
optimizer group or a training call is never of this shape; a rule asking "is this submodule
used (trained, frozen, averaged) elsewhere" can pass over these statements (GT115).
"""
from __future__ import annotations

import ast

from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

REWRAP = frozenset({"torch.nn.Parameter", "torch.nn.Buffer", "torch.nn.parameter.Parameter"})
PEEL = frozenset({"data", "detach", "clone", "contiguous"})
TESTS = frozenset({"hasattr", "isinstance", "getattr"})


def resize_statements(ctx: Context) -> frozenset[int]:
    """Ids of the file's resize statements and resize-only loops
    (NOTE [resize is not training])."""
    def make() -> frozenset[int]:
        out: set[int] = set()
        for n in walk(ctx.tree):
            if isinstance(n, ast.Assign) and _resize(ctx, n) is not None:
                out.add(id(n))
            elif isinstance(n, ast.For) and isinstance(n.target, ast.Name) and not n.orelse \
                    and _only_resizes(ctx, n.body, n.target.id):
                out.add(id(n))
        return frozenset(out)
    return ctx.memo("resize-statements", ctx.tree, make)


def _resize(ctx: Context, s: ast.Assign) -> str | None:
    """The dotted target of ``s`` when ``s`` rebinds it to a slice of itself."""
    if len(s.targets) != 1 or not isinstance(s.targets[0], ast.Attribute):
        return None
    target = dotted(s.targets[0])
    v = s.value
    if isinstance(v, ast.Call) and len(v.args) == 1 and not any(
            k.arg != "requires_grad" for k in v.keywords) and \
            (ctx.qualified_name(v.func) or "") in REWRAP:
        v = v.args[0]
    if not isinstance(v, ast.Subscript) or not any(
            isinstance(x, ast.Slice) for x in walk(v.slice)):
        return None
    inner = v.value
    while True:
        if isinstance(inner, ast.Attribute) and inner.attr in PEEL:
            inner = inner.value
        elif isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and \
                inner.func.attr in PEEL and not inner.args:
            inner = inner.func.value
        else:
            break
    return target if target is not None and dotted(inner) == target else None


def _only_resizes(ctx: Context, body: list[ast.stmt], var: str) -> bool:
    if not body:
        return False
    for s in body:
        if isinstance(s, ast.Assign):
            t = _resize(ctx, s)
            if t is None or t.split(".", 1)[0] != var:
                return False
        elif isinstance(s, ast.If):
            if s.orelse and not _only_resizes(ctx, s.orelse, var):
                return False
            calls = [c for c in walk(s.test) if isinstance(c, ast.Call)]
            if not calls or not all(isinstance(c.func, ast.Name) and c.func.id in TESTS
                                    for c in calls) or not _only_resizes(ctx, s.body, var):
                return False
        else:
            return False
    return True
