"""Whether a name holds an object other than a tensor where a statement reads it.

# NOTE [narrowed to an object]
``if isinstance(x, PackedSequence): x = x.data`` reads the ``.data`` field of a
``PackedSequence`` (the packed tensor, with its history), not ``Tensor.data``. Inside the body
of an ``if`` whose test is ``isinstance(x, C)`` (or ``isinstance(x, (C, D))``, or an ``and``
with it), ``x`` holds an instance of ``C``; when every such class is known to be no tensor
(torch's classes outside ``torch.Tensor`` / ``nn.Parameter``, Python's containers, a class of
the file whose bases name no tensor class), ``x`` there is an object, and what it spells
``.data`` is an attribute of that object. A class imported from elsewhere is not known: it may
derive from ``torch.Tensor``.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import statements

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

BUILTIN_OBJECTS = frozenset({"dict", "list", "tuple", "str", "bytes", "int", "float", "bool",
                             "set", "frozenset", "type"})
TENSOR_CLASSES = frozenset({"torch.Tensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter",
                            "torch.autograd.Variable", "torch.nn.parameter.Buffer",
                            "torch.nn.Buffer"})


def narrowed_to_object(name: str, stmt: ast.stmt, scope: Scope, ctx: Context) -> bool:
    """``stmt`` lies in the body of an ``if isinstance(name, C)`` of ``scope`` whose every
    class ``C`` is known to be no tensor (NOTE [narrowed to an object])."""
    arms = scope.branches.get(id(stmt), ())
    if not arms:
        return False
    ifs = {id(s): s for s in scope.stmts if isinstance(s, ast.If)}
    for if_id, in_body in arms:
        test = getattr(ifs.get(if_id), "test", None)
        if in_body and test is not None and any(
                _object_test(t, name, ctx) for t in _conjuncts(test)):
            return True
    return False


def _conjuncts(test: ast.expr) -> list[ast.expr]:
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return [c for v in test.values for c in _conjuncts(v)]
    return [test]


def _object_test(test: ast.expr, name: str, ctx: Context) -> bool:
    if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Name)
            and test.func.id == "isinstance" and len(test.args) == 2 and not test.keywords):
        return False
    subject, classes = test.args
    if dotted(subject) != name:
        return False
    options = classes.elts if isinstance(classes, ast.Tuple) else [classes]
    return bool(options) and all(_no_tensor_class(c, ctx) for c in options)


def _no_tensor_class(c: ast.expr, ctx: Context) -> bool:
    q = ctx.qualified_name(c) or ""
    if q in TENSOR_CLASSES or q.endswith("Tensor"):
        return False
    if q.startswith("torch."):
        return True  # `torch.nn.utils.rnn.PackedSequence`, `torch.Size`, ...
    if isinstance(c, ast.Name) and c.id in BUILTIN_OBJECTS and q in ("", c.id):
        return True
    if not isinstance(c, ast.Name) or (q and q != c.id):
        return False  # imported from the project or a library: it may derive from a tensor
    own = [s for s in statements(ctx.tree) if isinstance(s, ast.ClassDef) and s.name == c.id]
    return len(own) == 1 and not any(
        "Tensor" in (ctx.qualified_name(b) or "") or "Parameter" in (ctx.qualified_name(b) or "")
        for b in own[0].bases)
