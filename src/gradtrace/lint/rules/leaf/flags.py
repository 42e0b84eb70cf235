"""GT303-GT304: `requires_grad` set where PyTorch refuses it (non-leaf, integer dtype)."""
from __future__ import annotations

import ast
from dataclasses import replace
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.int_numbers import python_int
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.leaf._passed_nonleaf import flagged_non_leaf, freezes_flag
from gradtrace.lint.rules.leaf._tensors import (
    GRAD_FACTORIES, INT_CASTS, INT_DTYPES, INT_TENSOR_TYPES, is_false, is_true, keyword,
    non_leaf_origin,
)
from gradtrace.lint.nodes import walk
from gradtrace.lint.excerpt import excerpt


class RequiresGradOnNonLeaf(Rule):
    """`.requires_grad` is changed on a computed (non-leaf) tensor.

    Why: only leaf tensors carry a settable flag. `y.requires_grad = False` (or `= True`) and
    `y.requires_grad_(False)` on a tensor with a `grad_fn` raise `RuntimeError: you can only
    change requires_grad flags of leaf variables.` To stop gradients use `y = y.detach()`;
    to make a trainable tensor, set the flag on the leaf before computing from it. In a loop
    (an adversarial attack), `x.requires_grad = True` followed by `x = torch.clamp(x + r, 0, 1)`
    raises on the next iteration: the rebinding is reported, it must make a new leaf
    (`.detach()`).
    A parameter the flag is set on holds what the calls of its function pass: when every call
    in the file passes such a non-leaf (or passes on a parameter of its own so passed, a few
    calls up) with grad enabled, the flag raises there too.
    Known limits: the tensor must be computed in the same function (or the caller) from a
    leaf that requires grad (`torch.*(..., requires_grad=True)`, `nn.Parameter`) or be a
    model's output; if the
    function freezes parameters, model outputs are left alone (they may be leaves then).
    """

    code = "GT303"
    gate_statements = True
    name = "requires-grad-on-non-leaf"
    message = ("`{name}` is a non-leaf tensor ({why}); changing its `requires_grad` raises "
               "`RuntimeError: you can only change requires_grad flags of leaf variables.`")
    message_loop = ("`{name}` is rebound here to a value computed from itself after its "
                    "`requires_grad` was set (line {line}): a non-leaf, so on the next iteration "
                    "line {line} raises `RuntimeError: you can only change requires_grad flags "
                    "of leaf variables.`; rebind it to a new leaf: `{name} = (...).detach()`")
    fix_title = "Use `.detach()` to stop gradients"
    fix_safety = "safe"
    triggers = ("requires_grad",)
    examples = [
        Bad("""
            import torch
            w = torch.randn(3, requires_grad=True)
            scaled = w * 2
            scaled.requires_grad = False
            """, fixed="""
            import torch
            w = torch.randn(3, requires_grad=True)
            scaled = w * 2
            scaled = scaled.detach()
            """, at=(4, 0)),
        Bad("""
            import torch
            model = torch.nn.Linear(4, 2)
            out = model(x)
            out.requires_grad = True
            """, at=(4, 0)),
        Good("""
            import torch
            x = torch.randn(8, 3)
            x.requires_grad = True
            out = model(x)
            out.sum().backward()
            saliency = x.grad.abs()
            """),
        Good("""
            import torch
            w = torch.randn(3, requires_grad=True)
            y = w * 2
            y.requires_grad_()
            y.retain_grad()
            """),
    ]

    def visit_Attribute(self, t: ast.Attribute, ctx: Context) -> Iterator[Finding]:
        node = ctx.statement
        if t.attr == "requires_grad" and isinstance(t.ctx, ast.Store) \
                and isinstance(node, ast.Assign) and node.targets == [t]:
            yield from self._check(node, t.value, is_false(node.value), ctx)
        elif t.attr == "requires_grad_" and isinstance(node, ast.Expr):
            call = node.value
            if isinstance(call, ast.Call) and call.func is t and call.args \
                    and is_false(call.args[0]):
                yield from self._check(node, t.value, True, ctx)

    def _check(self, stmt: ast.stmt, recv: ast.expr, off: bool,
               ctx: Context) -> Iterator[Finding]:
        name = dotted(recv)
        if name is None or "." in name or ctx.grad_disabled is not None:
            return
        scope = ctx.scope()
        got = non_leaf_origin(scope, name, stmt.lineno)
        passed = flagged_non_leaf(ctx.function, name, stmt, ctx) if got is None \
            and scope.binding_before(name, stmt.lineno) is None else None
        if passed is not None:
            call, where = passed
            rel = [Related(ctx.path, call.lineno, f"`{ctx.source(call).strip()}` passes a "
                           "non-leaf tensor for it", ctx.column(call))]
            yield self.report(stmt, ctx, related=rel, name=name, why=(
                f"a parameter every call of `{ctx.function.name}` passes a computed tensor for"))
            return
        if got is None:
            again = None if off else _loop_rebinding(scope, name, stmt)
            if again is not None:
                rel = [Related(ctx.path, stmt.lineno, f"`{ctx.source(stmt).strip()}` runs again "
                               "on the next iteration and raises", ctx.column(stmt))]
                f = self.report(again, ctx, related=rel, name=name, why="")
                yield replace(f, message=self.message_loop.format(name=name, line=stmt.lineno))
            return
        b, why = got
        if why == "a model output" and freezes_flag(scope, b):
            return
        if why in ("made-non-leaf", "rebound"):
            why = "made from a leaf by an operation"
        related = [Related(ctx.path, b.line, f"`{name}` is computed here", ctx.column(b.stmt))]
        fix = self.fix(ctx.edit(stmt, f"{name} = {name}.detach()")) if off else None
        yield self.report(stmt, ctx, related=related, fix=fix, name=name, why=why)


