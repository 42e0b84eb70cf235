"""The discriminator call of a GAN step, in one function or across the file's step helpers.

# NOTE [GAN steps in helpers]
The discriminator and generator steps often live in two helpers of the file
(``d_step(real, fake)``, ``self.train_generator(fake)``) called one after the other with the
same generator output. Each helper alone is an ordinary step; the bug is in the pair: the
first helper's ``backward()`` runs through the generator's graph and frees it, and the second
needs it again. :func:`helper_pairs` reads the caller: two calls, in one pass, of two different
functions of the file that each run ``backward()``, handed the same graph-carrying name (the
same argument position may differ: each is mapped to its own parameter); inside the helpers the
parameters take the place of the shared name in :func:`gan_call`, which finds the
discriminator's call exactly as for one function (the callee that scores the parameter in both
losses and something else, the real batch, in one of them only). A helper that rebinds the
parameter first (``fake = fake.detach()``) is not read as handed the graph.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Sequence

from gradtrace.lint.analysis.cut_inputs import bound_param
from gradtrace.lint.analysis.graph_deps import Deps, graphs
from gradtrace.lint.analysis.reach import called_function
from gradtrace.lint.analysis.steps import Backward
from gradtrace.lint.flow import Binding
from gradtrace.lint.nodes import function_scopes
from gradtrace.lint.rules.training_loop._base import function_text, needs_met
from gradtrace.lint.rules.training_loop._loop import LoopFacts, facts

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

FUNCTION_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef)


def step_mates(f: LoopFacts, b: Backward) -> list[Deps]:
    """The deps of the other backward passes of ``b``'s optimizer step: those that run before
    ``b`` with no optimizer step in between (``errD_real.backward()`` before
    ``errD_fake.backward()``, then ``optimizerD.step()``)."""
    g = graphs(f.scope)
    return [g.deps(b0.loss, b0.stmt.lineno) for b0 in f.backwards  # type: ignore[arg-type]
            if b0 is not b and b0.loss is not None and f.before(b0.stmt, b.stmt)
            and not any(f.before(b0.stmt, s.stmt) and f.before(s.stmt, b.stmt)
                        for s in f.steps)]


def gan_call(name1: str, name2: str, d1: Deps, d2: Deps, mates1: Sequence[Deps] = (),
             mates2: Sequence[Deps] = ()) -> ast.Call | None:
    """``D(fake)`` in the *discriminator* loss, when one callee consumes the fake (spelled
    ``name1`` in the first loss, ``name2`` in the second) in both losses and also consumes
    something else (the real batch) in exactly one of the two steps (that loss, or another
    backward of the same optimizer step: ``mates``)."""
    both = {c for c, a, _ in d1.consumers if a == name1} & \
        {c for c, a, _ in d2.consumers if a == name2}
    for disc in sorted(both):
        real1 = any(c == disc and a != name1 for d in (d1, *mates1) for c, a, _ in d.consumers)
        real2 = any(c == disc and a != name2 for d in (d2, *mates2) for c, a, _ in d.consumers)
        if real1 != real2:
            deps, name = (d1, name1) if real1 else (d2, name2)
            return next(call for c, a, call in deps.consumers if c == disc and a == name)
    return None


@dataclass(frozen=True)
class HelperPair:
    """Two step helpers handed one graph-carrying value; ``call`` is the discriminator's."""

    shared: Binding         # the caller's binding of the generator output
    call: ast.Call          # `D(fake)` inside the discriminator helper
    first: Backward         # the backward of the helper called first (frees the graph)
    second: Backward        # the backward of the helper called second
    disc_first: bool        # the discriminator helper is the one called first


