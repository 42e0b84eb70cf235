"""GT118: `torch.tensor([...])` built from Parameters copies their values, not their graph."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.grad_values import KEEPS
from gradtrace.lint.analysis.kinds import PARAMETER
from gradtrace.lint.analysis.param_attrs import file_freezes, forward_methods
from gradtrace.lint.analysis.calls import call_sites
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.graph_breaks.rebuilt_params import REBUILDERS, own_parameter
from gradtrace.lint.excerpt import excerpt

MAX_DEPTH = 6


class ParametersCopiedIntoTensor(Rule):
    """`torch.tensor([...])` (or `torch.as_tensor`, `torch.Tensor`, `x.new_tensor`) is given a
    list or tuple that holds Parameters, or arithmetic on them (`[[a + b, a - b]]`).

    Why: these constructors read the values of the tensors in the sequence and build a new
    leaf without history. Whatever is computed from the copy (a kernel tied to two
    parameters, a vector of learned scales) has no path back to the Parameters: they never
    get a gradient and never train, silently, or the loss has no `grad_fn` when they were its
    only trainable part (discuss.pytorch.org "trainable customized convolutional layer",
    checked on torch 2.13). Combine them with `torch.stack(...)` / `torch.cat(...)`.
    Known limits: an element must be known to be a Parameter (`nn.Parameter(...)`, a
    registered `self.<p>`, a helper's or a caller's Parameter:
    NOTE [kinds], NOTE [parameter kinds]), the call made with grad enabled, in a file that
    calls `backward()` and freezes nothing. A module's own Parameters in `forward` are
    GT110's.
    """

    code = "GT118"
    needs_step = True  # NOTE [step files]
    name = "parameters-copied-into-tensor"
    message = ("`{call}` copies the values of the Parameter `{param}` into a new tensor "
               "without history: nothing computed from it reaches `{param}`, which never gets a "
               "gradient; use `torch.stack(...)`/`torch.cat(...)`")
    triggers = ("tensor(", "Tensor(", "as_tensor(", "new_tensor(")
    gate_statements = True
    examples = [
        Bad("""
            import torch
            from torch import nn

            a = nn.Parameter(torch.tensor(1.0))
            b = nn.Parameter(torch.tensor(0.5))
            kernel = torch.tensor([[a + b, a - b], [a - b, a + b]])
            (kernel * torch.randn(2, 2)).sum().backward()
            """, at=(6, 9)),
        Good("""
            import torch
            from torch import nn

            a = nn.Parameter(torch.tensor(1.0))
            b = nn.Parameter(torch.tensor(0.5))
            kernel = torch.stack([torch.stack([a + b, a - b]), torch.stack([a - b, a + b])])
            (kernel * torch.randn(2, 2)).sum().backward()
            print(torch.tensor([a.item(), b.item()]))
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        f = node.func
        if not node.args or not isinstance(node.args[0], (ast.List, ast.Tuple)) \
                or not ctx.mentions(".backward(") or not (
                ctx.qualified_name(f) in REBUILDERS
                or isinstance(f, ast.Attribute) and f.attr == "new_tensor"):
            return
        if ctx.grad_disabled is not None or file_freezes(ctx) \
                or not call_sites(ctx, "backward"):
            return
        cls = ctx.analysis.class_of(ctx.function)
        if cls is not None and cls.is_module and ctx.function in forward_methods(cls) \
                and own_parameter(node.args[0], cls, ctx) is not None:
            return  # GT110's
        where = ctx.function if ctx.function is not None else ctx.tree
        got = _parameter(node.args[0], where, node.lineno, ctx, 0)
        if got is None:
            return
        elt, kind_node = got
        rel = [Related(ctx.path, kind_node.lineno, f"`{ctx.source(elt)}` is a Parameter made "
                       "here", ctx.column(kind_node))] if kind_node is not None \
            and hasattr(kind_node, "lineno") and kind_node.lineno != node.lineno else []
        yield self.report(node, ctx, related=rel, param=ctx.source(elt),
                          call=excerpt(ctx.source(node)))


def _parameter(e: ast.AST, where: ast.AST, line: int, ctx: Context,
               depth: int) -> tuple[ast.AST, ast.AST | None] | None:
    """(element, where it is made) for the first element of the nested literal ``e`` that is,
    through arithmetic and graph-keeping methods, a Parameter."""
    if depth > MAX_DEPTH:
        return None
    if isinstance(e, (ast.List, ast.Tuple)):
        parts: list[ast.AST] = list(e.elts)
    elif isinstance(e, ast.BinOp):
        parts = [e.left, e.right]
    elif isinstance(e, ast.UnaryOp):
        parts = [e.operand]
    elif isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in KEEPS:
        parts = [e.func.value]
    elif isinstance(e, (ast.Name, ast.Attribute, ast.Subscript)):
        k = ctx.analysis.kind_in(e, where, line)
        return (e, k.node) if k is not None and k.what == PARAMETER else None
    else:
        return None
    for p in parts:
        got = _parameter(p, where, line, ctx, depth + 1)
        if got is not None:
            return got
    return None
