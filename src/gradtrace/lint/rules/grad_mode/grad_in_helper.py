"""GT210: a helper that builds an output and differentiates it, called under no_grad."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.callees import resolve
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.grad_mode.global_state import SETTERS, _flag, _is_false
from gradtrace.lint.nodes import bfs_walk
from gradtrace.lint.grad_modes import grad_mode_of, turns_on_inside
from gradtrace.lint.analysis.grad_off_calls import _targets, made_names, off_list
from gradtrace.lint.analysis.reach import disables_grad
from gradtrace.lint.rules.grad_mode._deep_gradient import deep_gradient, forward_start
from gradtrace.lint.rules.grad_mode._trained_path import statement_calls as _statement_calls
from gradtrace.lint.rules.grad_mode._trained_path import trained_through
from gradtrace.lint.rules.grad_mode._helper_gradients import (
    _differentiates, _given_gradient, _own_gradient, _spread,
)


class GradientHelperUnderNoGrad(Rule):
    """A function that runs a model and differentiates its output (`autograd.grad`, a
    Jacobian or gradient-norm penalty, `backward()`) is called inside `torch.no_grad()` or
    `inference_mode()`.

    Why: the helper's forward then records no graph: its output has no `grad_fn` and the
    gradient call raises `RuntimeError: element 0 of tensors does not require grad and does
    not have a grad_fn` (a validation loop under `no_grad` reusing the training loss that
    holds a gradient penalty; checked on torch 2.13). Call it outside the block, or wrap the
    gradient part of the helper in `torch.enable_grad()` (under `no_grad` only: it does not
    undo `inference_mode`, see GT208).
    The same holds after `torch.set_grad_enabled(False)` written as a statement: grad stays
    off for the statements that follow it in its block, up to the call that turns it back on
    (an evaluation that runs an adversarial attack before its `torch.set_grad_enabled(True)`).
    A function decorated with `@torch.no_grad()` or `@torch.inference_mode()` is such a block
    (reported at the decorator). When the helper is not called by the block itself but by a
    function the block runs (an evaluation method that fits a probe, a loss module that
    caches gradients with `loss.backward()` in its `forward`, an environment reset that warms
    up a trajectory optimizer), the finding is on that call
    (NOTE [gradient reached through the callee]). When the gradient is taken in a module's
    own `forward` (test-time adaptation), the finding is where that work starts in `forward`
    (NOTE [gradient taken in a module's forward]).
    Known limits: the helper must be a function or method of this file called in the block
    (or between the statement and the first statement of its block that can turn grad back
    on), or up to three calls below, and compute the differentiated output itself; a gradient
    under a test of a flag passed down, and a call under a test of grad mode or training, are
    left alone.
    """

    code = "GT210"
    name = "gradient-helper-under-no-grad"
    message = ("`{mode}` covers `{call}`, which runs a forward and differentiates it "
               "(`{grad}`, line {line}): with no graph recorded the gradient call raises "
               "`element 0 of tensors does not require grad`; call it outside the block or "
               "wrap its gradient part in `torch.enable_grad()`")
    triggers = ("no_grad", "inference_mode", "set_grad_enabled")
    gate_statements = True
    examples = [
        Bad("""
            import torch

            def jacobian_loss(model, x, y):
                x = x.clone().requires_grad_(True)
                out = model(x)
                jac = torch.autograd.grad(out.sum(), x, create_graph=True)[0]
                return (out - y).pow(2).mean() + jac.norm()

            def validate(model, loader):
                with torch.no_grad():
                    return sum(jacobian_loss(model, x, y).item() for x, y in loader)
            """, at=(10, 4)),
        Good("""
            import torch

            def jacobian_loss(model, x, y):
                x = x.clone().requires_grad_(True)
                out = model(x)
                jac = torch.autograd.grad(out.sum(), x, create_graph=True)[0]
                return (out - y).pow(2).mean() + jac.norm()

            def validate(model, loader):
                return sum(jacobian_loss(model, x, y).item() for x, y in loader)
            """),
        Good("""
            import torch

            def train_step(loss, opt):
                loss.backward()
                opt.step()

            def run(model, x, opt):
                loss = model(x).sum()
                with torch.no_grad():
                    train_step(loss, opt)
            """),
        Bad("""
            import torch

            def attack(model, x, y, eps):
                x = x.clone().requires_grad_(True)
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                return (x + eps * x.grad.sign()).detach()

            def evaluate_robust(model, loader, eps):
                torch.set_grad_enabled(False)
                errors = [(model(attack(model, x, y, eps)).argmax(1) != y).sum() for x, y in loader]
                torch.set_grad_enabled(True)
                return errors
            """, at=(10, 4)),
        Good("""
            import torch

            def attack(model, x, y, eps):
                x = x.clone().requires_grad_(True)
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                return (x + eps * x.grad.sign()).detach()

            def evaluate_robust(model, loader, eps):
                adv = [(attack(model, x, y, eps), y) for x, y in loader]
                torch.set_grad_enabled(False)
                errors = [(model(x).argmax(1) != y).sum() for x, y in adv]
                torch.set_grad_enabled(True)
                return errors
            """),
        Bad("""
            import torch
            import torch.nn.functional as F

            def fit_probe(feats, labels):
                probe = torch.nn.Linear(feats.shape[1], 2)
                loss = F.cross_entropy(probe(feats), labels)
                loss.backward()
                return probe

            class Evaluator:
                def score(self, encoder, x, y):
                    probe = fit_probe(encoder(x), y)
                    return (probe(encoder(x)).argmax(1) == y).float().mean()

            def validate(ev, encoder, x, y):
                with torch.no_grad():
                    return ev.score(encoder, x, y)

            validate(Evaluator(), torch.nn.Linear(4, 3), torch.randn(5, 4), torch.zeros(5).long())
            """, at=(12, 16)),
        Good("""
            import torch
            import torch.nn.functional as F

            def fit_probe(feats, labels):
                probe = torch.nn.Linear(feats.shape[1], 2)
                loss = F.cross_entropy(probe(feats), labels)
                loss.backward()
                return probe

            class Evaluator:
                def score(self, encoder, x, y):
                    with torch.enable_grad():
                        probe = fit_probe(encoder(x).detach(), y)
                    return (probe(encoder(x)).argmax(1) == y).float().mean()

            def validate(ev, encoder, x, y):
                with torch.no_grad():
                    return ev.score(encoder, x, y)

            validate(Evaluator(), torch.nn.Linear(4, 3), torch.randn(5, 4), torch.zeros(5).long())
            """),
    ]

    def visit_With(self, node: ast.With, ctx: Context) -> Iterator[Finding]:
        mode = next((i.context_expr for i in node.items if disables_grad(i.context_expr, ctx)),
                    None)
        if mode is None or not _differentiates(ctx):
            return
        where = ctx.function or ctx.tree
        outer = grad_mode_of(mode, ctx.imports)
        calls = [n for s in node.body for n in _grad_off_walk(s, outer, ctx)
                 if isinstance(n, ast.Call)]
        yield from self._region(node, mode, node, calls, where, ctx)

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        """A function decorated with ``@torch.no_grad()`` / ``@torch.inference_mode()`` runs
        its body as a ``with`` block would; the direct reading is reported at the
        decorator."""
        mode = next((d for d in node.decorator_list if disables_grad(d, ctx)), None)
        if mode is None or not _differentiates(ctx):
            return
        # a function handed in (an optimizer's `closure`, GT213's), or rebound here
        # (`closure = torch.enable_grad()(closure)`), is not read as the helper it names
        given = {a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)}
        given.update(t.id for n in off_list(ctx, node) if isinstance(n, ast.Assign)
                     for t in n.targets if isinstance(t, ast.Name))
        calls = sorted((n for n in off_list(ctx, node) if isinstance(n, ast.Call)
                        and not (isinstance(n.func, ast.Name) and n.func.id in given)),
                       key=lambda n: (n.lineno, n.col_offset))
        yield from self._region(mode, mode, node, calls, node, ctx)

    visit_AsyncFunctionDef = visit_FunctionDef

    def _region(self, at: ast.AST, mode: ast.expr, owner: ast.AST, calls: list[ast.Call],
                where: ast.AST, ctx: Context) -> Iterator[Finding]:
        made: set[str] | None = None
        for n in calls:
            target = resolve(ctx, where, n)
            grad = _own_gradient(ctx, target[0], _spread(n, where, ctx)) \
                if target is not None else next((g for fn, _ in _targets(n, where, ctx)
                                                 if fn.name == "forward" and (
                                                     g := _own_gradient(ctx, fn, n, True))), None)
            if grad is None and _differentiates(ctx):
                if made is None:
                    made = made_names(off_list(ctx, owner), where, ctx)
                grad = next((g for fn, binds in _targets(n, where, ctx) if binds is not None
                             and (g := _given_gradient(ctx, fn, binds, made, where))), None)
            if grad is None:
                continue
            inner = forward_start(ctx, grad)  # NOTE [gradient taken in a module's forward]
            yield self.report(inner or at, ctx, related=(*(() if inner is None else (
                Related(ctx.path, at.lineno, f"`{ctx.source(mode)}` turns grad off here",
                        ctx.column(at)),)), Related(
                ctx.path, grad.lineno, "the gradient is taken here", ctx.column(grad))),
                mode=ctx.source(mode), call=ctx.source(n.func) + "(...)",
                grad=ctx.source(grad.func), line=grad.lineno)
            return
        deep = deep_gradient(ctx, owner, where, _own_gradient)
        if deep is not None:  # NOTE [gradient reached through the callee]
            n, grad = deep
            inner = forward_start(ctx, grad)
            if trained_through(ctx, grad, _own_gradient):  # NOTE [the training path run with grad off]
                inner = at
            yield self.report(inner or n, ctx, related=(
                Related(ctx.path, at.lineno, f"`{ctx.source(mode)}` turns grad off here",
                        ctx.column(at)),
                *(() if inner is None else (Related(ctx.path, n.lineno, "the module runs "
                                                    "here, grad still off", ctx.column(n)),)),
                Related(ctx.path, grad.lineno, "the gradient is taken here", ctx.column(grad))),
                mode=ctx.source(mode), call=ctx.source(n.func) + "(...)",
                grad=ctx.source(grad.func), line=grad.lineno)

    visit_AsyncWith = visit_With

    def visit_Expr(self, node: ast.Expr, ctx: Context) -> Iterator[Finding]:
        """``torch.set_grad_enabled(False)`` as a statement: grad is off for the statements
        after it in its block until one that can turn it back on."""
        call = node.value
        if not isinstance(call, ast.Call) or ctx.qualified_name(call.func) not in SETTERS \
                or not _is_false(_flag(call)) or ctx.grad_disabled is not None \
                or not _differentiates(ctx):
            return
        block = _block_of(node, ctx)
        if block is None:
            return
        where = ctx.function or ctx.tree
        for s in block[block.index(node) + 1:]:
            if _turns_on(s, ctx):
                break
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue  # defined here, not run here
            for n in bfs_walk(s):
                if not isinstance(n, ast.Call) or n.lineno < s.lineno:
                    continue
                target = resolve(ctx, where, n)
                grad = _own_gradient(ctx, target[0], n) if target is not None else None
                if grad is None:
                    continue
                yield self.report(node, ctx, related=(
                    Related(ctx.path, n.lineno, f"`{ctx.source(n.func)}(...)` runs with grad "
                            "still off", ctx.column(n)),
                    Related(ctx.path, grad.lineno, "the gradient is taken here",
                            ctx.column(grad))),
                    mode=ctx.source(call), call=ctx.source(n.func) + "(...)",
                    grad=ctx.source(grad.func), line=grad.lineno)
                return
        off = _statement_calls(block[block.index(node) + 1:], ctx, _turns_on)
        deep = deep_gradient(ctx, node, where, _own_gradient, off) if off else None
        if deep is not None and trained_through(ctx, deep[1], _own_gradient):
            n, grad = deep  # NOTE [the training path run with grad off]
            yield self.report(node, ctx, related=(
                Related(ctx.path, n.lineno, f"`{ctx.source(n.func)}(...)` runs with grad "
                        "still off", ctx.column(n)),
                Related(ctx.path, grad.lineno, "the gradient is taken here",
                        ctx.column(grad))),
                mode=ctx.source(call), call=ctx.source(n.func) + "(...)",
                grad=ctx.source(grad.func), line=grad.lineno)


def _block_of(node: ast.stmt, ctx: Context) -> list[ast.stmt] | None:
    """The statement list that holds ``node`` (its parent's body, orelse, ...)."""
    parent = ctx.stmts[-2] if len(ctx.stmts) > 1 else ctx.tree
    for field in ("body", "orelse", "finalbody"):
        block = getattr(parent, field, None)
        if isinstance(block, list) and any(x is node for x in block):
            return block
    for h in getattr(parent, "handlers", ()) or ():
        if any(x is node for x in h.body):
            return h.body
    return None


def _turns_on(s: ast.stmt, ctx: Context) -> bool:
    """``s`` holds a call that can turn grad back on (``set_grad_enabled`` with anything but
    ``False``, ``enable_grad``)."""
    for n in bfs_walk(s):
        if isinstance(n, ast.Call):
            q = ctx.qualified_name(n.func)
            if q in SETTERS and not _is_false(_flag(n)) or q == "torch.enable_grad":
                return True
    return False


def _grad_off_walk(s: ast.stmt, outer: str | None, ctx: Context) -> Iterator[ast.AST]:
    """The nodes of ``s`` (breadth first) that run with grad still off: not the body of a
    ``with`` nested in the block that turns grad back on (``with torch.enable_grad():`` under
    ``no_grad``, NOTE [grad turned back on inside])."""
    todo: list[ast.AST] = [s]
    while todo:
        n = todo.pop(0)
        yield n
        if isinstance(n, (ast.With, ast.AsyncWith)) and any(
                turns_on_inside(i.context_expr, ctx.imports, outer) for i in n.items):
            todo.extend(i.context_expr for i in n.items)
            continue
        todo.extend(ast.iter_child_nodes(n))


# NOTE [grad turned back on inside]
# `with torch.no_grad(): with torch.enable_grad(): e = energy(model, x)` (a sampler that scores
# candidate points by a gradient): the inner block records a graph again, so a helper called
# there differentiates what it computes. Its calls are not read as calls under `no_grad`;
# neither is a helper whose gradient sits in a `with torch.set_grad_enabled(flag):` of its
# own (`run_epoch(model, val)` under `no_grad`, the helper choosing its mode from
# `is_training`): the helper, not the caller, sets the mode there.
