"""GT721: an LBFGS closure runs backward() without clearing the gradients first."""
from __future__ import annotations

import ast
from dataclasses import replace
from typing import Callable, Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.steps import backward_of
from gradtrace.lint.context import Context
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.autograd_api.closure import _closure_arg, _local_def

LBFGS = frozenset({"torch.optim.LBFGS", "torch.optim.lbfgs.LBFGS"})


def _lbfgs(recv: ast.expr, ctx: Context, where: ast.AST) -> ast.Call | None:
    """The ``torch.optim.LBFGS(...)`` call that built ``recv``, when it evaluates the closure
    more than once per step (``max_iter`` not 1)."""
    k = ctx.analysis.kind_in(recv, where, recv.lineno)
    made = k.node if k is not None and isinstance(k.node, ast.Call) else None
    if made is None:
        made = _self_made(recv, where, ctx)
    if made is None or not ((ctx.qualified_name(made.func) or "") in LBFGS
                            or _lbfgs_given(made, where, ctx)):
        return None
    it = next((kw.value for kw in made.keywords if kw.arg == "max_iter"),
              made.args[2] if len(made.args) > 2 else None)
    return None if isinstance(it, ast.Constant) and it.value == 1 else made


def _self_made(recv: ast.expr, where: ast.AST, ctx: Context) -> ast.Call | None:
    """The call a method of ``where``'s class assigns to ``self.<attr>`` when ``recv`` is
    ``self.<attr>`` and that is its only assignment in the class (``self.optimizer_ =
    optimizer(params, **kw)`` in ``__init__``)."""
    cls = ctx.analysis.class_of(where)
    if cls is None or not (isinstance(recv, ast.Attribute) and isinstance(recv.value, ast.Name)
                           and recv.value.id == "self"):
        return None
    found: list[ast.expr] = []
    for m in cls.methods.values():
        for n in walk(m):
            if isinstance(n, ast.Assign) and any(
                    isinstance(t, ast.Attribute) and t.attr == recv.attr
                    and isinstance(t.value, ast.Name) and t.value.id == "self" for t in n.targets):
                found.append(n.value)
    return found[0] if len(found) == 1 and isinstance(found[0], ast.Call) else None


def _lbfgs_given(made: ast.Call, where: ast.AST, ctx: Context) -> bool:
    """``made`` is ``optimizer(params, ...)`` with ``optimizer`` a parameter of the method that
    makes it, and every call of that method (``Cls(..., torch.optim.LBFGS, ...)`` for
    ``__init__``) passes ``torch.optim.LBFGS`` for it."""
    if not isinstance(made.func, ast.Name):
        return False
    cls = ctx.analysis.class_of(where)
    fn = next((m for m in (cls.methods.values() if cls is not None else ())
               if any(n is made for n in walk(m))), None)
    if fn is None or made.func.id not in {a.arg for a in (*fn.args.posonlyargs, *fn.args.args,
                                                           *fn.args.kwonlyargs)}:
        return False
    got = ctx.analysis.argument_values(fn, made.func.id)
    if not got or any((ctx.qualified_name(v) or "") not in LBFGS for v, _ in got):
        return False
    return not any(isinstance(k.value, ast.Constant) and k.value.value == 1  # one evaluation
                   for call, _ in ctx.analysis.call_sites(fn) for k in call.keywords
                   if k.arg == "max_iter")


def _made_closure(call: ast.Call, owner: ast.AST, ctx: Context) -> ast.AST | None:
    """The closure a function of the file returns when ``call`` calls it
    (``opt.step(self._objective(logits, labels))`` with ``_objective`` defining ``closure`` and
    returning it): the one function every ``return`` of the callee gives, defined in it."""
    callee = ctx.analysis.callee(call, owner)
    if callee is None:
        return None
    got = {id(d): d for r in _own_returns(callee) if r.value is not None
           for d in [r.value if isinstance(r.value, ast.Lambda) else _local_def(
               r.value.id, callee, r.lineno) if isinstance(r.value, ast.Name) else None]}
    return next(iter(got.values())) if len(got) == 1 and None not in got.values() else None


