"""A step that applies, besides its own loss's gradient, one another optimizer already applied.

# NOTE [another optimizer's gradient applied again]
Two optimizers over two models (a GAN's generator and discriminator, an actor and its critics),
each stepped after its own loss's backward(). A loss that runs through both models (the
generator's loss through the discriminator, the policy's loss through the Q networks) also adds
its gradient into the other model's ``.grad``. When that other model's gradients are not cleared
between that backward() and its own step, its step applies its own loss's gradient plus the
other loss's: nothing fails, the other model follows a loss that is not its own. The run sees
it with NOTE [step before backward]'s representative parameter: per optimizer, the backward()
calls that changed its gradient since its last step (each call counted once, the gradient
unchanged since the last of them and not all zeros at the next backward() start, so no clear
in between). At a step of optimizer D, the steps of other optimizers since D's last step are
compared: an optimizer E that applied some of D's backward() calls, while D also holds one E
did not apply (its own loss), means E's loss leaked into D's step. Not reported: two
optimizers that share a parameter (the static GT406, and NOTE [one gradient, two steps]), an
optimizer whose gradients are never cleared between its steps (GT501 says so), one joint
backward() that both optimizers step (D holds nothing E did not apply), plain accumulation
(no other optimizer stepped), a leaking loss whose gradients D clears before its own
backward() (the usual GAN loop), a model frozen or detached
from the other loss (its gradient does not change). The line named: when the leaked backward()
ran before D's own one, D's ``zero_grad()`` in the block of D's step (the first after it,
else the last before it): it clears before the other loss, not after it (Lightning's old loop);
otherwise (the leak comes after D's own backward(), so no clear can separate them) the
backward() of the leaking loss, whose graph should not reach D's parameters.
Cost: a dict read per optimizer per backward() end and per step; with two optimizers or more,
one ``any()`` of one gradient per optimizer per backward() start; one dict read per module call
with grad on (``HookState._pre``; the dict stays empty until a leak is seen).
"""
from __future__ import annotations

import ast
from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make, src
from gradtrace.runtime.frames import Site

_RECENT = 16  # steps remembered: (id(rec), rec.steps, the backward() calls it applied)


def note_graded(order: Any, rec: Any, fresh: bool, count: int, site: Site) -> None:
    """At a backward() end that changed ``rec``'s gradient (``fresh``: a new window)."""
    got = order.inst.get(id(rec))
    calls = [] if fresh or got is None or got[0] != rec.steps else got[1]
    if len(calls) < 64:
        calls.append((count, site))
    order.inst[id(rec)] = (rec.steps, calls)


def cleared_unseen(order: Any, rec: Any, p: Any) -> None:
    """At a backward() start, ``rec``'s gradient is the same tensor at the same version as
    after the last backward() that changed it: zeroed through ``.data`` (no version bump) when
    it is all zeros; its window of backward() calls starts again."""
    if id(rec) in order.inst and p.grad is not None and not bool(p.grad.any()):
        del order.inst[id(rec)]


def note_step(state: Any, rec: Any, calls: list[tuple[int, Site]]) -> None:
    """At ``rec``'s step: ``calls``, the backward() calls its gradients hold (from
    ``loop_order.step_window``); compare with the other optimizers' steps since its last one
    (NOTE [another optimizer's gradient applied again])."""
    order = state.order
    mine = frozenset(c for c, _ in calls)
    recent = order.recent
    if len(mine) >= 2:
        for other, steps, applied in reversed(recent):
            if other is rec and steps < rec.steps:
                break  # D's last step: what ran before it is not in this window
            if other is not rec and applied & mine and not mine <= applied:
                leaked = [(c, s) for c, s in calls if c in applied]
                own = [(c, s) for c, s in calls if c not in applied]
                _note_leak(state, rec, other, leaked, own)
                break
    lines = order.applied.setdefault(id(rec), set())  # NOTE [soft target not detached]
    if len(lines) < 64 and not getattr(state.hooks_data, "unobserved", True):
        lines.update(s for _, s in calls)  # (while every backward() is seen)
    recent.append((rec, rec.steps, mine))
    del recent[:-_RECENT]


def _note_leak(state: Any, rec: Any, other: Any, leaked: list[Any], own: list[Any]) -> None:
    order = state.order
    if len(order.leak_counts) < 64:
        order.leak_counts.update(c for c, _ in leaked)
    if len(order.leaks) >= 4 or any(lk[0] is rec for lk in order.leaks) or _shared(rec, other):
        return
    order.leaks.append((rec, other, leaked, own))
    data = state.hooks_data
    if leaked[0][0] > own[0][0] and data is not None and not data.leak_watch:
        _arm(data, rec)


def _shared(rec: Any, other: Any) -> bool:
    """The two optimizers hold a parameter in common (NOTE [one gradient, two steps] and the
    static GT406 speak of that), or one of them is gone."""
    a, b = rec.ref(), other.ref()
    if a is None or b is None:
        return True
    mine = {id(p) for g in a.param_groups for p in g["params"]}
    return any(id(p) in mine for g in b.param_groups for p in g["params"])


