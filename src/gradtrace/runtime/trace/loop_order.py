"""Loop order seen at run time: gradients cleared before any optimizer step used them.

# NOTE [discarded gradients]
The tracer notes, when a backward() starts, what happened to the gradients of the backward()
before it (``TraceState._before_backward``): an optimizer step ran in between (that line's
gradients are *used*; with the number of backward() calls the step summed), or ``zero_grad()``
/ ``p.grad = None`` / ``grad.zero_()`` cleared them with no step in between (*discarded*: the
clearing line, that backward()'s line, how many backward() calls it threw away, the ids of
the tensors cleared). A discard is reported only for a backward() line whose gradients a step
also used at another pass: the same training backward() sometimes reaches a step and sometimes
not. A backward() whose gradients are never meant for a step (saliency, a gradient metric,
an evaluation pass) is never used by one and stays silent; so does true gradient accumulation
(several backward() calls, then one step, then zero_grad()). The line that leads:

- a step that summed several backward() calls (accumulation works) and a ``zero_grad()``
  elsewhere that drops a partial sum (at the start of an epoch): that ``zero_grad()``. Not when
  every such drop threw away fewer backward() calls than the steps usually sum and the step
  right after it summed the usual number (icefall after PR 1693: the end of an epoch clears its
  incomplete window and the next epoch's counter starts a full one): the drop is the program's
  flush of a partial window; with a counter that runs on across the drop, the step after it
  sums fewer;
- one backward() per step, ``zero_grad()`` every pass and ``step()`` inside the same loop but
  only on some passes (an accumulation branch): the ``zero_grad()``, which belongs after the
  step. Only when the passes that skip the step are at least as many as the steps: an
  accumulation branch skips k-1 passes per step, while a guard that skips the step of a rare
  pass (a gradient-norm spike, a bad batch) drops that batch on purpose;
- one backward() per step and ``step()`` outside the loop where ``zero_grad()`` and backward()
  run (once per epoch): the ``step()``.

# NOTE [cleared gradients already used by a step]
With several optimizers, one's ``zero_grad()`` may run after another loss's backward() and
before any step, yet clear only gradients its own last step already applied: TextBox's LeakGAN
(after its fix) zeroes and backpropagates the manager's loss, then zeroes the worker's
optimizer and backpropagates the worker's loss, then steps both. Nothing is lost. After each
step (while more than one optimizer steps) the optimizer's record keeps its gradients (weak
references; ``OptimizerRecord.applied``); a backward() that changes one (its version moves
between the backward()'s start and end: a clip or a scaling in between does not count) takes
it out; clearing a gradient still kept is no discard (``on_zero``). The first loss reaching a
parameter the second optimizer holds (a shared encoder) changes that gradient, so clearing it
is still a discard.
"""
from __future__ import annotations

import ast
import weakref
from collections import Counter
from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make, src
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.leaked_step import cleared_unseen, note_graded, note_step

KIND = "gradients-cleared-before-step"


def _owner(data: Any, ids: set[int]) -> Any:
    """The optimizer record whose parameters (or their gradients) were cleared."""
    recs = [r for r in list(data.optimizers.values()) if r.steps]
    for rec in recs:
        opt = rec.ref()
        if opt is None:
            continue
        for group in opt.param_groups:
            for p in group["params"]:
                if id(p) in ids or (p.grad is not None and id(p.grad) in ids):
                    return rec
    return recs[0] if len(recs) == 1 else None


def _same_loop(a: Site, b: Site) -> bool:
    from gradtrace.runtime.trace.locate import enclosing_loop

    if a.path != b.path or a.function != b.function:
        return True  # the step sits in a helper: where it runs from is not known here
    return enclosing_loop(a) is enclosing_loop(b)


