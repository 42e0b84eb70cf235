"""GT537: a loop clears one module's gradients while the optimizer it steps was given the
parameter groups of other modules by the caller."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule

LOOPS = (ast.For, ast.AsyncFor, ast.While)


def _params(fn: ast.AST) -> list[str]:
    a = fn.args  # type: ignore[attr-defined]
    return [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]


def _added_owners(call: ast.Call) -> list[str]:
    """``opt.add_param_group({"params": proj.parameters(), ...})``: ``["proj"]``."""
    return [d for n in walk(call.args[0]) if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute) and n.func.attr in ("parameters",
                                                                      "named_parameters")
            and (d := dotted(n.func.value))] if call.args else []


def _callee(call: ast.Call, cls: ast.ClassDef | None, ctx: Context) -> ast.AST | None:
    """The method of the file that ``super().m(...)`` or ``self.m(...)`` (in class ``cls``)
    runs: the nearest base of the file defining ``m`` (``super()``), or the class's own."""
    f = call.func
    if cls is None or not isinstance(f, ast.Attribute):
        return None
    info = ctx.analysis.classes.get(cls.name)
    if info is None:
        return None
    lineage = list(info.lineage())
    if isinstance(f.value, ast.Call) and isinstance(f.value.func, ast.Name) \
            and f.value.func.id == "super":
        lineage = lineage[1:]
    elif dotted(f.value) != "self":
        return None
    return next((c.methods[f.attr] for c in lineage if f.attr in c.methods), None)


def _receiving_param(call: ast.Call, opt: str, callee: ast.AST) -> str | None:
    """The parameter of ``callee`` (a method) that receives the name ``opt`` in ``call``."""
    names = _params(callee)[1:]  # after `self`
    for i, a in enumerate(call.args):
        if isinstance(a, ast.Name) and a.id == opt and i < len(names):
            return names[i]
    return next((k.arg for k in call.keywords if isinstance(k.value, ast.Name)
                 and k.value.id == opt and k.arg in names), None)


def _module_clear(fn: ast.AST, opt: str) -> ast.Call | None:
    """In a loop of ``fn`` that steps ``opt``: the only gradient clearing, a
    ``self.<module>.zero_grad()`` (``fn`` clears nothing else, nor sets a ``.grad``)."""
    clears = [n for n in walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
              and n.func.attr in ("zero_grad", "clear_grad", "zero_")]
    if any(isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and any(
            isinstance(t, ast.Attribute) and t.attr == "grad" for t in (
                n.targets if isinstance(n, ast.Assign) else [n.target])) for n in walk(fn)):
        return None
    if len(clears) != 1 or clears[0].func.attr != "zero_grad":  # type: ignore[attr-defined]
        return None
    z = clears[0]
    recv = dotted(z.func.value)  # type: ignore[attr-defined]
    if recv is None or not recv.startswith("self.") or recv == opt:
        return None
    for lp in walk(fn):
        if isinstance(lp, LOOPS) and z in walk(lp) and any(
                isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr == "step" and dotted(n.func.value) == opt for n in walk(lp)):
            return z
    return None


def _attached_under(ctx: Context, recv: str) -> bool:
    """Something is stored on the cleared module (``self.model.proj = p``,
    ``self.model.add_module(...)``, ``setattr(self.model, ...)``): the added groups may be its."""
    for n in walk(ctx.tree):
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            ts = n.targets if isinstance(n, ast.Assign) else [n.target]
            if any(isinstance(t, ast.Attribute) and dotted(t.value) == recv for t in ts):
                return True
        if isinstance(n, ast.Call) and (
                isinstance(n.func, ast.Attribute) and n.func.attr in (
                    "add_module", "register_module", "register_parameter")
                and dotted(n.func.value) == recv
                or isinstance(n.func, ast.Name) and n.func.id == "setattr" and n.args
                and dotted(n.args[0]) == recv):
            return True
    return False


