"""Whether a module's accessor of ``self`` tensors is read only for looking at them.

# NOTE [accessor only looked at]
GT402 leaves alone a plain tensor that requires grad when a method taking only ``self``
returns it in a list (``def fusion_weights(self): return [self.w1, self.w2]``, DARTS's
``arch_parameters``): the list is there for the caller's own optimizer. That reading fails
when the file itself builds an optimizer, calls the accessor, and every call's list is only
looked at: bound to a name that is only iterated (``for w in ws``, ``[w.item() for w in
ws]``) or counted (``len(ws)``), or iterated directly. The list then never reaches an
optimizer of the file; no other file of the project names the accessor, so none of theirs
either (quantized-depth-estimation's BiFPN fusion weights: read and printed, never trained).
A list handed anywhere else (an optimizer, a function, a return, an attribute) keeps the
accessor the caller's: unknown, left alone.
"""
from __future__ import annotations

import ast
import os

from gradtrace.lint.context import Context
from gradtrace.lint.nodes import walk
from gradtrace.lint.analysis.file_parents import file_parents
from gradtrace.lint.rules.leaf._tensors import is_optimizer_call

COUNTS = frozenset({"len"})


def only_looked_at(ctx: Context, name: str) -> bool:
    """Whether every call ``x.<name>()`` of the file (one at least) has its list only looked
    at, in a file that builds an optimizer, and so has every reading of ``.<name>`` in the
    project's other files (NOTE [accessor only looked at])."""
    if not ctx.mentions("optim") or not any(is_optimizer_call(n, ctx) for n in walk(ctx.tree)):
        return False
    calls = _all_looked_at(ctx, name)
    if not calls:
        return False
    others = _others(ctx, name)
    return others is not None and all(_all_looked_at(o, name) is not None for o in others)


def _all_looked_at(ctx: Context, name: str) -> int | None:
    """How many calls ``x.<name>()`` the file makes, each only looked at; None: ``.<name>``
    is read some other way."""
    reads = [n for n in walk(ctx.tree) if isinstance(n, ast.Attribute) and n.attr == name
             and isinstance(n.ctx, ast.Load)]
    if not reads:
        return 0
    parents = file_parents(ctx)
    for r in reads:
        c = parents.get(id(r))
        if not (isinstance(c, ast.Call) and c.func is r and not c.args and not c.keywords
                and _looked_at(c, parents)):
            return None
    return len(reads)


def _looked_at(call: ast.Call, parents: dict[int, ast.AST]) -> bool:
    up = parents.get(id(call))
    if _iterated(call, up):
        return True
    if not (isinstance(up, ast.Assign) and len(up.targets) == 1
            and isinstance(up.targets[0], ast.Name)):
        return False
    bound = up.targets[0].id
    fn = up
    while fn is not None and not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                 ast.Module)):
        fn = parents.get(id(fn))
    uses = [n for n in walk(fn) if isinstance(n, ast.Name) and n.id == bound] if fn else []
    return all(isinstance(n.ctx, ast.Store) and n is up.targets[0]
               or isinstance(n.ctx, ast.Load) and _iterated(n, parents.get(id(n)))
               for n in uses)


def _iterated(e: ast.AST, up: ast.AST | None) -> bool:
    """``e`` is what a loop or a comprehension iterates over, or what ``len`` counts."""
    if isinstance(up, (ast.For, ast.AsyncFor, ast.comprehension)):
        return up.iter is e
    return isinstance(up, ast.Call) and isinstance(up.func, ast.Name) \
        and up.func.id in COUNTS and up.args == [e]


def _others(ctx: Context, name: str) -> list[Context] | None:
    """The project's other files that hold ``.<name>`` (None: they cannot be told)."""
    from gradtrace.lint.analysis.callers import project_files, readers
    me = os.path.realpath(ctx.path)
    if not os.path.isfile(me):
        return []  # a snippet: nothing around it
    files = project_files(me)
    if files is not None and len(files) < 2:
        return []
    found = readers(ctx, ("." + name).encode())
    return found