CUTTING = frozenset({"detach", "detach_", "item", "numpy", "tolist", "tensor", "as_tensor",
                     "from_numpy", "Tensor", "requires_grad_"})


def _loop_rebinding(scope: Scope, name: str, stmt: ast.stmt) -> ast.stmt | None:
    """A later statement of the loop around ``stmt`` (``name.requires_grad = ...``) that
    rebinds ``name`` to a value computed from ``name`` with grad on (``image = torch.clamp(
    image + r, 0, 1)``): from then on ``name`` holds a non-leaf, and the flag raises on the
    next iteration. None when the loop makes it a leaf again (``.detach()``, a factory), when
    what the rebinding reads is no longer computed from the flagged tensor (``delta =
    last + alpha * grad.sign()`` with ``grad`` from ``autograd.grad``: no history; then
    ``delta = clamp(delta, ...)``), or when the loop body rebinds ``name`` afresh before
    ``stmt`` on every pass (``x = pool[i]`` first: the rebound value never reaches it)."""
    loops = scope.loops_of(stmt)
    if not loops:
        return None
    loop = loops[-1]
    end = loop.end_lineno or loop.lineno
    later = [b for b in scope.bindings.get(name, ()) if stmt.lineno < b.line <= end]
    if not later or any(_fresh_leaf(b.value, name) for b in later) \
            or _rebound_before(scope, name, loop, stmt):
        return None
    derived = _derived_names(scope, name, stmt.lineno, end)
    for b in sorted(later, key=lambda b: b.line):
        v = b.value
        if v is None or isinstance(b.stmt, ast.AugAssign) or b.no_grad \
                or scope.grad_off_at(b.stmt) is not None:
            continue
        if scope.loops_of(b.stmt)[:len(loops)] != loops:
            continue
        if not any(isinstance(n, ast.Name) and n.id in derived.get(b.line, {name})
                   for n in walk(v)):
            return None  # `name` now holds a value not computed from the flagged tensor
        if isinstance(v, (ast.Call, ast.BinOp)) and any(
                isinstance(n, ast.Name) and n.id == name for n in walk(v)):
            return b.stmt
    return None


def _derived_names(scope: Scope, name: str, start: int, end: int) -> dict[int, set[str]]:
    """For each line of ``start..end`` binding something, the names holding a value computed
    from the tensor ``name`` held at ``start`` (with history) just before that line. The
    result of ``torch.autograd.grad`` without ``create_graph=True`` has none."""
    binds = sorted((b for bs in scope.bindings.values() for b in bs
                    if start < b.line <= end and b.value is not None),
                   key=lambda b: b.line)
    live = {name}
    out: dict[int, set[str]] = {}
    for b in binds:
        out.setdefault(b.line, set(live))
        reads = {n.id for n in walk(b.value) if isinstance(n, ast.Name)}  # type: ignore[arg-type]
        if reads & live and not _plain_gradient(b.value, scope):
            live = live | {b.name}
        else:
            live = live - {b.name}
    return out


