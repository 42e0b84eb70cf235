"""GT403: a parameter moved or reshaped after it was wrapped, kept as a plain tensor."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.analysis.per_pass_returns import made_each_pass
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.graph_breaks._paths import LOSS_FUNC_RE
from gradtrace.lint.rules.leaf._tensors import MOVE_OR_VIEW, asks_what_it_has, is_parameter_call
from gradtrace.lint.rules.registration._attrs import regrad_leaf
from gradtrace.lint.rules.registration._moved_name import dropped_moves
from gradtrace.lint.rules.registration._spent_locals import spent_locally


class ParameterMovedAfterWrapping(Rule):
    """`nn.Parameter(t).to(device)` (or `.cuda()`, `.double()`) returns a plain tensor.

    Why: `.to()` / `.cuda()` / `.double()` that really move or cast return a new tensor
    computed from the Parameter: a non-leaf plain `Tensor`, not an `nn.Parameter`. Assigned to
    a module it is not registered (`named_parameters()` misses it); given to an optimizer it
    raises `ValueError: can't optimize a non-leaf Tensor` (verified on torch 2.13). A view
    (`.squeeze()`, `.reshape()`, `.view()`, `.t()`) is always such a new tensor. Move or
    reshape the data first: `nn.Parameter(t.to(device))`. The same holds through a name: `p =
    nn.Parameter(t)` read only in `module._parameters[k] = p.to(dtype=d)` (or a return) keeps
    the copy and drops the Parameter (NOTE [parameter dropped for its moved copy]).
    Known limits: a move to the device/dtype the tensor already has returns the Parameter
    itself; the rule sees that only when the data was moved or made the same way in the call
    (`nn.Parameter(t.to(d)).to(d)`), and reports the rest. A dummy loss returned by a loss
    function, an operand of arithmetic, or a local copy made under `no_grad` (a leaf) whose
    `requires_grad` the function then turns on, is left alone, and so is a value assigned to
    `.data` (`emb.weight.data = nn.Parameter(t).to(d)`: the registered weight gets new data),
    and a local that only feeds the function's own computation: made anew on every call,
    nothing trains it, moved or not (NOTE [parameter spent in its function]); and so is a
    value a method returns when every call of it, in the project, binds the result to local
    names of a module's `forward`, or starts a loop's recurrence elsewhere (an initial hidden
    state made on every pass: NOTE [made anew on every forward pass]). A Parameter made with `requires_grad=False` is a
    leaf however moved: the message then says what is lost (`state_dict()`, the module's
    `.to()`), not the optimizer's error.
    """

    code = "GT403"
    gate_statements = True
    name = "parameter-moved-after-wrapping"
    message = ("`{expr}` returns a plain tensor copy or view when it moves, casts or "
               "reshapes, not an `nn.Parameter` (a non-leaf one when it requires grad): a module attribute set "
               "to it is not registered{tail}")
    tails = (", and an optimizer given it raises `ValueError: can't optimize a non-leaf Tensor`",
             " (made with `requires_grad=False`: a constant that `state_dict()` misses and the "
             "module's `.to()` does not move)")
    fix_title = "Move the data before wrapping: `nn.Parameter(t.to(...))`"
    fix_safety = "safe"
    triggers = ("Parameter",)
    examples = [
        Bad("""
            import torch
            from torch import nn
            class Net(nn.Module):
                def __init__(self, device):
                    super().__init__()
                    self.w = nn.Parameter(torch.randn(3, 3)).to(device)
            """, fixed="""
            import torch
            from torch import nn
            class Net(nn.Module):
                def __init__(self, device):
                    super().__init__()
                    self.w = nn.Parameter(torch.randn(3, 3).to(device))
            """, at=(6, 17)),
        Bad("""
            import torch
            from torch import nn
            def set_parameter(module, name, tensor, dtype):
                param = nn.Parameter(tensor)
                module._parameters[name] = param.to(dtype=dtype)
            """, at=(5, 31)),
        Good("""
            import torch
            from torch import nn
            def set_parameter(module, name, tensor, dtype):
                param = nn.Parameter(tensor.to(dtype=dtype))
                module._parameters[name] = param
            def forward(self, x):
                w = nn.Parameter(self.base)
                self.cache = w.to(x.dtype)
                return x @ w
            """),
        Good("""
            import torch
            from torch import nn
            w = nn.Parameter(torch.randn(3, 3).to(device))
            b = nn.Parameter(torch.zeros(3, device=device))
            """),
    ]

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        for move, name in dropped_moves(node, ctx):  # NOTE [parameter dropped for its moved copy]
            yield self.report(move, ctx, expr=f"{name}.{move.func.attr}()",  # type: ignore[attr-defined]
                              tail=self.tails[0])

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        f = node.func
        if not (isinstance(f, ast.Attribute) and f.attr in MOVE_OR_VIEW):
            return  # a view (`.squeeze()`) is a new non-leaf tensor too
        inner = f.value
        if not is_parameter_call(inner, ctx) or not isinstance(inner, ast.Call) or not inner.args \
                or isinstance(ctx.parent, (ast.BinOp, ast.UnaryOp, ast.Compare)):
            return  # `x + nn.Parameter(t).to(d)`: an operand used on the spot, never kept
        if isinstance(ctx.parent, ast.Attribute) and ctx.parent.attr in ("detach", "detach_"):
            return  # NOTE [moved parameter detached]
        st = ctx.statement
        if isinstance(st, ast.Assign) and st.value is node and all(
                isinstance(t, ast.Attribute) and t.attr == "data" for t in st.targets):
            return  # `layer.weight.data = nn.Parameter(t).to(d)`: new data for a registered one
        if isinstance(ctx.statement, ast.Return) and (fn := ctx.function) is not None \
                and LOSS_FUNC_RE.match(fn.name.lower()):
            return  # a dummy loss for a model with nothing to train: backwarded, not registered
        if spent_locally(node, ctx):
            return  # NOTE [parameter spent in its function]
        if _returned(node, ctx) and made_each_pass(ctx, ctx.function):
            return  # NOTE [made anew on every forward pass]
        data = inner.args[0]
        if isinstance(data, ast.Starred) or asks_what_it_has(node, data, ctx) or regrad_leaf(
                node, ctx):  # `nn.Parameter(t.to(d)).to(d)`: the Parameter; a leaf (no_grad)
            return
        dsrc = ctx.source(data)
        if not isinstance(data, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)):
            dsrc = f"({dsrc})"
        margs = [ctx.source(a) for a in node.args] + \
            [f"{k.arg}={ctx.source(k.value)}" if k.arg else f"**{ctx.source(k.value)}"
             for k in node.keywords]
        rest = [ctx.source(a) for a in inner.args[1:]] + \
            [f"{k.arg}={ctx.source(k.value)}" for k in inner.keywords if k.arg]
        moved = f"{dsrc}.{f.attr}({', '.join(margs)})"
        new = f"{ctx.source(inner.func)}({', '.join([moved, *rest])})"
        frozen = any(k.arg == "requires_grad" and isinstance(k.value, ast.Constant)
                     and k.value.value is False for k in inner.keywords)
        yield self.report(node, ctx, fix=self.fix(ctx.edit(node, new)),
                          expr=f"nn.Parameter(...).{f.attr}()", tail=self.tails[frozen])


# NOTE [moved parameter detached]
# ``self.base_flow = nn.Parameter(torch.from_numpy(flow)).cuda().detach()``: the chain ends in
# ``.detach()``, which gives a tensor that requires no grad and has no history (torch 2.13:
# ``requires_grad False``, ``grad_fn None``), whatever the Parameter was. The author asks for
# a constant (a fixed sampling grid, a base flow), not for a weight: nothing is meant to be
# registered or trained, so neither consequence of the message is the bug. The same move kept
# without ``.detach()`` is still reported.


def _returned(node: ast.Call, ctx: Context) -> bool:
    """``node`` is what the function returns, or an element of the tuple it returns."""
    st = ctx.statement
    return isinstance(st, ast.Return) and st.value is not None and (st.value is node or isinstance(
        st.value, (ast.Tuple, ast.List)) and any(e is node for e in st.value.elts))
