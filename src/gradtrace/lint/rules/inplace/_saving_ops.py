"""The ops that save a tensor for backward, for GT605: which bare names the ops of an
expression may save as their input (:func:`_candidates`, :func:`_own_candidates`), and
whether one does (:func:`_saves_it`: a saving layer, a product with a Parameter, an
elementwise op of a tensor that requires grad). Holds no rule."""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.grad_values import passed_requiring, requires_grad
from gradtrace.lint.analysis.graph_params import graph_params
from gradtrace.lint.analysis.kinds import MODULE, PARAMETER
from gradtrace.lint.analysis.module_results import attr_module, first_layers
from gradtrace.lint.context import FUNCTION_TYPES, LOOP_TYPES, Context
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.inplace._passed_graph import from_passed
from gradtrace.lint.rules.inplace._self_saves import saved_by, unview as _unview

# layers whose backward needs their input (the weight gradient is input x grad): checked on
# torch 2.13, `x += 1` after `y = layer(x)` makes `y`'s backward raise
SAVING_MODULES = frozenset({
    "torch.nn.Linear", "torch.nn.Bilinear", "torch.nn.Conv1d", "torch.nn.Conv2d",
    "torch.nn.Conv3d", "torch.nn.ConvTranspose1d", "torch.nn.ConvTranspose2d",
    "torch.nn.ConvTranspose3d", "torch.nn.BatchNorm1d", "torch.nn.BatchNorm2d",
    "torch.nn.BatchNorm3d", "torch.nn.LayerNorm", "torch.nn.GroupNorm"})
SAVING_FUNCS = frozenset({"torch.mm", "torch.matmul", "torch.bmm", "torch.mul",
                          "torch.nn.functional.linear", "torch.nn.functional.conv1d",
                          "torch.nn.functional.conv2d", "torch.nn.functional.conv3d"})


def _is_param(e: ast.expr, ctx: Context, line: int) -> bool:
    k = ctx.analysis.kind(e, None, line)
    return k is not None and k.what == PARAMETER


def _candidates(e: ast.AST, ctx: Context, written: str | None = None
                ) -> list[tuple[str, ast.AST, tuple[str, list]]]:
    """(name, op, test) for each bare name an op in ``e`` may save as its input, in walk
    order; the op saves it when :func:`_saves_it` passes ``test`` (kinds cost a data-flow
    pass: asked only for the name a write touches)."""
    out: list[tuple[str, ast.AST, tuple[str, list]]] = []
    for n in walk(e):
        saved = saved_by(n, ctx, written)
        if isinstance(saved, ast.Name):  # `F.softplus(x)`, `x.norm(dim=-1)`: if x has a graph
            out.append((saved.id, n, ("grad", [saved])))
        if isinstance(n, ast.Call) and n.args:
            f = n.func
            q = ctx.qualified_name(f) or ""
            if q in SAVING_FUNCS:
                for a in n.args[:2]:
                    if isinstance(a, ast.Name):
                        out.append((a.id, n, ("param", [o for o in n.args[:2] if o is not a])))
                continue
            a = _unview(n.args[0])  # `self.pos_conv(x.transpose(1, 2))` saves a view of x
            if isinstance(f, (ast.Name, ast.Attribute)) and isinstance(a, ast.Name):
                out.append((a.id, n, ("module", [f, _reordered(n.args[0])])))
        elif isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Mult, ast.MatMult)):
            for a, b in ((n.left, n.right), (n.right, n.left)):
                if isinstance(a, ast.Name):
                    out.append((a.id, n, ("operand", [b])))
    return out


# NOTE [product saves the other operand]
# `y = a * t` (or `a @ t`) saves `t` for the gradient of `a` whenever `a` requires grad: a
# Parameter, a layer's result, a value its callers give a graph
# (NOTE [values that require grad]). Writing `t` in place before the backward raises (timm's asymmetric loss smooths its
# one-hot targets in place after `xs_pos * targets`; checked on torch 2.13). A constant or a
# data tensor on the other side saves nothing that needs `t`'s version.


