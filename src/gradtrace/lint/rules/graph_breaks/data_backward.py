"""GT125: ``backward()`` on a value computed only from data."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.data_values import BUILTINS, data_value, weightless_module
from gradtrace.lint.context import Context
from gradtrace.lint.flow_kinds import (DETACHED, GRAPH, LEAF, MODULE, NEW_TENSOR_FUNCS,
                                       PARAMETER)
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule

# factories whose tensors are integers: they cannot require grad, so not the one to mark
INTEGER_FACTORIES = frozenset({"torch.randint", "torch.randint_like", "torch.randperm",
                               "torch.LongTensor"})
CUTS = frozenset({"data", "detach", "item", "numpy", "tolist"})
INTEGER_DTYPES = frozenset({"long", "int", "int64", "int32", "int16", "int8", "uint8", "bool"})


class BackwardOfDataOnly(Rule):
    """`backward()` runs on a value computed only from data: new tensors that were never
    asked to require grad (`torch.rand(...)`, `torch.from_numpy(a)`), through `torch`
    functions, arithmetic, tensor methods and modules of the file that hold no weight (a loss
    written as an `nn.Module`).

    Why: nothing upstream of the value requires grad, so it has no `grad_fn`:
    `backward()` raises `RuntimeError: element 0 of tensors does not require grad and does
    not have a grad_fn` (pytorch-facts.md#no-graph-loss). When exactly one floating-point
    tensor made without `requires_grad=True` feeds the value, the finding is on it (give it
    `requires_grad=True`); otherwise on the `backward()` call
    (NOTE [data values]).
    Known limits: only names bound once, in the function (or script) of the backward; a name
    handed before the backward to a function or method that may mark it (`enable(x)`) is
    trusted.
    """

    code = "GT125"
    gate_statements = True
    name = "backward-of-data-only"
    message = ("`{value}` is computed only from data{source}: nothing upstream requires grad, "
               "so `backward()` (line {line}) raises `element 0 of tensors does not require "
               "grad and does not have a grad_fn`{remedy}")
    triggers = ("backward",)
    examples = [
        Bad("""
            import torch
            import torch.nn.functional as F

            logits = torch.rand(8, 5)
            labels = torch.randint(0, 5, (8,))
            loss = F.cross_entropy(logits, labels)
            loss.backward()
            """, at=(4, 0)),
        Bad("""
            import torch

            class Hinge(torch.nn.Module):
                def __init__(self, margin=1.0):
                    super().__init__()
                    self.margin = margin

                def forward(self, scores, target):
                    return torch.relu(self.margin - scores * target).mean()

            scores = torch.randn(8)
            target = torch.ones(8)
            loss = Hinge(margin=0.5)(scores, target)
            loss.backward()
            """, at=(14, 0)),
        Good("""
            import torch
            import torch.nn.functional as F

            logits = torch.rand(8, 5, requires_grad=True)
            labels = torch.randint(0, 5, (8,))
            loss = F.cross_entropy(logits, labels)
            loss.backward()
            """),
        Good("""
            import torch

            class Hinge(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.scale = torch.nn.Linear(1, 1)

                def forward(self, scores, target):
                    return torch.relu(1.0 - self.scale(scores) * target).mean()

            scores = torch.randn(8, 1)
            target = torch.ones(8, 1)
            loss = Hinge()(scores, target)
            loss.backward()
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        f = node.func
        if not isinstance(f, ast.Attribute) or f.attr != "backward" or \
                not isinstance(f.value, ast.Name):
            return
        if (ctx.qualified_name(f.value) or "").startswith("torch"):
            return
        scope = ctx.scope()
        stmt = ctx.statement
        if stmt is None or id(stmt) in scope.no_grad:
            return  # GT207's
        names = data_value(ctx, scope, f.value, node.lineno)
        if names is None or not any(
                (b := scope.binding_before(n, node.lineno)) is not None and b.kind in (LEAF, DETACHED)
                for n in names):
            return
        if _cut_from_graph(ctx, scope, names):
            return  # a break of a graph (`.data`, `.detach()`, `.item()`, a copy of outputs)
        fresh = [(n, s) for n, s in names.items() if _float_fresh(ctx, s)]
        value = f.value.id
        if len(fresh) == 1 and fresh[0][0] != value:
            name, at = fresh[0]
            rel = (Related(ctx.path, node.lineno, "`backward()` is called here",
                           ctx.column(node)),)
            yield self.report(at, ctx, related=rel, value=value, line=node.lineno,
                              source=f" (`{name}` is made here without `requires_grad=True`)",
                              remedy=f"; make `{name}` with `requires_grad=True`")
            return
        yield self.report(node, ctx, value=value, line=node.lineno, source="", remedy="")


def _cut_from_graph(ctx: Context, scope, names: dict[str, ast.stmt]) -> bool:  # type: ignore[no-untyped-def]
    """A binding of ``names`` reads a graph through a cut: ``.data``, a cutting method
    (``detach``, ``item``, ``numpy``, ``tolist``), a name holding a graph, a parameter or a
    module, or a call of a module: the data is a break, which GT102-GT109 name. Names read by
    those bindings are followed too (``parts = [f(x).item() for ...]`` read by
    ``torch.tensor(parts)``), a few assignments deep."""
    todo = list(names.values())
    seen = {id(s) for s in todo}
    while todo:
        stmt = todo.pop()
        v = stmt.value if isinstance(stmt, ast.Assign) else None
        for n in walk(v) if v is not None else ():
            if isinstance(n, ast.Attribute) and n.attr in CUTS:
                return True
            if isinstance(n, ast.Call) and _runs_something(ctx, scope, n, stmt.lineno):
                return True
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in names \
                    and n.id not in ctx.analysis.classes:  # (a class: its calls are read above)
                b = scope.binding_before(n.id, stmt.lineno)
                if b is not None and b.kind in (GRAPH, PARAMETER, MODULE) and \
                        not weightless_module(ctx, scope, n, stmt.lineno):
                    return True
                if b is not None and isinstance(b.stmt, ast.Assign) and id(b.stmt) not in seen \
                        and len(seen) < 16:
                    seen.add(id(b.stmt))
                    todo.append(b.stmt)
    return False


def _runs_something(ctx: Context, scope, call: ast.Call, line: int) -> bool:  # type: ignore[no-untyped-def]
    """``call`` may run a model: a module, or a function that is neither ``torch``'s nor a
    builtin (``model(x)`` with ``model`` a parameter); not a weightless module of the file,
    nor the building of one."""
    f = call.func
    if (ctx.qualified_name(f) or "").startswith("torch.") or weightless_module(ctx, scope, f, line):
        return False
    if isinstance(f, ast.Name):
        if f.id in BUILTINS:
            return False
        return not any(weightless_module(ctx, scope, c, line) for c in walk(scope.node)
                       if isinstance(c, ast.Call) and c.func is f)
    return scope.kind(f, line) == MODULE


def _float_fresh(ctx: Context, stmt: ast.stmt) -> bool:
    """``stmt`` binds a new tensor from a factory that could have been asked to require grad
    (not an integer one)."""
    v = stmt.value if isinstance(stmt, ast.Assign) else None
    if not isinstance(v, ast.Call):
        return False
    q = ctx.qualified_name(v.func) or ""
    if q not in NEW_TENSOR_FUNCS or q in INTEGER_FACTORIES:
        return False
    for k in v.keywords:
        if k.arg == "dtype" and isinstance(k.value, ast.Attribute) and \
                k.value.attr in INTEGER_DTYPES:
            return False
    if q in ("torch.tensor", "torch.as_tensor") and v.args and all(
            isinstance(c.value, (int, bool)) for c in ast.walk(v.args[0])
            if isinstance(c, ast.Constant)):
        return False
    if q == "torch.arange" and all(isinstance(a, ast.Constant) and isinstance(a.value, int)
                                   for a in v.args):
        return False
    return True
