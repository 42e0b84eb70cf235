"""GT612: a fresh leaf's `.grad` used at the top of the loop, before the first backward."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.analysis.steps import backward_of, step_calls
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.nodes import bfs_walk, function_scopes, of_types, walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.inplace._ops import _statements
from gradtrace.lint.rules.training_loop._base import related_at

LOOPS = (ast.For, ast.AsyncFor, ast.While)


def _fresh_leaf(v: ast.AST | None, ctx: Context) -> bool:
    """``torch.randn(..., requires_grad=True)``, ``nn.Parameter(...)``, ``t.requires_grad_()``:
    a leaf whose ``.grad`` is None until a backward reaches it."""
    if not isinstance(v, ast.Call):
        return False
    if isinstance(v.func, ast.Attribute) and v.func.attr == "requires_grad_":
        return not v.args or isinstance(v.args[0], ast.Constant) and v.args[0].value is True
    q = ctx.qualified_name(v.func) or ""
    if q == "torch.nn.Parameter" or q == "torch.nn.parameter.Parameter":
        return not any(k.arg == "requires_grad" for k in v.keywords)
    return q.startswith("torch.") and any(
        k.arg == "requires_grad" and isinstance(k.value, ast.Constant) and k.value.value is True
        for k in v.keywords)


def _grad_uses(s: ast.stmt) -> Iterator[tuple[str, ast.Attribute]]:
    """(name, node) for each ``name.grad.<attr>`` a simple statement reads (``w.grad.zero_()``,
    ``w.grad.data``): ``.grad`` used as a tensor."""
    for n in bfs_walk(s):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute) \
                and n.value.attr == "grad" and isinstance(n.value.value, ast.Name) \
                and isinstance(n.value.ctx, ast.Load):
            yield n.value.value.id, n


class GradUsedBeforeFirstBackward(Rule):
    """A leaf made with `requires_grad=True` has its `.grad` used (`w.grad.data.zero_()`,
    `w.grad.zero_()`) at the top of the training loop, before the loop's backward.

    Why: a fresh leaf's `.grad` is None until the first `backward()` reaches it. Zeroing the
    gradients before the backward pass is the right order, but on the first pass there is
    nothing to zero: `w.grad.data` raises `AttributeError: 'NoneType' object has no attribute
    'data'` (jcjohnson/pytorch-examples#7, checked on torch 2.13). Zero after the update at
    the end of the pass, guard with `if w.grad is not None:`, or set `w.grad = None`.
    Known limits: the leaf is made in the same function before the loop, no backward and no
    `.grad` assignment come first; a use under an `if` that tests a `.grad` is trusted.
    """

    code = "GT612"
    name = "grad-used-before-first-backward"
    message = ("`{use}` runs before the loop's first `backward()` (line {line}), when "
               "`{leaf}.grad` is still None: the first pass raises AttributeError; zero the "
               "gradient after the update, or guard it with `if {leaf}.grad is not None`")
    triggers = (".grad.",)  # the use; a visit_Module rule: the engine's word search decides
    examples = [
        Bad("""
            import torch
            w = torch.randn(3, 1, requires_grad=True)
            for x, y in batches:
                w.grad.zero_()
                loss = ((x @ w - y) ** 2).mean()
                loss.backward()
                with torch.no_grad():
                    w -= 0.1 * w.grad
            """, at=(4, 4)),
        Good("""
            import torch
            w = torch.randn(3, 1, requires_grad=True)
            for x, y in batches:
                loss = ((x @ w - y) ** 2).mean()
                loss.backward()
                with torch.no_grad():
                    w -= 0.1 * w.grad
                w.grad.zero_()
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        """Once per file: the outermost loops of the module body and of every function."""
        if _grad_assigned(ctx):
            return
        for where in function_scopes(node):
            for loop in _outer_loops(where.body):  # type: ignore[attr-defined]
                yield from self._check(loop, ctx, where)

    def _check(self, loop: ast.stmt, ctx: Context, where: ast.AST) -> Iterator[Finding]:
        """``loop`` is outermost (an inner one may follow an earlier backward)."""
        stmts = list(_statements(loop.body))
        first = next((s for s in stmts if not isinstance(s, (*LOOPS, ast.If, ast.With)) and any(
            backward_of(c, ctx) is not None for c in of_types(s, (ast.Call,)))), None)
        if first is None:
            return
        scope = ctx.scope(where)
        guarded: set[int] | None = None
        for s in stmts:
            if s is first or s.lineno >= first.lineno:
                break
            if isinstance(s, (*LOOPS, ast.If, ast.With, ast.Try)):
                continue
            if guarded is None:
                guarded = _guarded(loop)
            if id(s) in guarded:
                continue
            for leaf, use in _grad_uses(s):
                b = scope.binding_before(leaf, loop.lineno)
                if b is None or not _fresh_leaf(b.value, ctx) or any(
                        b.line < x.call.lineno < loop.lineno
                        for x in step_calls(ctx, scope.node).losses()):
                    continue
                yield self.report(s, ctx, related=(
                    related_at(ctx, b.value, f"`{leaf}` is made here, `.grad` None"),
                    related_at(ctx, first, "the first backward runs here")),
                    use=ctx.source(use)[:50], line=first.lineno, leaf=leaf)
                return


def _outer_loops(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The loops of a body not inside another loop (nested defs excluded)."""
    for s in body:
        if isinstance(s, LOOPS):
            yield s
        elif not isinstance(s, (*FUNCTION_TYPES, ast.ClassDef)):
            for f in ("body", "orelse", "finalbody"):
                yield from _outer_loops(getattr(s, f, None) or [])
            for h in getattr(s, "handlers", ()):
                yield from _outer_loops(h.body)


def _grad_assigned(ctx: Context) -> bool:
    """The file assigns some ``.grad`` (``w.grad = torch.zeros_like(w)``): not followed."""
    return ctx.memo("gt612-grad-assigned", ctx.tree, lambda: any(
        n.attr == "grad" and isinstance(n.ctx, ast.Store)  # type: ignore[attr-defined]
        for n in of_types(ctx.tree, (ast.Attribute,))))


def _guarded(loop: ast.AST) -> set[int]:
    """The ids of the nodes under an ``if`` of the loop whose test reads a ``.grad``: a
    statement among them is guarded (once per loop, not one walk of the loop per statement)."""
    out: set[int] = set()
    for n in of_types(loop, (ast.If,)):
        if any(a.attr == "grad" for a in of_types(n.test, (ast.Attribute,))):  # type: ignore[attr-defined]
            out.update(map(id, walk(n)))
    return out