def discarded_findings(state: Any, data: Any) -> list[Finding]:
    """NOTE [discarded gradients]. Not when an optimizer steps with a closure: LBFGS calls it
    (zero_grad, forward, backward) several times inside one step(), and uses each."""
    if state.closure_steps:
        return []
    used = dict(state.consumed_sites)
    if state.backward_sites and not state.fresh_grads:
        last = state.backward_sites[-1]
        used[last] = max(used.get(last, 0), state.fresh_count)
    events = [e for e in state.discards if e[1] is not None and e[1] in used]
    if not events:
        return step_too_early(state)
    zero, backward = Counter((e[0], e[1]) for e in events).most_common(1)[0][0]
    mine = [e for e in events if (e[0], e[1]) == (zero, backward)]
    lost = sum(e[2] for e in mine)
    rec = _owner(data, mine[0][3])
    if rec is None or rec.site is None:
        return []
    step = rec.site
    related = [(backward, "the gradients of this backward() were cleared unused"),
               (step, "the optimizer steps here")]
    times = f"{len(mine)} time(s)" if len(mine) > 1 else "once"
    if used[backward] > 1:
        if _flushed(rec, mine):
            return []
        return [make(code_for(KIND, "GT827"), zero,
                     f"zero_grad() here cleared gradients that {lost} backward() call(s) at "
                     f"{src(backward)} had accumulated before any optimizer.step() used them "
                     f"({times}); the steps ({src(step)}) sum several backward() calls, so these "
                     "batches are lost", fix="clear gradients only right after the step that "
                     "used them (or step on the partial sum first)", related=related,
                     severity="warning")]
    if _same_loop(step, zero):
        if len(mine) < rec.steps:
            return []  # a guard that skips a rare step (a spike, a bad batch): on purpose
        return [make(code_for("zero-grad-every-accumulation-step", "GT827"), zero,
                     f"zero_grad() here runs on every pass while optimizer.step() "
                     f"({src(step)}) runs only on some: it cleared the gradients of {lost} "
                     "backward() call(s) before a step used them, so each step applies the "
                     "last batch's gradient alone", fix="call zero_grad() right after "
                     "optimizer.step(), in the same branch", related=related,
                     severity="warning")]
    return [make(code_for(KIND, "GT827"), step,
                 f"optimizer.step() here runs outside the loop where zero_grad() "
                 f"({src(zero)}) and backward() ({src(backward)}) run: zero_grad() cleared the "
                 f"gradients of {lost} backward() call(s) before any step used them, so each "
                 "step applies the last batch's gradient alone",
                 fix="move optimizer.step() into the loop, right after backward()",
                 related=[(zero, "the gradients are cleared here, unused"),
                          (backward, "backward() runs here")], severity="warning")]


def _flushed(rec: Any, drops: list[Any]) -> bool:
    """Each drop cleared a partial window and the step after it summed the usual count."""
    usual = Counter(rec.windows).most_common(1)
    if not usual or usual[0][1] < 2:
        return False
    k = usual[0][0]
    for e in drops:
        j = dict(e[4]).get(id(rec)) if len(e) > 4 else None
        if j is None or j >= len(rec.windows) or rec.windows[j] != k or e[2] >= k:
            return False
    return True


# NOTE [step before backward]
# Per optimizer that has stepped, one representative parameter (the first with a gradient at
# its last step, ``OptimizerRecord.rep``; for an optimizer whose steps found no gradient, its
# first parameter that requires grad) is looked at when each backward() starts and ends:
# a gradient that changed during a backward() marks that backward() as *pending* for the
# optimizer; the optimizer's next step marks its pending lines *used* when that step found
# gradients; a step that found none, or a gradient found cleared (None, another tensor, or all
# zeros) at a later backward() start with no step in between, marks them *dropped*. A
# backward() line dropped for some optimizer and never used by any (not even through another
# optimizer: a GAN's generator loss also reaches the critic) lost all its gradients; when it
# runs after that optimizer's step() in the same function, the step came too early (texture
# adaptation: step, then the adversarial backward(), then zero_grad() at the top of the next
# pass). Judged per optimizer, as GT522 is (NOTE [two optimizers]): a backward() reaches
# the optimizers whose parameters it grades, and of those that stepped before it in the pass, the one whose
# steps never used any backward() (a GAN's generator stepped before its loss's backward(), so
# that it steps on cleared gradients) is named, not the other one whose gradients that loss
# also touches. A few dict reads per optimizer per backward(), at backward time only.
class Order:
    """Pending, used and dropped backward() lines, per optimizer record."""

    def __init__(self) -> None:
        self.params: dict[int, tuple[int, Any]] = {}  # id(rec) -> (param id, weakref)
        self.before: dict[int, tuple[int, int] | None] = {}  # id(rec) -> grad at the start
        self.pending: dict[int, tuple[int, tuple[int, int], set[Site]]] = {}
        self.used: set[Site] = set()
        self.dropped: dict[Site, list[Any]] = {}  # backward() line -> optimizer records
        self.used_by: dict[int, int] = {}  # id(rec) -> steps that used a pending backward()
        self.graded: set[int] = set()  # id(rec) of optimizers some backward() graded
        # NOTE [another optimizer's gradient applied again] (leaked_step.py)
        self.inst: dict[int, tuple[int, list[Any]]] = {}  # id(rec) -> (steps, calls)
        self.recent: list[Any] = []
        self.leaks: list[Any] = []
        self.leak_counts: set[int] = set()
        self.calls: list[Any] = []  # (backward count, site) of the watched modules' calls
        self.applied: dict[int, set[Site]] = {}  # id(rec) -> backward() lines its steps applied


