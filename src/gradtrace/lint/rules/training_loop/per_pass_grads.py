"""GT568: per-pass gradients read from `.grad` after a backward per pass, never cleared."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.fixed_loops import runs_once
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule

LOOPS = (ast.For, ast.AsyncFor, ast.While)
CLEARS = frozenset({"zero_grad", "zero_", "detach_", "fill_"})


def _own(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """The nodes of ``body``, nested function and class definitions left out."""
    todo: list[ast.AST] = list(body)
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        yield n
        todo.extend(ast.iter_child_nodes(n))


def _bound_in(loop: ast.stmt, name: str) -> bool:
    """``name`` is the loop's target or is assigned in its body: a value of the pass."""
    targets = [loop.target] if isinstance(loop, (ast.For, ast.AsyncFor)) else []
    for n in _own(loop.body):  # type: ignore[attr-defined]
        if isinstance(n, ast.Assign):
            targets.extend(n.targets)
        elif isinstance(n, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
            targets.append(n.target)
    return any(isinstance(x, ast.Name) and x.id == name for t in targets for x in ast.walk(t))


def _clears(loop: ast.stmt, ctx: Context) -> bool:
    """The pass clears gradients: ``zero_grad()``, ``.grad = None``, ``p.grad.zero_()``, or
    calls a function or method of the file that touches ``grad`` (it may clear them)."""
    for n in _own(loop.body):  # type: ignore[attr-defined]
        if isinstance(n, ast.Attribute) and n.attr == "grad" and isinstance(n.ctx, ast.Store):
            return True
        if isinstance(n, ast.Delete):
            return True
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) \
            else ""
        if name in CLEARS or name == "step":
            return True  # (a loop that steps: a training loop, the clearing rules' matter)
        fns = [ctx.analysis.functions.get(name)] if isinstance(f, ast.Name) else [
            info.methods.get(name) for info in ctx.analysis.classes.values()]
        if any(fn is not None and ("grad" in ctx.source(fn) or "step" in ctx.source(fn))
               for fn in fns):
            return True  # `learner.step_all()`: a method of the file that may clear or step
    return False


def _manual_update(loop: ast.stmt) -> bool:
    """The pass updates tensors with the gradients itself (``w -= lr * w.grad``,
    ``p.data.add_(p.grad, alpha=-lr)``): a hand-written step, the clearing rules' matter."""
    for n in _own(loop.body):  # type: ignore[attr-defined]
        if isinstance(n, ast.AugAssign) and any(
                isinstance(x, ast.Attribute) and x.attr == "grad" for x in ast.walk(n.value)):
            return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr.endswith("_") and any(
                    isinstance(x, ast.Attribute) and x.attr == "grad"
                    for a in [*n.args, *(k.value for k in n.keywords)] for x in ast.walk(a)):
            return True
    return False


SHOWN = frozenset({"print", "info", "debug", "warning", "log", "write", "add_scalar",
                   "set_postfix", "set_description"})


def _shown(st: ast.stmt) -> bool:
    """``print(...)`` / ``logger.info(...)`` / ``assert ...`` / ``self.assertTrue(...)``: a
    statement that only shows or checks what it reads."""
    if isinstance(st, ast.Assert):
        return True
    if not (isinstance(st, ast.Expr) and isinstance(st.value, ast.Call)):
        return False
    f = st.value.func
    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
    return name in SHOWN or name.startswith("assert")


def _owner_kept(read: ast.Attribute, loop: ast.stmt, st: ast.stmt) -> bool:
    """The tensor whose ``.grad`` is read is the same object on every pass: a name not bound
    in the loop, or the variable of a comprehension over such a name (``p.grad for p in
    model.parameters()``); not a leaf made again each pass (``x = x + update``)."""
    root = read.value
    while isinstance(root, (ast.Attribute, ast.Subscript, ast.Call)):
        root = root.func if isinstance(root, ast.Call) else root.value
    if not isinstance(root, ast.Name):
        return False
    for comp in (n for n in ast.walk(st) if isinstance(n, (ast.ListComp, ast.SetComp,
                                                          ast.GeneratorExp, ast.DictComp))):
        for g in comp.generators:
            if any(isinstance(t, ast.Name) and t.id == root.id for t in ast.walk(g.target)):
                return _owner_kept(ast.Attribute(value=g.iter, attr="grad"), loop, st)
    inner = [n for n in _own(loop.body) if isinstance(n, (ast.For, ast.AsyncFor))  # type: ignore[attr-defined]
             and isinstance(n.target, ast.Name) and n.target.id == root.id]
    if len(inner) == 1 and not any(
            isinstance(t, ast.Name) and t.id == root.id for n in _own(loop.body)  # type: ignore[attr-defined]
            if isinstance(n, ast.Assign) for t in n.targets):
        return _owner_kept(ast.Attribute(value=inner[0].iter, attr="grad"), loop, st)
    return not _bound_in(loop, root.id)


