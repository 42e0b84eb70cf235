"""GT480: the optimizer is built on a plain tensor that the function then wraps in a new
Parameter for the model."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.reach import called_function
from gradtrace.lint.context import Context
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.leaf._tensors import is_optimizer_call, is_parameter_call

# NOTE [optimizer before the wrap]
# `nn.Parameter(t)` is a new tensor object over `t`'s memory (`Tensor._make_subclass`; torch
# 2.13: `nn.Parameter(t) is t` is False, `.data_ptr()` equal). An optimizer built over `t`
# before the wrap holds `t`; the model then computes with the Parameter, so the backward writes
# the Parameter's `.grad`, `t.grad` stays None and the optimizer skips `t` at every step: the
# values never move (PyTorch-BigGraph's `load_embeddings` before fc614086). Said when `t` is a
# local bound once, handed inside a list display to an optimizer (or to a function of the file
# whose body builds one from its first argument), then wrapped by `nn.Parameter(t)` in the same
# function, the wrap's result returned or bound, and `t` read nowhere after the wrap.


def _builds_optimizer_from_arg(fn: ast.AST, ctx: Context) -> bool:
    """``fn``'s body builds a ``torch.optim`` optimizer whose first argument reads ``fn``'s
    first parameter (``Adagrad(list(params), lr=...)``)."""
    args = getattr(fn, "args", None)
    if args is None or not (args.posonlyargs or args.args):
        return False
    first = (args.posonlyargs or args.args)[0].arg
    return any(is_optimizer_call(c, ctx) and c.args and any(  # type: ignore[attr-defined]
        isinstance(n, ast.Name) and n.id == first for n in walk(c.args[0]))  # type: ignore
        for c in walk(fn))


class OptimizerBeforeParameterWrap(Rule):
    """An optimizer is built on a plain tensor that the same function then wraps in a new
    `nn.Parameter` for the model.

    Why: `nn.Parameter(t)` is a new tensor object sharing `t`'s memory
    (NOTE [optimizer before the wrap]). The model trains the Parameter, so the backward fills
    the Parameter's `.grad`; the optimizer holds `t`, whose `.grad` stays None, and skips it at
    every step: the values never change, silently (PyTorch-BigGraph: the entity embeddings
    never learned while the relation operators did). Wrap first (`t = nn.Parameter(t)`), then
    build the optimizer on that object.
    Known limits: `t` is a local name bound once, given in a list display to a `torch.optim`
    optimizer or to a function of the file that builds one from its first argument, wrapped
    later in the same function with its result returned or bound, and not read after the wrap.
    """

    code = "GT480"
    name = "optimizer-before-parameter-wrap"
    message = ("the optimizer built by `{opt}(...)` holds `{name}`, which line {line} then "
               "wraps in a new `nn.Parameter`: the model trains that new object, so "
               "`{name}.grad` stays None and the optimizer never moves it; wrap first and "
               "build the optimizer on the Parameter")
    triggers = ("Parameter",)
    gate_statements = True
    examples = [
        Bad("""
            import torch
            def load_table(n, d):
                table = torch.randn(n, d) * 0.1
                opt = torch.optim.SGD([table], lr=0.1)
                return torch.nn.Parameter(table), opt
            """, at=(4, 10)),
        Good("""
            import torch
            def load_table(n, d):
                table = torch.nn.Parameter(torch.randn(n, d) * 0.1)
                opt = torch.optim.SGD([table], lr=0.1)
                return table, opt
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        fn = ctx.function
        if fn is None or not is_parameter_call(node, ctx) or len(node.args) != 1 \
                or not isinstance(node.args[0], ast.Name):
            return
        name = node.args[0].id
        scope = ctx.scope(fn)
        bs = scope.bindings.get(name, ())
        if len(bs) != 1 or bs[0].line >= node.lineno or any(
                a.arg == name for a in (*fn.args.posonlyargs, *fn.args.args,  # type: ignore
                                         *fn.args.kwonlyargs)):  # type: ignore[attr-defined]
            return
        stmt = next((s for s in scope.stmts if s.lineno <= node.lineno <= (s.end_lineno or 0)
                     and isinstance(s, (ast.Return, ast.Assign))
                     and any(n is node for n in walk(s.value))), None)  # type: ignore[arg-type]
        if stmt is None or any(  # `name` read after the wrap
                isinstance(n, ast.Name) and n.id == name and n is not node.args[0]
                and n.lineno >= node.lineno for n in walk(fn)):
            return
        for c in walk(fn):
            if not (isinstance(c, ast.Call) and c.lineno < node.lineno and c.args
                    and isinstance(c.args[0], ast.List) and any(
                        isinstance(e, ast.Name) and e.id == name for e in c.args[0].elts)):
                continue
            if not is_optimizer_call(c, ctx):
                callee = called_function(c, scope, c.lineno)
                if callee is None or not _builds_optimizer_from_arg(callee, ctx):
                    continue
            yield self.report(c, ctx, related=(Related(
                ctx.path, node.lineno, f"`{name}` is wrapped in a new Parameter here",
                ctx.column(node)),), opt=ctx.source(c.func), name=name, line=node.lineno)
            return
