"""GT553: a `.grad` written in place after `zero_grad()` set it to None."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.analysis.steps import step_calls
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good
from gradtrace.lint.rules.training_loop._base import LoopRule, related_at
from gradtrace.lint.rules.training_loop._loop import LoopFacts
from gradtrace.lint.context import Context

SIMPLE = (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign)


def _sets_none(call: ast.Call) -> bool:
    """``zero_grad()`` / ``zero_grad(set_to_none=True)``: the default of torch 2."""
    v = next((k.value for k in call.keywords if k.arg == "set_to_none"),
             call.args[0] if call.args else None)
    return v is None or isinstance(v, ast.Constant) and v.value is True


def _grad_of(e: ast.AST) -> bool:
    """``x.grad`` or ``x.grad.data``."""
    if isinstance(e, ast.Attribute) and e.attr == "data":
        e = e.value
    return isinstance(e, ast.Attribute) and e.attr == "grad"


def grad_write(s: ast.stmt) -> ast.AST | None:
    """The in-place write into a ``.grad`` that simple statement ``s`` makes:
    ``p.grad.add_(g)``, ``p.grad.data.copy_(g)``, ``p.grad += g``, ``p.grad[i] = v``."""
    if isinstance(s, ast.AugAssign) and _grad_of(s.target):
        return s
    if isinstance(s, ast.Assign) and any(isinstance(t, ast.Subscript) and _grad_of(t.value)
                                         for t in s.targets):
        return s
    for n in walk(s):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr.endswith("_") and not n.func.attr.startswith("_") \
                and _grad_of(n.func.value):
            return n
    return None


def _refills(s: ast.stmt) -> bool:
    """``s`` gives a ``.grad`` a tensor again: ``p.grad = g`` (or ``setattr``)."""
    return isinstance(s, (ast.Assign, ast.AnnAssign)) and any(
        isinstance(t, ast.Attribute) and t.attr == "grad"
        for t in (s.targets if isinstance(s, ast.Assign) else [s.target]))


def _helper_write(ctx: Context, fn: ast.AST) -> ast.AST | None:
    """The first in-place ``.grad`` write of helper ``fn`` that no ``backward()``, no
    ``.grad =`` and no test of a grad precedes (by line)."""
    def make() -> ast.AST | None:
        scope = ctx.scope(fn)
        stops = [b.call.lineno for b in step_calls(ctx, fn).backwards if b.accumulates]
        for s in scope.stmts:
            if _refills(s) or isinstance(s, (ast.If, ast.While)) \
                    and "grad" in ctx.source(s.test) or any(x <= s.lineno for x in stops):
                return None
            w = grad_write(s) if isinstance(s, SIMPLE) else None
            if w is not None:
                return w
        return None
    return ctx.memo("gt553-helper", fn, make)


def _calls_refill(ctx: Context, fn: ast.AST, s: ast.stmt) -> bool:
    """``s`` calls a function of the file that gives some ``.grad`` a tensor (``p.grad =
    ...``): what it fills is unknown, so the writes after it are trusted."""
    for n in walk(s):
        callee = ctx.analysis.callee(n, fn) if isinstance(n, ast.Call) else None
        if callee is not None and callee is not fn and ctx.memo(
                "gt553-refills", callee, lambda c=callee: any(
                    _refills(x) for x in ctx.scope(c).stmts)):
            return True
    return False


def _owner(w: ast.AST) -> ast.AST | None:
    """The tensor whose ``.grad`` write ``w`` (from :func:`grad_write`) writes."""
    if isinstance(w, ast.Call):
        e: ast.AST | None = w.func.value  # type: ignore[attr-defined]
    elif isinstance(w, ast.AugAssign):
        e = w.target
    else:
        e = next((t.value for t in getattr(w, "targets", ()) if isinstance(t, ast.Subscript)),
                 None)
    if isinstance(e, ast.Attribute) and e.attr == "data":
        e = e.value
    return e.value if isinstance(e, ast.Attribute) and e.attr == "grad" else None


def _made_leaf(v: ast.AST | None) -> bool:
    """``t.detach().requires_grad_()``, ``torch.zeros(n, requires_grad=True)``: a plain tensor
    made a leaf here (no ``nn.Parameter``: no module holds it)."""
    if not isinstance(v, ast.Call):
        return False
    if isinstance(v.func, ast.Attribute) and v.func.attr == "requires_grad_" and not v.args:
        return True
    return (dotted(v.func) or "").startswith("torch.") and any(
        k.arg == "requires_grad" and isinstance(k.value, ast.Constant) and k.value.value is True
        for k in v.keywords)


def _outside_clear(w: ast.AST, s: ast.stmt, clear: ast.Call, f: LoopFacts) -> bool:
    """The ``.grad`` written (by ``w`` of statement ``s``) belongs to a name every binding of
    which that can reach ``s`` (above it, or in a loop around it) is a leaf made here, and the cleared optimizer is built in the function from arguments that do
    not hold it, with no ``add_param_group`` of it: the clear leaves that ``.grad`` a tensor
    (UvA's ProtoMAML: ``local_optim`` over ``local_model.parameters()``, its output layer
    ``output_weight = init.detach().requires_grad_()`` updated and refilled by hand)."""
    owner, opt = _owner(w), clear.func.value if isinstance(clear.func, ast.Attribute) else None
    if not isinstance(owner, ast.Name) or not isinstance(opt, ast.Name):
        return False
    loops = f.loops_of(s)
    leaf = [b for b in f.scope.bindings.get(owner.id, ()) if b.line <= s.lineno
            or any(f.inside(b.stmt, lp) for lp in loops)]
    built = f.scope.bindings.get(opt.id, ())
    if not leaf or not all(_made_leaf(b.value) for b in leaf) or not built or not all(
            isinstance(b.value, ast.Call) for b in built):
        return False

    def holds(e: ast.AST) -> bool:
        return any(isinstance(n, ast.Name) and n.id == owner.id for n in ast.walk(e))
    return not any(holds(b.value) for b in built if b.value is not None) and not any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
        and n.func.attr == "add_param_group" and holds(n) for n in walk(f.node))


def _drawn_tested(w: ast.AST, s: ast.stmt, f: LoopFacts) -> bool:
    """The ``.grad`` written belongs to the target of a loop around ``s`` drawn from a
    comprehension that tests a grad (``nans = [(n, p) for n, p in named if p.grad is not
    None and ...]``, then ``for _, p in nans: p.grad[...] = 0``), itself or through the one
    binding of the name it iterates: every element has a ``.grad`` tensor, like a write under
    ``if p.grad is not None`` (var-attn's NaN scrub, after a loss helper's backward)."""
    owner = _owner(w)
    if not isinstance(owner, ast.Name):
        return False
    for lp in f.loops_of(s):
        if not isinstance(lp, (ast.For, ast.AsyncFor)) or not any(
                isinstance(n, ast.Name) and n.id == owner.id for n in ast.walk(lp.target)):
            continue
        it: ast.AST | None = lp.iter
        if isinstance(it, ast.Name):
            bound = [b for b in f.scope.bindings.get(it.id, ()) if b.line <= lp.lineno]
            it = bound[-1].value if len(bound) == 1 else None
        return isinstance(it, (ast.ListComp, ast.GeneratorExp, ast.SetComp)) and any(
            isinstance(n, ast.Attribute) and n.attr == "grad"
            for g in it.generators for c in g.ifs for n in ast.walk(c))
    return False


class GradWrittenAfterZeroGrad(LoopRule):
    """`optimizer.zero_grad()` and then `p.grad.add_(g)` (or `p.grad += g`,
    `p.grad.copy_(g)`) with no `backward()` in between: the `.grad` is None.

    Why: since torch 2.0 `zero_grad()` (of an optimizer or a module) defaults to
    `set_to_none=True`: every `.grad` becomes None, not a tensor of zeros. Code that adds
    hand-computed gradients (hypergradients, a meta-gradient, gradients gathered from
    workers) into `.grad` in place after clearing, or that preallocated `p.grad =
    torch.zeros_like(p)` once and clears it every step, fails with `AttributeError:
    'NoneType' object has no attribute 'add_'` (ssnl/dataset-distillation#61, checked on
    torch 2.13). Clear with `zero_grad(set_to_none=False)`, or assign (`p.grad = g`) instead
    of adding in place.
    Known limits: the write is in the same function (after the clear, or before it in the
    same loop when the loop runs no `backward()`), or in a helper of the file called after the
    clear, before any `backward()` of the helper; a write under a test of a grad
    (`if p.grad is not None`), or to the elements of a comprehension filtered by one, is
    trusted.
    """

    code = "GT553"
    name = "grad-written-after-zero-grad"
    message = ("{head}: the write fails on None (AttributeError, or TypeError for `+=`); "
               "{remedy}")
    head = ("`{clear}` sets every `.grad` to None{default}, and `{write}` (line {line}) then "
            "writes into one in place before any `backward()` gives it a tensor again")
    early = ("`{write}` writes into a `.grad` in place after `{clear}` (line {line}) set every "
             "`.grad` to None{default}, before the `backward()` that gives it a tensor again")
    triggers = ("zero_grad",)
    function_needs = ("zero_grad",)
    examples = [
        Bad("""
            import torch

            def train(params, grads_of, steps):
                opt = torch.optim.SGD(params, lr=0.1)
                for p in params:
                    p.grad = torch.zeros_like(p)
                for _ in range(steps):
                    opt.zero_grad()
                    for p, g in zip(params, grads_of(params)):
                        p.grad.add_(g)
                    opt.step()
            """, at=(8, 8)),
        Good("""
            import torch

            def train(params, grads_of, steps):
                opt = torch.optim.SGD(params, lr=0.1)
                for _ in range(steps):
                    opt.zero_grad()
                    for p, g in zip(params, grads_of(params)):
                        p.grad = g
                    opt.step()
            """),
        Good("""
            import torch

            def train(params, grads_of, steps):
                opt = torch.optim.SGD(params, lr=0.1)
                for p in params:
                    p.grad = torch.zeros_like(p)
                for _ in range(steps):
                    opt.zero_grad(set_to_none=False)
                    for p, g in zip(params, grads_of(params)):
                        p.grad.add_(g)
                    opt.step()
            """),
    ]

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        clears = [z for z in f.zero_grads if _sets_none(z.call)
                  and ctx.analysis.callee(z.call, f.node) is None]  # not a `zero_grad` of the
        if not clears:  # file (DeepSpeed's clears its own fp16 copies)
            return
        refills = [b.stmt for b in f.backwards if b.accumulates] + [
            s for s in f.scope.stmts if _refills(s) or isinstance(s, SIMPLE)
            and _calls_refill(ctx, f.node, s)]
        done: set[int] = set()
        backwards = [b.stmt for b in f.backwards if b.accumulates]
        for z in reversed(clears):  # the clear nearest before the write first
            got = self._first_write(f, ctx, z.stmt, refills, z.call)
            if got is None or id(got[1]) in done:
                continue
            w, s = got
            done.add(id(s))
            clear = ctx.source(z.call)
            default = "" if z.call.args or z.call.keywords else \
                " (`set_to_none=True` is the default)"
            write = " ".join(ctx.source(w).split())[:60]
            if grad_write(s) is not None and any(f.before(s, b) for b in backwards):
                # the write itself is early: a backward of this pass fills `.grad` after it
                yield self.report(w, ctx, related=(related_at(
                    ctx, z.call, "every `.grad` is set to None here"),),
                    head=self.early.format(write=write, clear=clear, line=z.call.lineno,
                                           default=default),
                    remedy="move it after the `backward()`")
                continue
            yield self.report(z.call, ctx, related=(related_at(
                ctx, w, "the `.grad` is written in place here"),),
                head=self.head.format(clear=clear, default=default, write=write,
                                      line=w.lineno),  # type: ignore[attr-defined]
                remedy="clear with `set_to_none=False`, or assign the gradient (`p.grad = g`)")

    @staticmethod
    def _first_write(f: LoopFacts, ctx: Context, clear: ast.stmt, refills: list[ast.stmt],
                     clear_call: ast.Call) -> tuple[ast.AST, ast.stmt] | None:
        """The first in-place ``.grad`` write that runs after ``clear`` with no refill between:
        among the statements of the clear's innermost loop (also before it, on the next pass,
        when the loop refills nothing), or, outside loops, the statements after it up to the
        first refill (linear in the function: NOTE [statement order])."""
        loops = f.loops_of(clear)
        if loops:
            cands = f.within(loops[-1])
            ids = {id(c) for c in cands}
            local = [r for r in refills if id(r) in ids]
            carried = not local
        else:
            stops = {id(r) for r in refills}
            cands = []
            for c in f.scope.stmts:
                if c.lineno > clear.lineno:
                    if id(c) in stops:
                        break
                    cands.append(c)
            local, carried = [], False
        tests = [o for o in cands if isinstance(o, (ast.If, ast.While))
                 and "grad" in f.text(o.test)]
        for s in cands:
            if not isinstance(s, SIMPLE) or s is clear:
                continue
            if f.before(clear, s):
                if any(f.before(clear, r) and f.before(r, s) for r in local):
                    continue
            elif not (carried and f.before(s, clear)):
                continue
            if any(f.inside(s, o) for o in tests):
                continue
            w = grad_write(s)
            if w is not None and (_outside_clear(w, s, clear_call, f) or _drawn_tested(w, s, f)):
                continue
            if w is None:
                for n in walk(s):
                    callee = ctx.analysis.callee(n, f.node) if isinstance(n, ast.Call) \
                        else None
                    if callee is not None and callee is not f.node:
                        w = _helper_write(ctx, callee)
                        if w is not None:
                            break
            if w is not None:
                return w, s
        return None
