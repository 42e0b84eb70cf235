"""GT110: a module copies its own parameters into a new tensor (`torch.tensor`) in `forward`."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.analysis.kinds import PARAMETER, PARAMS
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule

# constructors that copy their data into a new leaf without history
REBUILDERS = frozenset({"torch.tensor", "torch.Tensor", "torch.as_tensor", "torch.FloatTensor",
                        "torch.DoubleTensor", "torch.HalfTensor", "torch.asarray"})
PARAM_CONTAINERS = frozenset({"torch.nn.ParameterList", "torch.nn.ParameterDict"})


class ParameterRebuiltInForward(Rule):
    """A module's `forward` copies its own parameters into a new tensor with `torch.tensor(...)`.

    Why: `torch.tensor(x)`, `torch.Tensor([p1, p2])` and `torch.as_tensor((a, b))` read the
    values of the tensors they are given and build a new leaf without history (a list of
    tensors that require grad is read element by element). What `forward` computes from it
    has no path back to the parameters: they never receive a gradient and never train, while
    the rest of the model trains normally (pytorch/pytorch#61410, checked on torch 2.13).
    Combine parameters with `torch.stack(list(self.scales))` / `torch.cat(...)`, or keep one
    `nn.Parameter` of the full shape.
    Known limits: the parameters must be attributes of the same class (`self.w`,
    `self.scales` of an `nn.ParameterList`/`ParameterDict`), read in `forward` or in a method
    `forward` calls.
    """

    code = "GT110"
    name = "parameter-rebuilt-in-forward"
    message = ("`{call}` copies the parameter(s) `{param}` into a new tensor without history: "
               "nothing computed from it reaches `{param}`, which never gets a gradient; use "
               "`torch.stack(...)`/`torch.cat(...)` (or the parameter itself)")
    triggers = ("Tensor(", "tensor(", "as_tensor(", "asarray(")
    gate_statements = True
    examples = [
        Bad("""
            import torch
            from torch import nn

            class ChannelScale(nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.scales = nn.ParameterList([nn.Parameter(torch.ones(1)) for _ in range(n)])

                def forward(self, x):
                    return x * torch.Tensor([p for p in self.scales])
            """, at=(10, 19)),
        Good("""
            import torch
            from torch import nn

            class ChannelScale(nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.scales = nn.ParameterList([nn.Parameter(torch.ones(1)) for _ in range(n)])
                    self.eps = 1e-6

                def forward(self, x):
                    return x * torch.stack(list(self.scales)).view(-1) + torch.tensor(self.eps)
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if ctx.qualified_name(node.func) not in REBUILDERS or not node.args:
            return
        cls = ctx.analysis.class_of(ctx.function)
        if cls is None or not cls.is_module or ctx.grad_disabled is not None \
                or ctx.function.name not in _forward_methods(ctx, cls):  # type: ignore[union-attr]
            return
        param = _own_parameter(node.args[0], cls, ctx)
        if param is not None:
            yield self.report(node, ctx, call=_clip(ctx.source(node)), param=param)


def _forward_methods(ctx: Context, cls: object) -> frozenset[str]:
    """``forward`` and the methods of the class it calls through ``self`` (transitively)."""
    def make() -> frozenset[str]:
        methods = cls.methods  # type: ignore[attr-defined]
        seen: set[str] = set()
        todo = ["forward"]
        while todo:
            name = todo.pop()
            m = methods.get(name)
            if m is None or name in seen:
                continue
            seen.add(name)
            for n in ast.walk(m):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                        and dotted(n.func.value) == "self" and n.func.attr in methods:
                    todo.append(n.func.attr)
        return frozenset(seen)
    return ctx.memo("gt110-forward", cls.node, make)  # type: ignore[attr-defined]


def _own_parameter(arg: ast.AST, cls: object, ctx: Context) -> str | None:
    """``self.<x>`` read by ``arg`` (directly, in a list/tuple, or iterated by a
    comprehension) that is a Parameter or a ParameterList/ParameterDict of the class."""
    for n in ast.walk(arg):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) \
                and n.value.id == "self":
            k = cls.attr_kind(n.attr)  # type: ignore[attr-defined]
            info = cls.attrs.get(n.attr)  # type: ignore[attr-defined]
            made = ctx.qualified_name(info.value.func) if info is not None and isinstance(
                info.value, ast.Call) else None
            if k is not None and (k.what in (PARAMETER, PARAMS) or k.cls in PARAM_CONTAINERS) \
                    or made in PARAM_CONTAINERS or made == "torch.nn.Parameter":
                return f"self.{n.attr}"
    return None


def _clip(src: str) -> str:
    src = " ".join(src.split())
    return src if len(src) <= 60 else src[:57] + "..."
