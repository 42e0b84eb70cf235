"""GT305-GT306: non-leaf tensors used where a leaf is needed (weights, the optimizer); GT307
(`.grad`) is in :mod:`.grad_of_nonleaf`."""
from __future__ import annotations

import ast
import copy
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.leaf._nonleaf_attrs import _sliced_attr
from gradtrace.lint.rules.leaf._tensors import (
    COMPOUND, derived_from_grad_leaf, grad_leaf_binding, is_optimizer_call, made_non_leaf,
    non_leaf_origin, optimizer_param_exprs, single_assign_of,
)
from gradtrace.lint.nodes import walk


def _weight_use(scope: Scope, name: str, line: int) -> tuple[int, str] | None:
    """The first later use of ``name`` as a weight: ``name.grad`` read or optimizer argument."""
    ctx = scope.ctx
    end = _rebound_after(scope, name, line)
    for s in scope.stmts:
        if s.lineno <= line or s.lineno >= end or isinstance(s, COMPOUND):
            continue
        for n in walk(s):
            if isinstance(n, ast.Attribute) and n.attr == "grad" and dotted(n.value) == name:
                return s.lineno, f"`{name}.grad` is read here (it stays None)"
            if isinstance(n, ast.Call) and is_optimizer_call(n, ctx) and any(
                    dotted(e) == name for e in optimizer_param_exprs(n, scope)):
                return s.lineno, "given to the optimizer here"
    return None


def _attr_weight_use(cls: ast.ClassDef, name: str, ctx: Context) -> tuple[int, str] | None:
    """The first use of ``self.<attr>`` (``name``) as a weight in a method of ``cls``: its
    ``.grad`` read or an optimizer argument; None when any method rebinds it."""
    found: tuple[int, str] | None = None
    for m in cls.body:
        if not isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for n in walk(m):
            if isinstance(n, ast.Attribute) and n.attr == "grad" and dotted(n.value) == name \
                    and isinstance(n.ctx, ast.Load):
                got = (n.lineno, f"`{name}.grad` is read here (it stays None)")
            elif isinstance(n, ast.Call) and is_optimizer_call(n, ctx) and any(
                    dotted(e) == name for e in optimizer_param_exprs(n, ctx.scope(m))):
                got = (n.lineno, "given to the optimizer here")
            else:
                continue
            found = got if found is None or got[0] < found[0] else found
    return found


def _rebound_after(scope: Scope, name: str, line: int) -> int:
    for b in scope.bindings.get(name, ()):
        if b.line > line and not isinstance(b.stmt, ast.AugAssign):
            return b.line
    return 1 << 30


DTYPES = {"torch.float": "torch.float32", "torch.float32": "torch.float32",
          "torch.double": "torch.float64", "torch.float64": "torch.float64",
          "torch.half": "torch.float16", "torch.float16": "torch.float16",
          "torch.bfloat16": "torch.bfloat16"}
CASTS = {"double": "torch.float64", "float": "torch.float32", "half": "torch.float16",
         "bfloat16": "torch.bfloat16"}
FLOAT_FACTORIES = frozenset({"torch.randn", "torch.rand", "torch.zeros", "torch.ones",
                             "torch.empty"})


