"""GT781: a custom `autograd.Function` keeps an intermediate computed from its input on `ctx`,
uses it in `backward`, and the file differentiates through the Function twice."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.autograd_api.functions import (
    _is_function_class, _method, only_called_directly)

# ops whose result carries no derivative: a mask, an index, a shape
FLAT = frozenset({"long", "int", "bool", "byte", "argmax", "argmin", "argsort", "sign",
                  "size", "dim", "numel", "item", "tolist", "nonzero", "round", "floor", "ceil",
                  "detach", "eq", "ne", "gt", "lt", "ge", "le"})


def _second_order(ctx: Context) -> int | None:
    """The first line of the file that differentiates a gradient: a call with
    ``create_graph=True``, or ``gradgradcheck``."""
    def find() -> int | None:
        for n in walk(ctx.tree):
            if not isinstance(n, ast.Call):
                continue
            if (dotted(n.func) or "").endswith("gradgradcheck") or any(
                    k.arg == "create_graph" and isinstance(k.value, ast.Constant)
                    and k.value.value is True for k in n.keywords):
                return n.lineno
        return None
    return ctx.memo("gt781-second-order", ctx.tree, find)  # type: ignore[no-any-return]


def _from_input(v: ast.expr, params: set[str], local: dict[str, ast.expr], depth: int = 0
                ) -> bool:
    """Whether ``v`` is a differentiable function of a ``forward`` input: arithmetic or a
    tensor op over one, through local names (a comparison or an integer cast is not)."""
    if depth > 4:
        return False
    if isinstance(v, ast.Name):
        if v.id in params:
            return True
        return v.id in local and _from_input(local[v.id], params, local, depth + 1)
    if isinstance(v, ast.BinOp):
        return _from_input(v.left, params, local, depth + 1) or \
            _from_input(v.right, params, local, depth + 1)
    if isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.USub):
        return _from_input(v.operand, params, local, depth + 1)
    if isinstance(v, ast.Call):
        f = v.func
        if isinstance(f, ast.Attribute) and f.attr in FLAT:
            return False
        if isinstance(f, ast.Attribute) and isinstance(f.value, (ast.Name, ast.BinOp,
                                                                 ast.Call)) and \
                _from_input(f.value, params, local, depth + 1):
            return not (isinstance(f.value, ast.Name) and f.value.id in ("torch", "F"))
        if (dotted(f) or "").startswith(("torch.", "F.")) and \
                (dotted(f) or "").rpartition(".")[2] not in FLAT:
            return any(_from_input(a, params, local, depth + 1) for a in v.args)
    return False


def _returned(v: ast.expr, fwd: ast.FunctionDef) -> bool:
    """Whether ``v`` (a local name) is what ``forward`` returns (alone or in a tuple): autograd
    then gives that very tensor the Function's graph, and reading it in ``backward`` is how
    outputs are meant to be kept (checked on torch 2.13: the second order is right)."""
    if not isinstance(v, ast.Name):
        return False
    for r in walk(fwd):
        if isinstance(r, ast.Return) and r.value is not None:
            items = r.value.elts if isinstance(r.value, ast.Tuple) else [r.value]
            if any(isinstance(e, ast.Name) and e.id == v.id for e in items):
                return True
    return False


class IntermediateOnCtxBreaksDoubleBackward(Rule):
    """A custom `autograd.Function` stores a tensor it computed from its input on `ctx`
    (`ctx.foo = inp * 2`), uses it in `backward`, and the file differentiates through the
    Function twice (`create_graph=True`, `gradgradcheck`).

    Why: `forward` runs with grad mode off, so the stored intermediate has no graph; when
    `backward` is itself differentiated (a gradient penalty, a Hessian-vector product), the
    terms that flow through it are silently missing: `gradcheck` passes, `gradgradcheck`
    fails, and the penalty's gradient is wrong (pytorch#58509; checked on torch 2.13, 6.3
    instead of 126). Save the input with `ctx.save_for_backward(inp)` and recompute the
    intermediate in `backward` (or return it as an output), or mark `backward`
    `@once_differentiable` so that a second differentiation raises.
    An output of `forward` kept on `ctx` is fine: autograd gives that very tensor the
    Function's graph.
    Known limits: the intermediate must be arithmetic or a torch op over a `forward` input
    (through local names); a mask, an index or an integer cast carries no derivative and is
    not reported. The file must hold `create_graph=True` or `gradgradcheck`. A Function the
    file only runs as a plain method (`Dice().forward(a, b)`) is never differentiated.
    """

    code = "GT781"
    name = "intermediate-on-ctx-breaks-double-backward"
    message = ("`{attr}` keeps `{value}`, computed in `{cls}.forward` with grad mode off, and "
               "`backward` uses it: the file differentiates twice (line {line}), and the "
               "second-order terms through it are silently dropped; save the input with "
               "`ctx.save_for_backward` and recompute it in `backward`")
    triggers = ("create_graph", "gradgradcheck")
    examples = [
        Bad("""
            import torch

            class Square(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.y = x * 3
                    return ctx.y ** 2

                @staticmethod
                def backward(ctx, g):
                    return 6 * ctx.y * g

            x = torch.randn(3, requires_grad=True)
            gx, = torch.autograd.grad(Square.apply(x).sum(), x, create_graph=True)
            gx.pow(2).sum().backward()
            """, at=(6, 8)),
        Good("""
            import torch

            class Square(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    return (x * 3) ** 2

                @staticmethod
                def backward(ctx, g):
                    x, = ctx.saved_tensors
                    return 18 * x * g

            x = torch.randn(3, requires_grad=True)
            gx, = torch.autograd.grad(Square.apply(x).sum(), x, create_graph=True)
            gx.pow(2).sum().backward()
            """),
    ]

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> Iterator[Finding]:
        if not _is_function_class(node, ctx):
            return
        fwd, bwd = _method(node, "forward"), _method(node, "backward")
        if fwd is None or bwd is None or len(fwd.args.args) < 2:
            return
        if any("once_differentiable" in (dotted(d) or "") for d in bwd.decorator_list) \
                or only_called_directly(node, ctx):
            return  # (the second: autograd never runs it, nor its `backward`)
        line = _second_order(ctx)
        if line is None:
            return
        c = fwd.args.args[0].arg
        params = {a.arg for a in fwd.args.args[1:]}
        local: dict[str, ast.expr] = {}
        for st in walk(fwd):
            if isinstance(st, ast.Assign) and len(st.targets) == 1:
                t = st.targets[0]
                if isinstance(t, ast.Name):
                    local.setdefault(t.id, st.value)
        bc = bwd.args.args[0].arg if bwd.args.args else "ctx"
        read = {n.attr for n in walk(bwd) if isinstance(n, ast.Attribute)
                and isinstance(n.value, ast.Name) and n.value.id == bc
                and isinstance(n.ctx, ast.Load)}
        for st in walk(fwd):
            if not (isinstance(st, ast.Assign) and len(st.targets) == 1):
                continue
            t = st.targets[0]
            if not (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                    and t.value.id == c and t.attr in read):
                continue
            if isinstance(st.value, ast.Name) and st.value.id in params:
                continue  # the input itself: GT709's concern, not an intermediate
            if not _from_input(st.value, params, local) or _returned(st.value, fwd):
                continue
            yield self.report(st, ctx, related=[Related(
                ctx.path, line, "differentiated twice here", 1)],
                attr=f"{c}.{t.attr}", value=ctx.source(st.value)[:40], cls=node.name,
                line=line)
            return
