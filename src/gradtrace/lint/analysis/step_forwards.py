"""Functions whose result a training step of the file backpropagates (a forward split out).

# NOTE [step forward]
A training step may hand its forward to a helper of the file (NeRF's ``rgb, depth, acc =
self.run_model(pose, chunk)``, which runs the model chunk by chunk, appends each chunk's
output and returns their ``torch.cat``), then compute the loss from the helper's result and
backpropagate it. The chunk outputs the helper collects are the step's graph: kept on purpose,
not an evaluation's leak (GT505). Found by name: a call ``name(...)`` or ``x.name(...)``
bound by an assignment, one of whose targets is backpropagated after it in the same function
(or script) or feeds, one assignment later, the value that is.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


def step_forward(ctx: Context, fn: ast.AST) -> bool:
    """``fn`` returns a value a step of the file backpropagates (NOTE [step forward]): the
    outputs it collects are that step's graph, kept on purpose."""
    name = getattr(fn, "name", None)
    if name is None or not any(isinstance(r, ast.Return) and r.value is not None
                               for r in walk(fn)):
        return False

    def make() -> frozenset[str]:
        out: set[str] = set()
        for d in walk(ctx.tree):
            if isinstance(d, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)):
                out |= _fed_to_backward(d)
        return frozenset(out)
    return name in ctx.memo("gt505-backward-callers", ctx.tree, make)


def _fed_to_backward(d: ast.AST) -> set[str]:
    """Names of the callees whose result ``d``'s own statements backpropagate: ``a, b =
    f(...)`` then ``loss = g(a, y)`` (one step) and ``loss.backward()`` after them."""
    own = [n for st in d.body if not isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                    ast.ClassDef)) for n in ast.walk(st)]
    assigns = [n for n in own if isinstance(n, ast.Assign)]
    backs = [(c.lineno, dotted(c.func.value) if isinstance(c.func, ast.Attribute)
              and c.func.attr == "backward" else None) for c in own
             if isinstance(c, ast.Call) and "backward" in (dotted(c.func) or "")]
    out: set[str] = set()
    for a in assigns:
        if not isinstance(a.value, ast.Call) or not dotted(a.value.func):
            continue
        got = {n.id for t in a.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        loss = got | {t.id for b in assigns if b.lineno > a.lineno for t in b.targets
                      if isinstance(t, ast.Name) and any(
                          isinstance(n, ast.Name) and n.id in got for n in ast.walk(b.value))}
        if any(line > a.lineno and who in loss for line, who in backs):
            out.add((dotted(a.value.func) or "").rpartition(".")[2])
    return out
