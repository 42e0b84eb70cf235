"""GT468: a running average of the weights is built and applied, never updated."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.averages import averaging_classes
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import parent_map, scope_nodes, walk
from gradtrace.lint.rule import Bad, Good, Rule

STEP = "step"


def _method_uses(uses: list[ast.AST], parents: dict[int, ast.AST]
                 ) -> list[tuple[str, ast.Call]] | None:
    """``(method, call)`` for each use, or None when a use is not ``<obj>.<method>(...)``."""
    out = []
    for n in uses:
        p = parents.get(id(n))
        g = parents.get(id(p)) if p is not None else None
        if not (isinstance(p, ast.Attribute) and isinstance(g, ast.Call) and g.func is p):
            return None
        out.append((p.attr, g))
    return out


def _step_block(bodies: list[list[ast.stmt]], obj: str, after: int
                ) -> tuple[ast.stmt, ast.Call] | None:
    """The last statement of the first block (after line ``after``) that calls
    ``<optimizer>.step()`` on another object than ``obj``, and that call: ``bodies`` are the
    function bodies to search, with the blocks nested in them."""
    todo = list(bodies)
    while todo:
        block = todo.pop(0)
        for t in block:
            if t.lineno > after and isinstance(t, ast.Expr) and isinstance(t.value, ast.Call) \
                    and isinstance(t.value.func, ast.Attribute) \
                    and t.value.func.attr == STEP and not t.value.args \
                    and dotted(t.value.func.value) not in (None, obj):
                return block[-1], t.value
        for t in block:
            if isinstance(t, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(t, field, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    todo.append(inner)
    return None


class AverageNeverUpdated(Rule):
    """An average of the weights (an EMA object) is built from the model and applied or read,
    but the method that folds the new weights in is never called.

    Why: an EMA helper (`ema = EMAModel(model.parameters())`) copies the weights once when it
    is built; only its update method (`ema.step(model.parameters())`, `ema.update()`) moves
    the copy towards the trained weights. When the training loop steps the optimizer but
    never calls it, the average stays the initial (pretrained) weights, and whatever it is
    applied to (`ema.copy_to(model.parameters())` before saving or evaluating) throws the
    training away, silently (huggingface/diffusers#5783; checked on torch 2.13). Call the
    update after every optimizer step.
    Known limits: the class is of this file, with a method that loops over `zip(self.<held>,
    <argument>)` writing the held tensors in place; the object is a name or `self.<attr>`
    used only as the receiver of its methods; the finding sits at the end of the block that
    steps the optimizer (where the update belongs).
    """

    code = "GT468"
    name = "average-never-updated"
    message = ("`{obj}` ({cls}) is built from the weights (line {line}) and `{used}` is called, "
               "but `{fold}` never is: the optimizer steps here and the average keeps the "
               "initial weights")
    triggers = ("zip(",)
    examples = [
        Bad("""
            import torch
            class EMA:
                def __init__(self, params, decay=0.99):
                    self.shadow = [p.detach().clone() for p in params]
                    self.decay = decay
                def update(self, params):
                    for s, p in zip(self.shadow, params):
                        s.mul_(self.decay).add_(p.detach(), alpha=1 - self.decay)
                def copy_to(self, params):
                    for s, p in zip(self.shadow, params):
                        p.data.copy_(s)
            ema = EMA(model.parameters())
            for x, y in loader:
                loss = ((model(x) - y) ** 2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            ema.copy_to(model.parameters())
            """, at=(17, 4)),
        Good("""
            import torch
            class EMA:
                def __init__(self, params, decay=0.99):
                    self.shadow = [p.detach().clone() for p in params]
                    self.decay = decay
                def update(self, params):
                    for s, p in zip(self.shadow, params):
                        s.mul_(self.decay).add_(p.detach(), alpha=1 - self.decay)
                def copy_to(self, params):
                    for s, p in zip(self.shadow, params):
                        p.data.copy_(s)
            ema = EMA(model.parameters())
            for x, y in loader:
                loss = ((model(x) - y) ** 2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                ema.update(model.parameters())
            ema.copy_to(model.parameters())
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        classes = averaging_classes(ctx)
        if not classes:
            return
        parents = ctx.memo("s23b-parents", node, lambda: parent_map(node))
        for s in walk(node):
            if isinstance(s, ast.Assign) and len(s.targets) == 1 \
                    and isinstance(s.value, ast.Call) and dotted(s.value.func) in classes:
                fn = parents.get(id(s))
                while fn is not None and not isinstance(
                        fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
                    fn = parents.get(id(fn))
                if fn is not None:
                    yield from self._built(s, fn, classes, parents, ctx)

    def _built(self, s: ast.Assign, fn: ast.AST, classes: dict, parents: dict[int, ast.AST],
               ctx: Context) -> Iterator[Finding]:
        cls = dotted(s.value.func)
        t = s.targets[0]
        obj = dotted(t)
        if obj is None or not self._from_weights(s.value):
            return
        if isinstance(t, ast.Name):
            uses = [n for n in scope_nodes(fn) if isinstance(n, ast.Name) and n.id == obj
                    and isinstance(n.ctx, ast.Load)]
            everywhere = sum(1 for n in walk(ctx.tree) if isinstance(n, ast.Name)
                             and n.id == obj and isinstance(n.ctx, ast.Load))
            bodies, owner = [fn.body], fn
        elif obj.startswith("self.") and obj.count(".") == 1 \
                and (owner := self._class_of(fn, parents)) is not None:
            attr = obj[5:]
            uses = [n for n in walk(owner) if isinstance(n, ast.Attribute) and n.attr == attr
                    and isinstance(n.ctx, ast.Load) and dotted(n.value) == "self"]
            everywhere = sum(1 for n in walk(ctx.tree) if isinstance(n, ast.Attribute)
                             and n.attr == attr and isinstance(n.ctx, ast.Load))
            bodies = [f.body for f in owner.body
                      if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
        else:
            return
        if not uses or everywhere != len(uses):
            return
        calls = _method_uses(uses, parents)
        fold, other = classes[cls]
        if calls is None or any(m in fold for m, _ in calls) \
                or not any(m in other for m, _ in calls):
            return
        at = _step_block(bodies, obj, s.lineno if owner is fn else 0)
        if at is None:
            return
        used = next(m for m, _ in calls if m in other)
        yield self.report(at[0], ctx, related=[
            Related(ctx.path, s.lineno, f"`{obj}` is built here", ctx.column(s)),
            Related(ctx.path, at[1].lineno, "the optimizer steps here", ctx.column(at[1]))],
            obj=obj, cls=cls, line=s.lineno, used=f"{obj}.{used}()",
            fold=f"{obj}.{sorted(fold)[0]}()")

    @staticmethod
    def _from_weights(call: ast.Call) -> bool:
        """Built from a model's tensors: ``.parameters()`` or ``.state_dict()`` in its
        arguments, or a model (any name) as the only argument."""
        return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                   and n.func.attr in ("parameters", "named_parameters", "state_dict")
                   for a in [*call.args, *(k.value for k in call.keywords)] for n in walk(a))

    @staticmethod
    def _class_of(fn: ast.AST, parents: dict[int, ast.AST]) -> ast.ClassDef | None:
        p = parents.get(id(fn))
        return p if isinstance(p, ast.ClassDef) else None
