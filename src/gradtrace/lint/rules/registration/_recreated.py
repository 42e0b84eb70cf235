"""GT404's readings of a model made again: by the same call as the object the optimizer was
built over, or in ``__init__`` after the optimizer built there."""
from __future__ import annotations

import ast

from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.flow import Scope
from gradtrace.lint.rules.registration._modules import (
    OptimizerBuild, _strip, covers, optimizer_builds, stale_across_methods, step_lines,
)


def built_by_method(scope: Scope) -> list[OptimizerBuild]:
    """# NOTE [optimizer a model builds]
    ``optimizer = model.configure_optimizers(...)`` (nanoGPT, Lightning-style modules,
    ``agent.make_optimizer()``): a name bound from a method of another name, and both stepped
    and cleared in this scope, is an optimizer over that object's parameters (what else would
    a model hand back that is stepped and cleared?). Only the receiver is taken as its source:
    an argument (a config, a learning rate) may be anything."""
    def make() -> list[OptimizerBuild]:
        known = {id(b.call) for b in optimizer_builds(scope)}
        cleared = {m.receiver for m in scope.calls_to("zero_grad")}
        out = []
        for name, bs in scope.bindings.items():
            if name not in cleared:
                continue
            for b in bs:
                v = b.value
                if not (isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute)) \
                        or id(v) in known:
                    continue
                recv = dotted(v.func.value)
                if recv and recv != name and any(line > b.line
                                                 for line in step_lines(scope, name)):
                    out.append(OptimizerBuild(name, b.stmt, v, frozenset({recv})))
        return out
    return scope.ctx.memo("gt404-method-builds", scope.node, make)


def all_builds(scope: Scope) -> list[OptimizerBuild]:
    """The optimizers of the scope, built by torch or by a method of a model."""
    extra = built_by_method(scope)
    builds = optimizer_builds(scope)
    return sorted(builds + extra, key=lambda o: o.stmt.lineno) if extra else builds


def _same_constructor(value: ast.Call, target: str, ctx: Context) -> bool:
    """# NOTE [same constructor again]
    ``model = Net(cfg)`` where the binding of ``model`` before it was made by the same call
    (``Net(cfg).to(dev)``): a second object of that class, whatever the class (imported from
    another file, a builder): the optimizer built over the first object's parameters does
    not hold the new one's."""
    new = _strip(value)
    if not isinstance(new, ast.Call) or dotted(new.func) is None:
        return False
    scope = ctx.scope()
    if not any(b.stmt.lineno < value.lineno and any(covers(target, s) for s in b.sources)
               for b in all_builds(scope)):
        return False  # no optimizer over it before: nothing to be stale
    # any earlier binding, in any branch (`if init_from == "scratch": model = GPT(conf)` /
    # `elif ...: model = GPT.from_pretrained(...)`), made by the same call
    func = dotted(new.func)
    for b in scope.bindings.get(target, ()):
        old = _strip(b.value) if b.line < value.lineno and isinstance(b.value, ast.Call) else None
        if isinstance(old, ast.Call) and old is not new and dotted(old.func) == func:
            return True
    return False


def _stale_after_init(ctx: Context, node: ast.stmt, target: str
                      ) -> tuple[OptimizerBuild, int] | None:
    """``self.model = Net()`` re-created in ``__init__`` after ``self.opt`` was built there
    over its parameters (both in the method's own block, the optimizer not rebuilt after it),
    and another method of the class steps ``self.opt``."""
    fn = ctx.scope().node
    if getattr(fn, "name", "") != "__init__" or node not in fn.body \
            or not target.startswith("self."):  # type: ignore[attr-defined]
        return None
    builds = optimizer_builds(ctx.scope())
    prior = [b for b in builds if b.stmt in fn.body and b.stmt.lineno < node.lineno  # type: ignore
             and b.name.startswith("self.") and any(covers(target, s) for s in b.sources)]
    if not prior or any(b.name == prior[-1].name and b.stmt.lineno > node.lineno
                        for b in builds):
        return None
    got = stale_across_methods(ctx, fn, target, node.lineno, init_too=True)
    return (got[0], got[1].lineno) if got is not None and got[0] is prior[-1] else None


def built_alike(cls: object, value: ast.Call, target: str) -> bool:
    """# NOTE [built alike]
    ``self.model = instantiate(self.cfg["model"])`` in a method (a ``setup``) of a class whose
    ``__init__`` made ``self.model`` by a call of the same function (``instantiate(cfg["model"])``,
    a builder of another file, a registry): a second object built the same way, whatever the
    function returns, unless the call is handed the object itself (a wrapper: ``compile``,
    ``DDP``). GT404 reports it when ``__init__`` built the optimizer over the first and no method
    rebuilds it; when no method steps it either, the script does (``exp.optimizer.step()``)."""
    new = _strip(value)
    init = getattr(cls, "methods", {}).get("__init__")
    if init is None or not isinstance(new, ast.Call) or dotted(new.func) is None or any(
            dotted(n) == target for n in ast.walk(new)):
        return False
    func = dotted(new.func)
    return any(isinstance(s, ast.Assign) and len(s.targets) == 1 and dotted(s.targets[0]) == target
               and isinstance(old := _strip(s.value), ast.Call) and old is not new
               and dotted(old.func) == func for s in init.body)
