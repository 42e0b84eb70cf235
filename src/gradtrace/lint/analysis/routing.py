"""Softmax weights over logits the loop refines from the weighted sum: routing by agreement.

# NOTE [routing by agreement]
A capsule network's dynamic routing (Sabour et al.) normalises the logits ``b`` over the
*parent* capsules, ``c = softmax(b, dim=parents)``, sums the predictions over the *child*
capsules, ``s = (c * u).sum(dim=children)``, and then refines the logits from the agreement
of that sum with each prediction, ``b = b + (u * squash(s)).sum(-1)``, in a loop of a few
iterations. The normalised axis differs from the summed one by design: each child splits its
vote among the parents. The loop that rebinds the softmax's own logits after the softmax, from
a value the loop computed in between, is the fact read here; an attention's scores are not
recomputed from their own weighted sum.
"""
from __future__ import annotations

import ast


def refined_in_loop(fn: ast.AST, call: ast.Call) -> bool:
    """``call`` (a softmax of the name ``b``) sits in a loop of ``fn`` that rebinds ``b``
    after it from a value bound in the loop between the two (NOTE [routing by agreement])."""
    f = call.func  # `F.softmax(b, dim=4)`, `softmax_module(b)`, `b.softmax(dim=4)`
    x = call.args[0] if call.args and isinstance(call.args[0], ast.Name) else \
        f.value if isinstance(f, ast.Attribute) else None
    if not isinstance(x, ast.Name):
        return False
    for loop in ast.walk(fn):
        if not isinstance(loop, (ast.For, ast.While)) or not \
                loop.lineno < call.lineno <= (loop.end_lineno or loop.lineno):
            continue
        between: set[str] = set()
        for s in ast.walk(loop):
            if not isinstance(s, (ast.Assign, ast.AugAssign)) or s.lineno <= call.lineno:
                continue
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            names = {t.id for t in targets if isinstance(t, ast.Name)}
            if x.id in names and any(isinstance(n, ast.Name) and n.id in between - {x.id}
                                     for n in ast.walk(s.value)):
                return True
            between |= names
    return False
