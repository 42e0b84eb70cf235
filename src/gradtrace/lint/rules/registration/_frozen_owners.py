"""Which module instances of the file have frozen parameters, wherever the freeze is written.

# NOTE [frozen instances]
GT433 sees a freeze and a loop over the parameters in one function. A training helper is
usually elsewhere: ``fit(model)`` reads ``p.grad`` of every parameter of the ``model`` that the
script froze in part at the top level, or a class's ``__init__`` freezes ``self.rnn`` and
another class's method walks ``self.acmodel.parameters()``. :func:`frozen_owner` answers for a
module expression read anywhere: the statement freezing some of its parameters, when
- a freeze (``for p in m.backbone.parameters(): p.requires_grad = False``,
  ``m.requires_grad_(False)``, ``p.requires_grad_(False)``) names a part of a value whose kind
  was made by the same constructing call as the expression's kind (the instance, followed
  through names, returns and the callers' arguments by the kind analysis), that call not in a
  function the file calls more than once (each call would build another instance); or
- the ``__init__`` of the expression's module class, or of a file base of it, freezes a part of
  ``self`` (every instance is frozen).
Nothing is known when the file sets ``requires_grad`` to anything but False anywhere (a phase
that unfreezes, a flag from a variable): which parameters are frozen when is then not known.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from gradtrace.lint.analysis.callees import function_sites
from gradtrace.lint.analysis.frozen_params import file_unfreezes
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.analysis.params import FLAG
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import function_scopes, scope_nodes, walk
from gradtrace.lint.rules.leaf._tensors import is_false
from gradtrace.lint.rules.registration._callers import call_count
from gradtrace.lint.rules.registration._grad_flags import _flag_value

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

Table = tuple[dict[int, tuple[ast.stmt, ast.AST]], dict[str, tuple[ast.stmt, ast.AST]]]


def frozen_owner(ctx: Context, owner: ast.expr, fn: ast.AST, line: int
                 ) -> tuple[ast.stmt, ast.AST] | None:
    """(statement freezing some parameters of the module ``owner`` read at ``line`` in ``fn``,
    the function or module holding it) (NOTE [frozen instances]); None when not known."""
    if not ctx.mentions(FLAG):
        return None
    by_node, by_cls = ctx.memo("gt470-frozen-instances", ctx.tree, lambda: _table(ctx))
    if not by_node and not by_cls:
        return None
    a = ctx.analysis
    k = a.kind_in(owner, fn, line)
    if k is None or k.what != MODULE:
        return None
    if k.node is not None and id(k.node) in by_node:
        return by_node[id(k.node)]
    info = a.classes.get(k.cls or "")
    if info is not None and info.is_module:
        for c in info.lineage():
            if c.name in by_cls:
                return by_cls[c.name]
    return None


def _base(e: ast.AST) -> ast.Name | None:
    """The name an attribute/subscript chain starts from (``model`` of ``model.layers[0]``)."""
    while isinstance(e, (ast.Attribute, ast.Subscript)):
        e = e.value
    return e if isinstance(e, ast.Name) else None


def _frozen_receivers(fn: ast.AST, ctx: Context) -> Iterator[tuple[ast.expr, ast.stmt]]:
    """(module or parameter some of whose parameters the statement freezes, statement) for
    the freezes of ``fn``'s own code: ``m.requires_grad_(False)``, ``p.requires_grad = False``,
    a loop over ``m.parameters()`` setting False on some (NOTE [frozen instances])."""
    for s in ctx.scope(fn).stmts:
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
            f = s.value.func
            if isinstance(f, ast.Attribute) and f.attr == "requires_grad_" and s.value.args \
                    and is_false(s.value.args[0]):
                yield f.value, s
        elif isinstance(s, ast.Assign) and len(s.targets) == 1 \
                and isinstance(s.targets[0], ast.Attribute) and s.targets[0].attr == FLAG \
                and is_false(s.value):
            if not any(isinstance(lp, (ast.For, ast.AsyncFor)) and any(
                    dotted(t) == dotted(s.targets[0].value) for t in ast.walk(lp.target))
                       for lp in ctx.scope(fn).loops_of(s)):
                yield s.targets[0].value, s
        elif isinstance(s, (ast.For, ast.AsyncFor)) and isinstance(s.iter, ast.Call) \
                and isinstance(s.iter.func, ast.Attribute) \
                and s.iter.func.attr in ("parameters", "named_parameters"):
            t = s.target
            var = dotted(t.elts[-1] if isinstance(t, ast.Tuple) and t.elts else t)
            inner = next((x for x in walk(s) if isinstance(x, ast.stmt) and x is not s
                          and _flag_value(x, var) is False), None) if var else None
            if inner is not None:
                yield s.iter.func.value, inner


def _table(ctx: Context) -> Table:
    by_node: dict[int, tuple[ast.stmt, ast.AST]] = {}
    by_cls: dict[str, tuple[ast.stmt, ast.AST]] = {}
    if file_unfreezes(ctx):
        return by_node, by_cls
    a = ctx.analysis
    made_in: dict[int, ast.AST] | None = None
    for fn in function_scopes(ctx.tree):
        for recv, stmt in _frozen_receivers(fn, ctx):
            base = _base(recv)
            if base is None:
                continue
            if base.id == "self":
                cls = a.class_of(fn)
                if cls is not None and cls.is_module and getattr(fn, "name", "") == "__init__":
                    by_cls.setdefault(cls.name, (stmt, fn))
                continue
            places: list[tuple[ast.expr, ast.AST, int]] = [(base, fn, stmt.lineno)]
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                    and base.id in {x.arg for x in (*fn.args.posonlyargs, *fn.args.args)}:
                # a freezing helper: the instances its callers hand it (one call up)
                sites = function_sites(a, fn) or []
                places = [(b, w, c.lineno) for c, w in sites
                          for b in [_base(a.arguments(fn, c).get(base.id))] if b is not None]
            for name, where, line in places:
                k = a.kind_in(name, where, line)
                if k is None or k.what != MODULE or not isinstance(k.node, ast.Call):
                    continue
                if made_in is None:
                    made_in = {id(n): g for g in function_scopes(ctx.tree) if g is not ctx.tree
                               for n in scope_nodes(g) if isinstance(n, ast.Call)}
                maker = made_in.get(id(k.node))
                if maker is not None and call_count(getattr(maker, "name", "~"), ctx) > 2:
                    continue  # a factory called twice (its `def` line counts): two instances
                by_node.setdefault(id(k.node), (stmt, fn))
    return by_node, by_cls
