"""GT414: a helper given a model freezes (or unfreezes) a global model instead."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.analysis.objects import global_reads
from gradtrace.lint.analysis.params import PARAM_ITERS, WALKS
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.nodes import bfs_walk


def _sets_flag(body: list[ast.stmt]) -> bool:
    """Whether the statements set ``requires_grad`` on something."""
    for s in body:
        for n in bfs_walk(s):
            if isinstance(n, ast.Assign) and any(
                    isinstance(t, ast.Attribute) and t.attr == "requires_grad"
                    for t in n.targets):
                return True
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr == "requires_grad_":
                return True
    return False


class FreezesGlobalNotArgument(Rule):
    """A function given a model sets `requires_grad` on a global model instead of it.

    Why: the loop walks a module-level model (`for name, layer in model_ft.named_modules()`)
    while the model the caller passed in is not used (only returned). The caller's model keeps
    every parameter trainable (or frozen), silently: the freeze happens on another object
    (optuna/optuna#3855). Walk the argument (`model.named_modules()`).
    Known limits: the function must be of this file with its calls in the file passing a
    module for that parameter, and read the parameter nowhere but in `return`.
    """

    code = "GT414"
    name = "freezes-global-not-argument"
    message = ("`{walk}` walks the global `{glob}`, not the argument `{param}` the caller "
               "passes: `{param}`'s parameters keep their `requires_grad`; walk `{param}` here")
    triggers = ("requires_grad",)
    # the loop it reports sets `requires_grad` inside the function (`_sets_flag`): a function
    # whose lines do not say it finds nothing (NOTE [quiet subtrees])
    gate_statements = True
    examples = [
        Bad("""
            import torch.nn as nn
            def freeze(model, n):
                for i, layer in enumerate(net.children()):
                    if i < n:
                        for p in layer.parameters():
                            p.requires_grad = False
                return model
            net = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
            def run():
                model = freeze(nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2)), 1)
            """, at=(3, 4)),
        Good("""
            import torch.nn as nn
            def freeze(model, n):
                for i, layer in enumerate(model.children()):
                    if i < n:
                        for p in layer.parameters():
                            p.requires_grad = False
                return model
            net = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
            def run():
                model = freeze(nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2)), 1)
            """),
    ]

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        an = ctx.analysis
        if an.functions.get(node.name) is not node:
            return
        globs = global_reads(node, ctx)
        if not globs:
            return
        scope = ctx.scope(node)
        unused = [p for p in _positional(node) if _only_returned(scope, p)
                  and self._given_module(node, p, ctx)]
        if not unused:
            return
        for s in scope.stmts:
            if not isinstance(s, (ast.For, ast.AsyncFor)) or not _sets_flag(s.body):
                continue
            walk = _walked_global(s.iter, globs)
            if walk is None:
                continue
            root, call = walk
            k = an.kind_in(ast.Name(id=root, ctx=ast.Load()), ctx.tree, 10**9)
            if k is None or k.what != MODULE:
                continue
            param = unused[0]
            yield self.report(s, ctx, related=[Related(
                ctx.path, node.lineno, f"`{param}` is the model the caller passes",
                ctx.column(node))], walk=ctx.source(call), glob=root, param=param)
            return

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    @staticmethod
    def _given_module(fn: ast.FunctionDef, p: str, ctx: Context) -> bool:
        vals = ctx.analysis.argument_values(fn, p)
        return bool(vals) and all(
            (k := ctx.analysis.kind_in(v, where, v.lineno)) is not None and k.what == MODULE
            for v, where in vals)


def _positional(fn: ast.FunctionDef) -> list[str]:
    return [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]


def _only_returned(scope: object, p: str) -> bool:
    """``p`` is read nowhere but as ``return p``."""
    for n in scope.loads.get(p, ()):  # type: ignore[attr-defined]
        st = scope.stmt_of.get(id(n))  # type: ignore[attr-defined]
        if not (isinstance(st, ast.Return) and st.value is n):
            return False
    return p not in scope.bindings  # type: ignore[attr-defined]


def _walked_global(it: ast.AST, globs: frozenset[str]) -> tuple[str, ast.Call] | None:
    """``(g, call)`` for ``g.named_modules()`` (also inside ``enumerate(...)``) of a global."""
    for n in bfs_walk(it):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr in (*WALKS, *PARAM_ITERS):
            root = (dotted(n.func.value) or "").partition(".")[0]
            if root in globs:
                return root, n
    return None
