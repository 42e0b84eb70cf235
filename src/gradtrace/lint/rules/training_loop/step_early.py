"""GT522: the optimizer step runs before a backward() whose gradients it should apply,
judged per optimizer (NOTE [two optimizers])."""
from __future__ import annotations

import ast
from typing import Any, Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good
from gradtrace.lint.rules.training_loop._base import LoopRule, related_at
from gradtrace.lint.analysis.graph_deps import graphs
from gradtrace.lint.rules.training_loop._reach import (
    _live_calls, _reached, _unpacked_from, for_another,
)
from gradtrace.lint.analysis.params import param_loop_var
from gradtrace.lint.rules.training_loop._loop import (
    Backward, LoopFacts, Named, Step, _owners, _stepped_expr,
)
from gradtrace.lint.rules.training_loop.detached_owner import detached_step
from gradtrace.lint.rules.training_loop.micro_steps import conditional
from gradtrace.lint.rules.training_loop.zero_grad import covers


def _frozen_at(f: LoopFacts, owner: str, b: Backward, loop: ast.stmt) -> bool:
    """``for p in owner.parameters(): p.requires_grad = False`` runs in ``loop`` before
    ``b``, and no such loop setting it back to True runs between."""
    state = None
    for x in f.within(loop):
        if x.lineno >= b.stmt.lineno:
            break
        got = param_loop_var(x)
        if got is None or got[1] != owner:
            continue
        for s in x.body:  # type: ignore[attr-defined]
            if isinstance(s, ast.Assign) and any(dotted(t) == got[0] + ".requires_grad"
                                                 for t in s.targets) and \
                    isinstance(s.value, ast.Constant) and isinstance(s.value.value, bool):
                state = s.value.value
    return state is False


def _cut_for_later(f: LoopFacts, b: Backward) -> bool:
    """A later step is starved of ``b``'s gradient by a detach where its model's output was
    made (GT580 names that line: the step before ``b`` is not the mistake)."""
    return any(f.before(b.stmt, s2.stmt) and (got := detached_step(f, s2)) is not None
               and got[1] is b for s2 in f.steps)


def _clear_before(f: LoopFacts, s: Step, loop: ast.stmt) -> Any:
    """The unconditional ``zero_grad()`` of the pass that clears what ``s`` steps, before it."""
    return next((z for z in f.zero_grads if covers(f, z, s) and f.inside(z.stmt, loop)
                 and f.before(z.stmt, s.stmt) and not conditional(f, z.stmt, loop)), None)


def _fed(f: LoopFacts, z: Any, s: Step) -> bool:
    """A backward() runs between the clear ``z`` and the step ``s``."""
    return any(b.accumulates and f.before(z.stmt, b.stmt) and f.before(b.stmt, s.stmt)
               for b in f.backwards)


def _unfed_reach(f: LoopFacts, b: Backward, s: Step, owners: frozenset[str]) -> set[str]:
    """The owners a backward() after a step that never finds a gradient (cleared, then
    stepped, no backward() between) is taken to train: those its loss is computed from, or,
    when the file does not show it (a loss summed from lists), the step's own, unless the
    loss is known to reach only other optimizers' models."""
    return _reached(f, b, owners) or (set() if for_another(f, b, s) else set(owners))


def _own_defs(f: LoopFacts) -> dict[str, ast.AST]:
    """The file's functions and the methods of the class around ``f``, by name."""
    own: dict[str, ast.AST] = dict(f.ctx.analysis.functions)
    cls = f.ctx.class_def
    if cls is not None:
        own.update({m.name: m for m in cls.body if isinstance(m, (ast.FunctionDef,
                                                                    ast.AsyncFunctionDef))})
    return own


