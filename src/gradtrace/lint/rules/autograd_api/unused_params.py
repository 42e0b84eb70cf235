"""GT706: `torch.autograd.grad` over every parameter of a model whose forward leaves some out."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.frozen_params import frozen_parameter
from gradtrace.lint.analysis.kinds import MODULE, PARAMETER
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule

# forward text that reaches attributes without naming them
INDIRECT = ("children(", "modules(", "getattr(", "_modules", "named_", "parameters(",
            "__dict__", "vars(")


def _params_owner(e: ast.expr) -> ast.expr | None:
    """``model`` of ``model.parameters()`` / ``list(model.parameters())``."""
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id in (
            "list", "tuple") and len(e.args) == 1:
        e = e.args[0]
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr == "parameters" and not e.args and not e.keywords:
        return e.func.value
    return None


class GradOverUnusedParameters(Rule):
    """`torch.autograd.grad(loss, model.parameters())` where the model's `forward` never
    uses one of its layers (an auxiliary head, a layer kept for another task).

    Why: `autograd.grad` needs every input it is given to take part in the graph; the
    parameters of a layer that `forward` never calls do not, and it raises `RuntimeError: The
    differentiated Tensor at index 2 appears to not have been used in the graph. Set
    allow_unused=True if this is the desired behavior.` (meta-learning pseudo-updates over all
    parameters, checked on torch 2.13). Pass `allow_unused=True` (and treat the `None`
    gradients), or only the parameters the loss uses.
    Known limits: the model must be an instance of an `nn.Module` class of this file whose
    `forward` (and the methods it calls) names its layers (`self.fc(...)`); a forward that
    reaches them indirectly (`self.children()`, `getattr`) is trusted.
    A weight that never requires grad fails the same call
    (NOTE [frozen parameters of a class]): `self.w = nn.Parameter(t, requires_grad=False)`, `nn.Embedding.from_pretrained(m)`
    (frozen by default), or a submodule every instance is frozen on; `autograd.grad` then
    raises `One of the differentiated Tensors does not require grad`, also with
    `allow_unused=True` (checked on torch 2.13). The freeze is reported; a file that sets
    `requires_grad` back on anywhere is trusted.
    """

    code = "GT706"
    name = "grad-over-unused-parameters"
    message = "`{call}` differentiates every parameter of `{model}`, but {what}"
    UNUSED = ("`{cls}.forward` never uses `self.{attr}`: autograd.grad raises `The "
              "differentiated Tensor at index N appears to not have been used in the graph`; "
              "pass `allow_unused=True` or only the parameters the loss uses")
    FROZEN = ("`self.{attr}` of `{cls}` {how}: autograd.grad raises `One of the "
              "differentiated Tensors does not require grad` (also with `allow_unused=True`); "
              "differentiate only `[p for p in {model}.parameters() if p.requires_grad]`")
    triggers = ("grad(",)
    gate_statements = True
    examples = [
        Bad("""
            import torch
            import torch.nn as nn

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(4, 2)
                    self.aux_head = nn.Linear(4, 3)

                def forward(self, x):
                    return self.fc(x)

            net = Net()
            loss = net(torch.randn(2, 4)).sum()
            grads = torch.autograd.grad(loss, net.parameters(), create_graph=True)
            """, at=(15, 8)),
        Bad("""
            import torch
            import torch.nn as nn

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.w = nn.Parameter(torch.randn(2, 4))
                    self.scale = nn.Parameter(torch.ones(2), requires_grad=False)

                def forward(self, x):
                    return (x @ self.w.t()) * self.scale

            net = Net()
            loss = net(torch.randn(3, 4)).pow(2).mean()
            grads = torch.autograd.grad(loss, list(net.parameters()))
            """, at=(8, 8)),
        Good("""
            import torch
            import torch.nn as nn

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.w = nn.Parameter(torch.randn(2, 4))
                    self.scale = nn.Parameter(torch.ones(2), requires_grad=False)

                def forward(self, x):
                    return (x @ self.w.t()) * self.scale

            net = Net()
            loss = net(torch.randn(3, 4)).pow(2).mean()
            grads = torch.autograd.grad(loss, [p for p in net.parameters() if p.requires_grad])
            """),
        Good("""
            import torch
            import torch.nn as nn

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(4, 2)
                    self.aux_head = nn.Linear(4, 3)

                def forward(self, x):
                    return self.fc(x)

            net = Net()
            loss = net(torch.randn(2, 4)).sum()
            grads = torch.autograd.grad(loss, net.parameters(), allow_unused=True)
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if (ctx.qualified_name(node.func) or "") != "torch.autograd.grad" or len(node.args) > 6:
            return
        inputs = node.args[1] if len(node.args) > 1 else next(
            (k.value for k in node.keywords if k.arg == "inputs"), None)
        owner = _params_owner(inputs) if inputs is not None else None
        if owner is None:
            return
        k = ctx.analysis.kind(owner, None, node.lineno)
        info = ctx.analysis.classes.get(k.cls or "") if k is not None and k.what == MODULE \
            else None
        if info is None or not info.is_module or "forward" not in info.methods:
            return
        call = ctx.source(node.func) + "(...)"
        frozen = frozen_parameter(ctx, info)
        if frozen is not None:
            attr, stmt, how = frozen
            yield self.report(stmt, ctx, related=(Related(
                ctx.path, node.lineno, "every parameter is differentiated here",
                ctx.column(node)),), call=call, model=ctx.source(owner),
                what=self.FROZEN.format(attr=attr, cls=info.name, how=how,
                                        model=ctx.source(owner)))
            return
        if any(k.arg == "allow_unused" for k in node.keywords):
            return
        used = info.forward_uses
        texts = [ctx.code_of(m) for m in info.methods.values() if m.name != "__init__"]
        unused = [a for a in info.attrs if a not in used
                  and getattr(info.attr_kind(a), "what", None) in (MODULE, PARAMETER)
                  and not any(f"self.{a}" in t for t in texts)]
        if not unused or any(w in t for t in texts for w in INDIRECT):
            return
        attr = unused[0]
        yield self.report(node, ctx, related=(Related(
            ctx.path, info.attrs[attr].stmt.lineno, f"`self.{attr}` is made here",
            ctx.column(info.attrs[attr].stmt)),), call=call, model=ctx.source(owner),
            what=self.UNUSED.format(cls=info.name, attr=attr))