def _param(order: Order, rec: Any) -> Any:
    rep = rec.rep
    hit = order.params.get(id(rec))
    if hit is not None and (rep is None or hit[0] == rep[0]):
        p = hit[1]()
        if p is not None or rep is None:
            return p
    opt = rec.ref()
    params = [q for g in (opt.param_groups if opt is not None else ()) for q in g["params"]]
    if rep is not None:  # the parameter its last step found a gradient on
        p = next((q for q in params if id(q) == rep[0]), None)
    else:  # its steps found none: the first that can get one (NOTE [step before backward])
        p = next((q for q in params if getattr(q, "requires_grad", False)), None)
    order.params[id(rec)] = (id(p) if rep is None else rep[0],
                             weakref.ref(p) if p is not None else lambda: None)
    return p


def _grad_key(p: Any) -> tuple[int, int] | None:
    g = p.grad
    return None if g is None or g.is_inference() else (id(g), g._version)


def backward_starts(state: Any) -> None:
    """Resolve pending lines, and note each optimizer's gradient before this backward()."""
    data = state.hooks_data
    recs = [r for r in list(data.optimizers.values()) if r.steps] if data else []
    if not recs or len(recs) > 8:
        return
    order = state.order = getattr(state, "order", None) or Order()
    for rec in recs:
        p = _param(order, rec)
        if p is None:
            continue
        now = _grad_key(p)
        pend = order.pending.get(id(rec))
        if pend is not None:
            steps, key, lines = pend
            if now == key and rec.steps == steps and len(recs) > 1:
                cleared_unseen(order, rec, p)  # `.grad.data.zero_()` bumps no version
            if rec.steps > steps and rec.last_graded > steps:
                order.used |= lines
                order.used_by[id(rec)] = order.used_by.get(id(rec), 0) + 1
                del order.pending[id(rec)]
            elif rec.steps > steps or now is None or now[0] != key[0] or \
                    now[1] != key[1] and not bool(p.grad.any()):
                for line in lines:  # cleared, or stepped without finding a gradient
                    have = order.dropped.setdefault(line, [])
                    if rec not in have:
                        have.append(rec)
                del order.pending[id(rec)]
        order.before[id(rec)] = now


def backward_ends(state: Any, site: Site | None) -> None:
    """Mark this backward() pending for every optimizer whose gradient it changed."""
    order = getattr(state, "order", None)
    data = state.hooks_data
    if order is None or site is None or data is None:
        return
    for rec in list(data.optimizers.values()):
        if id(rec) not in order.before:
            continue
        p = _param(order, rec)
        now = _grad_key(p) if p is not None else None
        if now is None or now == order.before.pop(id(rec)):
            continue
        pend = order.pending.get(id(rec))
        fresh = pend is None or pend[0] != rec.steps
        lines = set() if fresh else pend[2]
        if len(lines) < 64:
            lines.add(site)
        note_graded(order, rec, fresh, state.backward_count, site)
        order.pending[id(rec)] = (rec.steps, now, lines)
        order.graded.add(id(rec))


def step_window(state: Any, rec: Any) -> None:
    """At ``rec``'s step (``rec.steps`` already counts it): the backward() calls its gradients
    hold, when none was cleared since (NOTE [another optimizer's gradient applied again])."""
    order = getattr(state, "order", None)
    if order is None:
        return
    got = order.inst.get(id(rec))
    pend = order.pending.get(id(rec))
    calls: list[Any] = []
    if got is not None and pend is not None and got[0] == pend[0] == rec.steps - 1:
        p = _param(order, rec)
        if p is not None and _grad_key(p) == pend[1]:  # not cleared since
            calls = got[1]
    note_step(state, rec, calls)


def _block_after(tree: ast.AST, line: int) -> list[ast.stmt]:
    """The statements after the innermost statement holding ``line``, in its block."""
    best: list[ast.stmt] = []
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if not isinstance(block, list):
                continue
            for i, st in enumerate(block):
                if isinstance(st, ast.stmt) and st.lineno <= line <= (st.end_lineno or st.lineno):
                    if not best or st.lineno >= best[0].lineno:
                        best = [st, *block[i + 1:]]
    return best[1:]


