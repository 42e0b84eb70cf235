"""GT419 / GT561: a module, or one parameter tensor, handed to an optimizer as its params."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.kinds import MODULE, PARAMETER
from gradtrace.lint.analysis.calls import call_sites, statements_on, word_lines
from gradtrace.lint.nodes import walk
from gradtrace.lint.context import FUNCTION_TYPES, Context
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
    A call spread over lines is reported on its first line, the line its traceback names
    (NOTE [raised at the call]).
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
            # NOTE [raised at the call]: the call raises, and its traceback names the call's
            # first line: an argument written on a later line is a related place
            at: ast.expr = e
            if e.lineno != node.lineno:
                at = node
                rel.append(Related(ctx.path, e.lineno, "the module is passed here",
                                   ctx.column(e)))
            yield self.report(at, ctx, related=rel, expr=ctx.source(e),
                              opt=ctx.source(node.func), why=why)


def _params_parameters(fn: ast.AST, ctx: Context) -> frozenset[str]:
    """Parameters of a function of the file that it hands on, as they are, as the params of a
    torch optimizer it builds (``def build_optimizer(params): return torch.optim.SGD(params)``).
    """
    a = getattr(fn, "args", None)
    names = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)} if a is not None else set()
    out = set()
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and is_optimizer_call(n, ctx):
            arg = _params_argument(n)
            if isinstance(arg, ast.Name) and arg.id in names:
                out.add(arg.id)
    return frozenset(out)


def _class_like(f: ast.expr) -> bool:
    """``torch.optim.SGD`` / ``Adam``: a capitalised name (the cheap test before the
    qualified name)."""
    last = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    return last[:1].isupper()


def _handing_helpers(ctx: Context) -> frozenset[str]:
    """Names of the functions and methods of the file that hand a parameter on as an
    optimizer's params (cached per file)."""
    def make() -> frozenset[str]:
        out: set[str] = set()  # the lines naming `optim` only (NOTE [word search])
        for st, encl in statements_on(ctx, word_lines(ctx, ("optim",))):
            fn = next((e for e in reversed(encl) if isinstance(e, FUNCTION_TYPES)), None)
            if fn is None or fn.name in out or isinstance(st, (*FUNCTION_TYPES, ast.ClassDef)):
                continue
            for n in walk(st):
                if isinstance(n, ast.Call) and _class_like(n.func) and isinstance(
                        _params_argument(n), ast.Name) and is_optimizer_call(n, ctx) \
                        and _params_argument(n).id in _params_parameters(fn, ctx):  # type: ignore
                    out.add(fn.name)
                    break
        return frozenset(out)
    return ctx.memo("gt561-helpers", ctx.tree, make)


class ParameterGivenToOptimizer(Rule):
    """One parameter tensor, not an iterable of them, is handed to an optimizer:
    `SGD(model.ctx)`, or `build_optimizer(learner.ctx)` with a helper of the file that passes it
    on as the optimizer's params.

    Why: an optimizer takes an iterable of tensors or of parameter-group dicts; a single
    tensor is rejected: `TypeError: params argument given to the optimizer should be an
    iterable of Tensors or dicts, but got torch.FloatTensor` (Dassl.pytorch#67, checked on
    torch 2.13). Pass `[p]`. What is a parameter comes from the code (`nn.Parameter(...)`
    bound to a name or on `self` of a class of the file: NOTE [kinds]).
    Known limits: the tensor must be written in the optimizer call or in the call of the
    helper, and be known to be an `nn.Parameter`; the helper must hand its argument on
    unchanged (a `list(params)` inside it makes the call valid), on a line that names `optim`.
    """

    code = "GT561"
    name = "parameter-given-to-optimizer"
    message = ("`{expr}` is one parameter tensor, not an iterable of them: {via} raises "
               "`TypeError`; pass `[{expr}]`")
    triggers = ("optim",)
    gate_statements = True
    examples = [
        Bad("""
            import torch
            scale = torch.nn.Parameter(torch.ones(3))
            opt = torch.optim.Adam(scale, lr=0.1)
            """, at=(3, 23)),
        Bad("""
            import torch
            def make_optimizer(params, lr=0.01):
                return torch.optim.SGD(params, lr=lr, momentum=0.9)
            scale = torch.nn.Parameter(torch.ones(3))
            opt = make_optimizer(scale)
            """, at=(5, 21)),
        Good("""
            import torch
            def make_optimizer(params, lr=0.01):
                return torch.optim.SGD(params, lr=lr, momentum=0.9)
            scale = torch.nn.Parameter(torch.ones(3))
            opt = make_optimizer([scale])
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if is_optimizer_call(node, ctx):
            arg = _params_argument(node)
            here = ctx.function
            if isinstance(arg, ast.Name) and here is not None and arg.id in _params_parameters(
                    here, ctx):
                return  # the helper's argument: reported where it is called
            if arg is not None and self._parameter(arg, ctx):
                yield self.report(arg, ctx, expr=ctx.source(arg),
                                  via=f"`{ctx.source(node.func)}(...)`")
            return

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        for name in sorted(_handing_helpers(ctx)):  # calls of the helpers, wherever they are
            for call, _, encl in call_sites(ctx, name):
                where = next((e for e in reversed(encl) if isinstance(e, FUNCTION_TYPES)),
                             ctx.tree)
                fn = ctx.analysis.callee(call, where)
                passed = _params_parameters(fn, ctx) if fn is not None else frozenset()
                for p, v in ctx.analysis.arguments(fn, call).items() if passed else ():
                    if p in passed and self._parameter(v, ctx, where, call.lineno):
                        yield self.report(v, ctx, expr=ctx.source(v), via=(
                            f"`{fn.name}(...)`, which hands it to the optimizer,"))  # type: ignore
                        break

    @staticmethod
    def _parameter(e: ast.AST, ctx: Context, where: ast.AST | None = None,
                   line: int | None = None) -> bool:
        if not isinstance(e, (ast.Name, ast.Attribute)):
            return False
        k = ctx.analysis.kind(e, ctx.scope(where) if where is not None else None, line)
        return k is not None and k.what == PARAMETER
