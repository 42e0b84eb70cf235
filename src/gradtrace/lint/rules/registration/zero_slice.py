"""GT473: the last ``n`` parts taken as ``parts[-n:]`` with ``n`` defaulting to 0 (all of them)."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.nodes import scope_nodes, walk
from gradtrace.lint.rule import Bad, Good, Rule


def _zero_defaults(fn: ast.AST) -> set[str]:
    """The parameters of ``fn`` whose default is the integer 0."""
    a = fn.args  # type: ignore[attr-defined]
    pos = [*a.posonlyargs, *a.args]
    pairs = list(zip(pos[len(pos) - len(a.defaults):], a.defaults))
    pairs += [(x, d) for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
    return {x.arg for x, d in pairs if isinstance(d, ast.Constant) and d.value == 0
            and not isinstance(d.value, bool)}


def _tested_or_rebound(fn: ast.AST, name: str) -> bool:
    """``fn`` tests ``name`` somewhere (``if n:``, ``if n != 0:``, ``assert n > 0``, ``x if n
    else y``, ``n and ...``) or binds it again: the zero case may be handled."""
    for n in walk(fn):
        tests = [n.test] if isinstance(n, (ast.If, ast.IfExp, ast.While, ast.Assert)) else \
            n.values if isinstance(n, ast.BoolOp) else []
        if any(isinstance(x, ast.Name) and x.id == name for t in tests for x in walk(t)):
            return True
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store):
            return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) \
                and n.func.id in ("max", "min", "range") and any(
                    isinstance(x, ast.Name) and x.id == name for x in n.args):
            return True  # `max(n, 1)`; `range(n)`: a loop the count drives
    return False


def _sets_grad_flag(fn: ast.AST) -> bool:
    """``fn`` sets ``.requires_grad`` (an assignment or ``requires_grad_(...)``)."""
    return any(isinstance(n, ast.Assign) and any(
        isinstance(t, ast.Attribute) and t.attr == "requires_grad" for t in n.targets)
        or isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
        and n.func.attr == "requires_grad_" for n in walk(fn))


def _flagged_use(sub: ast.Subscript, fn: ast.AST, ctx: Context) -> bool:
    """The slice is handed to a function of the file (a nested one too) that sets
    ``requires_grad``, or a loop over it sets it."""
    for n in walk(fn):
        if isinstance(n, ast.Call) and sub in n.args and isinstance(n.func, ast.Name):
            defs = [d for d in walk(ctx.tree) if isinstance(d, FUNCTION_TYPES)
                    and d.name == n.func.id]
            if len(defs) == 1 and _sets_grad_flag(defs[0]):
                return True
        if isinstance(n, (ast.For, ast.AsyncFor)) and n.iter is sub \
                and any(_sets_grad_flag(s) for s in n.body):
            return True
    return False


class LastZeroPartsAreAll(Rule):
    """`parts[-n:]` picks the parts to unfreeze (or freeze), with `n` a parameter whose
    default is 0: `parts[-0:]` is `parts[0:]`, every part, not none.

    Why: in Python `-0 == 0`, so the slice of "the last n" with n = 0 starts at the first
    item. A helper that freezes a tower and then unlocks its last `unlocked_groups` groups
    with `groups[-unlocked_groups:]` unlocks all of them when called with its default 0: the
    tower it was asked to lock trains in full, and nothing fails (open_clip's
    `lock_text_transformer`, fixed with `if unlocked_groups != 0:`). Guard the zero case, or
    slice with `parts[len(parts) - n:]`.
    Known limits: the count must be a parameter of the enclosing function defaulting to 0,
    never tested nor rebound there; the slice must go to a function of the file that sets
    `requires_grad`, or be the iterable of a loop that sets it.
    """

    code = "GT473"
    name = "last-zero-parts-are-all"
    message = ("`{expr}` with the default `{name}=0` is `{seq}[0:]`, every part, not none "
               "(`-0 == 0`): the {what} applies to all of them; guard `if {name}:` or slice "
               "`{seq}[len({seq}) - {name}:]`")
    triggers = ("requires_grad",)
    examples = [
        Bad("""
            def lock(model, unlocked_layers=0):
                for p in model.parameters():
                    p.requires_grad = False
                for layer in model.layers[-unlocked_layers:]:
                    for p in layer.parameters():
                        p.requires_grad = True
            """, at=(4, 17)),
        Good("""
            def lock(model, unlocked_layers=0):
                for p in model.parameters():
                    p.requires_grad = False
                if unlocked_layers:
                    for layer in model.layers[-unlocked_layers:]:
                        for p in layer.parameters():
                            p.requires_grad = True
            """),
        Good("""
            def lock(model, unlocked_layers=1):
                for p in model.parameters():
                    p.requires_grad = False
                for layer in model.layers[-unlocked_layers:]:
                    for p in layer.parameters():
                        p.requires_grad = True
            """),
    ]

    def visit_FunctionDef(self, fn: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        zeros = _zero_defaults(fn)
        if not zeros:  # the count must be a parameter defaulting to 0: nothing to walk
            return
        for node in scope_nodes(fn):
            if not isinstance(node, ast.Subscript):
                continue
            s = node.slice
            if not isinstance(s, ast.Slice) or s.upper is not None or s.step is not None \
                    or not isinstance(s.lower, ast.UnaryOp) \
                    or not isinstance(s.lower.op, ast.USub) \
                    or not isinstance(s.lower.operand, ast.Name):
                continue
            name = s.lower.operand.id
            if name not in zeros or _tested_or_rebound(fn, name) \
                    or not _flagged_use(node, fn, ctx):
                continue
            seq = ctx.source(node.value)[:40]
            yield self.report(node, ctx, expr=ctx.source(node)[:60], name=name, seq=seq,
                              what="unfreezing" if _unlocks(fn) else "freezing")

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]



def _unlocks(fn: ast.AST) -> bool:
    """``fn`` sets ``requires_grad`` to True somewhere (``p.requires_grad = True``,
    ``m.requires_grad_()``, ``m.requires_grad_(True)``)."""
    for n in walk(fn):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) \
                and n.value.value is True and any(
                    isinstance(t, ast.Attribute) and t.attr == "requires_grad" for t in n.targets):
            return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr == "requires_grad_" and (not n.args or isinstance(
                    n.args[0], ast.Constant) and n.args[0].value is True):
            return True
    return False
