"""GT422: a loop over every parameter reads ``.grad`` of a layer ``forward`` never runs."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.analysis.params import param_iter_var, param_loop_var
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.registration._frozen import _derefs_grad, unguarded_grad_use
from gradtrace.lint.rules.registration._unused import (
    dropped_output, nested_drop, tuple_call, unused_layers,
)

COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _comp_loop(node: ast.AST) -> tuple[str, ast.expr, ast.expr] | None:
    """``(p, model, use)`` for a comprehension over ``model.parameters()`` (or
    ``named_parameters()``) whose result dereferences ``p.grad`` with no test of ``.grad`` in
    its conditions: ``{n: p.grad.data for n, p in m.named_parameters() if p.requires_grad}``."""
    if not isinstance(node, COMPREHENSIONS) or len(node.generators) != 1:
        return None
    gen = node.generators[0]
    got = param_iter_var(gen.target, gen.iter)
    if got is None:
        return None
    var = got[0]
    if any(isinstance(n, ast.Attribute) and n.attr == "grad"
           for c in gen.ifs for n in ast.walk(c)):
        return None
    results = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
    use = next((r for r in results if _derefs_grad(ast.Expr(r), var)), None)
    return (var, gen.iter.func.value, use) if use is not None else None  # type: ignore[attr-defined]


class GradReadOfUnusedLayer(Rule):
    """A loop over all parameters reads `p.grad` of a layer that `forward` never runs, or whose
    output the loss drops: it is None there.

    Why: a layer built in `__init__` is registered, so `model.parameters()` yields its
    parameters, but if `forward` never calls it, or the caller drops the only output it makes
    (`yaw, pitch, roll = model(x)` and a loss of `yaw` alone), no gradient reaches them and
    `p.grad` stays None after `backward()` (`requires_grad` is still True, so testing it does
    not help).
    Reading `p.grad.data`, `p.grad * k` or `p.grad /= n` then raises `AttributeError` or
    `TypeError` on those parameters (verified on torch 2.13). Skip parameters whose `.grad` is
    None, or remove the layer.
    The output may also be dropped inside the model: a `forward` that runs its submodule once
    as `seq, _ = self.bert(ids)`, where the dropped output is made by a layer only the
    submodule's class names (BERT's pooler under a question-answering head,
    pytorch-pretrained-BERT's run_squad with `--loss_scale`).
    Known limits: the loop's model must be known to be an instance of a module class of the
    same file; the layer must be named nowhere else in the file (NOTE [unused layers]), or its
    output be dropped in the function of the loop (`a, b = model(x)`, `b` never read) or in
    the model's `forward` (a submodule of a class of the file).
    """

    code = "GT422"
    gate_statements = True
    name = "grad-read-of-unused-layer"
    message = ("`{var}.grad` is None for the parameters of `self.{attr}` of `{cls}`, {why}: "
               "this raises on them; skip parameters whose `.grad` is None, or {remedy}")
    triggers = ("grad",)
    examples = [
        Bad("""
            import torch.nn as nn
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Linear(4, 4)
                    self.aux_head = nn.Linear(4, 2)
                def forward(self, x):
                    return self.body(x)
            model = Net()
            for x in batches:
                model(x).sum().backward()
                for p in model.parameters():
                    if p.requires_grad:
                        p.grad.data.mul_(0.5)
            """, at=(14, 12)),
        Bad("""
            import torch.nn as nn
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Linear(4, 4)
                    self.aux_head = nn.Linear(4, 2)
                def forward(self, x):
                    return self.body(x)
            def snapshot(m):
                return {n: p.grad.clone() for n, p in m.named_parameters()}
            model = Net()
            model(x).sum().backward()
            grads = snapshot(model)
            """, at=(10, 15)),
        Bad("""
            import torch.nn as nn
            class Heads(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Linear(4, 4)
                    self.yaw, self.pitch = nn.Linear(4, 1), nn.Linear(4, 1)
                def forward(self, x):
                    h = self.body(x)
                    return self.yaw(h), self.pitch(h)
            model = Heads()
            for x, y in batches:
                yaw, pitch = model(x)
                loss_fn(yaw, y).backward()
                for p in model.parameters():
                    p.grad *= 0.5
            """, at=(15, 8)),
        Good("""
            import torch.nn as nn
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Linear(4, 4)
                    self.aux_head = nn.Linear(4, 2)
                def forward(self, x):
                    return self.body(x)
            model = Net()
            for x in batches:
                model(x).sum().backward()
                for p in model.parameters():
                    if p.grad is not None:
                        p.grad.data.mul_(0.5)
                grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
            """),
        Good("""
            import torch.nn as nn
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Linear(4, 4)
                    self.aux_head = nn.Linear(4, 2)
                def forward(self, x):
                    return self.aux_head(self.body(x))
            model = Net()
            for x in batches:
                model(x).sum().backward()
                for p in model.parameters():
                    p.grad.data.mul_(0.5)
            """),
        Bad("""
            import torch.nn as nn
            class Encoder(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Linear(4, 4)
                    self.pooler = nn.Linear(4, 4)
                def forward(self, x):
                    h = self.body(x)
                    return h, self.pooler(h[:, 0])
            class QA(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.enc = Encoder()
                    self.span = nn.Linear(4, 2)
                def forward(self, x):
                    seq, _ = self.enc(x)
                    return self.span(seq)
            model = QA()
            model(x).sum().backward()
            for p in model.parameters():
                p.grad.data /= 128.0
            """, at=(21, 4)),
        Good("""
            import torch.nn as nn
            class Encoder(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Linear(4, 4)
                    self.pooler = nn.Linear(4, 4)
                def forward(self, x):
                    h = self.body(x)
                    return h, self.pooler(h[:, 0])
            class QA(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.enc = Encoder()
                    self.span = nn.Linear(4, 2)
                def forward(self, x):
                    seq, pooled = self.enc(x)
                    return self.span(seq) + pooled.mean()
            model = QA()
            model(x).sum().backward()
            for p in model.parameters():
                p.grad.data /= 128.0
            """),
    ]

    def visit_For(self, node: ast.For, ctx: Context) -> Iterator[Finding]:
        got = param_loop_var(node)
        if got is None or not isinstance(node.iter, ast.Call) \
                or not isinstance(node.iter.func, ast.Attribute):
            return
        use = unguarded_grad_use(node, got[0], guards=("grad",))
        if use is not None:
            yield from self._check(got[0], node.iter.func.value, use, node, ctx)

    def _comprehension(self, node: ast.AST, ctx: Context) -> Iterator[Finding]:
        got = _comp_loop(node)
        if got is not None:
            yield from self._check(got[0], got[1], got[2], node, ctx)

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    def _check(self, var: str, owner: ast.expr, use: ast.AST, loop: ast.AST,
               ctx: Context) -> Iterator[Finding]:
        fn = ctx.function or ctx.tree
        k = ctx.analysis.kind_in(owner, fn, loop.lineno)  # type: ignore[attr-defined]
        if k is None or k.what != MODULE or k.cls is None:
            return
        cls = ctx.analysis.classes.get(k.cls)
        if cls is None or not cls.is_module:
            return
        unused = unused_layers(cls, ctx)
        if unused:
            name, info = unused[0]
            yield self.report(use, ctx, related=[Related(
                ctx.path, info.stmt.lineno, f"`self.{name}` is built here and `forward` never "
                "uses it")], var=var, attr=name, cls=cls.name, remedy="remove the layer",
                why=f"which it builds but never uses (line {info.stmt.lineno})")
            return
        nested = nested_drop(cls, ctx)
        if nested is not None:
            st, out, sub, attr = nested
            yield self.report(use, ctx, related=[Related(
                ctx.path, st.lineno, f"`forward` drops this output of `self.{sub}` here",
                ctx.column(st))], var=var, attr=f"{sub}.{attr}", cls=cls.name,
                remedy="put the output in the loss, or build the submodule without the layer",
                why=f"whose output `forward` drops (line {st.lineno})")
            return
        owner_name = dotted(owner)
        for st in ctx.scope(fn).stmts:
            if st.lineno >= loop.lineno:  # type: ignore[attr-defined]
                break
            if not tuple_call(st) or dotted(st.value.func) != owner_name:  # type: ignore[attr-defined]
                continue
            got = dropped_output(st, fn, cls, ctx)  # type: ignore[arg-type]
            if got is not None:
                out, attr = got
                yield self.report(use, ctx, related=[Related(
                    ctx.path, st.lineno, f"`{out}` is dropped here", ctx.column(st))],
                    var=var, attr=attr, cls=cls.name, remedy="put the output in the loss",
                    why=f"whose only output `{out}` is never read (line {st.lineno})")
                return
