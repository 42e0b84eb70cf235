"""GT446: one module object repeated into a list (`[layer] * n`, `[module for _ in range(n)]`)."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.registration._modules import SELF_RETURNING, module_ctor, owns_params
from gradtrace.lint.nodes import bfs_walk


def _strip(e: ast.AST) -> ast.AST:
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr in SELF_RETURNING:
        e = e.func.value
    return e


def _module_with_params(e: ast.AST, ctx: Context) -> bool:
    """``e`` builds, or names, one module object that owns parameters."""
    e = _strip(e)
    if isinstance(e, ast.Call):
        return owns_params(e, ctx)
    if isinstance(e, (ast.Name, ast.Attribute)):
        k = ctx.analysis.kind(e)
        return k is not None and k.what == MODULE and k.node is not None \
            and owns_params(_strip(k.node), ctx)
    return False


def _count(e: ast.expr, ctx: Context) -> bool:
    """A repeat count: an int constant above 1, a name, an attribute or arithmetic; not a
    flag (a parameter of the function whose default is ``True``/``False`` or annotated
    ``bool``, never rebound): ``flag * [layer]`` is zero or one layer, nothing repeated."""
    if isinstance(e, ast.Constant):
        return isinstance(e.value, int) and not isinstance(e.value, bool) and e.value > 1
    if isinstance(e, ast.Name) and _bool_param(e.id, ctx.function):
        return False
    return isinstance(e, (ast.Name, ast.Attribute, ast.BinOp, ast.Call))


def _bool_param(name: str, fn: ast.AST | None) -> bool:
    """``name`` is a parameter of ``fn`` with a bool default or a ``bool`` annotation that no
    statement of ``fn`` rebinds."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    a = fn.args
    pos = [*a.posonlyargs, *a.args]
    defaults = dict(zip([x.arg for x in pos[len(pos) - len(a.defaults):]], a.defaults))
    defaults.update({x.arg: d for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
    arg = next((x for x in [*pos, *a.kwonlyargs] if x.arg == name), None)
    if arg is None:
        return False
    d = defaults.get(name)
    if not (isinstance(d, ast.Constant) and isinstance(d.value, bool)
            or isinstance(arg.annotation, ast.Name) and arg.annotation.id == "bool"):
        return False
    return _never_rebound(name, fn)


def _never_rebound(name: str, fn: ast.AST) -> bool:
    return not any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
                   for n in bfs_walk(fn))


def _per_position_in_other_arm(ctor: ast.AST, ctx: Context) -> bool:
    """The other arm of an enclosing ``if`` builds the same class once per position (a
    comprehension or a loop calling it): ``[Linear(...) for _ in range(n)] if per_layer else
    [Linear(...)] * n``; sharing one layer is then the option the flag chooses."""
    name = dotted(ctor.func) if isinstance(ctor, ast.Call) else None
    stmts = ctx.stmts
    for i in range(len(stmts) - 1, 0, -1):
        s, inner = stmts[i - 1], stmts[i]
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return False
        if not isinstance(s, ast.If) or name is None:
            continue
        other = s.orelse if any(inner is x for x in s.body) else s.body
        for n in (m for x in other for m in bfs_walk(x)):
            if isinstance(n, (ast.ListComp, ast.GeneratorExp, ast.For)):
                if any(isinstance(c, ast.Call) and dotted(c.func) == name for c in bfs_walk(n)):
                    return True
    return False


def _bound_by(comp: ast.ListComp | ast.GeneratorExp) -> set[str]:
    return {n.id for g in comp.generators for n in bfs_walk(g.target) if isinstance(n, ast.Name)}


class ModuleRepeatedInList(Rule):
    """One module object is repeated into a list of layers: `[nn.Linear(d, d)] * n`, or
    `[module for _ in range(n)]` in a helper meant to clone the module it is given.

    Why: multiplying a list copies references, not modules, and a comprehension whose
    element is a name made before it yields that one object at every position. The model then
    holds a single layer called `n` times: `parameters()` lists its weight once, every
    "layer" shares it, and the network has a fraction of the capacity it was meant to have,
    silently (tfjgeorge/nngeometry#60; checked on torch 2.13). Build each layer anew:
    `[nn.Linear(d, d) for _ in range(n)]`, or `copy.deepcopy(block)` per position.
    Known limits: a comprehension is read where the statement names `ModuleList` or
    `Sequential`; the repeated element must be a module that owns parameters (a parameter-free
    activation repeated is harmless and left alone): built inside the multiplied list
    (`[shared] * n` of a name is an explicit choice to share, and left alone), or the element
    of a comprehension, a parameter of the function that builds the list (a module made in the
    function and repeated by name is a choice to share, as with `[shared] * n`; so is one the
    same function also deep-copies elsewhere; a function every call of which in the file
    hands it a parameter-free module, `clones(nn.ReLU(), n)`, is left alone).
    """

    code = "GT446"
    name = "module-repeated-in-list"
    message = ("`{expr}` repeats one `{elt}` object {how}: every position shares its "
               "parameters; build a new layer per position ({remedy})")
    triggers = ("]*", "] *", "*[", "* [", "ModuleList", "Sequential")
    examples = [
        Bad("""
            import torch.nn as nn
            layers = [nn.Linear(64, 64), nn.ReLU()] * 4
            model = nn.Sequential(*layers)
            """, at=(2, 9)),
        Bad("""
            import torch.nn as nn
            def clones(module, n):
                return nn.ModuleList([module for _ in range(n)])
            """, at=(3, 25)),
        Good("""
            import copy
            import torch.nn as nn
            block = nn.TransformerEncoderLayer(64, 4)
            blocks = nn.ModuleList([copy.deepcopy(block) for _ in range(6)])
            acts = nn.Sequential(*([nn.Linear(8, 8)] + [nn.ReLU()] * 3))
            heads = nn.ModuleList([nn.Linear(8, 2) for _ in range(3)])
            head = nn.Linear(8, 2)
            shared = nn.ModuleList([head for _ in range(3)])
            """),
    ]

    def visit_BinOp(self, node: ast.BinOp, ctx: Context) -> Iterator[Finding]:
        if not isinstance(node.op, ast.Mult):
            return
        for seq, n in ((node.left, node.right), (node.right, node.left)):
            if isinstance(seq, (ast.List, ast.Tuple)) and _count(n, ctx):
                elt = next((e for e in seq.elts if isinstance(_strip(e), ast.Call)
                            and _module_with_params(e, ctx)), None)
                if elt is not None and not _per_position_in_other_arm(_strip(elt), ctx):
                    yield self.report(node, ctx, expr=ctx.source(node),
                                      elt=_name(_strip(elt), ctx), how="by list multiplication",
                                      remedy="a comprehension that calls the constructor")
                    return

    def visit_ListComp(self, node: ast.ListComp, ctx: Context) -> Iterator[Finding]:
        elt = node.elt
        if not isinstance(elt, ast.Name) or elt.id in _bound_by(node) \
                or not _replicates_param(elt.id, ctx.function):
            return
        ups = [e for e in ctx.exprs[-3:-1] if not isinstance(e, ast.Starred)]
        up = ups[-1] if ups else None  # the list is made into a container of modules
        if not (isinstance(up, ast.Call) and (dotted(up.func) or "").rpartition(".")[2]
                in ("ModuleList", "Sequential")):
            return
        if not _cloned_nearby(elt, ctx) and not _given_only_param_free(elt.id, ctx):
            yield self.report(node, ctx, expr=ctx.source(node), elt=dotted(elt) or "module",
                              how="at every position of the comprehension",
                              remedy="`copy.deepcopy(...)` or the constructor in the comprehension")

    visit_GeneratorExp = visit_ListComp  # type: ignore[assignment]


def _replicates_param(name: str, fn: ast.AST | None) -> bool:
    """``name`` is a parameter of ``fn``, a function whose job is to replicate what it is
    given (``def clones(module, n): return nn.ModuleList([module for _ in range(n)])``): the
    caller asked for ``n`` layers and gets one. A module built in the function itself and then
    repeated by name (DETR's ``[fc_cls for _ in range(num_pred)]``, N-BEATS' shared blocks) is
    an explicit choice to share, like ``[shared] * n`` (0 real of 13 on unseen projects)."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    a = fn.args
    return name in {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)} \
        and _never_rebound(name, fn)


def _given_only_param_free(name: str, ctx: Context) -> bool:
    """Every call of the replicating function in the file hands it, as ``name``, a module that
    owns no parameter (``clones(nn.ReLU(), n)``): one activation shared is harmless. With no
    call in the file, or any argument that may own parameters, ``False``."""
    fn = ctx.function
    assert isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
    pos = [x.arg for x in (*fn.args.posonlyargs, *fn.args.args)]
    at = pos.index(name) if name in pos else None
    method = bool(pos) and pos[0] in ("self", "cls") and ctx.class_def is not None
    given = []
    for c in bfs_walk(ctx.tree):
        if not isinstance(c, ast.Call) or (dotted(c.func) or "").rpartition(".")[2] != fn.name:
            continue
        kw = next((k.value for k in c.keywords if k.arg == name), None)
        i = None if at is None else at - (method and isinstance(c.func, ast.Attribute))
        arg = kw if kw is not None else c.args[i] if i is not None and 0 <= i < len(c.args) \
            and not any(isinstance(a, ast.Starred) for a in c.args[:i + 1]) else None
        if arg is None:
            return False
        given.append(_strip(arg))
    return bool(given) and all(isinstance(a, ast.Call) and module_ctor(a, ctx)
                               and not owns_params(a, ctx) for a in given)


def _cloned_nearby(elt: ast.expr, ctx: Context) -> bool:
    """The same function also deep-copies ``elt`` (``copy.deepcopy(self.head)``, or a helper
    of this file that does, Deformable-DETR's ``_get_clones(self.class_embed, n)`` in the
    other arm of ``if with_box_refine:``, or one defined inside the function, DETR3D's):
    sharing it in the other arm is a choice."""
    name = dotted(elt)
    fns = dict(ctx.analysis.functions)
    fns.update((f.name, f) for f in bfs_walk(ctx.scope().node)  # a helper nested in it
               if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)))
    for c in bfs_walk(ctx.scope().node):
        if not isinstance(c, ast.Call) or not any(dotted(a) == name for a in c.args):
            continue
        d = dotted(c.func) or ""
        fn = fns.get(d)
        if d.rpartition(".")[2] == "deepcopy" or fn is not None and any(
                isinstance(n, ast.Call) and (dotted(n.func) or "").rpartition(".")[2]
                == "deepcopy" for n in bfs_walk(fn)):
            return True
    return False


def _name(e: ast.AST, ctx: Context) -> str:
    if isinstance(e, ast.Call):
        return ctx.source(e.func) + "(...)"
    return ctx.source(e)
