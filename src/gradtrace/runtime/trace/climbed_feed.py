"""Models a climbed objective runs through, beside the trained weights (a world model, a
reward model): left out of every optimizer on purpose.

# NOTE [model the climbed objective runs through]
A loss that is the whole objective negated (``-returns.mean()``, ``-1 * (target.mean())``)
climbs a value that a differentiable model computes from the trained module's output: the
actor's actions go through a world model and a reward model (Dreamer's imagined returns), or
through a fixed simulator with weights. Those models get gradients only because the actor's
gradient has to cross them; their own training (or their staying fixed) is another loss's
business, so no optimizer of this step is meant to hold them (GT821 stays silent). The run
walks the graph of the first backward() calls of each line and keeps, per parameter, whether a
backward() whose loss is not such a negation reached it, and whether one of its uses takes an
input that itself reaches a parameter some optimizer holds (the model sits after the trained
weights). Reported still: a parameter any other loss reaches (a critic with its own regression
loss left out of its optimizer), a model before the trained weights (a mapping network fed
only noise: forgotten, not crossed), a loss compared with a target or summed with another
term (``recon - kl``: only part of it is climbed), a negated log-likelihood (a graph with a
log node, ``-dist.log_prob(y).mean()``: fitted to data, its head forgotten). The negation is read from the loss's
statement, plain AST (:func:`negated_loss`).
"""
from __future__ import annotations

import ast
import weakref
from typing import Any

from gradtrace.lint.analysis.maximized import RESULT_METHODS

_PER_LINE = 2  # backward() calls walked per line
_LINES = 32  # lines looked at per session
_LIMIT = 20000  # graph nodes walked per backward()
_BY_STATE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _negative_constant(e: ast.AST) -> bool:
    return isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub) and isinstance(
        e.operand, ast.Constant) and isinstance(e.operand.value, (int, float)) or isinstance(
        e, ast.Constant) and isinstance(e.value, (int, float)) and e.value < 0


def _negated(e: ast.AST) -> bool:
    """``e`` is a whole negation of a non-constant: ``-x``, ``-k * x``, ``x * -1`` (through
    reductions on the result, ``(-x).mean()``)."""
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and \
            e.func.attr in RESULT_METHODS:
        e = e.func.value
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        return not isinstance(e.operand, ast.Constant)
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mult):
        if _negative_constant(e.left) != _negative_constant(e.right):
            other = e.right if _negative_constant(e.left) else e.left
            return not _negated(other)  # (``-1 * -q``: twice negated)
    return False


def negated_loss(tree: ast.AST, line: int) -> bool:
    """The ``X.backward()`` on ``line`` backpropagates a whole negation: ``X`` itself, or the
    last value its scope binds to the name ``X`` before that line."""
    scopes = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
              and n.lineno <= line <= (n.end_lineno or n.lineno)]
    scope = max(scopes, key=lambda n: n.lineno) if scopes else tree
    calls = [n for n in ast.walk(scope) if isinstance(n, ast.Call) and n.lineno == line and
             isinstance(n.func, ast.Attribute) and n.func.attr == "backward"]
    if len(calls) != 1:
        return False
    loss = calls[0].func.value
    if not isinstance(loss, ast.Name):
        return _negated(loss)
    bound = [n for n in ast.walk(scope) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
             and n.lineno < line and any(isinstance(t, ast.Name) and t.id == loss.id for t in (
                 n.targets if isinstance(n, ast.Assign) else [n.target]))]
    last = max(bound, key=lambda n: n.lineno, default=None)
    return isinstance(last, ast.Assign) and _negated(last.value)


def _negated_at(site: Any) -> bool:
    from gradtrace.runtime.trace.locate import tree_of

    tree = tree_of(site.path) if site is not None and not site.path.startswith("<") else None
    return tree is not None and negated_loss(tree, site.line)


def _kids(n: Any) -> list[Any]:
    try:
        return [m for m, _ in n.next_functions if m is not None]
    except (AttributeError, RuntimeError):
        return []


def _var(n: Any) -> Any:
    return getattr(n, "variable", None) if type(n).__name__ == "AccumulateGrad" else None


def _likelihood(n: Any) -> bool:
    """A log or log-likelihood node (``LogBackward0``, ``LogSoftmaxBackward0``,
    ``NllLossBackward0``): a negated log-likelihood is fitted to data, not a value climbed."""
    name = type(n).__name__
    return name.startswith(("Log", "Nll", "BinaryCrossEntropy")) and name.endswith(
        "Backward0") or name in ("XlogyBackward0", "SpecialXlog1pyBackward0")


def _walk(root: Any, in_opt: set[int]) -> tuple[set[int], set[int], bool] | None:
    """(ids of the leaves reached, ids of those used beside an input that reaches an
    optimized leaf, whether a log node is met); None past the walk's limit."""
    order, seen, stack = [], set(), [(root, False)]
    logs = False
    while stack:
        n, done = stack.pop()
        if done:
            order.append(n)
            continue
        if id(n) in seen:
            continue
        seen.add(id(n))
        logs = logs or _likelihood(n)
        if len(seen) > _LIMIT:
            return None
        stack.append((n, True))
        stack.extend((m, False) for m in _kids(n))
    trained: dict[int, bool] = {}
    solo: dict[int, int | None] = {}  # node -> the one leaf a chain of one-input nodes ends at
    reached: set[int] = set()
    beside: set[int] = set()
    for n in order:  # children first
        var, kids = _var(n), _kids(n)
        if var is not None:
            reached.add(id(var))
            trained[id(n)], solo[id(n)] = id(var) in in_opt, id(var)
            continue
        trained[id(n)] = any(trained.get(id(k), False) for k in kids)
        solo[id(n)] = solo.get(id(kids[0])) if len(kids) == 1 else None
        for k in kids:
            leaf = solo.get(id(k))
            if leaf is not None and any(trained.get(id(o), False) for o in kids if o is not k):
                beside.add(leaf)
    return reached, beside, logs


def note_backward(state: Any, data: Any, site: Any, roots: Any) -> None:
    """At a backward() of one root: the leaves it reaches, by the kind of its loss."""
    root = roots[0] if len(roots) == 1 else None
    if site is None or root is None or getattr(root, "grad_fn", None) is None:
        return
    seen = _BY_STATE.setdefault(state, {"lines": {}, "plain": set(), "climbed": set(),
                                        "beside": set()})
    lines = seen["lines"]
    if site not in lines and len(lines) >= _LINES or lines.get(site, 0) >= _PER_LINE:
        return
    lines[site] = lines.get(site, 0) + 1
    in_opt = {id(p) for r in list(data.optimizers.values()) if r.ref() is not None
              for g in r.ref().param_groups for p in g["params"]}
    got = _walk(root.grad_fn, in_opt)
    if got is None:
        return
    reached, beside, logs = got
    seen["climbed" if not logs and _negated_at(site) else "plain"].update(reached)
    seen["beside"].update(beside)


def crossed_only(state: Any, missed: list[Any]) -> bool:
    """Every parameter of ``missed`` was reached only by backward() calls of a whole negated
    loss, used after the trained weights (NOTE [model the climbed objective runs through])."""
    seen = _BY_STATE.get(state)
    if not seen or not seen["climbed"]:
        return False
    ids = {id(p) for p in missed}
    return ids <= seen["climbed"] and ids <= seen["beside"] and not ids & seen["plain"]


__all__ = ["crossed_only", "negated_loss", "note_backward"]
