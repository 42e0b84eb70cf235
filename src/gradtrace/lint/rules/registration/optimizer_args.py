"""GT419: a module, not its parameters, handed to an optimizer."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.leaf._tensors import is_optimizer_call


def _params_argument(call: ast.Call) -> ast.expr | None:
    if call.args:
        return call.args[0]
    return next((k.value for k in call.keywords if k.arg == "params"), None)


ONE_OF = "one of the params is a module"
NOT_ITERABLE = "a module is not iterable"


def _module_entries(arg: ast.expr) -> Iterator[tuple[ast.expr, str]]:
    """(expression that must be a tensor or a group, what torch says when it is a module): the
    argument itself, the elements of a list/tuple literal, the ``"params"`` entries of group
    dicts in it (and their elements)."""
    if not isinstance(arg, (ast.List, ast.Tuple)):
        yield arg, NOT_ITERABLE
        return
    for e in arg.elts:
        if isinstance(e, ast.Dict):
            for k, v in zip(e.keys, e.values):
                if isinstance(k, ast.Constant) and k.value == "params":
                    if isinstance(v, (ast.List, ast.Tuple)):
                        yield from ((x, ONE_OF) for x in v.elts)
                    else:
                        yield v, NOT_ITERABLE
        elif not isinstance(e, ast.Starred):
            yield e, ONE_OF


class ModuleGivenToOptimizer(Rule):
    """A module, not its parameters, is handed to an optimizer: `Adam([model])`, `SGD(model)`.

    Why: an optimizer takes an iterable of tensors (or of parameter-group dicts); a module is
    neither. `Adam([R])` raises `TypeError: optimizer can only optimize Tensors, but one of the
    params is ...Linear`, and `SGD(R)` or `{"params": R}` raises `TypeError: 'Linear' object is
    not iterable` (geotorch#7; checked on torch 2.13). Pass `R.parameters()`. What is a module
    comes from the code (a constructor of `torch.nn` or of a module class of this file, through
    names, attributes, loops over lists of modules and constructor fields: NOTE [kinds]).
    Known limits: only a list/tuple literal, a group dict's `"params"` entry, or the module
    itself, written in the optimizer call.
    """

    code = "GT419"
    name = "module-given-to-optimizer"
    message = ("`{expr}` is a module, not a tensor: `{opt}(...)` raises `TypeError` "
               "({why}); pass `{expr}.parameters()`")
    triggers = ("optim",)
    gate_statements = True
    examples = [
        Bad("""
            import torch
            import torch.nn as nn
            R = nn.Linear(4, 4)
            optim = torch.optim.Adam([R], lr=0.1)
            """, at=(4, 26)),
        Bad("""
            import torch
            import torch.nn as nn
            head = nn.Linear(4, 4)
            opt = torch.optim.SGD([{"params": head}], lr=0.1)
            """, at=(4, 34)),
        Good("""
            import torch
            import torch.nn as nn
            R = nn.Linear(4, 4)
            optim = torch.optim.Adam([R.weight, *R.parameters()], lr=0.1)
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if not is_optimizer_call(node, ctx):
            return
        arg = _params_argument(node)
        if arg is None:
            return
        for e, why in _module_entries(arg):
            if not isinstance(e, (ast.Name, ast.Attribute, ast.Subscript, ast.Call)):
                continue
            k = ctx.analysis.kind(e)
            if k is None or k.what != MODULE:
                continue
            made = k.node if isinstance(k.node, ast.expr) else None
            rel = [Related(ctx.path, made.lineno, "the module is made here", ctx.column(made))] \
                if made is not None and made.lineno != node.lineno else []
            yield self.report(e, ctx, related=rel, expr=ctx.source(e),
                              opt=ctx.source(node.func), why=why)
