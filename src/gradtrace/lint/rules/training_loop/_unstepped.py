"""GT509's first pass into a producer the stepped optimizer does not hold
(NOTE [first pass into an unstepped producer])."""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.graph_deps import Deps
from gradtrace.lint.analysis.reach import value_of
from gradtrace.lint.analysis.steps import Step
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Binding
from gradtrace.lint.names import dotted
from gradtrace.lint.rules.training_loop._loop import LoopFacts


def _read_into_unstepped(f: LoopFacts, t: Binding, d1: Deps, step: Step, ctx: Context
                         ) -> ast.Call | None:
    """# NOTE [first pass into an unstepped producer]
    ``x = G(...)``; ``d = D(x, ...)`` in the first loss; ``opt_d`` (built over
    ``D.parameters()``) steps after its backward; ``x`` is read again for the second loss (the
    VITS2 duration discriminator fed the text encoder's outputs undetached). The first backward
    reaches ``G`` only to free its graph: ``opt_d`` holds none of ``G``'s parameters. The call
    of ``D`` on ``x`` in the first loss is then the line to change (``x.detach()``). Said when
    the optimizer's binding is ``torch.optim.X(D.parameters(), ...)`` with ``D`` the callee
    of that call, and ``x`` is bound from a call of another name."""
    b = f.scope.binding_before(step.optimizer, step.stmt.lineno)
    v = b.value if b is not None else None
    q = ctx.call_name(v) if isinstance(v, ast.Call) else None
    if not q or not q.startswith("torch.optim.") or not v.args:  # type: ignore[union-attr]
        return None
    a = v.args[0]  # type: ignore[union-attr]
    if not (isinstance(a, ast.Call) and isinstance(a.func, ast.Attribute)
            and a.func.attr == "parameters" and not a.args):
        return None
    owner = dotted(a.func.value)
    made = value_of(t)
    if owner is None or not isinstance(made, ast.Call) or dotted(made.func) is None or any(
            isinstance(n, ast.Call) and dotted(n.func) == owner for n in ast.walk(made)):
        return None  # `x` made by the stepped module itself: its graph is the step's
    return next((call for callee, arg, call in d1.consumers if arg == t.name
                 and dotted(call.func) == owner), None)
