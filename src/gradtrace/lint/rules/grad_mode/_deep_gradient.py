"""GT210 one call further: the gradient is taken by a helper of the function the block runs.

# NOTE [gradient reached through the callee]
Grad mode is thread state (NOTE [grad-off extent]): ``with torch.no_grad(): ctrl.validate(b)``
runs ``validate`` and everything it calls with grad off. When ``validate`` does not take a
gradient itself but calls a helper that does (a probe fitted with its own optimizer and
``loss.backward()``, a loss object that caches embedding gradients with ``loss.backward()``
inside its ``forward``, a planner that optimizes a trajectory), the helper's forward records
no graph and its gradient call raises ``element 0 of tensors does not require grad``
(pytorch-facts: grad mode). The finding is on that call inside the function the block runs:
the place that hands grad-off work to a gradient helper, where an ``enable_grad()`` or a
``torch.is_grad_enabled()`` test belongs. The helper differentiates an output it computes
itself, directly or ``MAX_DEPTH`` calls further down, with no guard on a parameter of its
own on the way, under no ``if`` (a flag passed down or a mode kept on ``self`` is not
followed: no fact); a call under a test of ``torch.is_grad_enabled()``, ``requires_grad``,
``.training`` or of a parameter of its function is left alone, and so are
the parts of a function inside its own grad-mode ``with`` or under a grad-mode decorator.
"""
from __future__ import annotations

import ast
from typing import Callable

from gradtrace.lint.analysis.grad_off_calls import _targets, off_list
from gradtrace.lint.context import Context
from gradtrace.lint.grad_modes import grad_mode_of
from gradtrace.lint.names import dotted

Def = ast.FunctionDef | ast.AsyncFunctionDef
MAX_DEPTH = 3
MAX_HOPS = 3  # functions deep into the grad-off extent where the call may stand
# the torch attributes a test reads when the code asks whether a graph is being recorded
# (`torch.is_grad_enabled()`, `module.training`, `t.requires_grad`)
_ASKS = frozenset({"is_grad_enabled", "training", "requires_grad", "is_inference_mode_enabled"})
Own = Callable[[Context, Def, "ast.Call | None", bool], "ast.Call | None"]


def deep_gradient(ctx: Context, owner: ast.AST, where: ast.AST, own: Own,
                  calls: list[ast.Call] | None = None) -> tuple[ast.Call, ast.Call] | None:
    """The first call, breadth first through the functions that the body of ``owner`` (a def
    or a ``with``, run with grad off) runs, whose callee differentiates within ``MAX_DEPTH``
    calls (NOTE [gradient reached through the callee]), with the gradient call; ``own`` is
    GT210's reading of one function's own gradient. The calls of that body itself are GT210's
    direct reading."""
    level: list[Def] = []
    seen: set[int] = set()
    for n in _calls(ctx, owner) if calls is None else calls:
        for fn, _ in _callees(n, where, ctx):
            if _decorated(fn, ctx) or own(ctx, fn, n, False) is not None:
                return None  # GT210's direct reading, or a helper it left alone
            if id(fn) not in seen:
                seen.add(id(fn))
                level.append(fn)
    for _ in range(MAX_HOPS):
        nxt: list[Def] = []
        for fn in level:
            for c in _calls(ctx, fn):
                if _asked(ctx, fn, c):
                    continue
                for g, _ in _callees(c, fn, ctx):
                    if g is fn or _decorated(g, ctx):
                        continue
                    grad = _differentiates(ctx, g, c, own, MAX_DEPTH, {id(fn)})
                    if grad is not None:
                        return c, grad
                    if id(g) not in seen:
                        seen.add(id(g))
                        nxt.append(g)
        level = nxt
    return None


def _callees(call: ast.Call, where: ast.AST, ctx: Context) -> list[tuple[Def, object]]:
    """The functions of the file ``call`` runs (NOTE [grad-off extent]), and a method called
    on an object built in place (``Probe().fit(x)``)."""
    got = _targets(call, where, ctx)
    f = call.func
    if got or not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Call)):
        return got
    k = ctx.analysis.kind_in(f.value, where, call.lineno)
    cls = ctx.analysis.classes.get(k.cls or "") if k is not None else None
    m = cls.methods.get(f.attr) if cls is not None else None
    return [(m, None)] if m is not None else []


