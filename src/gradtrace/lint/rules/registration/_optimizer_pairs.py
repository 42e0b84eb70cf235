"""GT406's tests of two optimizers over one model's parameters: all of a module's parameters,
the GAN role a name marks, a part one optimizer's module holds from its arguments, and
whether the two step in one loop."""
from __future__ import annotations

import ast
import re

from gradtrace.lint.analysis.modules import ClassInfo
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.rules.leaf._tensors import keyword
from gradtrace.lint.rules.registration._aliases import held_from_arguments
from gradtrace.lint.rules.registration._modules import OptimizerBuild, covers


def _whole_params(call: ast.Call) -> bool:
    """``Optim(m.parameters(), ...)``: all of a module's parameters, unfiltered."""
    first = call.args[0] if call.args else keyword(call, "params")
    return isinstance(first, ast.Call) and isinstance(first.func, ast.Attribute) \
        and first.func.attr == "parameters" and not first.args


ROLE_G = frozenset({"g", "gen", "generator", "netg", "modelg", "gnet"})


ROLE_D = frozenset({"d", "disc", "discriminator", "netd", "modeld", "dnet", "critic"})


def role(name: str) -> str | None:
    """"g" / "d" when a name marks a GAN generator / discriminator (`netG`, `opt_d`)."""
    toks = {t.lower() for t in re.findall(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])", name)}
    toks |= {name.lower().replace("_", "")}
    g, d = bool(toks & ROLE_G), bool(toks & ROLE_D)
    return "g" if g and not d else "d" if d and not g else None


def _step_loops(scope: Scope, opt: str) -> set[int]:
    """ids of the innermost loops around the ``step`` calls of optimizer ``opt``: an outer
    loop that runs two inner ones in turn (KGAT's epoch: a CF loop stepping ``cf_optimizer``,
    then a KG loop stepping ``kg_optimizer``) runs phases, each step on its own loss."""
    calls = [m for m in scope.calls_to("step")
             if m.receiver == opt or (m.call.args and dotted(m.call.args[0]) == opt)]
    return {id(loops[-1]) for m in calls for loops in (scope.loops_of(m.stmt),) if loops}


def _shared_part(me: OptimizerBuild, other: OptimizerBuild, cls: ClassInfo, ctx: Context
                 ) -> str | None:
    """``self.a = Opt(self.x.parameters())`` where ``self.x = X(self.critic, ...)`` keeps
    ``critic.encoder``, and the other optimizer is over ``self.critic.encoder``: the shared
    part (NOTE [held from arguments])."""
    if len(me.sources) != 1 or not _whole_params(me.call) or not other.sources:
        return None
    (src,) = me.sources
    if not src.startswith("self.") or src.count(".") != 1:
        return None
    for part in held_from_arguments(cls, src[5:], ctx):
        if any(covers(part, s) or covers(s, part) for s in other.sources):
            return part
    return None


def _stepped_together(scope: Scope, a: str, b: str) -> bool:
    """Whether two optimizers step in one pass of one loop (not in phases one after the
    other, nor in inner loops an outer one runs in turn)."""
    return bool(_step_loops(scope, a) & _step_loops(scope, b))


def odd_branch(b: OptimizerBuild, builds: list[OptimizerBuild]) -> frozenset[str] | None:
    """# NOTE [odd optimizer branch]
    ``b`` is one of several constructions of one optimizer name (the arms of an
    ``if args.optimizer == ...`` chain) and the only one over other parameters than the rest,
    which all agree: the sources the other arms use. A slip in that arm
    (``Adagrad(model.parameters())`` where every other arm of ``optimizer1`` says
    ``Autoencoder.parameters()``) is what makes it share the weights of another optimizer:
    that arm is the line to change, not each arm of the other optimizer."""
    same = [o.sources for o in builds if o.name == b.name and o.stmt is not b.stmt]
    if len(same) < 2 or len(set(same)) != 1 or not same[0] or same[0] == b.sources:
        return None
    return same[0]
