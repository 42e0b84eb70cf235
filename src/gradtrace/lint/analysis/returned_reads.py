"""Which arguments of a helper of another file one element of its returned tuple reads.

# NOTE [returned element reads]
Co-teaching's ``loss_1, loss_2, r1, r2 = loss_coteaching(logits1, logits2, labels, ...)``
(a function of ``loss.py``) returns ``loss_2`` computed from ``y_2[ind_1]``: the second
network's logits, indexed by the first network's small-loss ranking (``argsort`` of
``loss_1.data``). A subscript's index carries no gradient to its result, nor does ``.data``,
``.detach()`` or ``len(...)``: ``loss_2``'s graph holds the second network only, although the
call is handed both networks' logits. The helper is read in its own file (the project
index); the element's reads are followed through the helper's bindings to its parameters,
and mapped back to the call's arguments. Unknown (no fact): a return that is not a tuple of
the bound width, a starred argument, a read bound by anything but a plain assignment.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.cuts import DETACHING_METHODS, NON_VALUE_ATTRS, NUMBER_FUNCS
from gradtrace.lint.analysis.project import foreign_function, home

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Binding


def part_arguments(ctx: Context, b: Binding) -> list[ast.expr] | None:
    """The arguments of ``b``'s call that the element bound to ``b.name`` reads, for a tuple
    unpacked from a call of a function of another file (NOTE [returned element reads]);
    None: not such a binding, or unknown."""
    s = b.stmt
    if not (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(
            s.targets[0], ast.Tuple) and isinstance(s.value, ast.Call)
            and isinstance(s.value.func, ast.Name)):
        return None
    names = [t.id if isinstance(t, ast.Name) else None for t in s.targets[0].elts]
    call = s.value
    if b.name not in names or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    fn = foreign_function(ctx, call)
    if fn is None or fn.args.vararg is not None or fn.args.kwarg is not None:
        return None
    rets = [r.value for r in ast.walk(fn) if isinstance(r, ast.Return)]
    if not rets or any(not isinstance(r, ast.Tuple) or len(r.elts) != len(names)
                       for r in rets):
        return None
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)]
    scope = home(ctx, fn).scope(fn)
    read: set[str] = set()
    todo = [(r.elts[names.index(b.name)], r.lineno) for r in rets]  # type: ignore[union-attr]
    seen: set[tuple[str, int]] = set()
    while todo:
        e, line = todo.pop()
        for name in _reads(e):
            d = scope.binding_before(name, line)
            if d is None or d.line >= line or not isinstance(d.stmt, (
                    ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.With)):
                if name in params:
                    read.add(name)  # else a global: a module, a constant
            elif (name, d.line) not in seen:
                seen.add((name, d.line))
                if not isinstance(d.stmt, ast.Assign) or d.value is None:
                    return None
                todo.append((d.value, d.line))
    pos = dict(zip(params, call.args))
    pos.update((k.arg, k.value) for k in call.keywords if k.arg)
    return [pos[p] for p in sorted(read) if p in pos]


def _reads(e: ast.AST) -> set[str]:
    """Plain names whose value may flow into ``e`` with its gradient (not a subscript's
    index, not a detached or counted read)."""
    out: set[str] = set()
    stack = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Subscript):
            stack.append(n.value)  # the index carries no gradient
        elif isinstance(n, ast.Attribute):
            if n.attr not in NON_VALUE_ATTRS:
                stack.append(n.value)
        elif isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Name) and f.id in NUMBER_FUNCS or isinstance(
                    f, ast.Attribute) and f.attr in DETACHING_METHODS:
                continue
            if isinstance(f, ast.Attribute):
                stack.append(f.value)
            stack.extend(n.args)
            stack.extend(k.value for k in n.keywords)
        elif isinstance(n, ast.Name):
            out.add(n.id)
        else:
            stack.extend(ast.iter_child_nodes(n))
    return out
