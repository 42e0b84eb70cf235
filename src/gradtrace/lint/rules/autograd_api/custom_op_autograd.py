"""GT124: a ``torch.library.custom_op`` with no autograd formula runs in a trained forward.

# NOTE [custom op without an autograd formula]
An op made with ``torch.library.custom_op`` is opaque to autograd: unless the file wires a
backward with ``op.register_autograd(backward, setup_context=...)`` (or
``torch.library.register_autograd("ns::op", ...)``), its output still requires grad when an
input does, and the first ``backward()`` through it raises ``RuntimeError: Trying to backward
through ns::op but no autograd formula was registered`` (torch 2.13; TileOPs#649: the backward
kernel existed as a second custom op, never connected). Reported when the op is called in the
``forward`` of an ``nn.Module`` of the file, with grad on there, and the file takes gradients
(``.backward()``, ``torch.autograd.grad``). Silent when any ``register_autograd`` call of the
file names the op (or names an op it cannot resolve), when the op is only called elsewhere
(an inference kernel, a helper), and in a file that takes no gradient.
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule

CUSTOM_OP = frozenset({"torch.library.custom_op", "torch._library.custom_ops.custom_op"})
GRAD_CALLS = frozenset({"torch.autograd.grad", "torch.autograd.backward"})


def _op_decorator(fn: ast.AST, ctx: Context) -> tuple[ast.Call, str | None] | None:
    """The ``@torch.library.custom_op("ns::name", ...)`` decorator of ``fn`` and its name."""
    for d in getattr(fn, "decorator_list", ()):
        if isinstance(d, ast.Call) and (ctx.qualified_name(d.func) or "") in CUSTOM_OP:
            first = d.args[0] if d.args else None
            name = first.value if isinstance(first, ast.Constant) and isinstance(
                first.value, str) else None
            return d, name
    return None


def _wired(fn_name: str, op_name: str | None, tree: ast.AST) -> bool:
    """A ``register_autograd`` call of the file names this op or one it cannot resolve."""
    for n in walk(tree):
        if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr == "register_autograd"):
            continue
        recv = n.func.value
        if isinstance(recv, ast.Name) and recv.id == fn_name:
            return True  # `op.register_autograd(...)`
        if isinstance(recv, ast.Name) and recv.id != "torch" or not n.args:
            continue
        a = n.args[0]
        if isinstance(a, ast.Constant) and isinstance(a.value, str):
            if op_name is None or a.value == op_name:
                return True
            continue
        return True  # the op object itself, or a value naming an op: cannot tell which
    return False


def _takes_gradients(ctx: Context) -> bool:
    def make() -> bool:
        for n in walk(ctx.tree):
            if isinstance(n, ast.Call) and (
                    isinstance(n.func, ast.Attribute) and n.func.attr == "backward"
                    or (ctx.qualified_name(n.func) or "") in GRAD_CALLS):
                return True
        return False
    return ctx.memo("gt124-takes-gradients", ctx.tree, make)


def _forward_calls(fn_name: str, ctx: Context) -> Iterator[tuple[ast.Call, str]]:
    """Calls of ``fn_name`` in a ``forward`` of a module class of the file, with grad on."""
    for info in ctx.analysis.classes.values():
        fwd = info.methods.get("forward") if info.is_module else None
        if fwd is None:
            continue
        scope = None
        for n in walk(fwd):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == fn_name:
                scope = scope or ctx.scope(fwd)
                if scope.grad_off_at(n) is None:
                    yield n, info.name


class CustomOpWithoutAutograd(Rule):
    """A `torch.library.custom_op` that runs in a module's `forward` has no autograd formula
    (`register_autograd`), in a file that backpropagates.

    Why: autograd cannot look inside a custom op. Without `op.register_autograd(backward,
    setup_context=...)` its output still requires grad when an input does, and the first
    `loss.backward()` through it raises `RuntimeError: Trying to backward through ns::op but
    no autograd formula was registered` (TileOPs#649: the backward kernel was written as a
    second custom op and never connected). Register the backward, or wrap the op in a
    `torch.autograd.Function`.
    Known limits: only an op defined with the decorator at module level, called directly
    in a `forward` of an `nn.Module` class of the file,
    in a file that calls `backward()` or `torch.autograd.grad`; an op whose inputs never
    require grad there (raw data only) is reported too.
    """

    code = "GT124"
    gate_statements = True
    name = "custom-op-without-autograd"
    message = ("`{op}` is a `torch.library.custom_op` with no autograd formula, called in "
               "`{cls}.forward` (line {line}): `backward()` through it raises `Trying to "
               "backward through {shown} but no autograd formula was registered`; wire its "
               "backward with `{fn}.register_autograd(backward, setup_context=...)`")
    triggers = ("custom_op",)
    examples = [
        Bad("""
            import torch
            from torch import nn

            @torch.library.custom_op("demo::scaled", mutates_args=())
            def scaled(x: torch.Tensor, s: float) -> torch.Tensor:
                return x * s

            class Scale(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = nn.Linear(4, 4)
                def forward(self, x):
                    return scaled(self.lin(x), 2.0)

            Scale()(torch.randn(2, 4)).sum().backward()
            """, at=(4, 1)),
        Good("""
            import torch
            from torch import nn

            @torch.library.custom_op("demo::scaled", mutates_args=())
            def scaled(x: torch.Tensor, s: float) -> torch.Tensor:
                return x * s

            def _backward(ctx, grad):
                return grad * ctx.s, None

            def _setup(ctx, inputs, output):
                ctx.s = inputs[1]

            scaled.register_autograd(_backward, setup_context=_setup)

            class Scale(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = nn.Linear(4, 4)
                def forward(self, x):
                    return scaled(self.lin(x), 2.0)

            Scale()(torch.randn(2, 4)).sum().backward()
            """),
    ]

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        got = _op_decorator(node, ctx)
        if got is None or ctx.function is not None or ctx.class_def is not None:
            return
        deco, op_name = got
        if _wired(node.name, op_name, ctx.tree) or not _takes_gradients(ctx):
            return  # NOTE [custom op without an autograd formula]
        for call, cls in _forward_calls(node.name, ctx):
            shown = op_name.replace("::", ".") + ".default" if op_name else node.name
            yield self.report(deco, ctx, op=op_name or node.name, cls=cls, line=call.lineno,
                              fn=node.name, shown=shown)
            return

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]
