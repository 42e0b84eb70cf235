"""GT493: a module's `train()` override switches gradients on for every parameter, undoing a
freeze of part of it."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.registration._grad_flags import grad_flags

OWN_WALKS = ("parameters", "named_parameters")


class TrainOverrideUnfreezes(Rule):
    """A module class overrides `train(mode)` to set `requires_grad = mode` (or `True`) on every
    parameter of `self`, while a method of the class freezes a part of it.

    Why: `model.train()` (and `model.eval()`, which calls `self.train(False)`) runs the
    override, so every training loop's `model.train()` switches gradients back on for the
    frozen part: it gets gradients and the optimizer (built over `model.parameters()`) updates
    it, silently (checked on torch 2.13: a backbone frozen by `freeze_backbone()` moves after
    `model.train()`). Only switch the mode there, or keep the frozen names and skip them.
    Known limits: the freeze must be in a method of the same class (`self.backbone`'s
    parameters, `self.backbone.requires_grad_(False)`, also in `__init__`); a freeze the script
    does on an instance is not followed; an override that sets the flag only on some
    parameters (an `if`, a name test) is left alone.
    """

    code = "GT493"
    name = "train-override-unfreezes"
    message = ("`train()` sets `requires_grad` on every parameter of `self`: each "
               "`model.train()` undoes the freeze of `{part}` (line {line}) and it trains again")
    triggers = ("train",)
    examples = [
        Bad("""
            import torch.nn as nn
            class FineTuner(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.backbone = nn.Linear(8, 8)
                    self.head = nn.Linear(8, 2)
                def freeze_backbone(self):
                    self.backbone.requires_grad_(False)
                def train(self, mode=True):
                    super().train(mode)
                    for p in self.parameters():
                        p.requires_grad = mode
                    return self
            """, at=(12, 12)),
        Good("""
            import torch.nn as nn
            class FineTuner(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.backbone = nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8))
                    self.head = nn.Linear(8, 2)
                def freeze_backbone(self):
                    for p in self.backbone.parameters():
                        p.requires_grad = False
                def train(self, mode=True):
                    super().train(mode)
                    self.backbone.eval()
                    return self
            """),
    ]

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> Iterator[Finding]:
        cls = ctx.analysis.classes.get(node.name)
        train = cls.methods.get("train") if cls is not None and cls.node is node else None
        if train is None or not cls.is_module or len(train.args.args) < 1:  # type: ignore[union-attr]
            return
        flag = _unfreezes_all(train)
        if flag is None:
            return
        freeze = next((f for m in cls.methods.values() if m is not train  # type: ignore[union-attr]
                       for f in grad_flags(ctx.scope(m))
                       if not f.value and f.root.startswith("self.")), None)
        if freeze is None:
            return
        line = getattr(freeze.stmt, "lineno", 0)
        yield self.report(flag, ctx, related=[Related(ctx.path, line, f"`{freeze.root}` is "
                                                      "frozen here", ctx.column(freeze.stmt))],
                          part=freeze.root, line=line)


def _unfreezes_all(train: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.stmt | None:
    """The statement of ``train`` (straight in its body, not under an ``if``) that sets
    ``requires_grad`` to ``mode`` or ``True`` on every parameter of ``self``: ``for p in
    self.parameters(): p.requires_grad = mode``, ``self.requires_grad_(mode)``."""
    mode = train.args.args[1].arg if len(train.args.args) > 1 else None

    def on(v: ast.expr | None) -> bool:
        return v is None or isinstance(v, ast.Constant) and v.value is True or \
            isinstance(v, ast.Name) and v.id == mode

    for s in train.body:
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) \
                and isinstance(s.value.func, ast.Attribute) \
                and s.value.func.attr == "requires_grad_" and dotted(s.value.func.value) == "self":
            if on(s.value.args[0] if s.value.args else None):
                return s
        it = s.iter if isinstance(s, (ast.For, ast.AsyncFor)) else None
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
                and it.func.attr in OWN_WALKS and dotted(it.func.value) == "self"):
            continue
        t = s.target.elts[-1] if isinstance(s.target, ast.Tuple) and s.target.elts else s.target
        var = dotted(t)
        for b in s.body:  # a write straight in the loop's body: every parameter
            if isinstance(b, ast.Assign) and len(b.targets) == 1 and isinstance(
                    b.targets[0], ast.Attribute) and b.targets[0].attr == "requires_grad" \
                    and dotted(b.targets[0].value) == var and on(b.value):
                return b
            if isinstance(b, ast.Expr) and isinstance(b.value, ast.Call) and isinstance(
                    b.value.func, ast.Attribute) and b.value.func.attr == "requires_grad_" \
                    and dotted(b.value.func.value) == var \
                    and on(b.value.args[0] if b.value.args else None):
                return b
    return None