def _value_names(e: ast.expr) -> list[ast.Name]:
    """The names an elementwise expression computes from (``torch.exp(lp)``, ``a - b``):
    a call's arguments and receiver, an operator's operands; not callees nor attributes'
    owners (``self``, ``torch``)."""
    out: list[ast.Name] = []
    todo: list[ast.AST] = [e]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Name):
            out.append(n)
        elif isinstance(n, ast.BinOp):
            todo += [n.left, n.right]
        elif isinstance(n, ast.UnaryOp):
            todo.append(n.operand)
        elif isinstance(n, ast.Call):
            todo += list(n.args)
            if isinstance(n.func, ast.Attribute) and not isinstance(n.func.value, ast.Name):
                todo.append(n.func.value)
            elif isinstance(n.func, ast.Attribute) and n.func.value.id not in ("torch", "F", "self"):
                todo.append(n.func.value)  # `lp.exp()`: the receiver
    return out


def _has_graph(e: ast.expr, ctx: Context, line: int) -> bool:
    """``e`` surely requires grad and is no Parameter (a leaf written in place raises another
    error): a layer's result, or a parameter of the function that its callers pass one
    (NOTE [values that require grad])."""
    fn = ctx.function or ctx.tree
    if _is_param(e, ctx, line):
        return False
    if requires_grad(ctx, fn, e, line) is not None or from_passed(ctx, fn, e, line):
        return True
    return isinstance(e, ast.Name) and isinstance(fn, FUNCTION_TYPES) and any(  # NOTE [graph through helper returns]
        ctx.memo("gt605-passed:" + p, fn, lambda: passed_requiring(ctx, fn, p) is not None)
        for p in sorted(graph_params(ctx, fn, e, line)))


def _saves_it(test: tuple[str, list], ctx: Context, line: int) -> bool:
    how, operands = test
    if how == "param":  # another operand is a Parameter
        return any(_is_param(o, ctx, line) for o in operands)
    if how == "operand":  # NOTE [product saves the other operand]
        return any(_is_param(o, ctx, line) or _has_graph(o, ctx, line) or not isinstance(
            o, ast.Name) and any(isinstance(n, ast.Name) and _has_graph(n, ctx, line)
                                 for n in _value_names(o)) for o in operands)
    if how == "grad":  # an elementwise op saves it when it requires grad
        return _has_graph(operands[0], ctx, line)
    k = ctx.analysis.kind(operands[0], None, line)  # a saving layer
    if k is not None and k.what != MODULE:
        return False
    folded = operands[1:] == [True]  # NOTE [a linear layer folds a reordered input]
    if k is not None and (k.cls or "") in SAVING_MODULES:
        return not (folded and k.cls == LINEAR)
    # a Sequential (or a helper's) whose first layer saves its input (NOTE [module results]);
    # of unknown kind: a helper of the file whose every return builds a saving layer
    got = attr_module(operands[0], ctx, ctx.function)
    firsts = first_layers(got[0], ctx, got[1]) if got is not None else None
    return bool(firsts) and firsts <= SAVING_MODULES and not (folded and LINEAR in firsts)


LINEAR = "torch.nn.Linear"


def _reordered(e: ast.expr) -> bool:
    """# NOTE [a linear layer folds a reordered input]
    ``x.transpose(1, 2)`` (two dims, one of them past the first two: the tensor has three or
    more), ``x.permute(0, 2, 1)``: a view whose leading dims cannot be merged in place.
    ``nn.Linear`` on an input of three or more dims multiplies its folded 2-D form, which
    for such a view is a copy: the layer saves that copy, not ``x``, and ``x += fc(x.transpose(
    1, 2)).transpose(1, 2)`` trains (checked on torch 2.13; RTSF's RMLP). A convolution
    saves the view itself (WavLM's ``x += x_conv`` raises). Known limit: dims of size 1 can
    make the view foldable in place, the layer then saves it."""
    if not (isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and not e.keywords
            and all(isinstance(a, ast.Constant) and type(a.value) is int and a.value >= 0
                    for a in e.args)):
        return False
    dims = [a.value for a in e.args]  # type: ignore[attr-defined]
    if e.func.attr == "transpose":
        return len(dims) == 2 and dims[0] != dims[1] and max(dims) >= 2
    return e.func.attr == "permute" and len(dims) >= 3 and dims != sorted(dims)


def _own_candidates(s: ast.stmt, ctx: Context) -> list[tuple[str, ast.AST, tuple[str, list]]]:
    """:func:`_candidates` of a statement of the block itself (not of a nested block)."""
    if isinstance(s, (ast.If, *LOOP_TYPES, ast.With, ast.Try, ast.FunctionDef,
                      ast.AsyncFunctionDef, ast.ClassDef)):
        return []  # the op must sit in the block itself
    if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) \
            and not isinstance(s.value.func, ast.Attribute):
        return []
    return _candidates(s, ctx)
