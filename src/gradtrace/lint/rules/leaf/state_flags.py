"""GT310: a test on the ``requires_grad`` of ``state_dict()`` tensors, which is always False.

# NOTE [state-dict tensors never require grad]
``Module.state_dict()`` stores ``param.detach()`` for every parameter (unless
``keep_vars=True``): every value is a tensor that does not require grad. A state dict saved
with ``torch.save`` and read back with ``torch.load`` holds the same detached tensors. A test
on such a value's ``requires_grad`` (``if v.requires_grad``, a comprehension's ``if``, the
``lambda`` given to ``filter``) is therefore always False: a filter meant to keep the
trainable entries keeps none (checked on torch 2.13). The dictionary is ``m.state_dict()``, a
name bound once to it in the function, or a name bound to ``torch.load(...)`` in a file whose
every ``torch.save`` saves a ``state_dict()`` call (and there is one).
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.analysis.param_copies import copy_of_param, state_dict_call
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule

FLAG = "requires_grad"
VIEWS = ("items", "values")
COMPS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _saves_only_state(ctx: Context) -> bool:
    """Every ``torch.save`` of the file saves a ``state_dict()`` call, and there is one."""
    def make() -> bool:
        saves = [n for n in walk(ctx.tree) if isinstance(n, ast.Call) and n.args
                 and ctx.qualified_name(n.func) == "torch.save"]
        return bool(saves) and all(state_dict_call(n.args[0]) for n in saves)
    return ctx.memo("gt310-saves-state", ctx.tree, make)


def _state_dict(e: ast.expr, scope: Scope, line: int, ctx: Context) -> str | None:
    """How ``e`` is a state dict: ``m.state_dict()``, or a name bound once before ``line``
    to it or to ``torch.load(...)`` of a file that saves only state dicts."""
    if state_dict_call(e):
        return "`state_dict()`"
    if not isinstance(e, ast.Name):
        return None
    bs = scope.bindings.get(e.id) or []
    b = scope.binding_before(e.id, line + 1)
    if len(bs) != 1 or b is None or not isinstance(b.stmt, ast.Assign) \
            or len(b.stmt.targets) != 1 or not isinstance(b.value, ast.Call):
        return None
    if state_dict_call(b.value):
        return "`state_dict()`"
    if ctx.qualified_name(b.value.func) == "torch.load" and _saves_only_state(ctx):
        return "a saved `state_dict()` read back with `torch.load`"
    return None


def _view_of_state(it: ast.expr, scope: Scope, line: int, ctx: Context
                   ) -> tuple[str, str] | None:
    """(``items``/``values``, how) for ``D.items()`` / ``D.values()`` of a state dict."""
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) \
            and it.func.attr in VIEWS and not it.args and not it.keywords:
        how = _state_dict(it.func.value, scope, line, ctx)
        if how is not None:
            return it.func.attr, how
    return None


def _flag_reads(tests: list[ast.expr], value: str, item: bool) -> Iterator[ast.Attribute]:
    """``value.requires_grad`` (or ``value[1].requires_grad`` for an ``items()`` pair) read
    in ``tests``."""
    for t in tests:
        for n in walk(t):
            if isinstance(n, ast.Attribute) and n.attr == FLAG and isinstance(n.ctx, ast.Load):
                r = n.value
                if item and isinstance(r, ast.Subscript) and isinstance(r.slice, ast.Constant) \
                        and r.slice.value in (1, -1):
                    r = r.value
                if isinstance(r, ast.Name) and r.id == value:
                    yield n


def _loop_over_state(e: ast.expr, scope: Scope, stmt: ast.stmt, ctx: Context) -> str | None:
    """How ``e`` is the value a ``for`` loop around ``stmt`` takes from a state dict's
    ``items()`` / ``values()`` (the name not rebound in the loop before ``stmt``)."""
    if not isinstance(e, ast.Name):
        return None
    for loop in reversed(scope.loops_of(stmt)):
        if not isinstance(loop, (ast.For, ast.AsyncFor)):
            continue
        t = loop.target
        if not any(isinstance(n, ast.Name) and n.id == e.id for n in walk(t)):
            continue
        if any(isinstance(n, ast.Name) and n.id == e.id and isinstance(n.ctx, ast.Store)
               and n.lineno < stmt.lineno for s in loop.body for n in walk(s)):
            return None
        view = _view_of_state(loop.iter, scope, loop.lineno, ctx)
        if view is None:
            return None
        value = t.elts[1] if view[0] == "items" and isinstance(t, ast.Tuple) \
            and len(t.elts) == 2 else t if view[0] == "values" else None
        return view[1] if isinstance(value, ast.Name) and value.id == e.id else None
    return None


class StateDictFlagTested(Rule):
    """A test on the `requires_grad` of `state_dict()` tensors: it is always False.

    Why: `state_dict()` stores detached tensors (unless `keep_vars=True`), and a state dict
    saved with `torch.save` and loaded back holds the same: none of its values requires grad.
    `{k: v for k, v in model.state_dict().items() if v.requires_grad}` (save the trainable
    weights only) or `dict(filter(lambda kv: kv[1].requires_grad, sd.items()))` (rewind the
    trainable weights) keeps nothing, silently: nothing is saved, or nothing is reloaded and the
    run goes on from other weights than intended (checked on torch 2.13:
    NOTE [state-dict tensors never require grad]). Test the parameters themselves
    (`{n for n, p in model.named_parameters() if p.requires_grad}`, then keep those keys), or
    use `state_dict(keep_vars=True)`.
    Known limits: the dictionary is `m.state_dict()` or a name bound once to it, or to
    `torch.load(...)` in a file whose every `torch.save` saves a `state_dict()`; the test is an
    `if`/`while`/conditional expression, a comprehension's `if`, or a `lambda` given to `filter`.
    """

    code = "GT310"
    gate_statements = True
    name = "state-dict-flag-tested"
    message = ("`{target}` is a tensor of {how}, which is detached: its `requires_grad` is "
               "always False, so this test gives the same answer for every entry")
    triggers = (FLAG,)
    examples = [
        Bad("""
            import torch

            def save_trainable(model, path):
                sd = {k: v for k, v in model.state_dict().items() if v.requires_grad}
                torch.save(sd, path)
            """, at=(4, 4)),
        Bad("""
            def trainable_state(model):
                sd = model.state_dict()
                return dict(filter(lambda kv: kv[1].requires_grad, sd.items()))
            """, at=(3, 4)),
        Good("""
            import torch

            def save_trainable(model, path):
                keep = {n for n, p in model.named_parameters() if p.requires_grad}
                sd = {k: v for k, v in model.state_dict().items() if k in keep}
                torch.save(sd, path)
            """),
        Good("""
            def trainable_state(model):
                sd = model.state_dict(keep_vars=True)
                return dict(filter(lambda kv: kv[1].requires_grad, sd.items()))
            """),
    ]

    def _emit(self, read: ast.Attribute, how: str, ctx: Context) -> Finding:
        stmt = ctx.statement
        return self.report(stmt if stmt is not None else read, ctx,
                           target=dotted(read.value) or ctx.source(read.value), how=how)

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        f = node.func
        if not (isinstance(f, ast.Name) and f.id == "filter" and len(node.args) == 2
                and isinstance(node.args[0], ast.Lambda)):
            return
        lam = node.args[0]
        if len(lam.args.args) != 1:
            return
        view = _view_of_state(node.args[1], ctx.scope(), node.lineno, ctx)
        if view is None:
            return
        for read in _flag_reads([lam.body], lam.args.args[0].arg, view[0] == "items"):
            yield self._emit(read, view[1], ctx)
            return

    def _comp(self, node: ast.AST, ctx: Context) -> Iterator[Finding]:
        for gen in node.generators:  # type: ignore[attr-defined]
            line = getattr(node, "lineno", 0)
            view = _view_of_state(gen.iter, ctx.scope(), line, ctx)
            if view is None or not gen.ifs:
                continue
            t = gen.target
            if view[0] == "items" and isinstance(t, ast.Tuple) and len(t.elts) == 2:
                name, item = t.elts[1], False
            else:
                name, item = t, view[0] == "items"
            if isinstance(name, ast.Name):
                for read in _flag_reads(gen.ifs, name.id, item):
                    yield self._emit(read, view[1], ctx)
                    return

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comp

    def _test(self, node: ast.AST, ctx: Context) -> Iterator[Finding]:
        scope = ctx.scope()
        stmt = ctx.statement
        for n in walk(node.test):  # type: ignore[attr-defined]
            if isinstance(n, ast.Attribute) and n.attr == FLAG and isinstance(n.ctx, ast.Load) \
                    and stmt is not None:
                how = copy_of_param(n.value, scope, stmt)
                how = "`state_dict()`" if how is not None and "state_dict" in how \
                    else _loop_over_state(n.value, scope, stmt, ctx)
                if how is not None:
                    yield self._emit(n, how, ctx)
                    return

    visit_If = visit_While = visit_IfExp = _test
