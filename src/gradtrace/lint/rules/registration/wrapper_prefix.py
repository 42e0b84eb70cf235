"""GT137: parameter names of a DataParallel/DDP wrapper matched against the inner model's
prefixes: every name starts with `module.`, so the freeze matches nothing."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import scope_nodes
from gradtrace.lint.rule import Bad, Good, Rule

WRAPPERS = frozenset({"torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
                      "torch.nn.parallel.DistributedDataParallel",
                      "torch.nn.parallel.distributed.DistributedDataParallel",
                      "torch.nn.parallel.data_parallel.DataParallel"})
PREFIX = "module."


class FreezeNamesMissWrapperPrefix(Rule):
    """Names of a wrapped model's parameters tested with `startswith` against the inner model's prefixes.

    Why: `nn.DataParallel(model)` and `DistributedDataParallel(model)` hold the model as their
    `module` attribute, so every name `named_parameters()` yields starts with `module.`
    (`module.encoder.0.weight`; verified on torch 2.13, on the CPU as well). A freeze written
    for the bare model, `for n, p in model.named_parameters(): if n.startswith("encoder."):
    p.requires_grad = False`, after the model was wrapped matches no name: nothing is frozen,
    with no error, and the parts meant to stay fixed train (ESPnet's `--freeze-mods`). Match
    against `model.module.named_parameters()`, or prefix the keys with `module.` when the model
    is wrapped.
    Known limits: the wrapper is assigned to a name in the same function (or the script)
    before the loop over its `named_parameters()`, and the name is not bound again between; the loop's test is `name.startswith(...)`
    (alone or inside `any(...)`) and the loop sets `requires_grad`; nothing in that function
    spells a `module.` string.
    """

    code = "GT137"
    name = "freeze-names-miss-wrapper-prefix"
    message = ("`{model}` is a `{wrapper}` since line {wrap_line}: every name its "
               "`named_parameters()` yields starts with `module.`, so this `startswith` test "
               "matches no parameter and the `requires_grad` flag is never set; match "
               "`{model}.module.named_parameters()` or prefix the keys with `module.`")
    triggers = ("named_parameters",)
    gate_statements = True  # a flag loop over `named_parameters()` lies in the function
    examples = [
        Bad("""
            import torch
            def train(model, freeze_mods):
                model = torch.nn.DataParallel(model)
                for name, p in model.named_parameters():
                    if any(name.startswith(k) for k in freeze_mods):
                        p.requires_grad = False
            """, at=(5, 8)),
        Bad("""
            import torch.nn as nn
            model = nn.DataParallel(Net())
            for n, p in model.named_parameters():
                if n.startswith("encoder."):
                    p.requires_grad_(False)
            """, at=(4, 4)),
        Good("""
            import torch
            def train(model, freeze_mods):
                model = torch.nn.DataParallel(model)
                if hasattr(model, "module"):
                    freeze_mods = ["module." + k for k in freeze_mods]
                for name, p in model.named_parameters():
                    if any(name.startswith(k) for k in freeze_mods):
                        p.requires_grad = False
            """),
        Good("""
            import torch
            def train(model, freeze_mods):
                for name, p in model.named_parameters():
                    if any(name.startswith(k) for k in freeze_mods):
                        p.requires_grad = False
                model = torch.nn.DataParallel(model)
            """),
    ]

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        yield from self._scope(node, ctx)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        yield from self._scope(node, ctx)

    def _scope(self, fn: ast.AST, ctx: Context) -> Iterator[Finding]:
        nodes = list(scope_nodes(fn))
        wraps: dict[str, tuple[int, str]] = {}
        stores: dict[str, list[int]] = {}  # every line that binds the name anew
        for n in nodes:
            if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                    if dotted(t):
                        stores.setdefault(dotted(t), []).append(n.lineno)
            if isinstance(n, ast.Assign) and len(n.targets) == 1 \
                    and isinstance(n.value, ast.Call) and n.value.args:
                q = ctx.qualified_name(n.value.func)
                target = dotted(n.targets[0])
                if q in WRAPPERS and target:
                    got = wraps.get(target)
                    if got is None or n.lineno < got[0]:
                        wraps[target] = (n.lineno, q.rpartition(".")[2])
        if not wraps or any(_spells_prefix(n) for n in nodes):
            return
        for n in nodes:
            if not isinstance(n, (ast.For, ast.AsyncFor)):
                continue
            it = n.iter
            model = dotted(it.func.value) if isinstance(it, ast.Call) and isinstance(
                it.func, ast.Attribute) and it.func.attr == "named_parameters" else None
            if model not in wraps or wraps[model][0] >= n.lineno or any(
                    wraps[model][0] < x < n.lineno for x in stores.get(model, ())) \
                    or not (isinstance(n.target, ast.Tuple) and len(n.target.elts) == 2
                            and isinstance(n.target.elts[0], ast.Name)
                            and isinstance(n.target.elts[1], ast.Name)):
                continue
            name, param = n.target.elts[0].id, n.target.elts[1].id
            test = next((s for b in n.body for s in ast.walk(b) if isinstance(s, ast.If)
                         and _prefix_test(s.test, name) and _sets_flag(s.body, param)), None)
            if test is None:
                continue
            line, wrapper = wraps[model]
            yield self.report(test, ctx, related=[Related(
                ctx.path, line, f"`{model}` is wrapped here")], model=model, wrapper=wrapper,
                wrap_line=line)


def _spells_prefix(n: ast.AST) -> bool:
    """A `module.` string: the keys are (or may be) adapted to the wrapper's names."""
    return isinstance(n, ast.Constant) and isinstance(n.value, str) and PREFIX in n.value


def _prefix_test(test: ast.expr, name: str) -> bool:
    """``name.startswith(...)`` somewhere in the test (an ``any(...)`` generator included)."""
    return any(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
               and c.func.attr == "startswith" and isinstance(c.func.value, ast.Name)
               and c.func.value.id == name for c in ast.walk(test))


def _sets_flag(body: list[ast.stmt], param: str) -> bool:
    for s in body:
        for n in ast.walk(s):
            if isinstance(n, ast.Assign) and any(
                    isinstance(t, ast.Attribute) and t.attr == "requires_grad"
                    and isinstance(t.value, ast.Name) and t.value.id == param for t in n.targets):
                return True
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr == "requires_grad_" and isinstance(n.func.value, ast.Name) \
                    and n.func.value.id == param:
                return True
    return False
