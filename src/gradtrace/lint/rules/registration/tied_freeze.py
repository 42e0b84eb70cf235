"""GT426: freezing a module also freezes the weight another module shares with it (tied
weights), and that other module is the one given to the optimizer."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.leaf._tensors import is_optimizer_call


def _false(e: ast.AST) -> bool:
    return isinstance(e, ast.Constant) and e.value is False


def _frozen_by_loop(node: ast.For) -> tuple[str, ast.stmt] | None:
    """``for p in R.parameters(): p.requires_grad = False`` (or ``p.requires_grad_(False)``):
    ``R`` and the freezing statement."""
    it = node.iter
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
            and it.func.attr == "parameters" and isinstance(node.target, ast.Name)):
        return None
    recv = dotted(it.func.value)
    var = node.target.id
    if recv is None:
        return None
    for st in node.body:
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and _false(st.value):
            t = st.targets[0]
            if isinstance(t, ast.Attribute) and t.attr == "requires_grad" \
                    and isinstance(t.value, ast.Name) and t.value.id == var:
                return recv, st
        if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
            c = st.value
            if isinstance(c.func, ast.Attribute) and c.func.attr == "requires_grad_" \
                    and isinstance(c.func.value, ast.Name) and c.func.value.id == var \
                    and c.args and _false(c.args[0]):
                return recv, st
    return None


def _self_part(e: ast.AST) -> tuple[str, int] | None:
    """``("decoder", 3)`` for ``self.decoder[1].weight``: the attribute of ``self`` the
    chain starts from and the chain's length (attributes and subscripts)."""
    depth = 0
    while isinstance(e, (ast.Attribute, ast.Subscript)):
        if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self":
            return e.attr, depth + 1
        e = e.value
        depth += 1
    return None


class FreezeTiesOffTrainedModule(Rule):
    """Freezing a module freezes the weight it shares with another module (tied weights), and
    the other module is the one given to the optimizer: nothing it holds can train.

    Why: `self.lm_head.weight = self.transformer.wte.weight` makes both attributes one
    Parameter. `for p in model.transformer.parameters(): p.requires_grad = False` then freezes
    `lm_head.weight` too, so `AdamW(model.lm_head.parameters())` gets only frozen tensors: the
    loss has no trainable input (`element 0 of tensors does not require grad`) or the head
    never moves (checked on torch 2.13). Untie the weights, freeze all but the shared tensor
    (`wte.weight.requires_grad_(True)` after the loop), or train the tied module.
    Known limits: the tie must be an assignment `self.<a>.<w> = self.<b>...` in the model
    class's `__init__` (a module class of the file), the freeze a loop over
    `<model>.<b>.parameters()` and the optimizer built over `<model>.<a>.parameters()` after it
    in the same function.
    """

    code = "GT426"
    name = "freeze-ties-off-trained-module"
    message = ("freezing `{frozen}` also freezes `{tied}`, the same Parameter as `{shared}` "
               "(tied on line {line}), and `{trained}` is what the optimizer trains: it gets no "
               "gradient")
    triggers = ("requires_grad",)
    examples = [
        Bad("""
            import torch
            from torch import nn
            class LM(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Embedding(10, 4)
                    self.head = nn.Linear(4, 10, bias=False)
                    self.head.weight = self.body.weight
            model = LM()
            for p in model.body.parameters():
                p.requires_grad = False
            opt = torch.optim.AdamW(model.head.parameters(), lr=1e-3)
            """, at=(11, 4)),
        Good("""
            import torch
            from torch import nn
            class LM(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Embedding(10, 4)
                    self.head = nn.Linear(4, 10, bias=False)
            model = LM()
            for p in model.body.parameters():
                p.requires_grad = False
            opt = torch.optim.AdamW(model.head.parameters(), lr=1e-3)
            """),
    ]

    def visit_For(self, node: ast.For, ctx: Context) -> Iterator[Finding]:
        got = _frozen_by_loop(node)
        if got is None:
            return
        recv, freeze = got
        base, _, part = recv.partition(".")
        if not part or "." in part:
            return
        scope = ctx.scope()
        k = ctx.analysis.kind(ast.Name(id=base), scope, node.lineno)
        classes = ctx.analysis.classes
        if k is None or k.what != MODULE or k.cls not in classes:
            return
        cls = classes[k.cls]  # type: ignore[index]
        if self._unfreezes(scope.node, node.end_lineno or node.lineno):
            return
        for c in cls.lineage():
            init = c.methods.get("__init__")
            for st in walk(init) if init is not None else ():
                if not (isinstance(st, ast.Assign) and len(st.targets) == 1):
                    continue
                tgt, src = _self_part(st.targets[0]), _self_part(st.value)
                if tgt is None or src is None or src[0] != part or not isinstance(
                        st.targets[0], ast.Attribute) or not isinstance(st.value, ast.Attribute):
                    continue
                other = tgt[0]
                if other == part or tgt[1] < 2:
                    continue
                if self._optimized(scope.node, f"{base}.{other}", node.lineno, ctx):
                    yield self.report(freeze, ctx, related=[Related(
                        ctx.path, st.lineno, "the weights are tied here", ctx.column(st))],
                        frozen=recv, tied=ctx.code_of(st.targets[0]).replace("self", base, 1),
                        shared=ctx.code_of(st.value).replace("self", base, 1),
                        line=st.lineno, trained=f"{base}.{other}")
                    return

    @staticmethod
    def _unfreezes(fn: ast.AST, after: int) -> bool:
        """Something is made trainable again after the loop (the shared weight, perhaps)."""
        for n in walk(fn):
            if getattr(n, "lineno", 0) <= after:
                continue
            if isinstance(n, ast.Assign) and any(
                    isinstance(t, ast.Attribute) and t.attr == "requires_grad" for t in n.targets) \
                    and not _false(n.value):
                return True
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr == "requires_grad_" and not (n.args and _false(n.args[0])):
                return True
        return False

    @staticmethod
    def _optimized(fn: ast.AST, part: str, after: int, ctx: Context) -> bool:
        """An optimizer built after the loop over ``part``'s parameters."""
        for n in walk(fn):
            if isinstance(n, ast.Call) and is_optimizer_call(n, ctx) \
                    and getattr(n, "lineno", 0) > after and any(
                        isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                        and c.func.attr == "parameters" and dotted(c.func.value) == part
                        for c in walk(n)):
                return True
        return False
