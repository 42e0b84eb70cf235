"""GT523: ``zero_grad()`` on one branch of an ``if`` whose other branch also runs ``backward()``.

# NOTE [clearing on one path]
``if bf16: ...; loss.backward() else: opt.zero_grad(); ...; loss.backward()`` followed by
``opt.step()`` after the ``if``: on the path without the ``zero_grad()`` every step adds its
gradients into the previous step's, and ``step()`` applies the running sum. Said when both
branches run an accumulating ``backward()``, only one clears, a ``step()`` runs after the
``if`` in the same pass, and nothing else in the function clears; when the function is not
itself a loop, a loop of the file must call it without clearing around the call (a step
function whose caller clears is fine).
The other branch may instead build the loss that one accumulating ``backward()`` after the
``if`` backpropagates (EVE's ``if step % k == 0: loss = 10 * mse`` / ``else: opt.zero_grad();
...; loss = neg_elbo``, then ``loss.backward(); opt.step()``): the loss is a name bound on both
branches, the ``if`` has both, the backward and the step follow it in the same block, and the
step is not under an ``if`` of its own (gradient accumulation steps only on some passes).
A call of a function of the file whose own top-level statements clear gradients, and that
neither backpropagates nor steps (``def clear(self): self.opt.zero_grad()``), is a clear too.
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good
from gradtrace.lint.rules.training_loop._base import LoopRule, related_at
from gradtrace.lint.rules.training_loop._loop import LoopFacts
from gradtrace.lint.nodes import bfs_walk, of_types
from gradtrace.lint.analysis.callees import resolve
from gradtrace.lint.analysis.steps import Named


def _branch(f: LoopFacts, s: ast.stmt, stmts: dict[int, ast.stmt]
            ) -> tuple[ast.If, str] | None:
    """The innermost ``if`` holding ``s`` in one of its branches, and that branch's field."""
    path = f.paths.get(id(s))
    for pid, field, _ in reversed(path or ()):
        node = stmts.get(pid)
        if isinstance(node, ast.If) and field in ("body", "orelse"):
            return node, field
    return None


def _in(f: LoopFacts, s: ast.stmt, node: ast.If, field: str) -> bool:
    ps, pn = f.paths.get(id(s)), f.paths.get(id(node))
    return ps is not None and pn is not None and len(ps) > len(pn) and \
        ps[:len(pn)] == pn and ps[len(pn)][:2] == (id(node), field)


def _after_both(f: LoopFacts, node: ast.If, field: str, other: str, step) -> object | None:
    """The accumulating backward after ``node`` (in its block) of a loss bound on both of its
    branches, with ``step`` after it and in the same block (NOTE [clearing on one path])."""
    if not node.orelse or any(_in(f, b.stmt, node, field) or _in(f, b.stmt, node, other)
                              for b in f.backwards):
        return None
    if not _same_block(f, node, step.stmt):
        return None  # the step is not in the `if`'s own block
    for b in f.backwards:
        recv = b.call.func.value if isinstance(b.call.func, ast.Attribute) else None
        if not b.accumulates or not isinstance(recv, ast.Name) or not _same_block(
                f, node, b.stmt) or not f.before(node, b.stmt) or not f.before(b.stmt, step.stmt):
            continue
        if all(any(isinstance(s, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == recv.id for t in s.targets)
                for st in getattr(node, part) for s in ast.walk(st))
                for part in ("body", "orelse")):
            return b
    return None


def _same_block(f: LoopFacts, a: ast.stmt, b: ast.stmt) -> bool:
    pa, pb = f.paths.get(id(a)), f.paths.get(id(b))
    return pa is not None and pb is not None and pa[:-1] == pb[:-1] and \
        pa[-1][:2] == pb[-1][:2]


FUNCTION_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
CALLS = (ast.Call,)


def _clearing_helpers(ctx: Context) -> frozenset[int]:
    """The functions of the file whose own body clears gradients as a statement at its top
    (``def clear(self): self.opt.zero_grad()``) and that neither backpropagate nor step."""
    def make() -> frozenset[int]:
        out = set()  # a set: the file's type index, in any order, not a walk of every node
        for fn in of_types(ctx.tree, FUNCTION_DEFS):
            if any(isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and isinstance(
                    s.value.func, ast.Attribute) and s.value.func.attr == "zero_grad"
                    for s in fn.body) and not any(
                    isinstance(c.func, ast.Attribute) and c.func.attr in ("backward", "step")
                    for c in of_types(fn, CALLS)):
                out.add(id(fn))
        return frozenset(out)
    return ctx.memo("gt523-clearing-helpers", ctx.tree, make)


def _helper_clears(f: LoopFacts, ctx: Context) -> list[Named]:
    """Statements calling a clearing helper of the file (NOTE [clearing on one path])."""
    helpers = _clearing_helpers(ctx)
    if not helpers:
        return []
    out = []
    for s in f.scope.stmts:
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and isinstance(
                s.value.func, (ast.Name, ast.Attribute)):
            got = resolve(ctx, f.node, s.value)
            if got is not None and id(got[0]) in helpers:
                out.append(Named(s.value, s, ctx.source(s.value.func)))
    return out


