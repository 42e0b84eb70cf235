"""The discriminator call of a GAN step made inside a loss helper, of this file or another.

# NOTE [GAN losses in helpers]
``discriminator_loss(D, real, fake).backward()`` then ``generator_loss(D, fake).backward()``,
with ``fake = G(z)``: the two losses are built by two helpers that run no ``backward()``
themselves (``losses.py``: ``real_logits = D(real); fake_logits = D(fake); ...``). The caller's
graph facts see only two different callees consuming ``fake``; the discriminator's call is
inside the helpers. :func:`loss_helper_gan` maps each helper's parameters to the names the
caller hands them (NOTE [GAN steps in helpers]'s argument map) and reads the calls a helper
makes of one parameter on another (``D(fake)``): the parameter the caller hands ``D`` scores
the shared generator output in both helpers and something else (the real batch) in one of them
only: that helper's ``D(fake)`` is the discriminator's undetached call, the root line. A helper
that rebinds the parameter (``fake = fake.detach()``), passes it through anything but the bare
name, or runs ``backward()`` itself (a step helper: NOTE [GAN steps in helpers]) is left out.
Helpers of another file of the project are read through the project index
(NOTE [project index]); the finding is then at the caller's call of that helper, naming the
other file's line.
"""
from __future__ import annotations

import ast
from dataclasses import replace
from typing import TYPE_CHECKING, Iterator, NamedTuple

from gradtrace.findings import Finding, Related

from gradtrace.lint.analysis.graph_deps import Deps
from gradtrace.lint.analysis.owners import home, shown_path
from gradtrace.lint.analysis.project import foreign_callee
from gradtrace.lint.analysis.reach import called_function
from gradtrace.lint.flow import Binding
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.training_loop._base import related_at
from gradtrace.lint.rules.training_loop._gan import _arg_map

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope
    from gradtrace.lint.rule import Rule
    from gradtrace.lint.rules.training_loop._loop import Backward

FUNCTION_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef)


class LossGan(NamedTuple):
    """The discriminator's undetached call inside a loss helper."""

    home: Context           # the helper's file
    call: ast.Call          # `D(fake)` in the helper
    caller: ast.Call        # the caller's call of that helper
    helper: str             # its name
    param: str              # the helper's parameter spelling the fake


def loss_helper_gan(ctx: Context, scope: Scope, t: Binding, d1: Deps, d2: Deps
                    ) -> LossGan | None:
    """NOTE [GAN losses in helpers]: the two losses consume ``t`` through two helpers."""
    c1s = [c for _, a, c in d1.consumers if a == t.name]
    c2s = [c for _, a, c in d2.consumers if a == t.name]
    for c1 in c1s:
        h1 = _helper(ctx, scope, c1)
        for c2 in c2s:
            h2 = _helper(ctx, scope, c2) if h1 is not None and c2 is not c1 else None
            if h2 is None or h2[1] is h1[1]:  # type: ignore[index]
                continue
            s1, s2 = _scores(h1, c1, t.name), _scores(h2, c2, t.name)
            for disc in sorted(s1.keys() & s2.keys()):
                (call1, real1), (call2, real2) = s1[disc], s2[disc]
                if real1 != real2:
                    (hctx, fn), call, caller = (h1, call1, c1) if real1 else (h2, call2, c2)
                    return LossGan(hctx, call, caller, fn.name, call.args[0].id)  # type: ignore
    return None


def _helper(ctx: Context, scope: Scope, call: ast.Call
            ) -> tuple[Context, ast.FunctionDef | ast.AsyncFunctionDef] | None:
    fn = called_function(call, scope, call.lineno) or foreign_callee(
        ctx, call, scope, call.lineno)
    if not isinstance(fn, FUNCTION_TYPES):
        return None
    if any(isinstance(n, ast.Attribute) and n.attr == "backward" for n in walk(fn)):
        return None  # a step helper (NOTE [GAN steps in helpers])
    return home(ctx, fn), fn


def _scores(h: tuple[Context, ast.AST], caller: ast.Call, shared: str
            ) -> dict[str, tuple[ast.Call | None, bool]]:
    """For each name the caller hands a parameter the helper calls on another parameter:
    (its call on the parameter bound to ``shared``, whether it is also called on another
    one)."""
    _, fn = h
    names = {p: n for n, p in _arg_map(caller, fn).items()}
    params = set(names)
    rebound = {t.id for n in walk(fn) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
               for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
               if isinstance(t, ast.Name)}
    out: dict[str, tuple[ast.Call | None, bool]] = {}
    for n in walk(fn):
        if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in params
                and len(n.args) == 1 and isinstance(n.args[0], ast.Name)
                and n.args[0].id in params and n.func.id not in rebound
                and n.args[0].id not in rebound):
            continue
        disc, arg = names[n.func.id], names[n.args[0].id]
        call, real = out.get(disc, (None, False))
        if arg == shared:
            call = call or n
        else:
            real = True
        out[disc] = (call, real)
    return {d: (c, r) for d, (c, r) in out.items() if c is not None}


def loss_helper_finding(rule: Rule, scope: Scope, b1: Backward, b2: Backward, t: Binding,
                        d1: Deps, d2: Deps, ctx: Context) -> Iterator[Finding]:
    """GT508 at the helper's ``D(fake)`` (this file), or at the call of the helper naming that
    line (another file's): NOTE [GAN losses in helpers]."""
    g = loss_helper_gan(ctx, scope, t, d1, d2)
    if g is None:
        return
    seen: set[int] = ctx.memo("gt508-loss-helpers", ctx.tree, set)
    here = g.home is ctx
    at = g.call if here else g.caller
    if id(at) in seen:
        return
    seen.add(id(at))
    path = shown_path(g.home.path, ctx.path)
    disc = g.home.source(g.call.func)
    related = [related_at(ctx, t.stmt, f"`{t.name}` is made by the generator here"),
               related_at(ctx, b1.call, "this backward frees the generator's graph"),
               related_at(ctx, b2.call, "this backward needs it again")]
    if not here:
        related.insert(0, Related(path, g.call.lineno, f"`{g.helper}` feeds `{g.param}` to "
                                  f"`{disc}` here without `.detach()`", g.home.column(g.call)))
    other = "the discriminator step frees it first" if g.caller.lineno <= b1.call.lineno \
        else "the generator step already freed that graph"
    f = rule.report(at, ctx, related=related, fake=g.param if here else t.name, disc=disc,
                    first_line=b1.call.lineno, second_line=b2.call.lineno, other=other)
    if not here:
        f = replace(f, message=f.message.replace(
            "the discriminator step feeds", f"the discriminator loss `{g.helper}` "
            f"({path}:{g.call.lineno}) feeds", 1).replace(
            f"use `{disc}({t.name}.detach())` here", f"use `{disc}({g.param}.detach())` there"))
    yield f
