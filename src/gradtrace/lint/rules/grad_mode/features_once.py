"""GT231: features a trained module computed once under no_grad, before the loop, feed every
loss of the loop."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.flow import OPTIMIZER, Binding, Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule

MAX_HOPS = 6


class FeaturesComputedOnceUnderNoGrad(Rule):
    """A value made by a part of a model under `torch.no_grad()`, once, before the training
    loop, feeds the loss of every pass, while the loop's optimizer steps that model's
    parameters and another part of the model runs in the loop.

    Why: nothing is recorded under `no_grad`, so the kept value (an embedding, encoder
    features: a cell of a notebook that looked at them first) is a constant: the layers that
    made it never get a gradient and never move, while the rest of the model (the head run in
    the loop) trains and the loss goes down, silently (checked on torch 2.13: the embedding's
    weight unchanged after 20 steps). Compute the value inside the loop, with grad on; or, for a
    frozen part on purpose, freeze it (`requires_grad_(False)`) and leave it out of the
    optimizer.
    Known limits: one function or script; the value is bound before the loop under a `with`
    that turns grad off, made by calling a module attribute (`model.embed(x)`) of a model the
    optimizer stepped in the loop is built over (`opt = Adam(model.parameters())`), and the
    loop runs another attribute of that model; a file that sets `requires_grad` anywhere is
    left alone.
    """

    code = "GT231"
    name = "features-computed-once-under-no-grad"
    message = ("grad is off here while `{part}` computes `{name}`, which every loss of the loop "
               "reads (backward on line {backward}): `{part}` never gets a gradient although "
               "`{opt}` steps it; compute it inside the loop with grad on")
    triggers = ("backward",)
    gate_statements = "function"
    examples = [
        Bad("""
            import torch
            import torch.nn as nn
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.encoder = nn.Linear(4, 8)
                    self.head = nn.Linear(8, 1)
            model = Net()
            opt = torch.optim.Adam(model.parameters())
            x, y = torch.randn(16, 4), torch.randn(16, 1)
            with torch.no_grad():
                feats = model.encoder(x)
            for epoch in range(10):
                loss = nn.functional.mse_loss(model.head(feats), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
            """, at=(11, 0)),
        Good("""
            import torch
            import torch.nn as nn
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.encoder = nn.Linear(4, 8)
                    self.head = nn.Linear(8, 1)
            model = Net()
            opt = torch.optim.Adam(model.head.parameters())
            x, y = torch.randn(16, 4), torch.randn(16, 1)
            with torch.no_grad():
                feats = model.encoder(x)
            for epoch in range(10):
                loss = nn.functional.mse_loss(model.head(feats), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        f = node.func
        if not (isinstance(f, ast.Attribute) and f.attr == "backward") \
                or ctx.mentions("requires_grad") or not any(
                    ctx.mentions(w) for w in ("no_grad", "inference_mode")):
            return
        scope = ctx.scope()
        loops = scope.loops_of(node)
        if not loops:
            return
        loop = loops[-1]
        for b in _sources(scope, f.value, node.lineno):
            if not b.no_grad or b.line >= loop.lineno or b.value is None:
                continue
            part = _module_part(b.value, scope, ctx)
            if part is None:
                continue
            root = part.partition(".")[0]
            opt = _stepping_optimizer(loop, root, scope, ctx)
            if opt is None or not _runs_other_part(loop, root, part):
                continue
            with_ = scope.grad_off_at(b.stmt)
            if with_ is None:
                continue
            yield self.report(with_, ctx, related=[
                Related(ctx.path, b.line, f"`{b.name}` is computed here, once",
                        ctx.column(b.stmt)),
                Related(ctx.path, node.lineno, "the loss read from it is backpropagated here",
                        ctx.column(node))],
                part=part, name=b.name, backward=node.lineno, opt=opt)
            return


def _sources(scope: Scope, e: ast.expr, line: int) -> list[Binding]:
    """The bindings ``e`` (read at ``line``) is computed from, a few steps back."""
    out: list[Binding] = []
    todo, seen = [(e, line, 0)], set()
    while todo:
        x, at, depth = todo.pop()
        for n in walk(x):
            if not isinstance(n, ast.Name) or (n.id, at) in seen:
                continue
            seen.add((n.id, at))
            b = scope.binding_before(n.id, at)
            if b is None:
                continue
            out.append(b)
            v = b.value if b.value is not None else getattr(b.stmt, "value", None)
            if v is not None and depth < MAX_HOPS:
                todo.append((v, b.line, depth + 1))
    return out


def _module_part(value: ast.expr, scope: Scope, ctx: Context) -> str | None:
    """``model.embed`` for ``model.embed(ids).mean(1)``: an attribute of a name called to make
    the value (the name is a module when the loop's optimizer is built over its parameters:
    :func:`_stepping_optimizer`)."""
    for c in walk(value):
        if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) \
                and isinstance(c.func.value, ast.Name) and c.func.attr not in NOT_FORWARD:
            return dotted(c.func)
    return None


# module methods that compute nothing from the input
NOT_FORWARD = frozenset({"parameters", "named_parameters", "state_dict", "to", "cpu", "cuda",
                         "eval", "train", "modules", "children", "buffers", "named_modules",
                         "zero_grad", "requires_grad_", "float", "half", "double"})


def _stepping_optimizer(loop: ast.stmt, root: str, scope: Scope, ctx: Context) -> str | None:
    for c in walk(loop):
        if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) \
                and c.func.attr == "step" and not c.args:
            k = ctx.analysis.kind(c.func.value, scope, c.lineno)
            if k is not None and k.what == OPTIMIZER and root in k.over:
                return dotted(c.func.value)
    return None


def _runs_other_part(loop: ast.stmt, root: str, part: str) -> bool:
    """The loop calls another attribute of ``root`` (``model.head(...)``)."""
    return any(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
               and isinstance(c.func.value, ast.Name) and c.func.value.id == root
               and dotted(c.func) != part and c.func.attr not in ("parameters", "train",
                                                                  "eval", "zero_grad")
               for c in walk(loop))