def _plain_gradient(v: ast.AST | None, scope: Scope) -> bool:
    """``torch.autograd.grad(...)[0]`` without ``create_graph=True``: a tensor without history."""
    while isinstance(v, ast.Subscript):
        v = v.value
    return isinstance(v, ast.Call) and scope.ctx.qualified_name(v.func) == \
        "torch.autograd.grad" and not any(
            k.arg == "create_graph" and not is_false(k.value) for k in v.keywords)


def _rebound_before(scope: Scope, name: str, loop: ast.stmt, stmt: ast.stmt) -> bool:
    """A statement of the loop body that runs on every pass before ``stmt`` (not under an
    ``if`` that does not hold ``stmt``) binds ``name`` to a value not read from ``name``, or
    cut from its graph (``sample = sample.detach()``: a leaf again on every pass), or
    unpacks it from a value not read from ``name`` (``x, y = batch``)."""
    body: list[ast.stmt] = list(getattr(loop, "body", ()))
    while body:
        nxt: list[ast.stmt] = []
        for s in body:
            if s is stmt or stmt in list(walk(s)):
                arms = [getattr(s, f, None) or [] for f in ("body", "orelse", "finalbody")]
                nxt = [] if s is stmt else next(
                    (a for a in arms if any(x is stmt or stmt in list(walk(x)) for x in a)), [])
                break
            for b in scope.bindings.get(name, ()):
                if b.stmt is s and (b.value is not None and (not any(
                        isinstance(n, ast.Name) and n.id == name for n in walk(b.value))
                        or _cut_chain(b.value)) or _unpacked_afresh(s, name)):
                    return True
        body = nxt
    return False


def _unpacked_afresh(s: ast.stmt, name: str) -> bool:
    """``s`` unpacks a right-hand side that does not read ``name`` into ``name``
    (``inputs, y, _ = batch``): each pass takes the new element, not the value ``name``
    held."""
    return isinstance(s, ast.Assign) and not any(
        isinstance(n, ast.Name) and n.id == name for n in walk(s.value)) and any(
        isinstance(t, (ast.Tuple, ast.List)) and any(
            isinstance(e, ast.Name) and e.id == name for e in walk(t)) for t in s.targets)


def _cut_chain(v: ast.expr) -> bool:
    """``v`` is cut from the graph as a whole: its outermost method chain passes a cut
    (``x.detach()``, ``x.detach().clone()``, ``x.data``)."""
    while isinstance(v, (ast.Call, ast.Attribute)):
        if isinstance(v, ast.Call):
            v = v.func
            continue
        if v.attr in CUTTING or v.attr == "data":
            return True
        v = v.value
    return False


def _fresh_leaf(v: ast.expr | None, name: str) -> bool:
    """A value that is (or may be) a new leaf: cut from the graph, or not computed from
    ``name`` with an operation (a factory, a plain name, an unknown)."""
    if v is None:
        return True
    for n in walk(v):
        if isinstance(n, ast.Attribute) and (n.attr in CUTTING or n.attr == "data"):
            return True
        if isinstance(n, ast.Name) and n.id in CUTTING:
            return True
    return False


def _const_ints(node: ast.AST) -> bool:
    """A literal made only of ints (nested lists/tuples), with at least one int."""
    if isinstance(node, ast.UnaryOp):
        return _const_ints(node.operand)
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int)
    if isinstance(node, (ast.List, ast.Tuple)):
        return bool(node.elts) and all(_const_ints(e) for e in node.elts)
    return False