def _fed_elsewhere(f: LoopFacts, z: Any, s: Step) -> bool:
    """Between the clear ``z`` and the step ``s``, something may give the optimizer a
    gradient that is not a backward() of this function: a call of a function or method of
    the file whose code backwards, writes a gradient or steps, a write of a ``.grad``, or
    another step."""
    own = _own_defs(f)
    for st in f.scope.stmts:
        if not (f.before(z.stmt, st) and f.before(st, s.stmt)):
            continue
        for t in getattr(st, "targets", None) or [getattr(st, "target", None)]:
            if t is not None and any(isinstance(n, ast.Attribute) and n.attr == "grad"
                                     for n in ast.walk(t)):
                return True
        for c in f.calls_of(st):
            name = dotted(c.func) or ""
            root, _, last = name.rpartition(".")
            if last in ("step", "backward", "grad"):
                return True
            if last in own and root in ("", "self") and _feeds(own[last]):
                return True
    return False


def _feeds(fn: ast.AST) -> bool:
    """``fn`` calls a ``backward``/``step``/``grad`` or writes a ``.grad`` (its own code)."""
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and (dotted(n.func) or "").rpartition(".")[2] in (
                "backward", "step", "grad"):
            return True
        if isinstance(n, ast.Attribute) and n.attr == "grad" and isinstance(n.ctx, ast.Store):
            return True
    return False


def _used_between(f: LoopFacts, b: Backward, z: Any) -> bool:
    """Between the backward ``b`` and the clear ``z``: a step (of any optimizer), a read of
    a ``.grad``, a call of a function of the file that may do either, or another method of
    the optimizer ``z`` clears (``opt.accumulate_curvature()`` reads its gradients)."""
    own = _own_defs(f)
    opt = getattr(z, "receiver", None)
    for st in f.scope.stmts:
        if not (f.before(b.stmt, st) and f.before(st, z.stmt)):
            continue
        if any(isinstance(n, ast.Attribute) and n.attr == "grad" for n in ast.walk(st)):
            return True
        for c in f.calls_of(st):
            name = dotted(c.func) or ""
            root, _, last = name.rpartition(".")
            if last in ("step", "grad") or last in own and root in ("", "self") and \
                    _feeds(own[last]) or opt and root == opt and last != "zero_grad":
                return True
    return False


def _models_of(f: LoopFacts, b: Backward, until: ast.stmt | None = None) -> set[str]:
    """# NOTE [step of unknown parameters]
    An optimizer handed in (an argument, ``self.optimizer`` set from one) holds parameters
    the file does not show. Cleared, then stepped with no backward() between, it finds no
    gradient whatever it holds; the backward() after it computes one that the next clear
    erases: nothing it holds ever trains. Said when the late loss is computed from a call of
    a module (``model(x)``, ``self.net(x)``), the model it names, and no step of any
    optimizer follows that backward() in the pass."""
    from gradtrace.lint.analysis.model_calls import module_like
    from gradtrace.lint.rules.training_loop._reach import _live_calls, _unpacked_from

    loops = f.scope.loops_of(b.stmt)  # (a step after the pass's loop comes after the
    if b.loss is None or any(          # next passes' clears: it takes none of this gradient)
            f.before(b.stmt, st) and (until is None or f.before(st, until))
            and (not loops or f.inside(st, loops[-1]))
            and any(isinstance(c.func, ast.Attribute) and c.func.attr == "step"
                    for c in f.calls_of(st))
            for st in f.scope.stmts):
        return set()  # a later step (of any optimizer) may take this gradient
    values: list[ast.AST] = [b.loss]
    for d in graphs(f.scope).deps(b.loss, b.stmt.lineno).bindings:
        v = d.value if d.value is not None else _unpacked_from(d)
        if v is not None:
            values.append(v)
    for v in values:
        for c in _live_calls(v):
            name = dotted(c.func)
            if name and module_like(f.ctx, f.scope, name, c.lineno):
                return {name}
    return set()


