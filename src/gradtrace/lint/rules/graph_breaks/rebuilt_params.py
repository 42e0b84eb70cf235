"""GT110: a module copies its own parameters into a new tensor (`torch.tensor`) in `forward`."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.kinds import PARAMETER, PARAMS
from gradtrace.lint.analysis.param_attrs import forward_methods
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import bfs_walk, walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.excerpt import excerpt

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
    `self.scales` of an `nn.ParameterList`/`ParameterDict`, or registered under a constant
    name with `register_parameter`/`setattr`), read in `forward` or in a method `forward` calls.
    A parameter a method sets by hand from another value (`self.t.data = temp`: a schedule) is
    left alone.
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
        Bad("""
            import torch
            from torch import nn

            class CNF(nn.Module):
                def __init__(self, train_T):
                    super().__init__()
                    if train_T:
                        self.register_parameter("sqrt_T", nn.Parameter(torch.tensor(1.0)))
                    else:
                        self.register_buffer("sqrt_T", torch.tensor(1.0))

                def forward(self, z):
                    times = torch.tensor([0.0, self.sqrt_T * self.sqrt_T])
                    return z * times[1]
            """, at=(13, 16)),
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
                or ctx.function not in forward_methods(cls):  # type: ignore[arg-type]
            return
        param = own_parameter(node.args[0], cls, ctx)
        if param is not None and param[5:] not in _set_from_outside(cls, ctx):
            yield self.report(node, ctx, call=excerpt(ctx.source(node)), param=param)


def _set_from_outside(cls: object, ctx: Context) -> frozenset[str]:
    """Parameters whose value a method of the class sets by hand from something else than
    their own value (``def set_temperature(self, temp): self.temperature.data = temp``): a
    schedule the caller drives (pyvene's annealed mask temperature), which the copy in
    ``forward`` keeps out of the optimizer's reach on purpose. A clamp of the parameter's own
    value (``self.t.data = self.t.data.clamp(0)``) is no such setter: it trains."""
    node = cls.node  # type: ignore[attr-defined]

    def make() -> frozenset[str]:
        out = set()
        for fn in node.body:
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                    or fn.name in ("__init__", "forward"):
                continue
            for n in walk(fn):
                if not isinstance(n, ast.Assign) or len(n.targets) != 1:
                    continue
                t = n.targets[0]
                if isinstance(t, ast.Attribute) and t.attr == "data" \
                        and isinstance(t.value, ast.Attribute) and dotted(t.value.value) == "self" \
                        and not any(isinstance(x, ast.Attribute) and x.attr == t.value.attr
                                    and dotted(x.value) == "self" for x in walk(n.value)):
                    out.add(t.value.attr)
        return frozenset(out)
    return ctx.memo("gt110-set-from-outside", node, make)


class PassedTensorsRebuilt(Rule):
    """A function of the file rebuilds, with `torch.as_tensor(...)`/`torch.tensor(...)`, the
    list or tuple of tensors that require grad its caller passes.

    Why: `torch.as_tensor((a, b))` and `torch.tensor([a, b])` read the values of the tensors in
    the sequence and build a new leaf without history; only a tensor passed on its own is
    returned as is. A backend helper (`def as_tensor(data): if isinstance(data, Tensor):
    return data; return torch.as_tensor(data)`) given `(C1, C2)` cuts the coefficients off:
    they never get a gradient and never train, silently (lululxvi/deepxde#1318, checked on
    torch 2.13). Combine them with `torch.stack(...)` (in the helper, for sequences).
    Known limits: the helper must be a top-level function of the file and every call of it in
    the file passes a list/tuple literal for that parameter, one element of which is known to
    require grad (made with `requires_grad=True`, or an `nn.Parameter`), from a function (or
    script) that calls `backward()`.
    """

    code = "GT111"
    needs_step = True  # NOTE [step files]
    name = "passed-tensors-rebuilt"
    message = ("`{call}` copies the tensors the caller passes as `{param}` (`{passed}`, line "
               "{line}) into a new tensor without history: `{elt}` never gets a gradient "
               "through it; use `torch.stack(...)` for a sequence of tensors")
    triggers = ("tensor(", "Tensor(", "as_tensor(")
    gate_statements = True
    examples = [
        Bad("""
            import torch
            def to_tensor(data):
                if isinstance(data, torch.Tensor):
                    return data
                return torch.as_tensor(data)
            a = torch.tensor(1.0, requires_grad=True)
            b = torch.tensor(2.0, requires_grad=True)
            (to_tensor((a, b)) ** 2).sum().backward()
            """, at=(5, 11)),
        Good("""
            import torch
            def to_tensor(data):
                if isinstance(data, torch.Tensor):
                    return data
                return torch.stack(data) if isinstance(data, (list, tuple)) else torch.as_tensor(data)
            a = torch.tensor(1.0, requires_grad=True)
            b = torch.tensor(2.0, requires_grad=True)
            (to_tensor((a, b)) ** 2).sum().backward()
            (to_tensor(a) * to_tensor([1.0, 2.0])).sum().backward()
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if ctx.qualified_name(node.func) not in REBUILDERS or not node.args \
                or not isinstance(node.args[0], ast.Name):
            return
        fn = ctx.function
        an = ctx.analysis
        param = node.args[0].id
        if fn is None or an.functions.get(getattr(fn, "name", "")) is not fn \
                or param not in [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)] \
                or ctx.scope().binding_before(param, node.lineno) is not None \
                or _sequence_branch(fn, param, node.lineno):
            return
        vals = an.argument_values(fn, param)
        if not vals or not all(isinstance(v, (ast.List, ast.Tuple)) for v, _ in vals):
            return
        for v, where in vals:
            for e in v.elts:  # type: ignore[attr-defined]
                k = an.kind_in(e, where, v.lineno)
                if k is None or not (k.what == PARAMETER or k.requires_grad):
                    continue
                if not _runs_backward(where, ctx):
                    continue
                yield self.report(node, ctx, related=[Related(
                    ctx.path, v.lineno, f"`{ctx.source(e)}` requires grad and is passed here",
                    ctx.column(v))], call=excerpt(ctx.source(node)), param=param,
                    passed=excerpt(ctx.source(v)), line=v.lineno, elt=ctx.source(e))
                return


