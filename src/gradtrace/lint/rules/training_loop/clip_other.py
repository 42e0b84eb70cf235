"""GT549: the gradients clipped before a step belong to parameters the stepped optimizer does
not hold."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.analysis.kinds import OPTIMIZER
from gradtrace.lint.analysis.params import param_sources_of
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.analysis.reach import value_of
from gradtrace.lint.rule import Bad, Good
from gradtrace.lint.rules.registration._modules import covers
from gradtrace.lint.rules.training_loop._base import LoopRule, related_at
from gradtrace.lint.rules.training_loop._loop import LoopFacts, Named, Step


def _holds(over: frozenset[str], srcs: list[str]) -> bool:
    """Some parameters of ``srcs`` are among the optimizer's (either way of nesting)."""
    return any(covers(o, s) or covers(s, o) for o in over for s in srcs)


def _wraps(f: LoopFacts, over: frozenset[str], srcs: list[str], line: int) -> bool:
    """One side was built from the other (tabsyn's CoDi: ``trainer_dis =
    MultinomialDiffusion(num_class, shape, model_dis, ...)`` clipped, ``optim_dis`` over
    ``model_dis``): an object made with a module stores it, and its ``.parameters()``
    commonly hold that module's (as an ``nn.Module`` wrapper's do)."""
    for made, inner in [*((x, over) for x in srcs), *((x, frozenset(srcs)) for x in over)]:
        for b in (f.scope.bindings_before(made, line) if "." not in made else ()):
            v = value_of(b)
            while isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
                    and v.func.attr in ("to", "cuda", "cpu"):
                v = v.func.value
            if isinstance(v, ast.Call) and any(
                    dotted(a) in inner for a in (*v.args, *(k.value for k in v.keywords))):
                return True
            # `model_without_ddp = model.module` (or `= model`): the wrapped module of the
            # other side, or the other side itself: a wrapper's parameters are its module's;
            # nanoGPT's `raw_model = model.module if ddp else model` when every branch is
            arms = _branches(v)
            if arms and all(isinstance(x, (ast.Name, ast.Attribute)) and (d := dotted(x))
                            is not None and any(covers(i, d) for i in inner) for x in arms):
                return True
    return False


def _branches(v: ast.AST | None) -> list[ast.AST]:
    """The values ``v`` may take: both arms of a conditional expression, else ``v``."""
    if isinstance(v, ast.IfExp):
        return _branches(v.body) + _branches(v.orelse)
    return [v] if v is not None else []


def _over(f: LoopFacts, s: Step, ctx: Context) -> frozenset[str]:
    """The owners of the parameters of the optimizer ``s`` steps (empty: unknown)."""
    recv = s.call.func.value if isinstance(s.call.func, ast.Attribute) and s.scaler is None \
        else (s.call.args[0] if s.call.args else None)
    if recv is None:
        return frozenset()
    k = ctx.analysis.kind(recv, f.scope, s.stmt.lineno)
    if k is None or k.what != OPTIMIZER:
        return frozenset()
    # the owners are spelled where the optimizer was built: comparable with the clip's only
    # when both are here (a local optimizer of this scope) or both are fields of `self`
    if isinstance(recv, ast.Name):
        here = f.scope.binding_before(recv.id, s.stmt.lineno) is not None
        return k.over if here and not any(o.startswith("self.") for o in k.over) \
            else frozenset()
    return k.over if all(o.startswith("self.") for o in k.over) else frozenset()


def _clipped(f: LoopFacts, c: Named) -> list[str] | None:
    """The modules whose ``.parameters()`` the clip call lists (None: unknown)."""
    a = c.call.args[0] if c.call.args else next(
        (k.value for k in c.call.keywords if k.arg == "parameters"), None)
    if a is None:
        return None
    got = param_sources_of(a, f.scope, c.stmt.lineno)
    return [name for name, _ in got] if got else None


