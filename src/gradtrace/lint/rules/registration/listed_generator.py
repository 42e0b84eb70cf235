"""GT488: a `parameters()` generator put inside the list handed to an optimizer."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.leaf._tensors import is_optimizer_call
from gradtrace.lint.rules.registration.optimizer_args import ONE_OF, _module_entries, \
    _params_argument

GENERATORS = frozenset({"parameters", "named_parameters"})


def _generator(e: ast.expr, ctx: Context, line: int) -> ast.Call | None:
    """The ``m.parameters()`` call ``e`` is, or that the name ``e`` was last bound to."""
    if isinstance(e, ast.Name):
        b = ctx.scope().binding_before(e.id, line)
        e = b.value if b is not None and b.value is not None else e  # type: ignore[assignment]
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr in GENERATORS and not e.args:
        return e
    return None


class GeneratorListedForOptimizer(Rule):
    """`model.parameters()` is put, as it is, inside the list given to an optimizer:
    `Adam([model.parameters()])`, `SGD([enc.parameters(), dec.parameters()])`.

    Why: the optimizer iterates the list and takes each element as one tensor (or one
    parameter-group dict); a generator is neither: torch raises `TypeError: optimizer can only
    optimize Tensors, but one of the params is Module.parameters` at construction (checked on
    torch 2.13). Pass the generator itself (`Adam(model.parameters())`), unpack it
    (`[*enc.parameters(), *dec.parameters()]`), chain it, or make one group per part
    (`[{"params": enc.parameters()}, ...]`).
    Known limits: the list or tuple must be written in the optimizer call; a name counts when
    its last binding before the call is the `parameters()` call itself.
    """

    code = "GT488"
    name = "generator-listed-for-optimizer"
    message = ("`{expr}` is a generator inside the list given to `{opt}`: each element must be "
               "a tensor or a group dict, so this raises `TypeError: optimizer can only optimize "
               "Tensors`; unpack it (`*{expr}`) or pass it alone")
    triggers = ("optim",)
    gate_statements = True
    examples = [
        Bad("""
            import torch
            def make_optimizer(model, lr):
                return torch.optim.Adam([model.parameters()], lr=lr)
            """, at=(3, 29)),
        Good("""
            import torch
            def make_optimizer(enc, dec, lr):
                return torch.optim.Adam([*enc.parameters(), {"params": dec.parameters()}], lr=lr)
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if not is_optimizer_call(node, ctx):
            return
        arg = _params_argument(node)
        if not isinstance(arg, (ast.List, ast.Tuple)):
            return
        for e, why in _module_entries(arg):
            gen = _generator(e, ctx, node.lineno) if why == ONE_OF else None
            if gen is None:
                continue
            rel = [Related(ctx.path, gen.lineno, "the generator is made here",
                           ctx.column(gen))] if gen is not e else []
            yield self.report(e, ctx, related=rel, expr=ctx.source(gen),
                              opt=ctx.source(node.func))