def _starved_other(f: LoopFacts, b: Backward, s: Step, loop: ast.stmt) -> bool:
    """# NOTE [two optimizers]
    A backward() reaches the optimizers holding parameters its loss is computed from; the step
    it needs belongs to those. When none of them steps after it, the step that came too early
    is the one with no backward() of its own between its clear and itself (a GAN's generator
    stepped before ``errG.backward()``: it always steps on cleared gradients), not the other
    optimizer (the discriminator) whose gradients that loss also touches and which the next
    pass clears on purpose."""
    for s2 in f.steps:
        if s2.optimizer == s.optimizer or not f.before(s2.stmt, b.stmt) or \
                not f.inside(s2.stmt, loop):
            continue
        other = _owners(f, _stepped_expr(s2), s2.call.lineno)
        z2 = _clear_before(f, s2, loop)
        if other and z2 is not None and not _fed(f, z2, s2) and _reached(f, b, other):
            return True
    return False


def _adversary_share(f: LoopFacts, b: Backward, s: Step, owners: frozenset[str],
                     loop: ast.stmt) -> bool:
    """# NOTE [adversary's share]
    The stepped model was trained on a backward of its own in the pass (its clear, a
    backward, its step), and the later loss reads it only on the output of another model
    that an optimizer of the pass holds (``D(E(x))`` after ``d_loss.backward();
    opt_d.step()``): that loss is the other model's adversarial loss, the critic's share of
    its gradient is dropped on purpose (POD-AANets' adversarial autoencoder). Whether the
    other model's optimizer applies its share is that optimizer's finding (an encoder stepped
    before the loss is reported on its own step). A critic call on anything else (noise, the
    real batch, its own earlier output) keeps the finding."""
    others = {o for s2 in f.steps if s2.optimizer != s.optimizer and f.inside(s2.stmt, loop)
              for o in _owners(f, _stepped_expr(s2), s2.call.lineno)} - set(owners)
    if b.loss is None or not others:
        return False
    values: list[ast.AST] = [b.loss]
    for d in graphs(f.scope).deps(b.loss, b.stmt.lineno).bindings:
        if d.value is not None:
            values.append(d.value)
    found = False
    for v in values:
        for n in _live_calls(v):
            d = dotted(n.func) or ""
            if any(d == o or d.startswith(o + ".") for o in owners):
                if not n.args or not all(_made_by(f, a, others, n.lineno) for a in n.args):
                    return False
                found = True
    return found


def _made_by(f: LoopFacts, a: ast.expr, models: set[str], line: int) -> bool:
    """``a`` is a call of one of ``models`` (``E(x)``), or a name bound to one before
    ``line``."""
    if isinstance(a, ast.Name):
        bd = f.scope.binding_before(a.id, line)
        if bd is not None:  # an output unpacked from the call: ``_, (z, _) = E(x)``
            a = bd.value if bd.value is not None else (_unpacked_from(bd) or a)
    d = dotted(a.func) if isinstance(a, ast.Call) else None
    return bool(d) and any(d == m or d.startswith(m + ".") for m in models)  # type: ignore


