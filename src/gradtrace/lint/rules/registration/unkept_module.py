"""GT483: an optimizer built over the parameters of a module made in its own argument."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.leaf._tensors import is_optimizer_call
from gradtrace.lint.rules.registration.optimizer_args import _params_argument

PARAM_ITERS = frozenset({"parameters", "named_parameters"})


def _module_class(call: ast.Call, ctx: Context) -> str | None:
    """The qualified class name when ``call`` builds a module: a module class of the file
    (``Encoder()``) or a ``torch.nn`` layer (``nn.Linear(4, 2)``)."""
    q = ctx.call_name(call) or ""
    if isinstance(call.func, ast.Name) and call.func.id in ctx.analysis.module_classes:
        return q
    last = q.rpartition(".")[2]
    if q == "torch.nn." + last and last[:1].isupper() and last not in ("Parameter",):
        return q
    return None


class OptimizerOverUnkeptModule(Rule):
    """An optimizer is built over the parameters of a module constructed right in its
    argument (`SGD(Encoder().parameters())`) while the same function builds that class again
    for the model it trains.

    Why: `Encoder()` inside the optimizer's argument is a new instance that nothing keeps but
    the optimizer; the `Encoder()` built beside it (`TrainState(model=Encoder(),
    optimizer=SGD(Encoder().parameters()))`) is another instance with its own parameters. The
    forward and backward run the kept one, the optimizer steps the other one, whose `.grad`
    stays None: the model never trains and nothing raises (checked on torch 2.13). Build the
    model once and hand the optimizer that instance's parameters.
    Known limits: the class must be a module class of the file or a `torch.nn` layer, built
    again (for the model) in the same function; a throw-away optimizer with no such twin (a
    learning-rate schedule plotted on `SGD(nn.Linear(1, 1).parameters())`) is left alone.
    """

    code = "GT483"
    name = "optimizer-over-unkept-module"
    message = ("`{expr}` gives `{opt}` the parameters of a new `{cls}` that nothing else keeps; "
               "the `{cls}` built at line {line} is another instance, so stepping never moves it")
    triggers = ("optim",)
    gate_statements = True
    examples = [
        Bad("""
            import torch
            import torch.nn as nn

            class Encoder(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(4, 2)

                def forward(self, x):
                    return self.fc(x)

            def make_state():
                model = Encoder()
                opt = torch.optim.SGD(Encoder().parameters(), lr=0.1)
                return model, opt
            """, at=(14, 26)),
        Good("""
            import torch
            import torch.nn as nn

            class Encoder(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(4, 2)

                def forward(self, x):
                    return self.fc(x)

            def make_state():
                model = Encoder()
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                return model, opt

            def plot_schedule():
                opt = torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=0.1)
                return torch.optim.lr_scheduler.StepLR(opt, 10)
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if not is_optimizer_call(node, ctx):
            return
        arg = _params_argument(node)
        if arg is None:
            return
        for n in walk(arg):
            if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                    and n.func.attr in PARAM_ITERS and isinstance(n.func.value, ast.Call)):
                continue
            cls = _module_class(n.func.value, ctx)
            twin = _twin(n.func.value, cls, node, ctx) if cls else None
            if twin is not None:
                yield self.report(n, ctx, related=[Related(
                    ctx.path, twin.lineno, "the model that trains is built here",
                    ctx.column(twin))], expr=ctx.source(n), opt=ctx.source(node.func),
                    cls=ctx.source(n.func.value.func), line=twin.lineno)
                return


def _twin(made: ast.Call, cls: str, opt: ast.Call, ctx: Context) -> ast.Call | None:
    """Another construction of ``cls`` in the function (or script) holding ``opt``, outside
    the optimizer's own arguments."""
    fn = ctx.function
    body = fn if isinstance(fn, FUNCTION_TYPES) else ctx.tree
    inside = {id(n) for n in walk(opt)}
    for n in walk(body):
        if isinstance(n, ast.Call) and n is not made and id(n) not in inside \
                and _module_class(n, ctx) == cls and \
                (body is not ctx.tree or not _in_def(n, ctx)):
            return n
    return None


def _in_def(n: ast.AST, ctx: Context) -> bool:
    """``n`` lies inside a function or class of the module (not the script's own code)."""
    for d in ctx.tree.body:
        if isinstance(d, (*FUNCTION_TYPES, ast.ClassDef)) and \
                d.lineno <= n.lineno <= (d.end_lineno or d.lineno):  # type: ignore[attr-defined]
            return True
    return False
