"""The caller that hands a loss to a helper keeping a running total of it.

# NOTE [running total in a helper]
``total += loss`` after a backward() keeps every step's graph (GT505). When the ``+=`` runs in
a helper that was *given* the tensor (an average meter's ``update(val, n)``, a logger's
``push(v)``, ``accumulate(logs, key, value)``), the helper is generic: it sums whatever it
receives, and the line to change is the call that passes a tensor with its graph where a
number was meant (``meter.update(loss.item())``). Run-time facts: the frame running the ``+=``
has an argument that is a tensor with a graph, whose ``grad_fn`` the added term reaches within
a few nodes; the line named is then the user frame that called that function.

# NOTE [running total of a returned loss]
``tr_loss += self.training_step(model, inputs)`` (transformers' Trainer before PR 6999): the
step function backpropagates its loss and returns it with its graph; the ``+=`` only sums what
it was given, and the line to change is the step's ``return loss`` (``return loss.detach()``).
Run-time fact: the added term's node is the root of a backward() seen (one of the first 8
losses backpropagated, NOTE [losses kept alive]) and that backward() ran in another function
than the ``+=``. The line named is the ``return`` of that function (its own scope, found in
the file's syntax tree) that hands out the backpropagated name, alone or in a tuple; without
one the ``+=`` stays named. Decided once per ``+=`` line.
"""
from __future__ import annotations

import sys
from typing import Any

from gradtrace.runtime.frames import Site, is_internal


def _near(after: Any, target: Any, depth: int = 4) -> bool:
    level = [after]
    for _ in range(depth):
        nxt = []
        for n in level:
            try:
                for m, _ in n.next_functions:
                    if m is target:
                        return True
                    if m is not None:
                        nxt.append(m)
            except (AttributeError, RuntimeError):
                continue
        level = nxt
    return False


def caller_of_argument(code: Any, after: Any) -> Site | None:
    """The call of the function running ``code`` (the frame of the ``+=``) when the added term
    comes from one of its tensor arguments (NOTE [running total in a helper]), else None."""
    import torch

    f = sys._getframe(1)
    while f is not None and f.f_code is not code:
        f = f.f_back
    if f is None or after is None:
        return None
    n = code.co_argcount + code.co_kwonlyargcount
    args = [f.f_locals.get(name) for name in code.co_varnames[:n]]
    if not any(isinstance(a, torch.Tensor) and a.grad_fn is not None
               and _near(after, a.grad_fn) for a in args):
        return None
    up = f.f_back
    while up is not None and is_internal(up.f_code):
        up = up.f_back
    return None if up is None else Site(up.f_code.co_filename, up.f_lineno, up.f_code.co_name)


def returned_backpropagated(state: Any, at: Site, gf: Any, after: Any) -> Site | None:
    """The ``return`` handing out the loss added at ``at``, else None; ``gf`` is the old
    total's node, ``after`` the sum's (NOTE [running total of a returned loss])."""
    memo = state.returned_at
    if at in memo:
        return memo[at]
    memo[at] = None
    terms = [f for f, _ in after.next_functions if f is not None and f is not gf]
    if len(terms) != 1:
        return None
    back = next((site for ref, site in state.kept_roots
                 if (t := ref()) is not None and t.grad_fn is terms[0]), None)
    if back is None or back.path != at.path:
        return None
    memo[at] = _return_of(back, at)
    return memo[at]


def _return_of(back: Site, at: Site) -> Site | None:
    import ast

    from gradtrace.runtime.trace.locate import tree_of
    from gradtrace.runtime.trace.offstack import _own

    tree = tree_of(back.path)
    if tree is None:
        return None
    scope = None
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and n.lineno <= back.line <= (n.end_lineno or n.lineno) \
                and (scope is None or n.lineno > scope.lineno):
            scope = n
    if scope is None or scope.lineno <= at.line <= (scope.end_lineno or scope.lineno):
        return None  # the += runs in the function of the backward(): its own name is summed
    own = _own(scope)
    name = next((n.func.value.id for n in own if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Attribute) and n.func.attr == "backward"
                 and n.lineno == back.line and isinstance(n.func.value, ast.Name)), None)
    for n in own:
        if isinstance(n, ast.Return) and n.value is not None and any(
                isinstance(e, ast.Name) and e.id == name
                for e in (n.value.elts if isinstance(n.value, ast.Tuple) else [n.value])):
            return Site(back.path, n.lineno, scope.name, n.col_offset)
    return None


__all__ = ["caller_of_argument", "returned_backpropagated"]
