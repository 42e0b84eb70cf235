"""Whether a loss hands back new leaves in place of the terms it computed.

# NOTE [returned fresh leaves]
A loss function, or the ``forward`` of a module class that holds no weights (a loss written as
an ``nn.Module``, NOTE [weightless class of the file]), may return its terms re-made as new
leaves: ``return [torch.tensor(sum(v) / len(v), requires_grad=True) for v in terms.values()]``
or ``return torch.tensor(total, requires_grad=True)``. Each returned value has no history, so
``backward()`` over them stops there: what the loss was handed (the model's output) gets no
gradient and the model never trains; ``requires_grad=True`` only silences the error a constant
loss raises. :func:`returned_leaf_fn` is the function when the new leaf is what it returns
(the value itself, an element of a returned list, tuple or comprehension) and a call of it is
both handed a graph (a model output: NOTE [loss evidence]'s ``graph_fed``) and backpropagated
(``reaches_backward``), with no gradient of the value read where it is bound (``inp.grad``,
``retain_grad``): in the file (an instance of the class called, ``loss(y, model(x))``), or in
another file of the project that imports it (NOTE [reverse index]), so a loss module of a
file without a training step is judged by its callers. A leaf made for an input whose
gradient is read (``x_adv = leaf(x)``, ``x_adv.grad``) or a helper never handed a graph is
not such a loss. Asked only for a fresh leaf of computed values (GT119's ``_fresh_leaf``)
found in a ``return``.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Callable

from gradtrace.lint.analysis.callees import function_sites, module_sites
from gradtrace.lint.analysis.loss_callers import project_evidence, subclassed
from gradtrace.lint.analysis.loss_evidence import graph_fed, logged_value, reaches_backward
from gradtrace.lint.analysis.weightless_classes import weightless_but_leaves
from gradtrace.lint.grad_modes import FUNCTION_TYPES

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

Fn = ast.FunctionDef | ast.AsyncFunctionDef
_HOLDERS = (ast.List, ast.Tuple, ast.ListComp, ast.GeneratorExp)


def returned_leaf_fn(node: ast.AST, parents: dict[int, ast.AST], ctx: Context,
                     grad_wanted: Callable[[str, Context], bool]) -> Fn | None:
    """NOTE [returned fresh leaves]: the function ``node`` (a fresh leaf) is the loss value
    returned by, when a call of it hands a graph to it and backpropagates what it returns;
    ``grad_wanted(name, file's context)``: the file reads the gradient of ``name``."""
    up = parents.get(id(node))
    held = node
    while isinstance(up, _HOLDERS) and (held in getattr(up, "elts", ()) or
                                        getattr(up, "elt", None) is held):
        held, up = up, parents.get(id(up))
    fn = ctx.function
    if not isinstance(up, ast.Return) or not isinstance(fn, FUNCTION_TYPES):
        return None
    cls = ctx.analysis.class_of(fn)
    if cls is not None and not (fn.name == "forward" and weightless_but_leaves(cls.name, ctx)
                                and not subclassed(ctx, cls.name)):
        return None
    if cls is None and ctx.analysis.functions.get(fn.name) is not fn:
        return None

    def judge(octx: Context, where: ast.AST, call: ast.Call) -> bool | None:
        if logged_value(octx, where, call) or not graph_fed(octx, where, call):
            return False
        s = octx.scope(where).statement_of(call)
        if isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and grad_wanted(t.id, octx)
                                             for t in s.targets):
            return False
        return reaches_backward(octx, where, call)

    def make() -> bool:
        sites = module_sites(ctx.analysis, cls.name) if cls is not None else \
            function_sites(ctx.analysis, fn)  # type: ignore[arg-type]
        if any(judge(ctx, where, call) for call, where in sites or ()):
            return True
        return bool(project_evidence(ctx, fn, judge))  # type: ignore[arg-type]
    return fn if ctx.memo("returned-leaf-fn", fn, make) else None
