"""A module's ``zero_grad()`` that clears only a part of what the stepped optimizer holds
(GT503): the rest of the step still applies, so the part is frozen for that step on purpose
(alternating training of a body and a head, FL-bench's FedPAC)."""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.cuts import self_assignments
from gradtrace.lint.names import dotted
from gradtrace.lint.rules.training_loop._loop import LoopFacts, Named, Step, _owners, _stepped_expr


def part_of(f: LoopFacts, z: Named, s: Step) -> bool:
    """``z`` clears one module of several the stepped optimizer holds (FL-bench's FedPAC:
    groups over ``model.base`` and ``model.classifier``, ``model.base.zero_grad()`` before the
    step), or a submodule of the one it holds (``model.encoder.zero_grad()``, the optimizer
    over ``model.parameters()``), after the optimizer's own ``zero_grad()`` in the same pass:
    the rest still trains, a freeze of that part on purpose."""
    if not any(c.receiver == s.optimizer and f.before(c.stmt, z.stmt) for c in f.zero_grads):
        return False  # only when the step's own gradients were cleared first (a decoder's
        # `zero_grad()` after backward, the encoder's before it: the clearing is misplaced)
    over = _owners(f, _stepped_expr(s), s.call.lineno) or _built_over(f, s)
    r = z.receiver
    return r in over and any(o != r for o in over) or any(r.startswith(o + ".") for o in over)


def _built_over(f: LoopFacts, s: Step) -> frozenset[str]:
    """The receivers of ``X.parameters()`` in the value ``s``'s optimizer is bound to (in the
    function, the module, or on ``self`` in the class): its parameter groups."""
    values = [b.value for sc in (f.scope, f.ctx.scope(f.ctx.tree))
              if (b := sc.binding_before(s.optimizer, s.stmt.lineno)) is not None]
    if not values and s.optimizer.startswith("self."):
        values = self_assignments(f.ctx.class_def, s.optimizer, f.ctx)
    return frozenset(r for v in values if v is not None for n in ast.walk(v)
                     if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                     and n.func.attr == "parameters" and (r := dotted(n.func.value)))


def part_clearing(f: LoopFacts, s: Step) -> Named | None:
    """The ``zero_grad()`` of a submodule of what ``s``'s optimizer holds
    (``ae.encoder.zero_grad()``, the optimizer over ``ae.parameters()``) when it is the only
    clearing of that optimizer (NOTE [one optimizer never cleared]): the line to change, since
    the rest of the model's gradients add up over the batches."""
    over = _owners(f, _stepped_expr(s), s.call.lineno)
    for z in f.zero_grads:
        r = z.receiver
        if r and any(r.startswith(o + ".") for o in over):
            return z
    return None
