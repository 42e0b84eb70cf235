"""GT156: `requires_grad` asked for on an input after the forward that used it."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule

# attributes whose read carries no history of the tensor (its flag, its gradient, its shape)
_PLAIN = frozenset({"grad", "requires_grad", "requires_grad_", "shape", "dtype", "device",
                    "is_leaf", "size", "dim", "retain_grad"})
_BLOCKS = ("body", "orelse", "finalbody")


def _flag_on(node: ast.stmt) -> str | None:
    """``x`` for ``x.requires_grad = True`` / ``x.requires_grad_()`` (``True``) on a name."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        t, v = node.targets[0], node.value
        if isinstance(t, ast.Attribute) and t.attr == "requires_grad" \
                and isinstance(t.value, ast.Name) and isinstance(v, ast.Constant) \
                and v.value is True:
            return t.value.id
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        c = node.value
        if isinstance(c.func, ast.Attribute) and c.func.attr == "requires_grad_" \
                and isinstance(c.func.value, ast.Name) and not c.keywords and (
                    not c.args or isinstance(c.args[0], ast.Constant) and c.args[0].value is True):
            return c.func.value.id
    return None


def _reads(node: ast.AST, name: str) -> list[ast.Name]:
    """Reads of ``name`` in ``node`` other than through an attribute that carries no history."""
    plain = {id(n.value) for n in walk(node) if isinstance(n, ast.Attribute) and n.attr in _PLAIN}
    return [n for n in walk(node) if isinstance(n, ast.Name) and n.id == name
            and isinstance(n.ctx, ast.Load) and id(n) not in plain]


def _binds(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
               for n in walk(node)) or any(
        isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == name
        for n in walk(node))


def _backward(node: ast.AST) -> ast.Call | None:
    return next((n for n in walk(node) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Attribute) and n.func.attr == "backward"), None)


def _grad_read(node: ast.AST, name: str) -> ast.Attribute | None:
    return next((n for n in walk(node) if isinstance(n, ast.Attribute) and n.attr == "grad"
                 and isinstance(n.ctx, ast.Load) and dotted(n.value) == name), None)


class RequiresGradAfterForward(Rule):
    """`x.requires_grad = True` is set after the forward that used `x` already ran.

    Why: autograd records a graph only from tensors that require grad *when an operation
    runs*. `out = model(x)` before `x.requires_grad = True` recorded nothing from `x`; the
    backward that follows (with no new use of `x`) leaves `x.grad` None, so the adversarial
    step or saliency map reading it raises `AttributeError: 'NoneType' object has no
    attribute 'sign'` (FGSM, checked on torch 2.13). Set the flag (or
    `x = x.clone().requires_grad_()`) before the forward.
    Known limits: the flag, the earlier use, the backward and the `x.grad` read must sit in one
    block of one function, with no use of `x` between the flag and the backward; an `x` that
    already required grad (the flag set twice) is not told apart.
    """

    code = "GT156"
    name = "requires-grad-after-forward"
    message = ("`{name}` is made to require grad here, after `{use}` (line {line}) already used "
               "it: the graph of that forward holds nothing from `{name}`, so the backward "
               "(line {back}) leaves `{name}.grad` None; set the flag before the forward")
    triggers = ("requires_grad",)
    gate_statements = True
    examples = [
        Bad("""
            import torch
            import torch.nn.functional as F
            def fgsm(model, x, y, eps):
                out = model(x)
                x.requires_grad = True
                F.cross_entropy(out, y).backward()
                return x + eps * x.grad.sign()
            """, at=(5, 4)),
        Good("""
            import torch
            import torch.nn.functional as F
            def fgsm(model, x, y, eps):
                x.requires_grad = True
                out = model(x)
                F.cross_entropy(out, y).backward()
                return x + eps * x.grad.sign()
            """),
    ]

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> Iterator[Finding]:
        yield from self._check(node, ctx)

    def visit_Expr(self, node: ast.Expr, ctx: Context) -> Iterator[Finding]:
        yield from self._check(node, ctx)

    def _check(self, node: ast.stmt, ctx: Context) -> Iterator[Finding]:
        name = _flag_on(node)
        if name is None:
            return
        owner = ctx.stmts[-2] if len(ctx.stmts) >= 2 else ctx.tree
        block = next((b for f in _BLOCKS if isinstance(b := getattr(owner, f, None), list)
                      and node in b), None)
        if block is None:
            return
        i = block.index(node)
        use = None
        for s in reversed(block[:i]):
            if _binds(s, name):
                break
            if any(isinstance(n, ast.Call) and any(
                    _reads(a, name) for a in [*n.args, *(k.value for k in n.keywords)])
                    for n in walk(s)):
                use = s
                break
        if use is None:
            return
        back = None
        for j in range(i + 1, len(block)):
            s = block[j]
            if _reads(s, name) or _binds(s, name):
                return  # used (or made) again after the flag: that use records a graph
            b = _backward(s)
            if b is not None:
                back = j
                break
        if back is None:
            return
        read = None
        for s in block[back:]:
            read = _grad_read(s, name)
            if read is not None:
                break
            if _binds(s, name):
                return
        if read is None:
            return
        call = next(n for n in walk(use) if isinstance(n, ast.Call) and _reads(n, name))
        yield self.report(node, ctx, related=(
            Related(ctx.path, use.lineno, f"`{name}` is used here, before it requires grad",
                    ctx.column(use)),
            Related(ctx.path, read.lineno, f"`{name}.grad` is read here: it is None",
                    read.col_offset)),
            name=name, use=" ".join(ctx.source(call).split())[:50], line=use.lineno,
            back=block[back].lineno)