class ModuleClearMissesAddedGroups(Rule):
    """A training loop clears gradients with `self.model.zero_grad()` and steps the optimizer it
    is handed, while the method that hands it that optimizer first adds the parameter groups of
    other modules (`optimizer.add_param_group({"params": proj.parameters()})`): their gradients
    are never cleared.

    Why: `Module.zero_grad()` clears that module's parameters only; the optimizer steps every
    group it holds. The added modules (projection layers of a distiller, a head kept outside
    the model) keep adding each backward's gradient to their `.grad`, so every step applies the
    sum of all past gradients and they drift, while the loss is logged as usual (TextBrewer's
    `GeneralDistiller` before 7a8d3c7: 6.0x the last batch's gradient after 6 steps). Clear with
    `optimizer.zero_grad()`, which covers every group.
    Known limits: the groups must be added in a method of the file that then calls the loop's
    method (`super().train(optimizer, ...)` or `self.train(...)`) with the same optimizer; the
    loop's method must clear nothing else, and nothing may be stored on the cleared module.
    """

    code = "GT537"
    name = "module-clear-misses-added-groups"
    message = ("`{clear}` clears `{module}`'s gradients only, but `{opt}` also holds the groups "
               "`{adder}` adds (`{owner}.parameters()`, line {line}): their gradients are never "
               "cleared and add up across steps; clear with `{opt}.zero_grad()`")
    triggers = ("add_param_group",)
    examples = [
        Bad("""
            import torch.nn as nn

            class Trainer:
                def __init__(self, model):
                    self.model = model

                def train(self, optimizer, batches):
                    for x, y in batches:
                        ((self.model(x) - y) ** 2).mean().backward()
                        optimizer.step()
                        self.model.zero_grad()

            class ProjTrainer(Trainer):
                def __init__(self, model):
                    super().__init__(model)
                    self.proj = nn.Linear(4, 4)

                def train(self, optimizer, batches):
                    optimizer.add_param_group({"params": self.proj.parameters()})
                    super().train(optimizer, batches)
            """, at=(11, 12)),
        Good("""
            import torch.nn as nn

            class Trainer:
                def __init__(self, model):
                    self.model = model

                def train(self, optimizer, batches):
                    for x, y in batches:
                        ((self.model(x) - y) ** 2).mean().backward()
                        optimizer.step()
                        optimizer.zero_grad()

            class ProjTrainer(Trainer):
                def __init__(self, model):
                    super().__init__(model)
                    self.proj = nn.Linear(4, 4)

                def train(self, optimizer, batches):
                    optimizer.add_param_group({"params": self.proj.parameters()})
                    super().train(optimizer, batches)
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        classes = [c for c in walk(node) if isinstance(c, ast.ClassDef)]
        for cls in classes:
            for g in cls.body:
                if isinstance(g, FUNCTION_TYPES):
                    yield from self._adder(g, cls, ctx)

    def _adder(self, g: ast.AST, cls: ast.ClassDef, ctx: Context) -> Iterator[Finding]:
        params = _params(g)
        for add in walk(g):
            if not (isinstance(add, ast.Call) and isinstance(add.func, ast.Attribute)
                    and add.func.attr == "add_param_group"
                    and isinstance(add.func.value, ast.Name) and add.func.value.id in params):
                continue
            opt = add.func.value.id
            owners = _added_owners(add)
            if not owners:
                continue
            for call in walk(g):
                if not isinstance(call, ast.Call) or call.lineno < add.lineno:
                    continue
                callee = _callee(call, cls, ctx)
                p = _receiving_param(call, opt, callee) if callee is not None else None
                z = _module_clear(callee, p) if p is not None else None
                if z is None:
                    continue
                recv = dotted(z.func.value) or ""  # type: ignore[attr-defined]
                if any(o == recv or o.startswith(recv + ".") or recv.startswith(o + ".")
                       for o in owners) or _attached_under(ctx, recv):
                    continue
                stmt = next((s for s in walk(callee) if isinstance(s, ast.Expr)
                             and s.value is z), None)
                if stmt is None:
                    continue
                yield self.report(stmt, ctx, related=(Related(
                    ctx.path, add.lineno, "the groups are added here", ctx.column(add)),),
                    clear=ctx.source(z)[:60], module=recv, opt=p, adder=f"{cls.name}.{getattr(g, 'name', '')}",
                    owner=owners[0], line=add.lineno)
                return
