"""GT494: an optimizer given only the weights a holder's class freezes when it is built."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.holder_frozen import holder_frozen
from gradtrace.lint.analysis.owners import shown_path
from gradtrace.lint.analysis.params import param_sources_of
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.leaf._tensors import is_optimizer_call
from gradtrace.lint.rules.registration.optimizer_args import _params_argument


class OptimizerOverHolderFrozen(Rule):
    """An optimizer is given only the parameters of a module that the class holding it
    froze when it was built (an EMA teacher's copy, a frozen encoder kept by a wrapper).

    Why: `class EMATeacher: __init__: self.module = copy.deepcopy(student); for p in
    self.module.parameters(): p.requires_grad_(False)` makes every weight of `teacher.module`
    a tensor that requires no grad. `SGD(teacher.module.parameters())` accepts them, but
    `backward()` never fills their `.grad` and `step()` skips them: nothing the optimizer holds
    ever moves, while the module the loss trains (the student) is not in it (checked on torch
    2.13: the student's weights stay as they were). Give the optimizer the trained module's
    parameters (`student.parameters()`).
    Known limits: the holder's class is read by the analysis layer's kind of the receiver (a
    class of this file, imported from another file of the project, or handed by every caller
    in another file); its `__init__` must freeze the attribute outside any branch, and neither
    its file nor this one may set `requires_grad` back on anywhere (NOTE [frozen by its holder]).
    """

    code = "GT494"
    name = "optimizer-over-holder-frozen"
    message = ("`{opt}` is given only the parameters of `{owner}`, which `{cls}` freezes when "
               "it is built ({where}): nothing it holds requires grad, so stepping moves nothing")
    triggers = ("optim",)
    gate_statements = True
    examples = [
        Bad("""
            import copy
            import torch

            class EMATeacher:
                def __init__(self, student):
                    self.module = copy.deepcopy(student)
                    for p in self.module.parameters():
                        p.requires_grad_(False)

            def build(student):
                teacher = EMATeacher(student)
                opt = torch.optim.SGD(teacher.module.parameters(), lr=0.1)
                return teacher, opt
            """, at=(12, 10)),
        Good("""
            import copy
            import torch

            class EMATeacher:
                def __init__(self, student):
                    self.module = copy.deepcopy(student)
                    for p in self.module.parameters():
                        p.requires_grad_(False)

            def build(student):
                teacher = EMATeacher(student)
                opt = torch.optim.SGD(student.parameters(), lr=0.1)
                return teacher, opt
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if not is_optimizer_call(node, ctx):
            return
        arg = _params_argument(node)
        scope = ctx.scope()
        srcs = param_sources_of(arg, scope, node.lineno) if arg is not None else None
        if not srcs:
            return
        found = []
        for owner, _ in srcs:
            got = holder_frozen(ctx, owner, scope, node.lineno)
            if got is None:
                return
            found.append((owner, got))
        owner, (hctx, cls, st) = found[0]
        path = shown_path(hctx.path, ctx.path)
        where = f"line {st.lineno}" if hctx is ctx else f"{path}:{st.lineno}"
        yield self.report(node, ctx, related=[Related(
            path, st.lineno, f"`{cls.name}` freezes `{owner.rpartition('.')[2]}` here",
            hctx.column(st))], opt=ctx.source(node.func), owner=owner, cls=cls.name,
            where=where)
