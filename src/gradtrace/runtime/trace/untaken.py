"""A layer whose only call sits in a branch of its parent's forward that never ran.

# NOTE [call in a branch that never ran]
fish-speech's ``RelativePositionTransformer.forward`` adds the speaker embedding with
``self.cond(g)`` only under ``if i == self.speaker_cond_layer - 1 and g is not None:``; with
``speaker_cond_layer: 0`` the index is -1, the layer loop never reaches it, and ``cond`` never
runs: its parameters, and the speaker encoder whose output ``g`` only that branch uses, get no
gradient. "Its module never ran" named at ``self.cond = nn.Linear(...)`` sends the reader to
the constructor; the line a fix changes is the test.

When a module never ran while its parent did (with grad on), the parent class's ``forward``
is read: every call of ``self.<name>(...)`` there sits in the body of one ``if`` (the innermost
around each, the same one for all). That test was never true when forward ran, and the finding
names it (the constructor line becomes a related place). A module called outside any branch,
in several branches, in an ``else``, or from another method is named where it is defined, as
before. Such a finding leads the parameters' findings of the run: an output computed and never
used (the speaker encoder's ``g``) is most often the value that branch was to use.
"""
from __future__ import annotations

import ast
from typing import Any

import torch

from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.locate import tree_of

UNTAKEN = "whose test was never true"  # the finding's reason says it (and sorts by it)


def untaken_branch(data: Any, p: torch.Tensor) -> tuple[Site, str] | None:
    """(the ``if`` line, the parent's class name) for parameter ``p`` of a module that never
    ran, whose only calls in its running parent's forward sit in that ``if``'s body."""
    for rec in list(data.modules.values()):
        m = rec.ref()
        if m is None or not rec.grad_runs:
            continue
        for name, child in m.named_children():
            if any(q is p for q in child.parameters(recurse=False)):
                site = _branch_of(type(m), name)
                return (site, type(m).__name__) if site is not None else None
    return None


def _branch_of(cls: type, attr: str) -> Site | None:
    code = getattr(getattr(cls, "forward", None), "__code__", None)
    tree = tree_of(code.co_filename) if code is not None else None
    if tree is None:
        return None
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
               and n.name == code.co_name and n.lineno <= code.co_firstlineno <= n.body[0].lineno),
              None)
    if fn is None:
        return None
    calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Attribute) and n.func.attr == attr
             and isinstance(n.func.value, ast.Name) and n.func.value.id == "self"]
    if not calls:
        return None
    branches = {id(b): b for b in (_innermost_if(fn, c) for c in calls)}
    if len(branches) != 1 or None in branches.values():
        return None
    branch = next(iter(branches.values()))
    return Site(code.co_filename, branch.lineno, code.co_name, branch.col_offset)


def _innermost_if(fn: ast.FunctionDef, call: ast.Call) -> ast.If | None:
    """The innermost ``if`` whose body (not its test, not its ``else``) holds ``call``; None
    when the call is under an ``else`` of that ``if`` or in no ``if``."""
    best: ast.If | None = None
    for n in ast.walk(fn):
        if isinstance(n, ast.If) and n.lineno <= call.lineno <= (n.end_lineno or n.lineno):
            if best is None or n.lineno >= best.lineno:
                best = n
    if best is None:
        return None
    inside = any(c is call for b in best.body for c in ast.walk(b))
    return best if inside else None


__all__ = ["UNTAKEN", "untaken_branch"]
