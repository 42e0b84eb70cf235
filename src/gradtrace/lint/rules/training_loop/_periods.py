"""Shapes of gradient accumulation besides a remainder's ``if`` (NOTE [periodic step]): a
counted step (NOTE [counted step]) and a loop of micro-steps (NOTE [micro-step loop]); and
where a statement sits relative to a loop's ``if``s."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.lint.analysis.grad_values import is_parameter
from gradtrace.lint.analysis.graph_deps import graphs
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.training_loop._loop import Backward, LoopFacts, Step
from gradtrace.lint.rules.training_loop.zero_grad import covers


def conditional(f: LoopFacts, stmt: ast.stmt, loop: ast.stmt) -> bool:
    """``stmt`` sits under an ``if`` (or an ``except``) inside ``loop``."""
    return any(isinstance(s, (ast.If, ast.Try)) and s is not stmt and f.inside(stmt, s)
               and f.inside(s, loop) and not (isinstance(s, ast.Try) and any(
                   x is stmt or _within(x, stmt) for x in s.body))
               for s in f.within(loop))


def _within(outer: ast.stmt, stmt: ast.stmt) -> bool:
    return any(n is stmt for n in walk(outer))


def _targets(st: ast.stmt) -> list[str]:
    """Dotted names a statement binds (``a, self.n = ...``, ``n += k``)."""
    if isinstance(st, ast.Assign):
        tops = st.targets
    elif isinstance(st, (ast.AugAssign, ast.AnnAssign)):
        tops = [st.target]
    else:
        return []
    return [d for t in tops for n in walk(t) if (d := dotted(n)) and isinstance(
        n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Store)]


def counted(f: LoopFacts, guard: ast.If, loop: ast.stmt) -> bool:
    """# NOTE [counted step]
    The guard's test compares a count with a bound (``if seen >= 128:``,
    ``if ni - last_step >= accumulate:``) and its body resets the count (``seen = 0``,
    ``last_step = ni``), while the count grows on every pass outside the guard (``seen +=
    len(x)``) or is measured from a value bound anew each pass: the guard holds once every
    few passes, a periodic step like a remainder's (NOTE [periodic step]). The bound must not
    change inside the loop (``if loss < best: best = loss`` is a comparison with a value, not
    a count)."""
    t = guard.test
    if not (isinstance(t, ast.Compare) and len(t.ops) == 1
            and isinstance(t.ops[0], (ast.GtE, ast.Gt))):
        return False
    left = {d for n in walk(t.left) if isinstance(n, (ast.Name, ast.Attribute))
            and (d := dotted(n))}
    bound = {d for n in walk(t.comparators[0]) if isinstance(n, (ast.Name, ast.Attribute))
             and (d := dotted(n))}
    reset: set[str] = set()
    grows: set[str] = set()
    per_pass: set[str] = set()
    for st in f.within(loop):
        names = _targets(st)
        if st is loop:
            tgt = getattr(loop, "target", None)
            per_pass |= {d for n in walk(tgt) if (d := dotted(n))} if tgt is not None else set()
            continue
        if bound & set(names):
            return False
        if f.inside(st, guard):
            if isinstance(st, ast.Assign):
                reset |= set(names) & left
        elif isinstance(st, ast.AugAssign) and isinstance(st.op, ast.Add):
            grows |= set(names) & left
        elif isinstance(st, ast.Assign):
            per_pass |= set(names) & left
    return bool(reset) and bool(grows & reset or per_pass - reset)


def micro_step_loops(f: LoopFacts) -> Iterator[tuple[Step, ast.stmt, str]]:
    """# NOTE [micro-step loop]
    (step, inner loop, its count) for ``for _ in range(n): ... loss.backward()`` followed, in
    the enclosing loop, by the step and a clear of what it steps (nanoGPT's ``for micro_step
    in range(gradient_accumulation_steps)``): each step applies the sum of ``n``
    micro-batches' gradients. Said only when the inner loop's body runs its backward on every
    pass and neither steps nor clears, its loss does not read the inner loop's variable
    (micro-batches drawn alike, not ``n`` distinct tasks or views) and ``n`` is a name, not a
    constant or a length."""
    seen: set[int] = set()
    for s in f.steps:
        if s.closure:
            continue
        loops = f.loops_of(s.stmt)
        # the step's loop, or the function (one pass of its caller's loop, NOTE [pass function])
        outer = loops[-1] if loops else None
        for inner in f.within(outer) if outer is not None else f.scope.stmts:
            if not (isinstance(inner, ast.For) and inner is not outer
                    and f.loops_of(inner) == loops and f.before(inner, s.stmt)):
                continue
            it = inner.iter
            if not (isinstance(it, ast.Call) and dotted(it.func) == "range"
                    and len(it.args) == 1 and isinstance(it.args[0], (ast.Name, ast.Attribute))
                    and (count := dotted(it.args[0]))):
                continue
            if id(inner) in seen or any(f.inside(x.stmt, inner)
                                        for x in (*f.steps, *f.zero_grads)):
                continue  # said; or it steps (clears) itself: whole updates, a GAN's critic
            backs = [b for b in f.backwards if b.accumulates and f.inside(b.stmt, inner)]
            if not backs or any(conditional(f, b.stmt, inner) for b in backs):
                continue
            var = {n.id for n in walk(inner.target) if isinstance(n, ast.Name)}
            if any(b.loss is None or _reads(f, b, inner, var) for b in backs):
                continue
            if not any(covers(f, z, s) and f.loops_of(z.stmt) == loops
                       and not _guarded(f, z.stmt, outer) for z in f.zero_grads):
                continue
            seen.add(id(inner))
            yield s, inner, count
            break


def _guarded(f: LoopFacts, stmt: ast.stmt, outer: ast.stmt | None) -> bool:
    """``stmt`` sits under an ``if`` (or ``try``) of ``outer`` (of the function: None)."""
    if outer is not None:
        return conditional(f, stmt, outer)
    return any(isinstance(x, (ast.If, ast.Try)) and x is not stmt and f.inside(stmt, x)
               for x in f.scope.stmts)


def _reads(f: LoopFacts, b: Backward, loop: ast.stmt, names: set[str]) -> bool:
    """The loss of ``b``, or a binding it is computed from inside ``loop``, reads ``names``."""
    loss: ast.expr = b.loss  # type: ignore[assignment]
    if any(isinstance(n, ast.Name) and n.id in names for n in walk(loss)):
        return True
    deps = graphs(f.scope).deps(loss, b.stmt.lineno)
    return any(f.inside(d.stmt, loop) and any(
        isinstance(n, ast.Name) and n.id in names and isinstance(n.ctx, ast.Load)
        for n in walk(d.stmt)) for d in deps.bindings)


def _remainders(test: ast.AST) -> list[ast.BinOp]:
    return [n for n in walk(test) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod)
            and not (isinstance(n.left, ast.Constant) and isinstance(n.left.value, str))]


def guard_remainders(f: LoopFacts, guard: ast.If, loop: ast.stmt) -> list[ast.BinOp]:
    """The remainders ``guard``'s test takes (``i % n``), or those of a name it reads that is
    bound inside ``loop`` before it (``do_step = (i + 1) % n == 0``)."""
    mods = _remainders(guard.test)
    for n in walk(guard.test):
        if isinstance(n, ast.Name) and not mods:
            b = f.scope.binding_before(n.id, guard.lineno)
            if b is not None and b.value is not None and f.inside(b.stmt, loop):
                mods = _remainders(b.value)
    return mods


def most_passes(f: LoopFacts, guard: ast.If, loop: ast.stmt) -> bool:
    """# NOTE [all but every n-th pass]
    ``if i % n_critic != 0:`` (``> 0``, or the bare remainder ``if i % n:``), directly or
    through a name bound in ``loop`` before it: the guard holds on every pass but one in ``n``,
    a step under it is skipped now and then (a GAN's critic left out every n-th pass), not
    taken once every ``n`` passes: no micro-batches wait for it to add up
    (NOTE [periodic step] reads only the opposite test)."""
    t = guard.test
    if isinstance(t, ast.Name):
        b = f.scope.binding_before(t.id, guard.lineno)
        t = b.value if b is not None and b.value is not None and f.inside(b.stmt, loop) else t
    if isinstance(t, ast.BinOp):
        return isinstance(t.op, ast.Mod) and bool(_remainders(t))
    return isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(
        t.ops[0], (ast.NotEq, ast.Gt)) and isinstance(t.left, ast.BinOp) and isinstance(
        t.left.op, ast.Mod) and isinstance(c := t.comparators[0], ast.Constant) and c.value == 0


def _period_one(f: LoopFacts, mod: ast.BinOp) -> bool:
    """The divisor is the constant 1 (``% 1``, a name bound once to 1, or the entry under a
    constant key of a dict literal bound once and never written by key): the guard holds on
    every pass, so the step is not periodic. A parameter of the function is bound by its
    caller too: ``accumulate = 1`` in a warm-up branch does not make ``accumulate`` 1."""
    d, key = mod.right, None
    if isinstance(d, ast.Subscript) and isinstance(d.slice, ast.Constant):
        d, key = d.value, d.slice.value
    if isinstance(d, ast.Name):
        bound = f.scope.bindings.get(d.id, [])
        if len(bound) != 1 or bound[0].value is None or is_parameter(f.node, d.id):
            return False
        d = bound[0].value
        if key is not None:
            name = mod.right.value.id  # type: ignore[attr-defined]
            if not isinstance(d, ast.Dict) or any(
                    isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store)
                    and isinstance(n.value, ast.Name) and n.value.id == name
                    for n in walk(f.scope.node)):
                return False
            d = next((v for k, v in zip(d.keys, d.values)
                      if isinstance(k, ast.Constant) and k.value == key), None)
    elif key is not None:
        return False
    return isinstance(d, ast.Constant) and type(d.value) is int and d.value == 1


def skip_guard(f: LoopFacts, s: Step, loop: ast.stmt) -> ast.If | None:
    """# NOTE [skipped passes]
    ``if global_step % accum != 0: continue`` before the step, in the step's own loop (ReLoRA's
    and several pre-training scripts' loops): the statements after that ``if`` run only on the
    passes it does not skip, every few passes, as if they sat under the opposite test
    (NOTE [periodic step]). The ``if`` (no ``else``, its body ending in ``continue``, not under
    another ``if`` or loop of ``loop``) must take a remainder that is not 1, directly or through
    a name bound in the loop, and come before the step in the loop's body; the step must not be
    under it. Returns that ``if``."""
    for x in f.within(loop):
        if not (isinstance(x, ast.If) and x is not loop and not x.orelse and x.body
                and isinstance(x.body[-1], ast.Continue) and f.loops_of(x)
                and f.loops_of(x)[-1] is loop and f.loops_of(s.stmt)
                and f.loops_of(s.stmt)[-1] is loop and not f.inside(s.stmt, x)
                and f.before(x, s.stmt) and not conditional(f, x, loop)):
            continue
        mods = guard_remainders(f, x, loop)
        if mods and not all(_period_one(f, m) for m in mods):
            return x
    return None