def int_dtype(node: ast.AST, ctx: Context) -> str | None:
    """The integer dtype an expression surely has ("torch.int64"...), else None."""
    if not isinstance(node, ast.Call):
        return None
    q = ctx.call_name(node) or ""
    dtype = keyword(node, "dtype")
    if dtype is not None:
        d = ctx.qualified_name(dtype)
        return d if d in INT_DTYPES else None
    if q in INT_TENSOR_TYPES:
        return q
    if q in ("torch.randint", "torch.randint_like"):
        return "torch.int64"
    if q == "torch.arange" and node.args and all(python_int(a, ctx) for a in node.args):
        return "torch.int64"
    if q == "torch.tensor" and node.args and _const_ints(node.args[0]):
        return "torch.int64"
    if q == "torch.full" and len(node.args) >= 2 and _const_ints(node.args[1]):
        return "torch.int64"
    if isinstance(node.func, ast.Attribute) and not q.startswith("torch."):
        if node.func.attr in INT_CASTS and not node.args:
            return f"torch.{node.func.attr}"
        if node.func.attr == "to":
            for a in [*node.args, keyword(node, "dtype")]:
                d = ctx.qualified_name(a) if a is not None else None
                if d in INT_DTYPES:
                    return d
    return None


# torch 2.13's three spellings of the error, by how the grad is asked for
INT_GRAD_ERRORS = {
    "factory": "Only Tensors of floating point and complex dtype can require gradients",
    "method": "only Tensors of floating point dtype can require gradients",  # requires_grad_()
    "attribute": "only Tensors of floating point and complex dtype can require gradients",
}


