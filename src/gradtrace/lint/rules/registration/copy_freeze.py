"""GT469: `requires_grad` set on a copy of a parameter (a `state_dict()` tensor, `.data`,
`.detach()`): the parameter keeps training."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.analysis.param_copies import copy_of_param
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.leaf._tensors import is_false, is_true

FLAG = "requires_grad"


class FlagSetOnParameterCopy(Rule):
    """`requires_grad` is set on another tensor object than the parameter: nothing is frozen.

    Why: `model.state_dict()` returns detached tensors (they share storage with the
    parameters but are other objects, already `requires_grad=False`); `p.data` and
    `p.detach()` make a new tensor at each use. `v.requires_grad = False` on a state-dict
    value, `p.data.requires_grad = False` or `p.detach().requires_grad_(False)` sets the flag
    on that object only: every parameter keeps `requires_grad=True`, gets gradients, and an
    optimizer built from `model.parameters()` keeps updating the part meant to be frozen
    (verified on torch 2.13). Set the flag on the parameters themselves
    (`for n, p in model.named_parameters()`, or `state_dict(keep_vars=True)`).
    Known limits: a freeze (`False`) on a state-dict tensor or on a loop variable over copies;
    an unfreeze (`True`) only where the copy is a temporary (`p.data.requires_grad = True`),
    since a named copy made to require grad is a new leaf code may use. The `.data` of an
    argument annotated with a type that is not a tensor (`x: SparseMatrix`) is that object's
    field, not a copy.
    """

    code = "GT469"
    gate_statements = True
    name = "flag-set-on-parameter-copy"
    message = ("`{target}` is {how}, not the parameter: setting its `requires_grad` leaves "
               "the parameter {state}")
    triggers = ("requires_grad",)
    examples = [
        Bad("""
            for name, value in model.state_dict().items():
                if name.startswith("encoder."):
                    value.requires_grad = False
            """, at=(3, 8)),
        Bad("""
            for p in model.backbone.parameters():
                p.data.requires_grad = False
            """, at=(2, 4)),
        Good("""
            for name, p in model.named_parameters():
                if name.startswith("encoder."):
                    p.requires_grad = False
            for name, v in model.state_dict(keep_vars=True).items():
                v.requires_grad = False
            x = image.detach().requires_grad_()
            """),
    ]

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> Iterator[Finding]:
        if len(node.targets) != 1:
            return
        t = node.targets[0]
        if isinstance(t, ast.Attribute) and t.attr == FLAG:
            yield from self._check(node, t.value, node.value, ctx)

    def visit_Expr(self, node: ast.Expr, ctx: Context) -> Iterator[Finding]:
        c = node.value
        if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) \
                and c.func.attr == FLAG + "_" and len(c.args) <= 1 and not c.keywords:
            value = c.args[0] if c.args else ast.Constant(True)
            yield from self._check(node, c.func.value, value, ctx)

    def _check(self, node: ast.stmt, recv: ast.expr, value: ast.expr, ctx: Context
               ) -> Iterator[Finding]:
        freeze = is_false(value)
        if not freeze and not is_true(value):
            return
        how = copy_of_param(recv, ctx.scope(), node)
        if how is None:
            return
        temporary = how.startswith("a new tensor")   # made in this statement
        if not freeze and not temporary:
            return
        target = dotted(recv) or ctx.source(recv)
        yield self.report(node, ctx, target=target, how=how,
                          state="trainable" if freeze else "as it was")