def _own_returns(fn: ast.AST) -> list[ast.Return]:
    """The ``return`` statements of ``fn`` itself (not of the functions it defines)."""
    out, work = [], list(getattr(fn, "body", []))
    while work:
        n = work.pop()
        if isinstance(n, ast.Return):
            out.append(n)
        elif not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            work.extend(ast.iter_child_nodes(n))
    return out


def _runs(fn: ast.AST, owner: ast.AST, ctx: Context, test: Callable[[ast.AST], bool],
          depth: int = 0) -> ast.AST | None:
    """The first node of ``fn`` for which ``test`` holds, or of a function of the file that
    ``fn`` calls (``self.train_step_single(...)`` with ``owner`` the method whose class
    ``self`` is, a helper), up to three calls deep."""
    for n in walk(fn):
        if test(n):
            return n
        if depth < 3 and isinstance(n, ast.Call):
            callee = ctx.analysis.callee(n, owner)
            if callee is not None and callee is not fn:
                got = _runs(callee, callee, ctx, test, depth + 1)
                if got is not None:
                    return got
    return None


def _clear(n: ast.AST) -> bool:
    """``zero_grad()`` on anything, ``p.grad = None`` or ``p.grad.zero_()``."""
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and (
            n.func.attr == "zero_grad" or n.func.attr in ("zero_", "fill_")
            and isinstance(n.func.value, ast.Attribute) and n.func.value.attr == "grad"):
        return True
    return isinstance(n, ast.Attribute) and n.attr == "grad" and isinstance(n.ctx, ast.Store)


def _clear_after(step: ast.Call, recv: ast.expr, scope_node: ast.AST, ctx: Context
                 ) -> ast.Call | None:
    """# NOTE [clear after the LBFGS step]
    ``recv.zero_grad()`` as the statement right after the one running ``step(closure)`` in its
    block is the clear meant for each evaluation, placed after the step: the line the fix moves
    into the closure, so it is the one reported (the closure's backward is given as related)."""
    for block_owner in walk(scope_node):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(block_owner, field, None)
            if not isinstance(block, list):
                continue
            for i, st in enumerate(block[:-1]):
                if not any(n is step for n in walk(st)) or isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    continue
                nxt = block[i + 1]
                v = nxt.value if isinstance(nxt, ast.Expr) else None
                if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
                        and v.func.attr == "zero_grad" \
                        and ctx.source(v.func.value) == ctx.source(recv):
                    return v
    return None


def _closure_def(arg: ast.expr, scope, line: int, ctx: Context  # type: ignore[no-untyped-def]
                 ) -> ast.AST | None:
    """The code the closure argument runs: a lambda, a ``def`` of the function, a function of
    the file (not rebound here), or a method of the class handed bound (``self.loss_pinn``)."""
    if isinstance(arg, ast.Lambda):
        return arg
    if isinstance(arg, ast.Name):
        got = _local_def(arg.id, scope.node, line)
        if got is None and scope.binding_before(arg.id, line) is None:
            got = ctx.analysis.functions.get(arg.id)
        return got
    if isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name) \
            and arg.value.id == "self":
        cls = ctx.analysis.class_of(scope.node)
        return cls.method(arg.attr) if cls is not None else None
    return None