def _arm(data: Any, rec: Any) -> None:
    """Watch the outermost modules whose parameters all belong to ``rec``'s optimizer: where
    they run in the leaking loss's forward is the line to name (``HookState._pre`` reads the
    watch dict once per module call with grad on)."""
    import weakref

    opt = rec.ref()
    if opt is None:
        return
    mine = {id(p) for g in opt.param_groups for p in g["params"]}
    cands = []
    for mrec in list(data.modules.values()):
        m = mrec.ref()
        ps = [id(p) for p in m.parameters()] if m is not None else []
        if ps and set(ps) <= mine:
            cands.append(m)
    outer = [m for m in cands if not any(o is not m and any(s is m for s in o.modules())
                                         for o in cands)]
    for m in outer[:16]:
        data.leak_watch[id(m)] = weakref.ref(m)


def watch_call(state: Any, data: Any, module: Any, site: Site | None) -> None:
    """A watched module runs with grad on: remember where, and before which backward().
    See NOTE [another optimizer's gradient applied again]."""
    ref = data.leak_watch.get(id(module))
    order = getattr(state, "order", None)
    if ref is None or ref() is not module or order is None or len(order.calls) >= 64:
        return
    order.calls.append((state.backward_count, site))


def _leak_forward(order: Any) -> Site | None:
    """Where a watched module ran in a forward whose backward() leaked."""
    return next((s for c, s in order.calls if c in order.leak_counts and s is not None), None)


def _zero_beside_step(step: Site) -> Site | None:
    """The ``X.zero_grad()`` in the block of ``X.step()`` (the step at ``step``): the first
    after it, else the last before it."""
    from gradtrace.runtime.trace.locate import tree_of

    tree = tree_of(step.path)
    if tree is None:
        return None
    for node in ast.walk(tree):
        for field in ("body", "orelse"):
            block = getattr(node, field, None)
            if not isinstance(block, list):
                continue
            for i, st in enumerate(block):
                if not isinstance(st, ast.stmt) or st.lineno != step.line:
                    continue
                recv = _receiver(st, "step")
                if recv is None:
                    continue
                zeros = [z for z in block[i + 1:] + block[:i][::-1]
                         if _receiver(z, "zero_grad") == recv]
                if zeros:
                    return Site(step.path, zeros[0].lineno, step.function, zeros[0].col_offset)
    return None


def _receiver(st: Any, method: str) -> str | None:
    """``X`` of a statement that is the call ``X.<method>(...)``."""
    call = getattr(st, "value", None) if isinstance(st, ast.Expr) else None
    if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and \
            call.func.attr == method:
        return ast.unparse(call.func.value)
    return None


def leaked_findings(state: Any) -> list[Finding]:
    """NOTE [another optimizer's gradient applied again]."""
    order = getattr(state, "order", None)
    if order is None or not order.leaks:
        return []
    leaks = [lk for lk in order.leaks if lk[0].accumulate_site is None]
    if not leaks:  # its gradients are never cleared between its steps: GT501 says so
        return []
    rec, other, leaked, own = leaks[0]
    step, leak_line, own_line = rec.site, leaked[0][1], own[0][1]
    if step is None:
        return []
    related = [(leak_line, "this backward() adds the other loss's gradient to its parameters"),
               (other.site, "the other optimizer applies that gradient here"),
               (step, "this optimizer then applies it again, with its own")]
    text = (f"optimizer.step() at {src(step)} applies the gradient of the backward() at "
            f"{src(leak_line)} (another optimizer's loss, already applied at "
            f"{src(other.site)}) together with its own loss's (backward() at {src(own_line)}): ")
    code = code_for("zero-grad-missing", "GT823")
    if leaked[0][0] < own[0][0]:
        zero = _zero_beside_step(step)
        if zero is not None:
            return [make(code, zero, text + "this zero_grad() clears its gradients before the "
                         "other loss's backward(), not after it, so that loss's gradient is "
                         "still there when it steps", fix="call zero_grad() right before "
                         "this optimizer's own backward()", related=related,
                         severity="warning")]
    fwd = _leak_forward(order)
    if fwd is not None:
        return [make(code, fwd, text + "here this optimizer's model runs in the other loss's "
                     "forward with its parameters requiring grad, so that loss's backward() "
                     "adds to its gradients", fix="run it with its parameters frozen "
                     "(requires_grad_(False)) for the other loss, or clear its gradients "
                     "before its own backward()", related=related, severity="warning")]
    return [make(code, leak_line, text + "the other loss's graph runs through this "
                 "optimizer's parameters, and no clear separates the two backward() calls",
                 fix="keep the other loss's gradient out of these parameters (requires_grad_"
                 "(False) around that forward, or detach the input it feeds them)",
                 related=related[1:], severity="warning")]
