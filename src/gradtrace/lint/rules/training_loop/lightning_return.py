"""GT530: a LightningModule's `training_step` that never returns its loss under automatic
optimization, so Lightning skips every batch."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.nodes import scope_nodes
from gradtrace.lint.analysis.lightning import class_chain, lightning_classes, manual_optimization
from gradtrace.lint.rule import Bad, Good, Rule

FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _abstract(fn: ast.AST) -> bool:
    """Only a docstring, ``pass``, ``...`` or a ``raise``."""
    body = [s for s in fn.body if not (isinstance(s, ast.Expr)  # type: ignore[attr-defined]
                                       and isinstance(s.value, ast.Constant))]
    return not body or all(isinstance(s, (ast.Pass, ast.Raise)) for s in body)


def _declines(fn: ast.AST) -> bool:
    """Only a docstring and ``return None`` (or a bare ``return``): the step computes no loss
    at all; a module kept for inference (a black-box victim) says so. A step that computes a
    loss and then returns None still drops it."""
    body = [s for s in fn.body if not (isinstance(s, ast.Expr)  # type: ignore[attr-defined]
                                       and isinstance(s.value, ast.Constant))]
    return len(body) == 1 and isinstance(body[0], ast.Return) and (
        body[0].value is None or isinstance(body[0].value, ast.Constant)
        and body[0].value.value is None)


def _returns_value(fn: ast.AST) -> bool:
    """Some ``return`` of ``fn`` itself gives back a value other than ``None``, or ``fn`` is a
    generator."""
    for n in scope_nodes(fn):
        if isinstance(n, ast.Return) and n.value is not None and not (
                isinstance(n.value, ast.Constant) and n.value.value is None):
            return True
        if isinstance(n, (ast.Yield, ast.YieldFrom)):
            return True
    return False


def _no_optimizer(chain: list[ast.ClassDef]) -> bool:
    """Every ``configure_optimizers`` of the classes returns nothing (and there is one):
    Lightning fits without an optimizer, ``training_step`` only collects (a memory bank, a
    statistics pass), there is nothing to step. A placeholder (``pass``, a ``raise``) says
    nothing: a subclass elsewhere may configure one."""
    fns = [s for k in chain for s in k.body if isinstance(s, FUNCS)
           and s.name == "configure_optimizers"]
    return bool(fns) and not any(_returns_value(f) or _abstract(f) for f in fns)


def _optimizers_call(e: ast.AST) -> bool:
    """``e`` holds a ``self.optimizers(...)`` call (Lightning's handle on the configured ones)."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr == "optimizers" and isinstance(n.func.value, ast.Name)
               and n.func.value.id == "self" for n in ast.walk(e))


def _steps_itself(step: ast.AST, chain: list[ast.ClassDef]) -> bool:
    """``training_step``, or a method of the classes it calls as ``self.m(...)`` (through such
    calls), runs a backward and steps an optimizer it takes from ``self.optimizers()``: it
    trains by hand, whatever it returns (UvA's ProtoMAML: ``outer_loop`` backwards each task,
    adds the gradients and steps ``self.optimizers()``)."""
    methods = {s.name: s for k in chain for s in k.body if isinstance(s, FUNCS)}
    seen: list[ast.AST] = []
    todo = [step]
    backward = stepped = False
    while todo:
        fn = todo.pop()
        if any(fn is x for x in seen) or len(seen) > 8:
            continue
        seen.append(fn)
        handles = {t.id for n in scope_nodes(fn) if isinstance(n, ast.Assign)
                   and _optimizers_call(n.value) for tg in n.targets for t in ast.walk(tg)
                   if isinstance(t, ast.Name)}
        for n in scope_nodes(fn):
            if not isinstance(n, ast.Call) or not isinstance(n.func, ast.Attribute):
                continue
            f = n.func
            if f.attr in ("backward", "manual_backward"):
                backward = True
            elif f.attr == "step":
                root = f.value
                while isinstance(root, (ast.Attribute, ast.Subscript)):
                    root = root.value
                if isinstance(root, ast.Name) and root.id in handles or _optimizers_call(f.value):
                    stepped = True
            elif isinstance(f.value, ast.Name) and f.value.id == "self" and f.attr in methods:
                todo.append(methods[f.attr])
    return backward and stepped


class TrainingStepReturnsNothing(Rule):
    """A LightningModule's `training_step` never returns the loss, under automatic optimization.

    Why: with automatic optimization (the default) Lightning calls `backward()` and the
    optimizer's `step()` on the loss that `training_step` returns (a tensor, or a dict with a
    `'loss'` key). When it returns `None`, Lightning skips the batch: no backward, no step. A
    `training_step` that computes the loss and only logs it (`self.log("train_loss", loss)`)
    runs every batch and the weights never change (MLOps-Basics#14). Nothing fails. Return the
    loss, or set `self.automatic_optimization = False` and step the optimizers yourself.
    Known limits: classes of the file that derive from `LightningModule` (directly or through
    another class of the file); a `training_step` inherited from elsewhere is not read; a
    class whose `configure_optimizers` returns nothing (no optimizer: a feature-collecting
    pass) is left alone, so is a `training_step` that is only `return None` (no loss is
    computed: a module kept for inference), and so is a `training_step` that runs a backward
    and steps `self.optimizers()` itself (or through the class's methods it calls).
    """

    code = "GT530"
    name = "training-step-returns-nothing"
    severity = "warning"
    message = ("`{cls}.training_step` ends here without returning its loss: under automatic "
               "optimization Lightning runs backward and the optimizer step only on the loss "
               "`training_step` returns and skips the batch when it returns None, so the model "
               "never trains; return the loss (or a dict with a 'loss' key)")
    triggers = ("training_step",)
    examples = [
        Bad("""
            import torch.nn.functional as F
            import pytorch_lightning as pl

            class Classifier(pl.LightningModule):
                def training_step(self, batch, batch_idx):
                    x, y = batch
                    loss = F.cross_entropy(self(x), y)
                    self.log("train_loss", loss)
            """, at=(8, 8)),
        Good("""
            import torch.nn.functional as F
            import pytorch_lightning as pl

            class Classifier(pl.LightningModule):
                def training_step(self, batch, batch_idx):
                    x, y = batch
                    loss = F.cross_entropy(self(x), y)
                    self.log("train_loss", loss)
                    return loss
            """),
        Good("""
            import lightning as L

            class GAN(L.LightningModule):
                def __init__(self):
                    super().__init__()
                    self.automatic_optimization = False

                def training_step(self, batch, batch_idx):
                    opt = self.optimizers()
                    loss = self.loss_of(batch)
                    opt.zero_grad()
                    self.manual_backward(loss)
                    opt.step()
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        found = lightning_classes(node, ctx)
        for name, c in found.items():
            step = next((s for s in c.body if isinstance(s, FUNCS)
                         and s.name == "training_step"), None)
            if step is None or _abstract(step) or _declines(step) or _returns_value(step):
                continue
            chain = class_chain(c, found)
            if any(manual_optimization(k) for k in chain) or _no_optimizer(chain) \
                    or _steps_itself(step, chain):
                continue
            last = step.body[-1]
            yield self.report(last, ctx, cls=name, related=[Related(
                ctx.path, step.lineno, "the training_step that returns nothing",
                ctx.column(step))])
