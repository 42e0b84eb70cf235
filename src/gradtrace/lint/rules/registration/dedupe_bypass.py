"""GT563: a loop over parameters checks for duplicates before appending a group, but an earlier
branch appends and moves on before the check (NOTE [duplicate check bypassed])."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule

# NOTE [duplicate check bypassed]
# A walk that recurses by children meets a shared module once per parent; a loop that keeps a
# duplicate check (`if p in seen: continue`, `self._is_in(group, groups)`) before appending
# exists for exactly that. An earlier branch that appends to the same list (or to the list the
# checked path fills, without recording the seen set) and `continue`s skips the check; reported
# at that branch, the check as related. A branch with a membership test of its own is silent.
PARAM_ITERS = frozenset({"parameters", "named_parameters"})
_ADDS = frozenset({"append", "add", "extend", "update"})


def _leaves(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], ast.Continue)


def _added(stmts: list[ast.stmt]) -> dict[str, ast.Call]:
    """``{container: call}`` for ``C.append(...)``/``C.add(...)`` among the statements."""
    out: dict[str, ast.Call] = {}
    for s in stmts:
        for n in walk(s):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr in _ADDS and dotted(n.func.value):
                out.setdefault(dotted(n.func.value), n)  # type: ignore[arg-type]
    return out


def _membership(test: ast.expr, names: set[str]) -> str | None:
    """The container a duplicate test reads: ``x in seen``, ``id(p) in ids``, or a call given
    the container and another value (``self._is_in(group, groups)``)."""
    for n in walk(test):
        if isinstance(n, ast.Compare) and len(n.ops) == 1 \
                and isinstance(n.ops[0], (ast.In, ast.NotIn)) \
                and dotted(n.comparators[0]) in names:
            return dotted(n.comparators[0])
        if isinstance(n, ast.Call) and len(n.args) >= 2:
            hit = [dotted(a) for a in n.args if dotted(a) in names]
            if hit:
                return hit[0]
    return None


class DuplicateCheckBypassed(Rule):
    """A loop over a module's parameters keeps a duplicate check before it appends a group
    (`if p in seen: continue`), but an earlier branch appends to the same list and moves on
    (`continue`) before the check: a parameter shared by two modules that takes that branch
    is added twice.

    Why: a module shared by two parents (tied layers, a stem reused by two branches) yields its
    parameters once per parent when the walk recurses by `named_children()`. The check exists
    for them; a branch that appends first (`if not param.requires_grad: params.append(group);
    continue`) skips it, so the optimizer gets the tensor twice and raises `ValueError: some
    parameters appear in more than one parameter group` (mmengine#903: frozen parameters of a
    shared module; checked on torch 2.13). Run the duplicate check first.
    Known limits: the loop must iterate `parameters()`/`named_parameters()`; the check must be
    an `if ...: continue` reading the list (or a set filled with it) by `in` or as an argument.
    """

    code = "GT563"
    name = "duplicate-check-bypassed"
    message = ("this branch appends to `{target}` and moves on before the duplicate check of "
               "line {check}: a parameter shared by two modules that takes it is added twice, "
               "and building the optimizer fails (ValueError: some parameters appear in more "
               "than one parameter group)")
    triggers = ("parameters(",)
    examples = [
        Bad("""
            import torch
            from torch import nn
            def add_params(groups, module, seen):
                for p in module.parameters(recurse=False):
                    if not p.requires_grad:
                        groups.append({"params": [p], "lr": 0.0})
                        continue
                    if p in seen:
                        continue
                    seen.add(p)
                    groups.append({"params": [p]})
                for child in module.children():
                    add_params(groups, child, seen)
            stem = nn.Linear(4, 4)
            net = nn.ModuleDict({"a": nn.Sequential(stem), "b": nn.Sequential(stem)})
            stem.requires_grad_(False)
            groups = []
            add_params(groups, net, set())
            opt = torch.optim.SGD(groups, lr=0.1)
            """, at=(5, 8)),
        Good("""
            import torch
            from torch import nn
            def add_params(groups, module, seen):
                for p in module.parameters(recurse=False):
                    if p in seen:
                        continue
                    seen.add(p)
                    if not p.requires_grad:
                        groups.append({"params": [p], "lr": 0.0})
                        continue
                    groups.append({"params": [p]})
                for child in module.children():
                    add_params(groups, child, seen)
            stem = nn.Linear(4, 4)
            net = nn.ModuleDict({"a": nn.Sequential(stem), "b": nn.Sequential(stem)})
            stem.requires_grad_(False)
            groups = []
            add_params(groups, net, set())
            opt = torch.optim.SGD(groups, lr=0.1)
            """),
    ]

    def visit_For(self, node: ast.For, ctx: Context) -> Iterator[Finding]:
        it = node.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
                and it.func.attr in PARAM_ITERS):
            return
        body = node.body
        for i, s in enumerate(body):
            if not (isinstance(s, ast.If) and _leaves(s.body) and not s.orelse):
                continue
            later = _added(body[i + 1:])
            guarded = _membership(s.test, set(later))
            if guarded is None:
                continue
            for e in body[:i]:
                if not (isinstance(e, ast.If) and _leaves(e.body)) or any(
                        isinstance(n, (ast.If, ast.IfExp)) and _membership(n.test, {guarded})
                        for x in e.body for n in walk(x)):
                    continue  # the branch runs a check of its own
                early = _added(e.body)
                # a list the checked path fills, filled here without the check's bookkeeping
                hit = [t for t in early if t in later and (t == guarded or guarded not in early)]
                if hit:
                    yield self.report(e, ctx, related=[Related(
                        ctx.path, s.lineno, "the duplicate check", ctx.column(s))],
                        target=hit[0], check=s.lineno)
                    return
