"""GT540's path for a module carried into a plain object (NOTE [carried modules]): the finding
names the constructor's store, where the network enters the object that runs it."""
from __future__ import annotations

import ast
from typing import Callable

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.carried_modules import carried_call
from gradtrace.lint.analysis.kinds import MODULE, Kind
from gradtrace.lint.context import Context
from gradtrace.lint.nodes import function_scopes, scope_nodes
from gradtrace.lint.rule import Rule


# NOTE [evaluated where it was carried]
# A plain class keeps a module from its constructor (`self.net = net`) and one of its methods
# runs it under `no_grad`. When every construction site passes a module with dropout or batch
# norm whose `forward` chooses no mode itself, and no statement of the file switches any
# module's mode (`x.eval()`, `x.train(flag)`: a switch of another name could still reach this
# one), the module runs in the mode it was built in, train mode. The store is the line the
# finding names: it is where the object takes the network without putting it in eval mode.
def carried_finding(rule: Rule, ctx: Context, call: ast.Call, fn: ast.AST, mode: ast.expr,
                    usable: Callable[[Kind], bool],
                    switches: Callable[[ast.AST, Context, ast.AST], bool]) -> Finding | None:
    """The GT540 finding at the store of the carried module ``call`` runs, or None."""
    got = carried_call(ctx, call, fn)
    if got is None or not all(usable(k) for _, _, k in got.sites) or _any_switch(ctx, switches):
        return None
    said: set[int] = ctx.memo("gt540-said", ctx.tree, set)
    if id(got.store) in said:
        return None
    said.add(id(got.store))
    related = [Related(ctx.path, call.lineno, f"it runs here under `{ctx.source(mode)}`",
                       ctx.column(call))]
    related += [Related(ctx.path, v.lineno, "the module is passed here; nothing in the file "
                        "puts it in eval mode", ctx.column(v)) for v, _, _ in got.sites]
    return rule.report(got.store, ctx, related=related, call=ctx.source(call),
                       model=f"self.{got.attr}",
                       mode=ctx.source(mode), fn=getattr(fn, "name", "?"))


def _any_switch(ctx: Context, switches: Callable[[ast.AST, Context, ast.AST], bool]) -> bool:
    """A call anywhere in the file switches a module's mode."""
    def make() -> list[bool]:
        return [any(switches(n, ctx, w) and not _own_method(ctx, n, w)
                    for w in function_scopes(ctx.tree) for n in scope_nodes(w))]
    return ctx.memo("gt540-any-switch", ctx.tree, make)[0]


def _own_method(ctx: Context, call: ast.Call, where: ast.AST) -> bool:
    """``call`` (``DeepAREstimator().train(series)``) runs a method of a plain class of the
    file (its body is read with the rest of the file), not ``Module.train``/``eval``."""
    k = ctx.analysis.kind(call.func.value, ctx.scope(where), call.lineno)  # type: ignore
    info = ctx.analysis.classes.get(k.cls or "") if k is not None else None
    return info is not None and not info.is_module and \
        info.method(call.func.attr) is not None  # type: ignore[attr-defined]


def has_mode_layers(ctx: Context, k: Kind, layers: Callable[[Context, Kind], bool]) -> bool:
    """``layers`` holds for ``k`` or for a base class of the file it derives from (the
    prediction network subclassing the training network that builds the dropout)."""
    info = ctx.analysis.classes.get(k.cls or "")
    return layers(ctx, k) or info is not None and any(
        layers(ctx, Kind(MODULE, cls=c.name)) for c in info.lineage() if c is not info)
