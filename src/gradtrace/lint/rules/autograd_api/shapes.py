"""GT715/GT716: backward on a per-sample value without `gradient`, or with a gradient whose
rank cannot match the output's (NOTE [ranks])."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.one_sample import one_element
from gradtrace.lint.analysis.ranks import MANY, ONE, SCALAR, Rank, elements, rank
from gradtrace.lint.context import Context
from gradtrace.lint.names import scaled_name
from gradtrace.lint.rule import Bad, Good, Rule

BACKWARD = "torch.autograd.backward"
GRAD = "torch.autograd.grad"


def _arg(call: ast.Call, i: int, name: str) -> ast.expr | None:
    if len(call.args) > i:
        return call.args[i]
    return next((k.value for k in call.keywords if k.arg == name), None)


def backward_pairs(call: ast.Call, ctx: Context) -> tuple[ast.expr, ast.expr | None] | None:
    """(what is backpropagated, the gradient given or None) for ``out.backward(...)``,
    ``torch.autograd.backward(...)`` and ``torch.autograd.grad(...)``; None: another call."""
    f = call.func
    q = ctx.qualified_name(f) or ""
    if q == BACKWARD:
        out = _arg(call, 0, "tensors")
        return (out, _arg(call, 1, "grad_tensors")) if out is not None else None
    if q == GRAD:
        out = _arg(call, 0, "outputs")
        return (out, _arg(call, 2, "grad_outputs")) if out is not None else None
    if isinstance(f, ast.Attribute) and f.attr == "backward" and not q.startswith("torch."):
        return f.value, _arg(call, 0, "gradient")
    return None


def _items(e: ast.expr, ctx: Context, line: int) -> list[ast.AST]:
    """The tensors a ``tensors``/``outputs`` argument holds (one, or a list's elements)."""
    got = elements(e, ctx.scope(), ctx, line)
    return got if got is not None else [e]


def _comprehension(e: ast.expr, ctx: Context, line: int) -> bool:
    if isinstance(e, ast.Name):
        b = ctx.scope().binding_before(e.id, line)
        e = b.value if b is not None and b.value is not None else e  # type: ignore[assignment]
    return isinstance(e, ast.ListComp)


def _left_to_loss_rules(r: Rank, ctx: Context) -> bool:
    """A ``reduction='none'`` loss's output backpropagated unchanged: from a local binding
    (GT510's), or returned by a module's ``forward`` (GT703's)."""
    if r.origin is None:
        return True
    for fn in ctx.analysis.classes.values():
        fwd = fn.methods.get("forward")
        if fn.is_module and fwd is not None and fwd.lineno <= r.origin.lineno <= (
                fwd.end_lineno or fwd.lineno):  # type: ignore[attr-defined]
            return True
    return False


def _differ(out: Rank, grad: Rank) -> bool:
    """Whether the two ranks cannot be equal (a shape mismatch, whatever the sizes)."""
    return (out.hi is not None and out.hi < grad.lo) or (grad.hi is not None and grad.hi < out.lo)


class BackwardOnPerSampleValue(Rule):
    """`backward()` (or `torch.autograd.grad(out, x)`) without a gradient on a value that holds
    one number per sample or per element: a module's output, a loss built with
    `reduction='none'`, a function of the file that returns such a value.

    Why: without `gradient=`/`grad_outputs=`, autograd can only start from a one-element
    output: `RuntimeError: grad can be implicitly created only for scalar outputs` (torch 2.13;
    pytorch-facts.md#non-scalar-backward). Reduce first (`.mean()`, a masked sum), or pass a
    gradient of the output's shape.
    Known limits: the value must be read as many-valued through names, arithmetic, file
    functions and module classes (NOTE [ranks]); a batch of one runs, the code is still wrong
    for any other batch. The finding is on the `return` that hands the value out when it comes
    from a function of the file, else on the call. A `reduction='none'` loss's output
    backpropagated unchanged (locally, or returned by `forward`) is GT510's and GT703's.
    """

    code = "GT715"
    name = "backward-on-per-sample-value"
    message = ("`{what}` holds one value per sample/element, and `{call}` (line {line}) is "
               "given no gradient: it raises 'grad can be implicitly created only for scalar "
               "outputs'; reduce it first (e.g. `.mean()`) or pass a gradient of its shape")
    triggers = (".backward(", "autograd")
    examples = [
        Bad("""
            import torch.nn as nn
            model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 3))
            output = model(data)
            output.backward()
            """, at=(4, 0)),
        Bad("""
            import torch.nn as nn
            import torch.nn.functional as F
            class RankLoss(nn.Module):
                def forward(self, s1, s2, target):
                    p1 = F.softmax(s1, dim=1).gather(1, target.view(-1, 1))
                    p2 = F.softmax(s2, dim=1).gather(1, target.view(-1, 1))
                    return (p1 - p2 + 0.05).clamp(min=0)
            rank_loss = RankLoss()
            rank_loss(a, b, y).backward()
            """, at=(7, 8)),
        Good("""
            import torch.nn as nn
            model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 3))
            output = model(data)
            output.sum().backward()
            """),
        Good("""
            import torch.nn as nn
            import torch.nn.functional as F
            class RankLoss(nn.Module):
                def forward(self, s1, s2, target):
                    p1 = F.softmax(s1, dim=1).gather(1, target.view(-1, 1))
                    p2 = F.softmax(s2, dim=1).gather(1, target.view(-1, 1))
                    return (p1 - p2 + 0.05).clamp(min=0).mean()
            rank_loss = RankLoss()
            rank_loss(a, b, y).backward()
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        f = node.func
        if not isinstance(f, ast.Attribute) or f.attr not in ("backward", "grad"):
            return
        got = backward_pairs(node, ctx)
        if got is None or got[1] is not None:
            return
        for item in _items(got[0], ctx, node.lineno):
            r = rank(item, ctx.scope(), ctx, node.lineno)
            if r is None or r.what != MANY or r.unreduced and _left_to_loss_rules(r, ctx) \
                    or one_element(item, ctx.scope(), ctx, node.lineno):
                continue  # NOTE [batch of one built here]
            where = r.origin or node
            yield self.report(where, ctx, related=(Related(
                ctx.path, node.lineno, "backpropagated here without a gradient",
                ctx.column(node)),) if where is not node else (),
                what=ctx.source(item), call=ctx.source(f) + "()", line=node.lineno)
            return


class GradientRankMismatch(Rule):
    """The gradient handed to `backward`/`torch.autograd.backward`/`torch.autograd.grad` cannot
    have the output's shape: `torch.ones(1)` for a 0-dim loss, a per-sample tensor for a summed
    score, a 0-dim gradient for a per-sample output.

    Why: autograd checks that each gradient has exactly its output's shape: `RuntimeError:
    Mismatch in shape: grad_output[0] has a shape of torch.Size([1]) and output[0] has a shape
    of torch.Size([])` (torch 2.13). Losses are 0-dim since PyTorch 0.4, so the old
    `backward(torch.ones(1))` idiom fails; pass nothing for a scalar, or
    `torch.ones_like(out)`.
    Known limits: both ranks must be read (NOTE [ranks]); an output of size-1 shape
    (`out.view(1)`) with a `torch.ones(1)` gradient is right and left alone. The finding is on
    the gradient's binding when it is a fixed-shape constant, else on the call.
    """

    code = "GT716"
    name = "gradient-rank-mismatch"
    message = ("the gradient {grad} has {grad_rank}, but `{out}` has {out_rank}: `{call}` "
               "(line {line}) raises 'Mismatch in shape'; give a gradient of the output's "
               "shape (none for a 0-dim loss)")
    triggers = ("backward(", "grad_outputs")
    examples = [
        Bad("""
            import torch
            import torch.nn as nn
            criterion = nn.CrossEntropyLoss()
            losses = [criterion(a, y), criterion(b, y)]
            grads = [torch.ones(1) for _ in losses]
            torch.autograd.backward(losses, grads)
            """, at=(5, 0)),
        Bad("""
            import torch.nn as nn
            model = nn.Sequential(nn.Flatten(), nn.Linear(192, 3))
            logits = model(images)
            gradient = logits * labels_ohe
            score = (logits * labels_ohe).sum()
            score.backward(gradient=gradient)
            """, at=(6, 0)),
        Good("""
            import torch
            one = torch.FloatTensor([1])
            errD_real = netD(real).mean(0).view(1)
            errD_real.backward(one)
            """),
        Good("""
            import torch
            import torch.nn as nn
            criterion = nn.CrossEntropyLoss()
            losses = [criterion(a, y), criterion(b, y)]
            grads = [torch.ones(()) for _ in losses]
            torch.autograd.backward(losses, grads)
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        f = node.func
        if not isinstance(f, ast.Attribute) or f.attr not in ("backward", "grad"):
            return
        got = backward_pairs(node, ctx)
        if got is None or got[1] is None:
            return
        out_e, grad_e = got
        outs, grads = _items(out_e, ctx, node.lineno), _items(grad_e, ctx, node.lineno)
        if len(grads) == 1 and len(outs) > 1 and _comprehension(grad_e, ctx, node.lineno):
            grads = grads * len(outs)  # `[torch.ones(1) for _ in losses]`
        if len(outs) != len(grads):
            return
        scope = ctx.scope()
        for o, g in zip(outs, grads):
            ro = rank(o, scope, ctx, node.lineno)
            rg = rank(g, scope, ctx, getattr(g, "lineno", node.lineno))
            if ro is None or rg is None or not _differ(ro, rg):
                continue
            where: ast.AST = node
            grad = f"`{ctx.source(g)}`"
            if rg.what in (ONE, SCALAR) and isinstance(grad_e, ast.Name):
                b = scope.binding_before(grad_e.id, node.lineno)
                where = b.stmt if b is not None else node
                for _ in range(4):  # `neg_one = one * -1`: the shape is `one`'s, made there
                    name = scaled_name(b.value) if b is not None else None
                    b = scope.binding_before(name, b.line) if name else None
                    if b is None:
                        break
                    where, grad = b.stmt, f"`{name}` (scaled into `{grad_e.id}`)"
            said = ctx.memo("gt716-said", ctx.tree, set)  # one finding per line that made it
            if where is not node:
                if id(where) in said:
                    return
                said.add(id(where))
            yield self.report(where, ctx, related=(Related(
                ctx.path, node.lineno, "the gradient is handed to autograd here",
                ctx.column(node)),) if where is not node else (),
                grad=grad, grad_rank=_says(rg), out=ctx.source(o), out_rank=_says(ro),
                call=ctx.source(f) + "(...)", line=node.lineno)
            return


def _says(r: Rank) -> str:
    if r.what == SCALAR:
        return "0 dims"
    if r.ndim is not None:
        return f"{r.ndim} dim" + ("s" if r.ndim != 1 else "")
    return f"at least {r.lo} dim" + ("s" if r.lo != 1 else "")
