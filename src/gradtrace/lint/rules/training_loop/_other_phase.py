"""GT518: the loop trains another optimizer's model; the step after it belongs to a later
backward.

# NOTE [another phase before the step]
A GAN-style pass: ``for e in range(k): optG.zero_grad(); lossD.backward(); optD.step()`` (the
discriminator's phase, which also clears the generator's leftovers), then ``lossG.backward();
optG.step()`` after the loop. The step after the loop is not the loop's: every backward of the
loop is followed, in its pass, by the step of another optimizer, and a backward runs after
the loop before that step. What the step applies is that later backward's gradient (with
whatever the loop left, which a missing clear, not the step's place, would explain): moving
the step into the loop, as GT518 advises, would step the generator with the discriminator's
loss. The rule is silent then.
"""
from __future__ import annotations

import ast

from gradtrace.lint.names import dotted
from gradtrace.lint.rules.training_loop._loop import LoopFacts, Step


def other_phase(f: LoopFacts, loop: ast.stmt, s: Step) -> bool:
    """NOTE [another phase before the step]."""
    inner = [b for b in f.backwards if f.inside(b.stmt, loop)]
    return bool(inner) and all(any(
        s2.optimizer != s.optimizer and f.inside(s2.stmt, loop) and f.before(b.stmt, s2.stmt)
        for s2 in f.steps) for b in inner) and any(
        f.before(loop, b.stmt) and f.before(b.stmt, s.stmt) and not f.inside(b.stmt, loop)
        for b in f.backwards)


# NOTE [gradient gathered by the optimizer]
# A pass that clears, backpropagates, then hands the fresh gradient to the stepped optimizer
# itself (`opt.aggregate_grads(n)` of a Bayesian gradient descent: every Monte-Carlo sample
# of the weights clears, backpropagates and adds its gradient into the optimizer's own
# sums; `step()` after the loop applies their mean): the step after the loop applies what
# every pass gave, not the last pass alone. Any call of another method of the stepped
# optimizer's object after each backward of the loop, in that pass, counts (the optimizer
# reads the gradient there); `zero_grad`, `step` and the state methods do not.
NOT_GATHERING = frozenset({"zero_grad", "step", "state_dict", "load_state_dict",
                           "add_param_group", "register_step_pre_hook",
                           "register_step_post_hook"})


def gathered(f: LoopFacts, loop: ast.stmt, s: Step) -> bool:
    """NOTE [gradient gathered by the optimizer]."""
    inner = [b for b in f.backwards if f.inside(b.stmt, loop)]
    takes = [n for n in ast.walk(loop) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Attribute) and n.func.attr not in NOT_GATHERING
             and dotted(n.func.value) == s.optimizer]
    return bool(inner and takes) and all(any(
        f.before(b.stmt, st) and f.inside(st, loop)
        for st in f.within(loop) if any(c in takes for c in ast.walk(st))) for b in inner)