def helper_pairs(ctx: Context, node: ast.AST) -> Iterator[HelperPair]:
    """GAN steps split over two helpers of the file (NOTE [GAN steps in helpers]), called by
    the function ``node`` (or the script body)."""
    names, called = _step_helpers(ctx)
    if called is None or len(set(called.findall(function_text(ctx, node)))) < 2:
        return
    f = facts(ctx, node)
    calls: list[tuple[ast.stmt, ast.Call, ast.AST]] = []
    for s in f.scope.stmts:
        v = s.value if isinstance(s, (ast.Expr, ast.Assign)) else None
        if isinstance(v, ast.Call) and isinstance(v.func, (ast.Name, ast.Attribute)):
            fn = called_function(v, f.scope, s.lineno)
            if isinstance(fn, FUNCTION_TYPES) and fn.name in names:
                calls.append((s, v, fn))
    g = graphs(f.scope)
    for i, (s1, c1, fn1) in enumerate(calls):
        for s2, c2, fn2 in calls[i + 1:]:
            if fn2 is fn1 or not f.before(s1, s2):
                continue
            for name, p1, p2 in _shared_args(c1, fn1, c2, fn2):
                bs = f.scope.bindings_before(name, s1.lineno)
                if not bs or f.scope.bindings_before(name, s2.lineno)[-1] is not bs[-1] \
                        or not g.carries(bs[-1]):
                    continue  # (made anew between the two calls: a fresh graph)
                got = _pair(ctx, fn1, p1, fn2, p2)
                if got is not None:
                    yield HelperPair(bs[-1], *got)
                    return


def _step_helpers(ctx: Context) -> tuple[frozenset[str], re.Pattern[str] | None]:
    """Names of the file's functions whose code calls ``backward``, and a pattern finding
    calls of them (None for fewer than two); once per file."""
    def build() -> tuple[frozenset[str], re.Pattern[str] | None]:
        names = frozenset(fn.name for fn in function_scopes(ctx.tree)
                          if isinstance(fn, FUNCTION_TYPES) and needs_met(ctx, fn, ("backward",)))
        if len(names) < 2:
            return names, None
        alts = "|".join(sorted(map(re.escape, names)))
        return names, re.compile(rf"\b({alts})\s*\(")
    return ctx.memo("gt508-step-helpers", ctx.tree, build)


def _shared_args(c1: ast.Call, fn1: ast.AST, c2: ast.Call, fn2: ast.AST
                 ) -> Iterator[tuple[str, str, str]]:
    """(caller's name, parameter of fn1, parameter of fn2) for each plain name both calls
    pass."""
    m1, m2 = _arg_map(c1, fn1), _arg_map(c2, fn2)
    for name, p1 in m1.items():
        if name in m2:
            yield name, p1, m2[name]


def _arg_map(call: ast.Call, fn: ast.AST) -> dict[str, str]:
    """Each plain name ``call`` passes, with the parameter of ``fn`` it binds."""
    out: dict[str, str] = {}
    for x in (*call.args, *(k.value for k in call.keywords)):
        p = bound_param(fn, call, x) if isinstance(x, ast.Name) else None  # type: ignore[arg-type]
        if p is not None:
            out.setdefault(x.id, p)  # type: ignore[attr-defined]
    return out


def _pair(ctx: Context, fn1: ast.AST, p1: str, fn2: ast.AST, p2: str
          ) -> tuple[ast.Call, Backward, Backward, bool] | None:
    f1, f2 = facts(ctx, fn1), facts(ctx, fn2)
    if _rebound(f1, p1) or _rebound(f2, p2):
        return None
    g1, g2 = graphs(f1.scope), graphs(f2.scope)
    for b1 in f1.backwards:
        if b1.loss is None or b1.retains or not b1.accumulates:
            continue
        d1 = g1.deps(b1.loss, b1.stmt.lineno)
        for b2 in f2.backwards:
            if b2.loss is None:
                continue
            d2 = g2.deps(b2.loss, b2.stmt.lineno)
            call = gan_call(p1, p2, d1, d2, step_mates(f1, b1), step_mates(f2, b2))
            if call is not None:
                return call, b1, b2, any(call is c for _, _, c in d1.consumers)
    return None


def _rebound(f: LoopFacts, param: str) -> bool:
    """The helper assigns its parameter (``fake = fake.detach()``): not the caller's graph."""
    return bool(f.scope.bindings.get(param))