def _runs_backward(node: ast.AST, ctx: Context) -> bool:
    """Whether the function (or module) ``node`` calls ``.backward()`` on anything."""
    return ctx.memo("gt111-backward", node, lambda: any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
        and n.func.attr == "backward" for n in bfs_walk(node)))


def _sequence_branch(fn: ast.AST, param: str, line: int) -> bool:
    """Whether an earlier ``if isinstance(param, (list, tuple, ...))`` handles sequences."""
    for n in bfs_walk(fn):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) \
                and n.func.id == "isinstance" and n.lineno <= line and len(n.args) == 2 \
                and dotted(n.args[0]) == param:
            kinds = {dotted(x) for x in bfs_walk(n.args[1]) if isinstance(x, (ast.Name,
                                                                              ast.Attribute))}
            if kinds & {"list", "tuple", "collections.abc.Sequence", "Sequence", "abc.Sequence"}:
                return True
    return False


def own_parameter(arg: ast.AST, cls: object, ctx: Context) -> str | None:
    """``self.<x>`` read by ``arg`` (directly, in a list/tuple, or iterated by a
    comprehension) that is a Parameter or a ParameterList/ParameterDict of the class."""
    for n in bfs_walk(arg):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) \
                and n.value.id == "self":
            k = cls.attr_kind(n.attr)  # type: ignore[attr-defined]
            info = cls.attrs.get(n.attr)  # type: ignore[attr-defined]
            made = ctx.qualified_name(info.value.func) if info is not None and isinstance(
                info.value, ast.Call) else None
            if k is not None and (k.what in (PARAMETER, PARAMS) or k.cls in PARAM_CONTAINERS) \
                    or made in PARAM_CONTAINERS or made == "torch.nn.Parameter" \
                    or n.attr in _registered_by_name(cls, ctx):
                return f"self.{n.attr}"
    return None


def _registered_by_name(cls: object, ctx: Context) -> frozenset[str]:
    """Parameters the class registers under a constant name, on some path:
    ``self.register_parameter("t", nn.Parameter(...))``, ``setattr(self, "t", nn.Parameter(...))``
    (ffjord's ``sqrt_end_time``, a Parameter when trained and a buffer otherwise)."""
    node = cls.node  # type: ignore[attr-defined]

    def make() -> frozenset[str]:
        out = set()
        for n in walk(node):
            if not isinstance(n, ast.Call) or len(n.args) < 2:
                continue
            f = n.func
            if isinstance(f, ast.Attribute) and f.attr == "register_parameter" \
                    and dotted(f.value) == "self":
                name, value = n.args[0], n.args[1]
            elif isinstance(f, ast.Name) and f.id == "setattr" and len(n.args) == 3 \
                    and dotted(n.args[0]) == "self":
                name, value = n.args[1], n.args[2]
            else:
                continue
            if isinstance(name, ast.Constant) and isinstance(name.value, str) \
                    and isinstance(value, ast.Call) \
                    and ctx.qualified_name(value.func) == "torch.nn.Parameter":
                out.add(name.value)
        return frozenset(out)
    return ctx.memo("gt110-registered", node, make)