class RequiresGradOnIntegerTensor(Rule):
    """`requires_grad=True` on an integer (or bool) tensor.

    Why: only floating point and complex tensors can require gradients:
    `torch.tensor([1, 2], requires_grad=True)`, `torch.arange(5, requires_grad=True)` and
    `torch.randint(..., requires_grad=True)` raise `RuntimeError: Only Tensors of floating point
    and complex dtype can require gradients` (verified on torch 2.13; `.requires_grad_()` says
    `only Tensors of floating point dtype can require gradients`, and setting `.requires_grad =
    True` `only Tensors of floating point and complex dtype can require gradients`). Integer
    literals make
    int64 tensors: write `1.0`, or pass `dtype=torch.float32`.
    `nn.Parameter(mask)` asks for grad too (unless `requires_grad=False`).
    Known limits: the dtype must be visible in the call (an explicit integer dtype, integer
    literals, `torch.randint`, `.long()`/`.int()`), in the name's assignment, or, for an
    argument of the function or class, at every call of it in the file.
    """

    code = "GT304"
    gate_statements = True
    name = "requires-grad-on-integer-tensor"
    message = ("`{expr}` is an integer tensor ({dtype}); asking it to require grad raises "
               "`RuntimeError: {error}`")
    triggers = ("requires_grad", "Parameter")
    examples = [
        Bad("""
            import torch
            w = torch.tensor([1, 2, 3], requires_grad=True)
            """, at=(2, 4)),
        Bad("""
            import torch
            idx = torch.arange(10, requires_grad=True)
            mask = torch.zeros(4, dtype=torch.long).requires_grad_()
            """, count=2),
        Good("""
            import torch
            w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
            b = torch.arange(10, dtype=torch.float32, requires_grad=True)
            """),
        Bad("""
            import torch
            import torch.nn as nn

            class Masked(nn.Module):
                def __init__(self, mask):
                    super().__init__()
                    self.mask = nn.Parameter(mask)

            net = Masked(torch.tensor([1, 0, 1], dtype=torch.uint8))
            """, at=(7, 20)),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        func = node.func
        if node.args and ctx.call_name(node) == "torch.nn.Parameter" and not (
                len(node.args) > 1 and is_false(node.args[1])) and \
                not is_false(keyword(node, "requires_grad")):
            got = _int_data(node.args[0], node.lineno, ctx)
            if got is not None:
                dtype, where = got
                rel = [Related(ctx.path, where.lineno, "the integer tensor is made here",
                               ctx.column(where))] if where is not node.args[0] else []
                yield self.report(node, ctx, related=rel, error=INT_GRAD_ERRORS["factory"],
                                  expr=excerpt(ctx.source(node.args[0])), dtype=dtype)
            return
        if is_true(keyword(node, "requires_grad")) and (
                (ctx.call_name(node) or "") in GRAD_FACTORIES or keyword(node, "dtype")):
            dtype = int_dtype(node, ctx)
            if dtype:
                yield self.report(node, ctx, expr=excerpt(ctx.source(node)), dtype=dtype,
                                  error=INT_GRAD_ERRORS["factory"])
            return
        if isinstance(func, ast.Attribute) and func.attr == "requires_grad_" and (
                not node.args or is_true(node.args[0])):
            yield from self._flagged(func.value, node, ctx, INT_GRAD_ERRORS["method"])

    def visit_Attribute(self, t: ast.Attribute, ctx: Context) -> Iterator[Finding]:
        """``ids.requires_grad = True``."""
        stmt = ctx.statement
        if t.attr == "requires_grad" and isinstance(t.ctx, ast.Store) \
                and isinstance(stmt, ast.Assign) and is_true(stmt.value):
            yield from self._flagged(t.value, stmt, ctx, INT_GRAD_ERRORS["attribute"])

    def _flagged(self, recv: ast.expr, at: ast.AST, ctx: Context, error: str
                 ) -> Iterator[Finding]:
        """The finding when ``recv``, asked to require grad at ``at``, holds an integer tensor:
        made so, bound so earlier in the function, or (a parameter) passed so by every call of
        the function in the file (``saliency(model, torch.randint(...))``)."""
        got = _int_data(recv, at.lineno, ctx)
        dtype, where = got if got is not None else (int_dtype(recv, ctx), recv)
        if dtype:
            rel = [Related(ctx.path, where.lineno, "the integer tensor is made here",
                           ctx.column(where))] if where.lineno != at.lineno else []
            yield self.report(at, ctx, related=rel, expr=excerpt(ctx.source(recv)), dtype=dtype,
                              error=error)


def _int_data(e: ast.expr, line: int, ctx: Context) -> tuple[str, ast.expr] | None:
    """(dtype, the expression that makes it) when ``e`` surely holds an integer tensor: made
    here, bound to one earlier in the function, or (``opt.mask`` / ``mask`` a parameter of
    the function) passed so by every call of the function or class in the file
    (``CascadeCore(opt)`` with ``opt = Namespace(mask=torch.tensor([1, 0], dtype=torch.uint8))``)."""
    dtype = int_dtype(e, ctx)
    if dtype:
        return dtype, e
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and not e.args \
            and not e.keywords and e.func.attr in SAME_DTYPE:
        e = e.func.value  # `batch["input_ids"].clone()`: the same dtype
    root, attr = (e, None) if isinstance(e, ast.Name) else \
        (e.value, e.attr) if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) \
        else (e.value, e.slice.value) if isinstance(e, ast.Subscript) and isinstance(
            e.value, ast.Name) and isinstance(e.slice, ast.Constant) and isinstance(
            e.slice.value, str) else (None, None)
    if root is None:
        return None
    scope = ctx.scope()
    b = scope.binding_before(root.id, line)
    if b is not None:
        v = _field(b.value, attr) if b.value is not None and not isinstance(
            b.stmt, ast.AugAssign) else None
        dtype = int_dtype(v, ctx) if v is not None else None
        return (dtype, v) if dtype and v is not None else None
    fn = ctx.function
    if fn is None:
        return None
    values = ctx.analysis.argument_values(fn, root.id)
    found = None
    for v, where in values:
        if isinstance(v, ast.Name):
            vb = ctx.scope(where).binding_before(v.id, v.lineno)
            v = vb.value if vb is not None and vb.value is not None else None
        v = _field(v, attr) if v is not None else None
        dtype = int_dtype(v, ctx) if v is not None else None
        if not dtype or v is None:
            return None
        found = found or (dtype, v)
    return found


def _field(v: ast.expr, attr: str | None) -> ast.expr | None:
    """``v`` itself (no ``attr``), or the ``attr=`` keyword of the call that builds it
    (``Namespace(mask=...)``, ``SimpleNamespace``, ``dict``)."""
    if attr is None:
        return v
    if isinstance(v, ast.Dict):  # `batch["input_ids"]` of `batch = {"input_ids": ...}`
        return next((val for k, val in zip(v.keys, v.values)
                     if isinstance(k, ast.Constant) and k.value == attr), None)
    return keyword(v, attr) if isinstance(v, ast.Call) else None


# methods whose result has the receiver's dtype
SAME_DTYPE = frozenset({"clone", "detach", "contiguous", "cpu", "cuda"})
