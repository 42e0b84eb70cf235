"""GT543: two `nn.Parameter`s made from the same tensor share its memory."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule

# NOTE [parameters over one tensor]
# `nn.Parameter(data)` does not copy: the Parameter is `data`'s storage seen as a leaf
# (`Tensor._make_subclass`, torch 2.13: `p.data_ptr() == data.data_ptr()`). Two Parameters made
# from one tensor are two leaves over the same memory: each gets its own gradient, but every
# in-place update of one (the optimizer's step) writes the other too, so the two values are
# always equal and move with the sum of both updates.


class ParametersShareOneTensor(Rule):
    """Two `nn.Parameter(x)` calls of one function wrap the same tensor `x`: the parameters
    share their memory.

    Why: `nn.Parameter(init)` uses `init`'s memory (NOTE [parameters over one tensor]), so
    `self.s = nn.Parameter(init); self.t = nn.Parameter(init)` makes two parameters that are
    one array: the optimizer applies the scale's update to the shift and the shift's to the
    scale, and they stay equal forever, silently (VincentStimper/normalizing-flows'
    `AffineConstFlow` before commit 13c1989; checked on torch 2.13: `s` and `t` are equal
    after training, and the fit is worse). Give each its own tensor (`nn.Parameter(init.clone())`
    or a new `torch.zeros(shape)`).
    Known limits: the tensor must be one plain name with one binding reaching both calls (not
    rebound between them), the two calls in arms that can both run (not two arms of one `if`,
    and no `return`/`raise`/`continue`/`break` between them: transformers' loaders wrap one
    checkpoint value per `if target_key == ...: ... return`); a parameter built in a loop from
    one tensor is not followed.
    """

    code = "GT543"
    name = "parameters-share-one-tensor"
    message = ("`{call}` wraps the same tensor `{name}` as `{other}` (line {line}): "
               "`nn.Parameter` does not copy, so the two parameters share one memory and every "
               "update of one changes the other; give each its own tensor (`{name}.clone()`)")
    triggers = ("Parameter",)
    gate_statements = True
    examples = [
        Bad("""
            import torch
            from torch import nn
            class Affine(nn.Module):
                def __init__(self, n):
                    super().__init__()
                    init = torch.zeros(1, n)
                    self.s = nn.Parameter(init)
                    self.t = nn.Parameter(init)
            """, at=(8, 17)),
        Good("""
            import torch
            from torch import nn
            class Affine(nn.Module):
                def __init__(self, n, scale=True):
                    super().__init__()
                    init = torch.zeros(1, n)
                    if scale:
                        self.s = nn.Parameter(init)
                    else:
                        self.s = nn.Parameter(init, requires_grad=False)
                    self.t = nn.Parameter(init.clone())
            """),
        Good("""
            import torch
            def load(key, value):
                value = value.float()
                if key == "qweight":
                    qweight = torch.nn.Parameter(value, requires_grad=False)
                    return {"qweight": qweight}
                if key == "dqweight":
                    dqweight = torch.nn.Parameter(value)
                    return {"dqweight": dqweight}
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        fn = ctx.function
        if fn is None or not node.args or not isinstance(node.args[0], ast.Name) \
                or not _named_parameter(node.func):
            return
        name = node.args[0].id
        earlier = ctx.memo("gt543-wraps", ctx.tree, dict).setdefault((id(fn), name), [])
        earlier.append(node)
        if len(earlier) < 2 or ctx.call_name(node) != "torch.nn.Parameter":
            return  # (most tensors are wrapped once: no data-flow scope is built for them)
        scope = ctx.scope(fn)
        b = scope.binding_before(name, node.lineno)
        stmt = scope.statement_of(node)
        if b is None or stmt is None or not isinstance(b.value, ast.expr) \
                or isinstance(b.value, (ast.Name, ast.Attribute)) \
                or scope.loops_of(stmt) != scope.loops_of(b.stmt):
            return  # a parameter of the function, a loop variable, another name
        for first in earlier[:-1]:
            at = scope.statement_of(first)
            if at is None or ctx.call_name(first) != "torch.nn.Parameter" \
                    or scope.binding_before(name, first.lineno) is not b \
                    or scope.exclusive(at, stmt) or any(
                        isinstance(x, (ast.Return, ast.Raise, ast.Continue, ast.Break))
                        and first.lineno <= x.lineno < node.lineno for x in _own_nodes(fn)):
                continue  # never both (different arms, or the first one's arm leaves)
            yield self.report(node, ctx, related=(Related(
                ctx.path, first.lineno, f"`{name}` is wrapped here first",
                ctx.column(first)),), call=ctx.source(node), name=name,
                other=ctx.source(first), line=first.lineno)
            return


def _named_parameter(f: ast.expr) -> bool:
    """The called name ends in ``Parameter`` (the qualified name is checked afterwards)."""
    return isinstance(f, ast.Name) and f.id == "Parameter" \
        or isinstance(f, ast.Attribute) and f.attr == "Parameter"


def _own_nodes(fn: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``fn`` outside nested functions, in source order."""
    out = [n for n in walk(fn) if n is not fn]
    skip: set[int] = set()
    for n in out:
        if isinstance(n, (*FUNCTION_TYPES, ast.Lambda)):
            skip.update(id(x) for x in walk(n))
    yield from sorted((n for n in out if id(n) not in skip and hasattr(n, "lineno")),
                      key=lambda x: (x.lineno, x.col_offset))  # type: ignore[attr-defined]

