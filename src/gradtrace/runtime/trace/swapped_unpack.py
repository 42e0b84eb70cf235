"""backward() on a number unpacked from a call whose other result is the loss tensor.

# NOTE [results unpacked out of order]
``loss, acc = criterion(out, y)`` where the criterion returns ``(acc, loss)`` (Deep_Metric's
trainer unpacking ``(mean_pos_sim, mean_neg_sim, prec, loss)`` as ``loss, inter_, dist_ap,
dist_an``): ``loss`` holds a Python number made inside the callee (``float(...)``, ``.item()``),
and backward() on it raises ``'float' object has no attribute 'backward'``. The ``.item()`` inside
the callee is right (it is a logged statistic); the slip is the caller's unpacking. Read when that
error is raised: the name backward() was called on was last bound, in the failing function, by
an assignment that unpacks one call's results into a tuple of names, and exactly one OTHER name
of that tuple now holds a one-element floating tensor with a graph (``grad_fn`` set). Named: the
unpacking line. A number unpacked next to no graph tensor (every result a number, a loss made
of ``.item()`` values) keeps the existing diagnosis (where the number was made).
"""
from __future__ import annotations

import ast
import types
from typing import Any

import torch

from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.locate import tree_of


def _names(target: ast.AST) -> list[str] | None:
    if not isinstance(target, (ast.Tuple, ast.List)):
        return None
    out = []
    for e in target.elts:
        if not isinstance(e, ast.Name):
            return None
        out.append(e.id)
    return out


def _unpacking(site: Site, name: str) -> tuple[ast.Assign, list[str]] | None:
    """The last ``a, b = f(...)`` binding ``name`` before ``site`` in ``site``'s function."""
    tree = tree_of(site.path)
    if tree is None:
        return None
    scope = min((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef,
                                                             ast.AsyncFunctionDef))
                 and n.lineno <= site.line <= (n.end_lineno or n.lineno)),
                key=lambda n: (n.end_lineno or n.lineno) - n.lineno, default=tree)
    best: tuple[ast.Assign, list[str]] | None = None
    for n in ast.walk(scope):
        if not isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For)) \
                or n.lineno >= site.line:
            continue
        targets = n.targets if isinstance(n, ast.Assign) else [n.target]
        binds = any(isinstance(t, ast.Name) and t.id == name or name in (_names(t) or ())
                    for t in targets)
        if not binds or best is not None and n.lineno < best[0].lineno:
            continue
        names = _names(targets[0]) if isinstance(n, ast.Assign) and len(targets) == 1 else None
        value = n.value.value if isinstance(getattr(n, "value", None), ast.Await) \
            else getattr(n, "value", None)
        best = (n, names) if names and name in names and isinstance(value, ast.Call) \
            else (n, [])
    return best if best is not None and best[1] else None


def _graph_scalar(v: Any) -> bool:
    return isinstance(v, torch.Tensor) and v.grad_fn is not None and v.numel() == 1 \
        and v.is_floating_point()


def swapped_unpack(name: str, value: Any, frame: types.FrameType,
                   site: Site) -> tuple[Site, str] | None:
    """(the unpacking line, the name holding the loss tensor) when the module's NOTE applies
    to ``name`` (holding the number ``value``), else None."""
    if not isinstance(value, (float, int)) or isinstance(value, bool):
        return None
    hit = _unpacking(site, name)
    if hit is None:
        return None
    node, names = hit
    local = frame.f_locals
    losses = [n for n in names if n != name and _graph_scalar(local.get(n))]
    if len(losses) != 1:
        return None
    return Site(site.path, node.lineno, site.function, node.col_offset), losses[0]


__all__ = ["swapped_unpack"]