class StepBeforeLastBackward(LoopRule):
    """`step()` runs before a later `backward()` of the same pass whose loss reaches the
    stepped model, and `zero_grad()` clears that gradient at the start of the next pass.

    Why: the loop body clears, backwards a first loss, steps, then backwards another loss
    through the same model (an adversarial or auxiliary term); nothing steps that model after
    it, so the next pass's `zero_grad()` erases the second gradient unused: the term trains
    nothing, whatever its weight (a domain-adaptation loop, check-ups of `lambda_adv = 0`
    giving the same weights). Step after the last backward that reaches the model.
    An optimizer handed in (an argument, `self.optimizer` set from one) whose parameters the
    file does not show is reported when it is cleared, then stepped with no backward between
    (or stepped, then the backward, then cleared with no step between): it never finds a
    gradient, whatever it holds (NOTE [step of unknown parameters]).
    Known limits: otherwise the optimizer's parameters must be known
    (`Adam(model.parameters())`), and the later loss must be computed from a call of that
    model; a later step of another optimizer whose model the loss also reaches (a GAN's
    generator step; an optimizer over a submodule, `G.features`, of a model the loss calls)
    takes the gradient as its own, unless that model's parameters were frozen in a loop just
    before. A critic stepped on its own loss, then read only on another stepped model's
    output (`D(E(x))`, that model's adversarial loss), drops its share on purpose:
    NOTE [adversary's share].
    """

    code = "GT522"
    gate_statements = True
    name = "step-before-last-backward"
    message = ("`{call}` runs before `{late}` (line {late_line}), whose loss is computed from "
               "`{owner}`: no step of `{opt}` follows it in the pass, and `{clear}` (line "
               "{clear_line}) erases that gradient {when}: that loss "
               "never trains `{owner}`; step after the last backward that reaches it")
    triggers = ("zero_grad",)
    function_needs = ("backward", "step", "zero_grad")
    examples = [
        Bad("""
            import torch
            model, critic = torch.nn.Linear(4, 4), torch.nn.Linear(4, 1)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                opt.zero_grad()
                loss = F.mse_loss(model(x), y)
                loss.backward()
                opt.step()
                loss_adv = critic(model(x)).mean()
                loss_adv.backward()
            """, at=(8, 4)),
        Bad("""
            def train(model, opt, loader):
                for x, y in loader:
                    opt.zero_grad()
                    loss = F.mse_loss(model(x), y)
                    opt.step()
                    loss.backward()
            """, at=(5, 8)),
        Good("""
            def train(model, opt, loader):
                for x, y in loader:
                    loss = F.mse_loss(model(x), y)
                    loss.backward()
                    opt.step()
                    opt.zero_grad()
            """),
        Good("""
            import torch
            G, D = torch.nn.Linear(4, 4), torch.nn.Linear(4, 1)
            opt_g = torch.optim.Adam(G.parameters())
            opt_d = torch.optim.Adam(D.parameters())
            for real, z in loader:
                opt_d.zero_grad()
                loss_d = D(G(z).detach()).mean() - D(real).mean()
                loss_d.backward()
                opt_d.step()
                opt_g.zero_grad()
                loss_g = -D(G(z)).mean()
                loss_g.backward()
                opt_g.step()
            """),
    ]

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        for s in f.steps:
            loop = None if s.closure else f.innermost_loop(s.stmt)
            if loop is None:
                if not s.closure and isinstance(f.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield from self._per_call(f, s, ctx)
                continue
            late = [b for b in f.between(f.backwards, loop.lineno, loop.end_lineno or 10 ** 9)
                    if b.accumulates and f.inside(b.stmt, loop)  # (in the loop: on its lines)
                    and f.before(s.stmt, b.stmt)]
            if not late:
                continue  # the common case: the step ends the pass
            owners = _owners(f, _stepped_expr(s), s.call.lineno)
            z = _clear_before(f, s, loop)
            if z is None:
                yield from self._erased_after(f, s, late, owners, loop, ctx)
                continue
            fed = _fed(f, z, s)
            if not owners and (fed or _fed_elsewhere(f, z, s)):
                continue
            for b in late:
                if any(s2.optimizer == s.optimizer and f.before(b.stmt, s2.stmt)
                       and f.inside(s2.stmt, loop) for s2 in f.steps) or _cut_for_later(f, b):
                    continue
                hit = _reached(f, b, owners) if fed else _unfed_reach(f, b, s, owners) \
                    if owners else _models_of(f, b)
                if not hit or fed and (self._taken(f, b, s, loop) or _starved_other(
                        f, b, s, loop) or _adversary_share(f, b, s, owners, loop)):
                    continue
                yield self._early(ctx, s, b, z, hit, "at the start of the next one" if fed
                                  else "before the step of the next one, which so finds no "
                                  "gradient")
                break

    def _erased_after(self, f: LoopFacts, s: Step, late: list[Backward],
                      owners: frozenset[str], loop: ast.stmt | None, ctx: Context
                      ) -> Iterator[Finding]:
        """NOTE [step of unknown parameters], the clear after: ``step()``, ``backward()``,
        then a ``zero_grad()`` of the same optimizer with no step and no read of a
        gradient between: every gradient is erased before a step reads it."""
        for b in late:
            z = next((z for z in f.zero_grads if covers(f, z, s) and f.before(b.stmt, z.stmt)
                      and (loop is None or f.inside(z.stmt, loop)
                           and not conditional(f, z.stmt, loop))), None)
            if z is None or not f.before(s.stmt, b.stmt) or _used_between(f, b, z):
                continue
            hit = _reached(f, b, owners) or (set() if for_another(f, b, s) else
                                             _models_of(f, b, z.stmt))
            if hit:
                yield self._early(ctx, s, b, z, hit, "right after it, before any step reads it")
                return

    def _per_call(self, f: LoopFacts, s: Step, ctx: Context) -> Iterator[Finding]:
        """A step function (each call one pass, no loop in it) that clears, steps, then
        backwards a loss reaching the stepped model: its step never finds a gradient."""
        owners = _owners(f, _stepped_expr(s), s.call.lineno)
        z = next((z for z in f.zero_grads if covers(f, z, s) and not f.loops_of(z.stmt)
                  and f.dominates(z.stmt, s.stmt)), None)
        if z is None:
            yield from self._erased_after(f, s, [b for b in f.backwards if b.accumulates and
                                                 not f.loops_of(b.stmt)], owners, None, ctx)
            return
        if z is None or _fed(f, z, s) or not owners and _fed_elsewhere(f, z, s) or any(
                f.before(s.stmt, s2.stmt) for s2 in f.steps if s2.optimizer == s.optimizer):
            return
        for b in f.backwards:
            hit = b.accumulates and not f.loops_of(b.stmt) and f.before(s.stmt, b.stmt) \
                and (_unfed_reach(f, b, s, owners) if owners else _models_of(f, b))
            if hit:
                yield self._early(ctx, s, b, z, hit,
                                  "before the step of the next call, which so finds no gradient")
                return

    def _early(self, ctx: Context, s: Step, b: Backward, z: Named, hit: set[str],
               when: str) -> Finding:
        """The step ``s`` named as too early: the backward ``b`` after it reaches ``hit``, and
        ``z`` clears that gradient ``when``."""
        return self.report(s.call, ctx, related=(
            related_at(ctx, b.call, "this gradient is erased unused"),
            related_at(ctx, z.call, "cleared here, before any step")),
            call=ctx.source(s.call), late=ctx.source(b.call), late_line=b.call.lineno,
            owner=sorted(hit)[0], opt=s.optimizer, clear=ctx.source(z.call),
            clear_line=z.call.lineno, when=when)

    @staticmethod
    def _taken(f: LoopFacts, b: Backward, s: Step, loop: ast.stmt) -> bool:
        """A later step of another optimizer takes the gradient of ``b``: its model is
        reached by the loss and not frozen when ``b`` runs; or a ``.step()`` whose optimizer
        cannot be named (``opts['g' + str(i)].step()``) follows ``b`` in the loop."""
        known = {id(s2.call) for s2 in f.steps}
        for st in f.within(loop):
            if f.before(b.stmt, st) and any(
                    isinstance(c.func, ast.Attribute) and c.func.attr == "step" and
                    id(c) not in known and not isinstance(c.func.value, ast.Name)
                    for c in f.calls_of(st)):
                return True
        for s2 in f.steps:
            if s2.optimizer == s.optimizer or not f.before(b.stmt, s2.stmt):
                continue
            other = _owners(f, _stepped_expr(s2), s2.call.lineno)
            if not other:
                return True  # unknown parameters: maybe the same model
            if any(not _frozen_at(f, o, b, loop) for o in _reached(f, b, other, inner=True)):
                return True
        return False