def _grad_read(loop: ast.stmt, after: int) -> ast.Attribute | None:
    """A read of a ``.grad`` as a value (not only tested against None, not only shown) after
    line ``after`` in the loop's body, of a tensor that is the same on every pass."""
    best = None
    for st in (n for n in _own(loop.body) if isinstance(n, ast.stmt)):  # type: ignore[attr-defined]
        if isinstance(st, (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.Try)) \
                or _shown(st):
            continue  # (their own statements come on their own)
        tested = {id(x) for n in ast.walk(st) if isinstance(n, ast.Compare)
                  for x in (n.left, *n.comparators)}
        for n in ast.walk(st):
            if isinstance(n, ast.Attribute) and n.attr == "grad" \
                    and isinstance(n.ctx, ast.Load) and id(n) not in tested \
                    and n.lineno > after and (best is None or n.lineno < best.lineno) \
                    and _owner_kept(n, loop, st):
                best = n
    return best


class PerPassGradsAccumulated(Rule):
    """A loop calls `backward()` on one loss per pass and reads the parameters' `.grad` in
    the same pass, never clearing it: from the second pass on, the value read holds every
    earlier pass's gradient too.

    Why: `backward()` adds into `.grad` (pytorch-facts.md#grad-accumulation); it does not
    replace it. Code that measures each loss term's gradient (the norm per condition of a
    PINN's self-adaptive weighting, GradNorm-style balancing, per-task gradient similarity)
    by `term.backward(retain_graph=True)` then `p.grad` reads, for the second term, the sum of
    the first and the second term's gradients, and so on: the balancing weights are computed
    from contaminated gradients and training silently optimises a wrongly weighted loss
    (PINA-org/PINA#718; checked on torch 2.13). Take each term's gradient with
    `torch.autograd.grad(term, params, retain_graph=True)`, which leaves `.grad` alone, or
    clear the gradients before each backward (`model.zero_grad()`).
    Known limits: the loss backwarded is a value of the pass (the loop's target or bound in
    its body) and `.grad` is read after the backward in the same pass, of a tensor that is the
    same on every pass (not a leaf made again in the loop), and not only shown or checked
    (`print`, a logger, an assertion); a pass that clears gradients anywhere (`zero_grad()`, `.grad = None`,
    `.grad.zero_()`), steps an optimizer or by hand (`w -= lr * w.grad`), or calls a function
    or method of the file that touches `grad` or `step`, is trusted.
    """

    code = "GT568"
    name = "per-pass-grads-accumulated"
    message = ("`{call}` adds this pass's gradient into `.grad`, which is read at line "
               "{line} with nothing clearing it in the loop: from the second pass on, the "
               "value read also holds every earlier pass's gradient; take it with "
               "`torch.autograd.grad(..., retain_graph=True)` or clear the gradients before "
               "each backward")
    triggers = (".grad",)
    examples = [
        Bad("""
            import torch

            def task_grad_norms(model, task_losses):
                norms = []
                for loss in task_losses:
                    loss.backward(retain_graph=True)
                    norms.append(torch.stack([p.grad.norm() for p in model.parameters()]).sum())
                return norms
            """, at=(6, 8)),
        Good("""
            import torch

            def task_grad_norms(model, task_losses):
                norms = []
                params = list(model.parameters())
                for loss in task_losses:
                    grads = torch.autograd.grad(loss, params, retain_graph=True)
                    norms.append(torch.stack([g.norm() for g in grads]).sum())
                return norms
            """),
        Good("""
            import torch

            def task_grad_norms(model, task_losses):
                norms = []
                for loss in task_losses:
                    model.zero_grad()
                    loss.backward(retain_graph=True)
                    norms.append(torch.stack([p.grad.norm() for p in model.parameters()]).sum())
                return norms
            """),
    ]

    def visit_For(self, node: ast.For, ctx: Context) -> Iterator[Finding]:
        yield from self._check(node, ctx)

    def visit_While(self, node: ast.While, ctx: Context) -> Iterator[Finding]:
        yield from self._check(node, ctx)

    def _check(self, loop: ast.stmt, ctx: Context) -> Iterator[Finding]:
        if runs_once(loop):
            return
        for st in loop.body:  # type: ignore[attr-defined]
            call = st.value if isinstance(st, ast.Expr) else None
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                    and call.func.attr == "backward"):
                continue
            recv = call.func.value
            if not (isinstance(recv, ast.Name) and _bound_in(loop, recv.id)):
                continue
            read = _grad_read(loop, call.lineno)
            if read is None or _clears(loop, ctx) or _manual_update(loop):
                return
            yield self.report(call, ctx, related=(Related(
                ctx.path, read.lineno, "`.grad` is read here", ctx.column(read)),),
                call=ctx.source(call), line=read.lineno)
            return
