"""Whether a loss climbs a module's output: the critic or discriminator a trained module is
pushed up, left out of that module's optimizer on purpose.

# NOTE [maximized module output]
A loss that climbs a module's output (``-critic(obs, act).mean()``, ``alpha * logp - q``)
uses the module as the objective the trained module is pushed up: an actor-critic's critic, a
GAN's discriminator, a reward model. Its own training (or its staying fixed) is another
loss's business: the actor's optimizer is meant not to hold it (GT438 statically, the run's
GT821 through ``runtime/trace/intent.py``). A predictor's output is compared with a target,
never maximized, so a module run that way stays reported; so does one negated inside another
op (``torch.maximum(d, -child(x))``: a composition of shapes, not an objective climbed).
Plain AST, no scope: shared by the static rule and the runtime's report.
"""
from __future__ import annotations

import ast

RESULT_METHODS = frozenset({"flatten", "squeeze", "mean", "sum", "view", "reshape", "float"})


def _parents(root: ast.AST) -> dict[int, ast.AST]:
    return {id(c): n for n in ast.walk(root) for c in ast.iter_child_nodes(n)}


def _chain_top(e: ast.AST, parents: dict[int, ast.AST]) -> ast.AST:
    """``e`` followed up through method calls on its result (``e.flatten().mean()``)."""
    while True:
        up = parents.get(id(e))
        if isinstance(up, ast.Attribute) and up.value is e and up.attr in RESULT_METHODS:
            call = parents.get(id(up))
            if isinstance(call, ast.Call) and call.func is up:
                e = call
                continue
        return e


def _summed_into(e: ast.AST, parents: dict[int, ast.AST]) -> bool:
    """``e`` reaches the statement's value through sums, scalings and reductions only: its
    sign is the loss's (``(a - q).mean()``); under another op (``torch.maximum(d, -q)``, a
    composition of shapes, or a second negation) the loss does not simply climb it."""
    while True:
        e = _chain_top(e, parents)
        up = parents.get(id(e))
        if up is None or isinstance(up, ast.stmt):
            return True
        if not (isinstance(up, ast.BinOp) and (isinstance(up.op, (ast.Add, ast.Mult)) or isinstance(
                up.op, (ast.Sub, ast.Div)) and up.left is e)):
            return False
        e = up


def _negated_in(stmt: ast.AST, e: ast.AST) -> bool:
    parents = _parents(stmt)
    top = _chain_top(e, parents)
    up = parents.get(id(top))
    return (isinstance(up, ast.UnaryOp) and isinstance(up.op, ast.USub) or isinstance(
        up, ast.BinOp) and isinstance(up.op, ast.Sub) and up.right is top) \
        and _summed_into(up, parents)


def maximized(call: ast.Call, stmt: ast.stmt, within: ast.AST) -> bool:
    """The loss climbs ``call``'s result (``stmt`` holds it): negated or subtracted directly,
    or through one name ``stmt`` binds to it, read negated later in ``within``."""
    if _negated_in(stmt, call):
        return True
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)):
        return False
    if _chain_top(call, _parents(stmt)) is not stmt.value:
        return False
    name = stmt.targets[0].id
    for s in ast.walk(within):
        if isinstance(s, ast.stmt) and not hasattr(s, "body") and s.lineno > stmt.lineno \
                and any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
                        and _negated_in(s, n) for n in ast.walk(s)):
            return True
    return False


def maximized_at(tree: ast.AST, line: int, col: int) -> bool:
    """The call at ``line``:``col`` of ``tree`` (a module's call site) has its result climbed
    by the loss (NOTE [maximized module output])."""
    stmts = [s for s in ast.walk(tree) if isinstance(s, ast.stmt) and not hasattr(s, "body")
             and s.lineno <= line <= (s.end_lineno or s.lineno)]
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, ast.Call) and n.lineno == line and n.col_offset == col:
                return maximized(n, s, tree)
    return False