def _caller_clears(ctx: Context, name: str) -> bool:
    """Whether every loop of the file calling ``name`` also clears gradients (True when no
    loop of the file calls it: its callers are unknown)."""
    loops = [n for n in bfs_walk(ctx.tree) if isinstance(n, (ast.For, ast.While))]
    calling = [lp for lp in loops if any(
        isinstance(c, ast.Call) and (getattr(c.func, "id", None) == name
                                     or getattr(c.func, "attr", None) == name)
        for c in bfs_walk(lp))]
    return not calling or any("zero_grad" in ctx.source(lp) for lp in calling)


class ZeroGradOnOneBranch(LoopRule):
    """`zero_grad()` runs on one branch of an `if` whose other branch also runs `backward()`,
    and `step()` runs after the `if` on both paths.

    Why: on the path that does not clear, each `backward()` adds into the gradients of the
    previous step, and `step()` applies the growing sum: training on that path (a bf16 or AMP
    flag, a model type) silently diverges from the other (facebookresearch/nwm train loop).
    Clear once, before the `if`.
    The same when each branch builds the loss and one `backward()` after the `if` runs it
    (NOTE [clearing on one path]).
    Known limits: both branches must call `backward()` in the function itself, or bind the
    loss that a backward after the `if` runs; a step function that a loop of the file calls
    with a `zero_grad()` around it is not reported.
    """

    code = "GT523"
    gate_statements = True
    name = "zero-grad-on-one-branch"
    message = ("`{call}` runs only on this branch of the `if`: {other} "
               "and `step()` follows on both paths, so there gradients add up "
               "across steps; clear them once, before the `if`")
    triggers = ("zero_grad",)
    statement_triggers = ("backward",)  # the clear may be a helper's (NOTE [clearing on one path])
    function_needs = ("backward", "step")
    examples = [
        Bad("""
            def fit(model, opt, batches, use_amp, scaler):
                for x, y in batches:
                    if use_amp:
                        opt.zero_grad()
                        scaler.scale(model(x, y)).backward()
                    else:
                        model(x, y).backward()
                    opt.step()
            """, at=(4, 12)),
        Bad("""
            def fit(model, opt, batches, probe, every):
                for i, (x, y) in enumerate(batches):
                    if i % every == 0:
                        loss = probe(model.encode(x)).sub(y).pow(2).mean()
                    else:
                        opt.zero_grad()
                        loss = model(x, y)
                    loss.backward()
                    opt.step()
            """, at=(6, 12)),
        Good("""
            def fit(model, opt, batches, probe, every):
                for i, (x, y) in enumerate(batches):
                    if i % every == 0:
                        opt.zero_grad()
                        loss = probe(model.encode(x)).sub(y).pow(2).mean()
                    else:
                        opt.zero_grad()
                        loss = model(x, y)
                    loss.backward()
                    opt.step()
                for i, (x, y) in enumerate(batches):
                    if i % every == 0:
                        loss = model(x, y) / every
                    else:
                        opt.zero_grad()
                        loss = model(x, y) / every
                    loss.backward()
                    if (i + 1) % every == 0:
                        opt.step()
            """),
        Good("""
            def fit(model, opt, batches, use_amp, scaler, accum):
                for i, (x, y) in enumerate(batches):
                    if use_amp:
                        opt.zero_grad()
                        scaler.scale(model(x, y)).backward()
                    else:
                        opt.zero_grad()
                        model(x, y).backward()
                    opt.step()
                for i, (x, y) in enumerate(batches):
                    if i % accum == 0:
                        opt.zero_grad()
                    model(x, y).backward()
                    if (i + 1) % accum == 0:
                        opt.step()
            """),
    ]

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        # (NOTE [clearing on one path])
        clears = list(f.zero_grads) + _helper_clears(f, ctx)
        if not clears or len(clears) > 2:
            return
        stmts = {id(s): s for s in f.scope.stmts}
        stmts[id(f.node)] = f.node  # type: ignore[assignment]
        for z in clears:
            got = _branch(f, z.stmt, stmts)
            if got is None:
                continue
            node, field = got
            other = "orelse" if field == "body" else "body"
            if any(not _in(f, o.stmt, node, field) for o in clears):
                continue  # cleared elsewhere too
            mine = [b for b in f.backwards if b.accumulates and _in(f, b.stmt, node, field)]
            theirs = [b for b in f.backwards if b.accumulates and _in(f, b.stmt, node, other)]
            step = next((s for s in f.steps if f.before(node, s.stmt)), None)
            if step is None:
                continue
            said = "the other branch also calls `backward()`"
            if not mine or not theirs:
                after = _after_both(f, node, field, other, step)
                if after is None:
                    continue
                mine, theirs = [after], [after]
                said = (f"the other branch builds the loss that `{ctx.source(after.call)}` "
                        "after the `if` also backpropagates,")
            if not f.loops_of(node) and (not isinstance(
                    f.node, (ast.FunctionDef, ast.AsyncFunctionDef))
                    or _caller_clears(ctx, f.node.name)):
                continue
            yield self.report(z.call, ctx, related=(
                related_at(ctx, theirs[0].call, "this path runs backward() without clearing"),
                related_at(ctx, step.call, "and steps here with the summed gradients")),
                call=ctx.source(z.call), other=said)
            return