def _used_otherwise(step: Site, line: Site) -> bool:
    """NOTE [step before backward]: after the backward() at ``line`` and before gradients are
    cleared, its block hands them to the stepping optimizer another way (a method other than
    ``step``/``zero_grad``: Sophia's ``update_hessian()``): they are used."""
    from gradtrace.runtime.trace.locate import tree_of

    tree = tree_of(line.path)
    if tree is None:
        return False
    # the optimizer: the receiver of ``opt.step()``, the argument of ``scaler.step(opt)``
    owners = {ast.unparse(n.args[0] if n.args else n.func.value) for n in ast.walk(tree)
              if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
              and n.func.attr == "step" and n.lineno <= step.line <= (n.end_lineno or n.lineno)}
    for st in _block_after(tree, line.line):
        for n in ast.walk(st):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                    ast.unparse(n.func.value) in owners:
                if n.func.attr == "zero_grad":
                    return False
                if n.func.attr not in _NO_GRADIENT_READ:
                    return True
    return False


# optimizer methods that read no gradient
_NO_GRADIENT_READ = frozenset({"step", "add_param_group", "state_dict", "load_state_dict",
                               "register_step_pre_hook", "register_step_post_hook"})


def _early(state: Any) -> tuple[Site, Any] | None:
    """(the backward() line, the optimizer record) of NOTE [step before backward]."""
    from gradtrace.runtime.trace.locate import enclosing_loop

    order = getattr(state, "order", None)
    if order is None:
        return None
    for line, recs in order.dropped.items():
        if line in order.used or line in state.consumed_sites:
            continue
        fits = [rec for rec in recs if (step := rec.site) is not None and
                step.path == line.path and step.function == line.function and
                step.line < line.line and enclosing_loop(step) is enclosing_loop(line) and
                not _used_otherwise(step, line)]
        # the optimizer that never applied a backward() first (NOTE [step before backward])
        fits.sort(key=lambda rec: order.used_by.get(id(rec), 0) > 0)
        if fits:
            return line, fits[0]
    return None


def stepped_early(state: Any) -> Any:
    """The optimizer record whose step runs before its backward(), or None: its idle steps
    are explained, its parameters are not misassigned (NOTE [step before backward])."""
    got = _early(state)
    return None if got is None else got[1]


def never_graded(state: Any, rec: Any) -> bool:
    """No backward() ever changed the gradient of the parameter followed for ``rec``: its
    model is cut off from every loss, it does not hold another loss's parameters (a GAN's
    generator fed a fake detached once; NOTE [step before backward])."""
    order = getattr(state, "order", None)
    return order is not None and id(rec) in order.before and id(rec) not in order.graded


def step_too_early(state: Any) -> list[Finding]:
    """NOTE [step before backward]: the step of the optimizer whose gradients a later
    backward() in the same function adds, and which are dropped before its next step."""
    got = _early(state)
    if got is None or got[1].wiped is not None and wiped_step_early(got[1]):
        return []  # reported from the wiped record (silent.py)
    return step_early_finding(got[1].site, got[0])


def wiped_step_early(rec: Any) -> bool:
    """A step that found every gradient cleared (``rec.wiped``: cleared, backward, step) sits
    before that backward() in the same function and loop: the clear is where it belongs
    (before the backward), the step is what came too early (NOTE [step before backward])."""
    from gradtrace.runtime.trace.locate import enclosing_loop

    zero, line, step = rec.wiped
    return line is not None and step is not None and step.path == line.path and \
        step.function == line.function and step.line < line.line and \
        (zero is None or zero.path != step.path or zero.line < step.line) and \
        enclosing_loop(step) is enclosing_loop(line)


def step_early_finding(step: Site, line: Site, zero: Site | None = None) -> list[Finding]:
    related = [(line, "this backward()'s gradients are cleared unused")]
    if zero is not None:
        related.append((zero, "cleared here, before the step"))
    return [make(code_for(KIND, "GT827"), step,
                 f"optimizer.step() here runs before the backward() at {src(line)} in the "
                 "same pass: the gradients that backward() adds to this optimizer's "
                 "parameters are cleared before its next step, so they never reach an "
                 "update", fix="call optimizer.step() after every backward() whose "
                 "gradients it should apply", related=related, severity="warning")]