def _dtype_made(value: ast.AST, ctx: Context) -> str | None:
    """The floating dtype a factory call makes: its ``dtype=`` or float32 by default."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
            and value.func.attr == "requires_grad_":
        value = value.func.value
    if not isinstance(value, ast.Call):
        return None
    for k in value.keywords:
        if k.arg == "dtype":
            return DTYPES.get(ctx.qualified_name(k.value) or "")
    return "torch.float32" if ctx.call_name(value) in FLOAT_FACTORIES else None


def _cast_of_leaf(value: ast.AST, scope: Scope, line: int) -> tuple[object, str, str] | None:
    """``(leaf binding, leaf, how)`` for ``w.type(torch.float)`` / ``w.double()`` of a leaf
    ``w`` that requires grad, when the cast really changes its dtype (a cast to the same
    dtype returns the leaf itself)."""
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
            and isinstance(value.func.value, ast.Name)):
        return None
    ctx = scope.ctx
    m = value.func.attr
    target = CASTS.get(m) if not value.args and not value.keywords else None
    if m in ("type", "to") and len(value.args) == 1 and not value.keywords:
        target = DTYPES.get(ctx.qualified_name(value.args[0]) or "")
    if target is None:
        return None
    b = grad_leaf_binding(scope, value.func.value.id, line)
    if b is None or b.value is None:
        return None
    made = _dtype_made(b.value, ctx)
    if made is None or made == target:
        return None
    return b, value.func.value.id, f".{m}()"


class WeightMadeNonLeaf(Rule):
    """A weight made with `requires_grad=True` and then moved, cast or scaled is a non-leaf.

    Why: `torch.randn(..., requires_grad=True).to(device)` (or `.cuda()`, `.double()`,
    `* 0.01`) returns a *new* tensor computed from the leaf (`grad_fn=ToCopyBackward0`,
    `MulBackward0`). The leaf is lost; the name holds a non-leaf whose `.grad` stays None
    (`w.grad.zero_()` raises `AttributeError: 'NoneType' object has no attribute 'zero_'`,
    pytorch-facts.md#non-leaf-grad), and `torch.optim` raises `ValueError: can't optimize a non-leaf
    Tensor`. Create the tensor first and ask for grad last:
    `torch.randn(..., device=device).requires_grad_()`.
    Known limits: `.to()`/`.cuda()` to the device the tensor is already on return the leaf
    itself; the rule assumes the move is real. The name must be used as a weight (`.grad` read
    or optimizer argument) in the same function; a `self.<attr>` bound once in its class, in
    any method of the class.
    """

    code = "GT305"
    gate_statements = True
    name = "weight-made-non-leaf"
    message = ("`{name}` holds the result of {how} applied to a new leaf that requires grad, "
               "not the leaf itself: it is a non-leaf whose `.grad` is never populated")
    fix_title = "Ask for grad after moving/casting: `(...).requires_grad_()`"
    fix_safety = "unsafe"
    # a named leaf cast later (`w1 = w.type(torch.float)`): the cast's line has no
    # `requires_grad`
    triggers = ("requires_grad", ".type(", ".double(", ".half(", ".bfloat16(")
    examples = [
        Bad("""
            import torch
            w = torch.randn(10, 1, requires_grad=True).to("cuda")
            opt = torch.optim.SGD([w], lr=0.1)
            """, fixed="""
            import torch
            w = torch.randn(10, 1).to("cuda").requires_grad_()
            opt = torch.optim.SGD([w], lr=0.1)
            """, at=(2, 0)),
        Bad("""
            import torch
            w = torch.randn(784, 10, requires_grad=True) * 0.01
            for x, y in data:
                loss = ((x @ w - y) ** 2).mean()
                loss.backward()
                with torch.no_grad():
                    w -= 0.1 * w.grad
            """, fixed="""
            import torch
            w = (torch.randn(784, 10) * 0.01).requires_grad_()
            for x, y in data:
                loss = ((x @ w - y) ** 2).mean()
                loss.backward()
                with torch.no_grad():
                    w -= 0.1 * w.grad
            """, at=(2, 0)),
        Bad("""
            import torch
            class Calibrator:
                def __init__(self, device):
                    self.t = torch.ones(1, requires_grad=True).to(device)
                def fit(self, logits, y):
                    opt = torch.optim.LBFGS([self.t], lr=0.01)
            """, at=(4, 8)),
        Good("""
            import torch
            w = (torch.randn(784, 10) * 0.01).requires_grad_()
            b = torch.zeros(10, device="cuda", requires_grad=True)
            opt = torch.optim.SGD([w, b], lr=0.1)
            """),
        Good("""
            import torch
            x = torch.randn(4, 3, requires_grad=True).double()
            assert torch.autograd.gradcheck(f, (x,))
            """),
    ]

    def visit_Call(self, call: ast.Call, ctx: Context) -> Iterator[Finding]:
        node = single_assign_of(call, ctx)
        if node is None:
            return
        name = dotted(node.targets[0])
        if name is not None and name.count(".") == 1 and name.startswith("self."):
            yield from self._self_attr(node, name, ctx)
            return
        if name is None or "." in name:
            return
        got = made_non_leaf(node.value, ctx)
        if got is None:
            cast = _cast_of_leaf(node.value, ctx.scope(), node.lineno)
            use = _weight_use(ctx.scope(), name, node.lineno) if cast is not None else None
            if cast is not None and use is not None:  # `w1 = w.type(torch.float)`
                yield self.report(node, ctx, related=[
                    Related(ctx.path, cast[0].line, f"`{cast[1]}` is the leaf",
                            ctx.column(cast[0].stmt)), Related(ctx.path, use[0], use[1])],
                    name=name, how=f"`{cast[2]}`")
            return
        factory, how = got
        use = _weight_use(ctx.scope(), name, node.lineno)
        if use is None:
            return
        related = [Related(ctx.path, use[0], use[1])]
        yield self.report(node, ctx, related=related, fix=self._fix(node.value, factory, ctx),
                          name=name, how=f"`{how}`" if how.startswith(".") else how)

    def _self_attr(self, node: ast.Assign, name: str, ctx: Context) -> Iterator[Finding]:
        """``self.t = torch.ones(1, requires_grad=True).to(device)`` bound once in its class
        and used as a weight (``self.t.grad`` read, or ``self.t`` given to an optimizer) in
        any method of the class."""
        got = made_non_leaf(node.value, ctx)
        cls = ctx.analysis.class_of(ctx.function) if ctx.function is not None else None
        info = cls.attrs.get(name[5:]) if cls is not None else None
        if got is None or info is None or info.stmt is not node or info.later:
            return
        use = _attr_weight_use(cls.node, name, ctx)
        if use is None:
            return
        factory, how = got
        yield self.report(node, ctx, related=[Related(ctx.path, use[0], use[1])],
                          fix=self._fix(node.value, factory, ctx),
                          name=name, how=f"`{how}`" if how.startswith(".") else how)

    def _fix(self, value: ast.expr, factory: ast.Call, ctx: Context):
        if factory.func and isinstance(factory.func, ast.Attribute) \
                and factory.func.attr == "requires_grad_":
            plain = ctx.source(factory.func.value)
        else:
            bare = copy.copy(factory)
            bare.keywords = [k for k in factory.keywords if k.arg != "requires_grad"]
            plain = ast.unparse(bare)
        src = ctx.source(value)
        fsrc = ctx.source(factory)
        if src.count(fsrc) != 1:
            return None
        new = src.replace(fsrc, plain)
        if isinstance(value, ast.BinOp):
            new = f"({new})"
        return self.fix(ctx.edit(value, f"{new}.requires_grad_()"))


class NonLeafGivenToOptimizer(Rule):
    """A tensor computed from other tensors (a non-leaf) is passed to an optimizer.

    Why: optimizers update leaves in place; `torch.optim.SGD([w * 2], ...)` or a tensor
    derived from a parameter raises `ValueError: can't optimize a non-leaf Tensor`
    (verified on torch 2.13). Pass the leaf (`w`, the `nn.Parameter`) itself.
    `itertools.chain(*model.parameters(), w)` is the same mistake one level down: the `*`
    unpacks each Parameter as an iterable, so `chain` yields the rows of every weight (views,
    non-leaves); chain the generators themselves (`chain(model.parameters(), [w])`).
    Known limits: the tensor must be computed in the same function from a leaf that requires
    grad or from a model's output. Weights made non-leaf by `.to()`/`.cuda()` at creation are
    reported by GT305 instead.
    """

    code = "GT306"
    gate_statements = True
    name = "non-leaf-given-to-optimizer"
    message = ("`{expr}` is a non-leaf tensor ({why}); the optimizer raises "
               "`ValueError: can't optimize a non-leaf Tensor`")
    triggers = ("optim",)
    examples = [
        Bad("""
            import torch
            w = torch.randn(3, requires_grad=True)
            w2 = w * 2
            opt = torch.optim.SGD([w, w2], lr=0.1)
            """, at=(4, 26)),
        Bad("""
            import torch
            opt = torch.optim.Adam([torch.zeros(3, requires_grad=True).cuda()], lr=1e-3)
            """, at=(2, 24)),
        Bad("""
            import torch
            w = torch.randn(3, requires_grad=True)
            scaled = w * 0.1
            params = [w, scaled]
            opt = torch.optim.SGD(params, lr=0.1)
            """, at=(4, 13)),
        Bad("""
            import itertools
            import torch
            net = torch.nn.Linear(4, 2)
            scale = torch.ones(2, requires_grad=True)
            opt = torch.optim.SGD(itertools.chain(*net.parameters(), [scale]), lr=0.1)
            """, at=(5, 38)),
        Bad("""
            import torch
            class Fit:
                def __init__(self, true):
                    self.guess = true.clone().requires_grad_() * 1.2
                def run(self):
                    return torch.optim.RMSprop([{"params": self.guess}])
            """, at=(4, 8)),
        Good("""
            import torch
            w = torch.randn(3, requires_grad=True)
            b = torch.nn.Parameter(torch.zeros(3))
            opt = torch.optim.SGD([w, b], lr=0.1)
            opt2 = torch.optim.Adam(model.parameters(), lr=1e-3)
            opt3 = torch.optim.Adam(itertools.chain(*[m.parameters() for m in parts]))
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if not node.args and not node.keywords or not is_optimizer_call(node, ctx):
            return
        for e in optimizer_param_exprs(node, ctx.scope()):
            rows = _unpacked_parameters(e, ctx, node.lineno)
            if rows is not None:
                yield self.report(rows, ctx, expr=ctx.source(rows), why=(
                    "`*` unpacks each Parameter into its rows, which `chain` yields: views, "
                    "not the parameters"))
                continue
            made = _sliced_attr(e, ctx)
            if made is not None:  # `self.x = self.emb[:, 1:3]` in another method
                seen: set[int] = ctx.memo("gt306-sliced", ctx.tree, set)
                if id(made[0]) not in seen:
                    seen.add(id(made[0]))
                    yield self.report(made[0], ctx, related=[Related(
                        ctx.path, node.lineno, "given to the optimizer here",
                        ctx.column(node))], expr=ctx.source(e),
                        why=made[1])
                continue
            if made_non_leaf(e, ctx) is not None:
                yield self.report(e, ctx, expr=ctx.source(e), why="made from a leaf")
                continue
            if not isinstance(e, (ast.Name, ast.BinOp, ast.Call)):
                continue
            scope = ctx.scope()
            if isinstance(e, ast.Name):
                got = non_leaf_origin(scope, e.id, node.lineno)
                if got is None or got[1] in ("made-non-leaf", "rebound"):
                    continue
                b, why = got
                yield self.report(e, ctx, related=[Related(ctx.path, b.line,
                                  f"`{e.id}` is computed here", ctx.column(b.stmt))],
                                  expr=e.id, why=why)
            else:
                src = derived_from_grad_leaf(scope, e, node.lineno)
                if src is not None:
                    yield self.report(e, ctx, expr=ctx.source(e), why=f"computed from `{src}`")


def _unpacked_parameters(e: ast.expr, ctx: Context, line: int) -> ast.Starred | None:
    """``*m.parameters()`` among the arguments of an ``itertools.chain(...)`` call ``e`` (or of
    the call a name ``e`` is bound to before ``line``): chain iterates each Parameter it is
    given."""
    if isinstance(e, ast.Name):
        b = ctx.scope().binding_before(e.id, line)
        e = b.value if b is not None and b.value is not None \
            and not isinstance(b.stmt, ast.AugAssign) else e
    if not isinstance(e, ast.Call) or ctx.call_name(e) != "itertools.chain":
        return None
    return next((a for a in e.args if isinstance(a, ast.Starred)
                 and isinstance(a.value, ast.Call) and isinstance(a.value.func, ast.Attribute)
                 and a.value.func.attr == "parameters"), None)
