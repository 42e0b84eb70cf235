"""Whether a name holds an object other than a tensor where a statement reads it.

# NOTE [narrowed to an object]
``if isinstance(x, PackedSequence): x = x.data`` reads the ``.data`` field of a
``PackedSequence`` (the packed tensor, with its history), not ``Tensor.data``. Inside the body
of an ``if`` whose test is ``isinstance(x, C)`` (or ``isinstance(x, (C, D))``, or an ``and``
with it), ``x`` holds an instance of ``C``; when every such class is known to be no tensor
(torch's classes outside ``torch.Tensor`` / ``nn.Parameter``, Python's containers, a class of
the file whose bases name no tensor class), ``x`` there is an object, and what it spells
``.data`` is an attribute of that object. A class imported from elsewhere is not known: it may
derive from ``torch.Tensor``. NumPy's classes (``np.ndarray``) are no tensor either.

# NOTE [known not a tensor]
``if isinstance(x, torch.Tensor): ... else: return x`` hands ``x`` back only where it is no
tensor: in the ``else`` of an ``isinstance(x, C)`` naming ``torch.Tensor`` (every tensor,
``nn.Parameter`` included, is one), in the body of ``if not isinstance(x, torch.Tensor)``,
and where ``x`` is narrowed to an object as above (the ``not`` forms read the other arm).
What ``x`` holds there has no autograd graph of its own (pix2pix's ``tensor2im`` returns its
argument unchanged when it is an array, or neither an array nor a tensor). A container of
tensors handed through so would be missed; the helpers seen hand back images.
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


def no_tensor_at(name: str, stmt: ast.stmt, scope: Scope, ctx: Context) -> bool:
    """``stmt`` lies in an arm of an ``if`` of ``scope`` where ``name`` is known to hold no
    tensor (NOTE [known not a tensor])."""
    ifs = {id(s): s for s in scope.stmts if isinstance(s, ast.If)}
    for if_id, in_body in scope.branches.get(id(stmt), ()):
        test = getattr(ifs.get(if_id), "test", None)
        negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        if negated:
            test, in_body = test.operand, not in_body  # type: ignore[union-attr]
        if test is None:
            continue
        if in_body and any(_object_test(t, name, ctx) for t in _conjuncts(test)):
            return True
        if not in_body and _isinstance_of(test, name) and any(
                ctx.qualified_name(c) in TENSOR_CLASSES for c in _classes(test)):
            return True
    return False


def _isinstance_of(test: ast.expr, name: str) -> bool:
    return isinstance(test, ast.Call) and isinstance(test.func, ast.Name) \
        and test.func.id == "isinstance" and len(test.args) == 2 and not test.keywords \
        and dotted(test.args[0]) == name


def _classes(test: ast.Call) -> list[ast.expr]:
    c = test.args[1]
    return list(c.elts) if isinstance(c, ast.Tuple) else [c]


def _conjuncts(test: ast.expr) -> list[ast.expr]:
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return [c for v in test.values for c in _conjuncts(v)]
    return [test]


def _object_test(test: ast.expr, name: str, ctx: Context) -> bool:
    if not _isinstance_of(test, name):
        return False
    options = _classes(test)  # type: ignore[arg-type]
    return bool(options) and all(_no_tensor_class(c, ctx) for c in options)


def _no_tensor_class(c: ast.expr, ctx: Context) -> bool:
    q = ctx.qualified_name(c) or ""
    if q in TENSOR_CLASSES or q.endswith("Tensor"):
        return False
    if q.startswith(("torch.", "numpy.")):
        return True  # `torch.nn.utils.rnn.PackedSequence`, `torch.Size`, `np.ndarray`, ...
    if isinstance(c, ast.Name) and c.id in BUILTIN_OBJECTS and q in ("", c.id):
        return True
    if not isinstance(c, ast.Name) or (q and q != c.id):
        return False  # imported from the project or a library: it may derive from a tensor
    own = [s for s in statements(ctx.tree) if isinstance(s, ast.ClassDef) and s.name == c.id]
    return len(own) == 1 and not any(
        "Tensor" in (ctx.qualified_name(b) or "") or "Parameter" in (ctx.qualified_name(b) or "")
        for b in own[0].bases)
