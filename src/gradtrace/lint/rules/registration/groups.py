"""GT442: a parameter group built for the optimizer but never handed to it."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Binding, Scope
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.leaf._tensors import is_optimizer_call
from gradtrace.lint.nodes import bfs_walk

PARAM_CALLS = frozenset({"parameters", "named_parameters"})


def _params_entry(value: ast.AST) -> bool:
    """A ``'params'`` value that lists parameters (``m.parameters()``, a comprehension over
    ``named_parameters()``, a list of them)."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr in PARAM_CALLS for n in bfs_walk(value))


def _is_dict(value: ast.AST | None) -> bool:
    return isinstance(value, ast.Dict) or isinstance(value, ast.Call) \
        and isinstance(value.func, ast.Name) and value.func.id == "dict"


def _fills(scope: Scope, name: str) -> dict[int, ast.Assign]:
    """``id(Name)`` of ``name`` used as the base of ``name[key] = value`` -> that assignment."""
    out: dict[int, ast.Assign] = {}
    for s in scope.stmts:
        if isinstance(s, ast.Assign):
            for t in s.targets:
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) \
                        and t.value.id == name:
                    out[id(t.value)] = s
    return out


def _key(s: ast.Assign) -> object:
    t = s.targets[0]
    k = t.slice if isinstance(t, ast.Subscript) else None
    return k.value if isinstance(k, ast.Constant) else None


class ParamGroupNeverAdded(Rule):
    """A parameter-group dict is built (`group['params'] = ...`) but never appended to the list
    given to the optimizer.

    Why: the optimizer trains only the groups it is given. A group dict that is filled with
    parameters and then dropped (the `parameters.append(group)` forgotten, or the name rebound
    before it) leaves those parameters out of every `param_groups`: they get gradients, never
    change, and no error is raised (zjunlp/HVPNeT#5). Append the group (or pass it in the list).
    Known limits: the group must be a dict bound to a name in the function that builds the
    optimizer, whose params argument is a name or a list; a group used in any way after it is
    built (appended, passed, returned) is left alone.
    """

    code = "GT442"
    name = "param-group-never-added"
    message = ("the parameter group `{group}` built here is never added to the optimizer "
               "`{opt}` (line {opt_line}): its parameters never train; append it to "
               "`{groups}`")
    triggers = ("optim",)
    examples = [
        Bad("""
            import torch
            def build(model):
                groups = []
                g = {'lr': 1e-3}
                g['params'] = list(model.body.parameters())
                groups.append(g)
                g = {'lr': 1e-2}
                g['params'] = list(model.head.parameters())
                return torch.optim.AdamW(groups)
            """, at=(8, 4)),
        Good("""
            import torch
            def build(model):
                groups = []
                g = {'lr': 1e-3}
                g['params'] = list(model.body.parameters())
                groups.append(g)
                g = {'lr': 1e-2}
                g['params'] = list(model.head.parameters())
                groups.append(g)
                return torch.optim.AdamW(groups)
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if not is_optimizer_call(node, ctx):
            return
        arg = node.args[0] if node.args else next(
            (k.value for k in node.keywords if k.arg == "params"), None)
        if not isinstance(arg, (ast.Name, ast.List)):
            return
        scope = ctx.scope()
        line = node.lineno
        groups = arg.id if isinstance(arg, ast.Name) else ctx.source(arg)
        for name, bs in scope.bindings.items():
            if "." in name:
                continue
            for i, b in enumerate(bs):
                if b.line >= line or not _is_dict(b.value):
                    continue
                end = bs[i + 1].line if i + 1 < len(bs) else 10**9  # read later: used
                got = self._dropped(scope, name, b, end)
                if got is not None:
                    yield self.report(got, ctx, related=[Related(
                        ctx.path, line, "the optimizer is built here without it",
                        ctx.column(node))], group=name, opt=ctx.source(node.func),
                        opt_line=line, groups=groups)

    @staticmethod
    def _dropped(scope: Scope, name: str, b: Binding, end: int) -> ast.stmt | None:
        """The statement that puts parameters in the dict bound by ``b`` when nothing reads
        the dict before ``end`` (nor anywhere in a loop around ``b``)."""
        fills = _fills(scope, name)
        loops = scope.loops.get(id(b.stmt), ())
        spans = [range(lp.lineno, (lp.end_lineno or lp.lineno) + 1) for lp in loops]
        where: ast.stmt | None = None
        if isinstance(b.value, ast.Dict) and any(
                isinstance(k, ast.Constant) and k.value == "params" and _params_entry(v)
                for k, v in zip(b.value.keys, b.value.values)):
            where = b.stmt
        for n in scope.loads.get(name, ()):
            in_loop = any(n.lineno in r for r in spans)
            if not (b.line < n.lineno < end or in_loop):
                continue
            fill = fills.get(id(n))
            if fill is None:
                return None  # read: appended, passed, returned
            if _key(fill) == "params" and _params_entry(fill.value):
                where = fill
        return where
