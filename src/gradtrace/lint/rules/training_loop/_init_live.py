"""Which expressions in ``__init__`` keep a graph to the module's parameters, for GT521
(:mod:`init_graph`, NOTE [graph built at construction]): the reads and calls that cut it, the
views that save nothing, and the calls that may keep their arguments instead."""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.cuts import FRESH_METHODS, INTEGER_METHODS, NO_HISTORY_METHODS
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import child_nodes
from gradtrace.lint.rules.training_loop._init_values import COMBINE

# reading these from a tensor leaves the graph
META_ATTRS = frozenset({"shape", "dtype", "device", "data", "requires_grad", "grad", "ndim",
                        "is_cuda", "T_", "layout", "is_leaf", "names"})
# results without a graph: the shared tables (a Python value, a detached, integer or fresh
# tensor, sizes) and a module's own bookkeeping
CUT_METHODS = NO_HISTORY_METHODS | INTEGER_METHODS | FRESH_METHODS | frozenset({
    "type", "parameters", "named_parameters", "state_dict", "modules", "children", "train",
    "eval", "apply"})
CUT_FUNCS = frozenset({"len", "isinstance", "getattr", "hasattr", "id", "str", "repr", "int",
                       "float", "bool", "type", "print", "list", "tuple", "range",
                       "torch.nn.Parameter", "copy.deepcopy", "deepcopy"})
# operations that only view their input: no saved tensor, storage shared with the Parameter
VIEW_METHODS = frozenset({"t", "view", "view_as", "reshape", "transpose", "permute", "expand",
                          "expand_as", "unsqueeze", "squeeze", "narrow", "select", "flatten",
                          "unflatten", "contiguous", "to", "cuda", "cpu", "float", "double",
                          "half", "chunk", "split", "unbind"})
GRAD_OFF = frozenset({"torch.no_grad", "torch.inference_mode", "torch.set_grad_enabled"})


def _live(e: ast.AST, params: set[str], mods: set[str], ctx: Context, view: bool = True
          ) -> tuple[str, bool] | None:
    """(the attribute reached, whether only through views) when ``e`` reaches a parameter
    or calls a submodule through graph-keeping operations."""
    if isinstance(e, ast.Attribute):
        if isinstance(e.value, ast.Name) and e.value.id == "self":
            return (e.attr, view) if e.attr in params else None
        if e.attr in META_ATTRS:
            return None
        return _live(e.value, params, mods, ctx, view)
    if isinstance(e, ast.Call):
        f = e.func
        q = ctx.call_name(e) or dotted(f) or ""
        if q in CUT_FUNCS or q in GRAD_OFF:
            return None
        if isinstance(f, ast.Attribute):
            if isinstance(f.value, ast.Name) and f.value.id == "self":
                if f.attr in mods:
                    return f.attr, False
                return None  # a method of the class: not followed
            if f.attr in CUT_METHODS:
                return None
            got = _live(f.value, params, mods, ctx, view and f.attr in VIEW_METHODS)
            if got is not None:
                return got
        if _opaque(e, q, ctx):
            return None
        for a in e.args if q in COMBINE else ():  # `torch.stack([self.x, self.y], 1)`
            for x in a.elts if isinstance(a, (ast.List, ast.Tuple)) else ():
                got = _live(x.value if isinstance(x, ast.Starred) else x, params, mods, ctx,
                            False)
                if got is not None:
                    return got
        for a in (*e.args, *(k.value for k in e.keywords)):
            got = _live(a, params, mods, ctx, False)
            if got is not None:
                return got
        return None
    if isinstance(e, ast.Subscript):
        return _live(e.value, params, mods, ctx, view)
    if isinstance(e, (ast.BinOp, ast.UnaryOp)):
        for x in child_nodes(e):
            got = _live(x, params, mods, ctx, False)
            if got is not None:
                return got
    return None


def _opaque(e: ast.Call, q: str, ctx: Context) -> bool:
    """A call that may keep its arguments rather than compute from them: a class of the
    file that is not a module (``GaussianPosterior(self.mu, self.rho)`` stores the Parameters
    and samples from them later), or a name imported from outside torch or from another file
    of the package (``from .sampler import Posterior``: unknown)."""
    f = e.func
    if isinstance(f, ast.Name):
        info = ctx.analysis.classes.get(f.id)
        if info is not None:
            return not info.is_module
    root = f
    while isinstance(root, ast.Attribute):
        root = root.value
    if isinstance(root, ast.Name) and root.id in ctx.imports.package:
        return True
    imported = ctx.imports.qualified_name(f) if isinstance(f, (ast.Name, ast.Attribute)) \
        else None
    return bool(imported) and imported != dotted(f) and not imported.startswith("torch.")