def _calls(ctx: Context, owner: ast.AST) -> list[ast.Call]:
    """The calls run with grad off in the body of ``owner`` (a def or a ``with``), in source
    order; once per owner (every region that reaches a helper asks again)."""
    return ctx.memo("gt210-calls", owner, lambda: sorted(
        (n for n in off_list(ctx, owner) if isinstance(n, ast.Call)),
        key=lambda n: (n.lineno, n.col_offset)))


def _decorated(fn: Def, ctx: Context) -> bool:
    return any(grad_mode_of(d, ctx.imports) for d in fn.decorator_list)


def _differentiates(ctx: Context, fn: Def, call: ast.Call, own: Own, depth: int,
                    seen: set[int]) -> ast.Call | None:
    """The gradient call ``fn`` (called by ``call``) reaches with grad left as its caller's."""
    if id(fn) in seen or _decorated(fn, ctx):
        return None
    seen.add(id(fn))
    grad = own(ctx, fn, call, True)
    if grad is not None or depth <= 1:
        return grad
    for c in _calls(ctx, fn):
        if _asked(ctx, fn, c):
            continue
        for g, _ in _callees(c, fn, ctx):
            grad = _differentiates(ctx, g, c, own, depth - 1, seen)
            if grad is not None:
                return grad
    return None


def _asked(ctx: Context, fn: Def, call: ast.Call) -> bool:
    """``call`` stands under an ``if`` (or a conditional expression) of ``fn`` whose test asks
    about grad mode or training (``torch.is_grad_enabled()``, ``x.requires_grad``,
    ``self.training``) or reads a parameter of ``fn`` (a flag its caller may pass)."""
    def make() -> list[tuple[int, int]]:
        out = []
        flags = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)
                 } - {"self", "cls"}
        for n in off_list(ctx, fn):
            if isinstance(n, (ast.If, ast.IfExp, ast.While)) and any(
                    isinstance(x, ast.Attribute) and x.attr in _ASKS
                    or isinstance(x, ast.Name) and x.id in flags
                    for x in ast.walk(n.test)):
                out.append((n.lineno, n.end_lineno or n.lineno))
        return out
    spans = ctx.memo("gt210-asked-spans", fn, make)
    return any(a <= call.lineno <= z for a, z in spans)


def forward_start(ctx: Context, grad: ast.Call) -> ast.stmt | None:
    """# NOTE [gradient taken in a module's forward]
    When the gradient call stands in the ``forward`` of a module class of the file (test-time
    adaptation: few-shot prototypes fine-tuned with their own optimizer and ``loss.backward()``
    inside ``forward``), the module is what every evaluation harness runs under ``no_grad``:
    the line to change is in ``forward``, where its gradient work starts (wrapped in
    ``torch.enable_grad()``, as test-time adaptation libraries do). That line is the earliest
    top-level statement of ``forward`` the statement holding the gradient call depends on,
    read backwards: one that binds or mutates (``x.requires_grad_()``, a method called on it)
    a name or ``self`` attribute read by the statements already taken. None when the gradient
    call is not in such a ``forward``."""
    for info in ctx.analysis.classes.values():
        fwd = info.methods.get("forward") if info.is_module else None
        if fwd is None or not fwd.lineno <= grad.lineno <= (fwd.end_lineno or 0):
            continue
        body = fwd.body
        top = next((i for i, s in enumerate(body)
                    if s.lineno <= grad.lineno <= (s.end_lineno or s.lineno)), None)
        if top is None or not any(n is grad for n in ast.walk(body[top])):
            return None
        deps = _read(body[top])
        first = body[top]
        for s in reversed(body[:top]):
            if _set(s) & deps:
                first = s
                deps |= _read(s)
        return first
    return None


def _read(s: ast.stmt) -> set[str]:
    out = set()
    for n in ast.walk(s):
        if isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Load):
            d = dotted(n)
            if d and d != "self":
                out.add(d)
    return out


def _set(s: ast.stmt) -> set[str]:
    """Names and attribute chains ``s`` binds, or mutates by a method call of its own."""
    if isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = s.targets if isinstance(s, ast.Assign) else [s.target]
        return {d for t in targets for e in ast.walk(t)
                if isinstance(e, (ast.Name, ast.Attribute)) and isinstance(e.ctx, ast.Store)
                and (d := dotted(e))}
    if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) \
            and isinstance(s.value.func, ast.Attribute):
        d = dotted(s.value.func.value)
        return {d} if d and d != "self" else set()
    return set()
