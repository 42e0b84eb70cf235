"""GT723: `backward()` or `autograd.grad()` given `retain_variables=`, a keyword PyTorch 0.4
renamed `retain_graph`."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.analysis.steps import backward_of
from gradtrace.lint.context import Context
from gradtrace.lint.grad_modes import FUNCTION_TYPES
from gradtrace.lint.rule import Bad, Good, Rule

REMOVED = "retain_variables"


def _own_backward_takes_it(ctx: Context) -> bool:
    """A function of the file named like a backward accepts ``retain_variables`` (a class of
    the program's own whose ``backward`` is called, not torch's)."""
    def make() -> bool:
        for n in ast.walk(ctx.tree):
            if isinstance(n, FUNCTION_TYPES) and "backward" in n.name:
                a = n.args
                if a.kwarg is not None or any(
                        x.arg == REMOVED for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)):
                    return True
        return False
    return ctx.memo("gt723-own-backward", ctx.tree, make)


class RemovedRetainVariablesKeyword(Rule):
    """`loss.backward(retain_variables=True)` (or `torch.autograd.grad(...,
    retain_variables=...)`, `torch.autograd.backward`, a trainer's `manual_backward`).

    Why: PyTorch 0.4 renamed the keyword `retain_graph`; today the call raises `TypeError:
    Tensor.backward() got an unexpected keyword argument 'retain_variables'` (checked on
    torch 2.13, likewise `grad()` and `autograd.backward()`). Code written for PyTorch 0.3
    (GAN tutorials backpropagating the generator's loss, then the discriminator's through the
    same graph) stops at this line, before any later backward: the graph it meant to keep is
    never built for a second pass. Write `retain_graph=True`. A file whose own function named
    like a backward takes `retain_variables` (or `**kwargs`) is not reported: the call may be
    that function.
    """

    code = "GT723"
    name = "removed-retain-variables-keyword"
    message = ("`retain_variables` is not an argument of `{call}` since PyTorch 0.4 (it was "
               "renamed `retain_graph`): this call raises `TypeError: ... got an unexpected "
               "keyword argument 'retain_variables'`; write `retain_graph=...`")
    triggers = (REMOVED,)
    examples = [
        Bad("""
            def train_step(gen_loss, dis_loss, gen_optim):
                gen_loss.backward(retain_variables=True)
                gen_optim.step()
                dis_loss.backward()
            """, at=(2, 4)),
        Good("""
            def train_step(gen_loss, dis_loss, gen_optim):
                gen_loss.backward(retain_graph=True)
                dis_loss.backward()
                gen_optim.step()
            """),
        Good("""
            class Graph:
                def backward(self, retain_variables=False):
                    return retain_variables

            def run(g):
                g.backward(retain_variables=True)
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if not any(k.arg == REMOVED for k in node.keywords) \
                or backward_of(node, ctx) is None or _own_backward_takes_it(ctx):
            return
        yield self.report(node, ctx, call=ctx.source(node.func) + "()")