class ClipOfOtherParameters(LoopRule):
    """Between `backward()` and an optimizer's `step()`, the gradients clipped are those of
    parameters that optimizer does not hold, and nothing clips the ones it steps.

    Why: `clip_grad_norm_(self.critic.parameters(), max_norm)` copied from the critic's update
    into the policy's leaves the policy's gradients unclipped: the step applies them at full
    size, and the clipping the configuration asks for never happens (deepmind/open_spiel's
    PyTorch `PolicyGradient._pi_update`; checked on torch 2.13). Clip the parameters of the
    optimizer that steps next (`clip_grad_norm_(policy.parameters(), ...)`).
    Known limits: the optimizer's parameters and the clipped ones must be spelled as
    `.parameters()` of named modules (NOTE [fields] for an optimizer kept on `self`); a clip
    followed by the step of an optimizer that holds them is left alone, as is one of an object
    built from the stepped module (a wrapper holds it) or the other way round, or bound to it
    or to one of its submodules (`model_without_ddp = model.module`, also as every arm of
    `model.module if ddp else model`).
    """

    code = "GT549"
    gate_statements = True
    name = "clip-of-other-parameters"
    message = ("`{call}` clips the gradients of {clipped}, but the optimizer stepped next, "
               "`{opt}` (line {line}), holds {held}: its own gradients are applied unclipped")
    triggers = ("clip_grad",)
    function_needs = ("backward", "step", "clip_grad")
    examples = [
        Bad("""
            import torch
            opt_actor = torch.optim.Adam(actor.parameters())
            opt_critic = torch.optim.Adam(critic.parameters())
            for s, a, r in batches:
                opt_actor.zero_grad()
                actor_loss(actor, critic, s, a, r).backward()
                torch.nn.utils.clip_grad_norm_(critic.parameters(), 0.5)
                opt_actor.step()
            """, at=(7, 4)),
        Good("""
            import torch
            opt_actor = torch.optim.Adam(actor.parameters())
            opt_critic = torch.optim.Adam(critic.parameters())
            for s, a, r in batches:
                opt_actor.zero_grad()
                actor_loss(actor, critic, s, a, r).backward()
                torch.nn.utils.clip_grad_norm_(actor.parameters(), 0.5)
                opt_actor.step()
            """),
    ]

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        acc = [b for b in f.backwards if b.accumulates]
        for c in f.clips:
            if not any(f.before(b.stmt, c.stmt) for b in acc):
                continue
            after = [s for s in f.steps if f.before(c.stmt, s.stmt)]
            if not after:
                continue
            srcs = _clipped(f, c)
            if not srcs or len({x.startswith("self.") for x in srcs}) > 1:
                continue
            overs = [_over(f, s, ctx) for s in after]
            if any(not o or _holds(o, srcs) or srcs[0].startswith("self.") != next(
                    iter(o)).startswith("self.") or _wraps(f, o, srcs, c.stmt.lineno)
                    or _holds(o, _unwrapped(f, srcs, c.stmt.lineno))
                    or _holds(o, _self_aliases(srcs, f, ctx)) for o in overs):
                continue  # a later step applies what was clipped, or one is unknown
            s, over = min(zip(after, overs), key=lambda p: p[0].stmt.lineno)
            if any(c2 is not c and _clips_held(f, c2, over, s) for c2 in f.clips):
                continue  # another clip covers the stepped optimizer
            yield self.report(c.call, ctx, related=(
                related_at(ctx, s.call, "this step applies unclipped gradients"),),
                call=ctx.source(c.call.func), opt=s.optimizer, line=s.call.lineno,
                clipped=", ".join(f"`{x}`" for x in srcs),
                held=", ".join(f"`{x}`" for x in sorted(over)))


def _clips_held(f: LoopFacts, c2: Named, over: frozenset[str], s: Step) -> bool:
    if not f.before(c2.stmt, s.stmt):
        return False
    srcs = _clipped(f, c2)
    return srcs is None or _holds(over, srcs)


def _unwrapped(f: LoopFacts, srcs: list[str], line: int) -> list[str]:
    """``w.module.head`` read as ``w.head`` when ``w`` is bound here to a wrapper built from
    the earlier ``w`` (``vq_loss = DDP(vq_loss.to(device))``): the wrapper's ``.module`` is
    the object an optimizer built before the rebinding spelled ``w`` (LlamaGen's
    ``optimizer_disc`` over ``vq_loss.discriminator``)."""
    out = []
    for x in srcs:
        w, sep, rest = x.partition(".module")
        if not sep or "." in w or rest[:1] not in ("", "."):
            continue
        for b in f.scope.bindings_before(w, line):
            v = value_of(b)
            args = (*v.args, *(k.value for k in v.keywords)) if isinstance(v, ast.Call) else ()
            if any(dotted(_moved(a)) == w for a in args):
                out.append(w + rest)
                break
    return out


def _self_aliases(srcs: list[str], f: LoopFacts, ctx: Context) -> list[str]:
    """``self.a.rest`` read as ``self.b.rest`` when every assignment of ``self.a`` in the
    class is ``self.a = self.b`` (LightZero's policies: ``self._learn_model = self._model`` in
    ``_init_learn``, the optimizer built over ``self._model``): one object, two names."""
    cls = ctx.analysis.class_of(f.scope.node)
    out = []
    for x in srcs:
        head, _, rest = x[5:].partition(".") if x.startswith("self.") else ("", "", "")
        info = cls.attrs.get(head) if cls is not None and head else None
        if info is None or info.later:
            continue
        d = dotted(info.value) if isinstance(info.value, ast.Attribute) else None
        if d is not None and d.startswith("self.") and d != "self." + head:
            out.append(d + ("." + rest if rest else ""))
    return out


def _moved(a: ast.AST) -> ast.AST:
    while isinstance(a, ast.Call) and isinstance(a.func, ast.Attribute) \
            and a.func.attr in ("to", "cuda", "cpu"):
        a = a.func.value
    return a
