"""GT122: ``backward()`` on a loss that one path makes a fresh constant tensor.

# NOTE [backward of a maybe-constant loss]
The receiver of ``.backward()`` may be a constant on one path (NOTE [constant on one path]):
when that path runs, the loss has no ``grad_fn`` and ``backward()`` raises. Not said when the
code looks at the loss before the backward: an ``if``/``while`` test anywhere in the function
that reads the loss or a name computed from it (``v = loss.item()``, then ``if v > 0:``), or
asks for its ``requires_grad``/``grad_fn``; nor when the function sets ``requires_grad`` on it
(GT106's band-aid, a finding of its own); nor inside a ``try``.
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.constant_returns import may_be_constant
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import parent_map, walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.graph_breaks._base import short

GRAD_FLAGS = frozenset({"requires_grad", "grad_fn", "requires_grad_", "is_leaf"})


class BackwardOfConstantLoss(Rule):
    """`backward()` runs on a loss that one path makes a new constant tensor
    (`torch.zeros(1) if correct else margin`, a helper or method returning `torch.tensor(0.)`
    early), with nothing checking the loss first.

    Why: a tensor made by `torch.zeros`/`torch.tensor`/`new_zeros` has no history; when the
    path that returns it runs (every sentence of a batch parsed right, no target in the
    batch), the loss has no `grad_fn` and `backward()` raises `RuntimeError: element 0 of
    tensors does not require grad and does not have a grad_fn`
    (pytorch-facts.md#no-graph-loss). The finding is on the constant. Skip the
    backward (and the step) when nothing was lost, or build the zero from the graph
    (`scores.sum() * 0`). The constant is followed through names, conditional expressions,
    `sum(...) / len(...)` of a list comprehension, and the returns of functions and methods of
    the file, two calls deep (NOTE [constant on one path]).
    Known limits: a loss tested before its backward (`if loss > 0:`, `if v:` with `v =
    loss.item()`, `loss.requires_grad`) is not reported; a list filled by anything but
    `append` of such values is not followed.
    """

    code = "GT122"
    gate_statements = True
    name = "backward-of-constant-loss"
    message = ("`{const}` is a new tensor with no graph, and on this path it is the loss that "
               "`{call}` (line {line}) backpropagates: there `backward()` raises `element 0 of "
               "tensors does not require grad`; skip the backward when nothing was lost, or "
               "build the zero from the graph")
    triggers = ("backward",)
    examples = [
        Bad("""
            import torch

            class Ranker(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.score = torch.nn.Linear(4, 1)

                def margin(self, good, bad):
                    gap = (self.score(bad) - self.score(good)).sum()
                    hinge = torch.zeros(()) if bool(gap < -1) else gap + 1
                    return gap, hinge

            ranker = Ranker()
            opt = torch.optim.SGD(ranker.parameters(), lr=0.1)
            for good, bad in pairs:
                opt.zero_grad()
                terms = [ranker.margin(g, b)[1] for g, b in zip(good, bad)]
                total = sum(terms) / len(terms)
                total.backward()
                opt.step()
            """, at=(10, 16)),
        Bad("""
            import torch

            def pair_cost(a, b, keep):
                if not keep.any():
                    return torch.tensor(0.0)
                return ((a - b)[keep] ** 2).mean()

            def fit(net, opt, rows):
                for x, y, keep in rows:
                    opt.zero_grad()
                    cost = pair_cost(net(x), y, keep)
                    cost.backward()
                    opt.step()
            """, at=(5, 15)),
        Good("""
            import torch

            def pair_cost(a, b, keep):
                if not keep.any():
                    return torch.tensor(0.0)
                return ((a - b)[keep] ** 2).mean()

            def fit(net, opt, rows):
                for x, y, keep in rows:
                    opt.zero_grad()
                    out = net(x)
                    cost = pair_cost(out, y, keep) + 0.01 * out.pow(2).mean()
                    cost.backward()
                    opt.step()
                for x, y, keep in rows:
                    cost = pair_cost(net(x), y, keep)
                    seen = cost.item()
                    if seen > 0:
                        opt.zero_grad()
                        cost.backward()
                        opt.step()
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr == "backward"):
            return
        recv = func.value
        if not isinstance(recv, (ast.Name, ast.Call, ast.Subscript, ast.BinOp)):
            return
        scope = ctx.scope()
        const = may_be_constant(ctx, scope, recv, node.lineno)
        # (NOTE [backward of a maybe-constant loss])
        if const is None or _looked_at(scope.node, recv, node, ctx):
            return
        call = short(ctx.source(node))
        yield self.report(const, ctx, related=(
            Related(ctx.path, node.lineno, f"`{call}` backpropagates it here",
                    ctx.column(node)),), const=short(ctx.source(const)), call=call,
            line=node.lineno)


def _looked_at(fn: ast.AST, recv: ast.expr, backward: ast.Call, ctx: Context) -> bool:
    """Whether ``fn`` tests the loss (or a name computed from it) before backpropagating it,
    sets its grad flag, or runs the backward inside a ``try``."""
    names = {n.id for n in walk(recv) if isinstance(n, ast.Name)
             and not (ctx.qualified_name(n) or "").startswith("torch")}
    if not names:
        return False
    for _ in range(3):  # names computed from the loss: `v = loss.item()`
        more = {t.id for s in walk(fn) if isinstance(s, ast.Assign)
                for t in s.targets if isinstance(t, ast.Name)
                and any(isinstance(n, ast.Name) and n.id in names for n in walk(s.value))}
        if more <= names:
            break
        names |= more
    for n in walk(fn):
        test = n.test if isinstance(n, (ast.If, ast.While, ast.IfExp, ast.Assert)) else None
        if test is not None and any(isinstance(x, ast.Name) and x.id in names for x in walk(test)):
            return True
        if isinstance(n, ast.Attribute) and n.attr in GRAD_FLAGS and dotted(n.value) in names:
            return True
    parents = parent_map(fn)
    p = parents.get(id(backward))
    while p is not None and p is not fn:
        if isinstance(p, ast.Try):
            return True
        p = parents.get(id(p))
    return False