class LbfgsClosureWithoutZeroGrad(Rule):
    """The closure given to `LBFGS.step(closure)` calls `backward()` without clearing the
    gradients first.

    Why: LBFGS evaluates the closure up to `max_iter` times (20 by default) in one `step()`,
    reading `.grad` after each evaluation; `backward()` adds to `.grad`, so without a
    `zero_grad()` inside the closure every evaluation sees the sum of all the gradients of the
    step so far: the line search and the curvature pairs are wrong and training can diverge
    (verified on torch 2.13: a least-squares fit that reaches 1.7e-10 with the clear ends at
    7.3e6 without it). A `zero_grad()` before `step()` clears only before the first evaluation,
    and one right after `step()` only after the last (reported there: the line to move). The
    optimizer may be built from a class given to the constructor (`self.opt = optimizer(params,
    **kw)` with `torch.optim.LBFGS` passed), and the backward may run in a method or helper of
    the file that the closure calls; the closure may be a method handed bound
    (`self.optimizer.step(self.loss_pinn)`) or a function of the file. Clear the gradients at
    the top of the closure.
    """

    code = "GT721"
    name = "lbfgs-closure-without-zero-grad"
    message = ("this closure is evaluated up to {iters} times per `{step}(closure)` of LBFGS "
               "(line {line}), and it backpropagates without clearing the gradients: each "
               "evaluation adds to the gradients of the ones before; call `zero_grad()` at the "
               "top of the closure")
    late_message = ("`zero_grad()` runs once after `{step}(closure)` (line {line}), but LBFGS "
                    "evaluates the closure up to {iters} times in that step and it backpropagates "
                    "(line {back}) without clearing: each evaluation adds to the gradients of the "
                    "ones before; move the `zero_grad()` to the top of the closure")
    triggers = ("step(",)
    examples = [
        Bad("""
            import torch
            class Trainer:
                def __init__(self, model, optimizer, **kw):
                    self.model = model
                    self.opt = optimizer(model.parameters(), **kw)
                def single(self, x, y):
                    loss = ((self.model(x) - y) ** 2).mean()
                    loss.backward()
                    return loss
                def train_step(self, x, y):
                    self.opt.step(lambda: self.single(x, y))
                    self.opt.zero_grad()
            trainer = Trainer(torch.nn.Linear(3, 1), torch.optim.LBFGS, lr=0.5)
            """, at=(12, 8)),
        Bad("""
            import torch
            def fit(model, x, y):
                opt = torch.optim.LBFGS(model.parameters(), lr=0.8)
                for i in range(10):
                    opt.zero_grad()
                    def closure():
                        loss = ((model(x) - y) ** 2).mean()
                        loss.backward()
                        return loss
                    opt.step(closure)
            """, at=(8, 12)),
        Good("""
            import torch
            def fit(model, x, y):
                opt = torch.optim.LBFGS(model.parameters(), lr=0.8)
                for i in range(10):
                    def closure():
                        opt.zero_grad()
                        loss = ((model(x) - y) ** 2).mean()
                        loss.backward()
                        return loss
                    opt.step(closure)
                once = torch.optim.LBFGS(model.parameters(), max_iter=1)
                once.zero_grad()
                def single():
                    loss = ((model(x) - y) ** 2).mean()
                    loss.backward()
                    return loss
                once.step(single)
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        f = node.func
        if not (isinstance(f, ast.Attribute) and f.attr == "step"):
            return
        arg = _closure_arg(node)
        if not isinstance(arg, (ast.Name, ast.Lambda, ast.Attribute, ast.Call)):
            return
        scope = ctx.scope()
        made = _lbfgs(f.value, ctx, scope.node)
        if made is None:
            return
        fn = _made_closure(arg, scope.node, ctx) if isinstance(arg, ast.Call) \
            else _closure_def(arg, scope, node.lineno, ctx)
        if fn is None or _runs(fn, scope.node, ctx, _clear) is not None:
            return
        back = _runs(fn, scope.node, ctx, lambda n: isinstance(n, ast.Call)
                     and backward_of(n, ctx) is not None)
        if back is None:
            return
        it = next((kw.value for kw in made.keywords if kw.arg == "max_iter"), None)
        iters = ctx.source(it) if it is not None else "20"
        late = _clear_after(node, f.value, scope.node, ctx)
        if late is not None:  # NOTE [clear after the LBFGS step]
            got = self.report(late, ctx, related=(Related(
                ctx.path, back.lineno, "the closure backpropagates here",  # type: ignore[attr-defined]
                ctx.column(back)),), iters=iters, step=ctx.source(f), line=node.lineno)
            yield replace(got, message=self.late_message.format(
                iters=iters, step=ctx.source(f), line=node.lineno, back=back.lineno))  # type: ignore[attr-defined]
            return
        yield self.report(back, ctx, related=(Related(
            ctx.path, node.lineno, "LBFGS steps with it here", ctx.column(node)),),
            iters=iters, step=ctx.source(f), line=node.lineno)
