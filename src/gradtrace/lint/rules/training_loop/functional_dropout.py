"""GT548: functional dropout in a module, without `training=`: it still drops after `.eval()`."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.grad_off_calls import calls_of
from gradtrace.lint.analysis.reach import disables_grad
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import bfs_walk, walk
from gradtrace.lint.rule import Bad, Good, Rule

# the functional dropouts whose `training` argument defaults to True (torch 2.13;
# `alpha_dropout` and `feature_alpha_dropout` default to False)
ALWAYS_ON = frozenset({"torch.nn.functional.dropout", "torch.nn.functional.dropout1d",
                       "torch.nn.functional.dropout2d", "torch.nn.functional.dropout3d"})
Def = ast.FunctionDef | ast.AsyncFunctionDef


def _reads_training(e: ast.AST) -> bool:
    """``e`` reads a train/eval flag: ``self.training``, ``training``, ``m.training``."""
    return any(isinstance(n, ast.Attribute) and n.attr == "training"
               or isinstance(n, ast.Name) and n.id == "training" for n in walk(e))


def _rate_follows_training(p: ast.AST | None, fn: Def, ctx: Context) -> bool:
    """``p`` is a parameter of the method ``fn`` and every ``self.<fn>(...)`` call of the file
    (the class's, its bases', its subclasses': an override is called through them) passes a
    rate that reads a train/eval flag (``dropout_p=0.0 if not self.training else r``)."""
    if not isinstance(p, ast.Name) or ctx.class_def is None:
        return False
    names = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)][1:]
    if p.id not in names and p.id not in [a.arg for a in fn.args.kwonlyargs]:
        return False
    seen = 0
    for c in walk(ctx.tree):
        if not (isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                and c.func.attr == fn.name and isinstance(c.func.value, ast.Name)
                and c.func.value.id == "self"):
            continue
        binds = {**dict(zip(names, c.args)), **{k.arg: k.value for k in c.keywords if k.arg}}
        v = binds.get(p.id)
        if v is None or not _reads_training(v):
            return False
        seen += 1
    return seen > 0


def _evaluates(ctx: Context) -> ast.Call | None:
    """A call of the file that puts a module in eval mode: ``x.eval()`` or
    ``x.train(False)`` on anything but ``self`` (the file runs a model in eval mode); not one
    whose result a method keeps as a part (``self.first_stage_model = model.eval()``: a
    frozen sub-model inside the model, which itself is not put in eval mode by it)."""
    def make() -> ast.Call | None:
        kept = {id(n.value) for n in bfs_walk(ctx.tree) if isinstance(n, ast.Assign)
                and all((dotted(t) or "").startswith("self.") for t in n.targets)}
        for n in bfs_walk(ctx.tree):
            if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)) \
                    or dotted(n.func.value) == "self" or id(n) in kept:
                continue
            if n.func.attr == "eval" and not n.args and not n.keywords:
                return n
            args = [*n.args, *(k.value for k in n.keywords)]
            if n.func.attr == "train" and len(args) == 1 and isinstance(args[0], ast.Constant) \
                    and args[0].value is False:
                return n
        return None
    return ctx.memo("gt548-evaluates", ctx.tree, make)


def _inference_only(fn: Def, ctx: Context) -> bool:
    """``fn`` is decorated to run with grad off (``@torch.no_grad()``, ``inference_mode``):
    a sampling or inference routine (latent-diffusion's ``p_sample`` drops entries of its
    fresh noise with ``noise_dropout``), which runs in eval mode by design: the dropout is
    asked for there, and ``training=self.training`` would switch it off."""
    return any(disables_grad(d, ctx) for d in fn.decorator_list)


def _module_method(ctx: Context, fn: Def | None) -> bool:
    cls = ctx.class_def
    info = ctx.analysis.classes.get(cls.name) if cls is not None else None
    return fn is not None and info is not None and info.is_module \
        and any(s is fn for s in cls.body)  # type: ignore[union-attr]


def _called_from_module(ctx: Context, fn: Def) -> bool:
    """``fn``, a function of the file outside classes, is called by a method of an
    ``nn.Module`` class of the file (a helper of ``forward``)."""
    for _, where in calls_of(ctx, fn):
        for info in ctx.analysis.classes.values():
            if info.is_module and any(m is where for m in info.node.body):
                return True
    return False


class FunctionalDropoutIgnoresEval(Rule):
    """`F.dropout(x, p)` in a module without `training=self.training`: the module keeps
    dropping activations after `model.eval()`.

    Why: `nn.Dropout` follows the module's train/eval flag, but the functional
    `F.dropout` (and `dropout1d/2d/3d`) takes it as an argument, `training`, that defaults to
    True. Called in `forward` without it, it zeroes and rescales activations at random in
    evaluation too: the evaluation metrics are noisy, two predictions of the same input
    differ, and an exported or served model is not deterministic (facebookresearch/DME#3,
    Academic-Hammer/SciTSR#16; checked on torch 2.13). Pass `training=self.training`, or use an
    `nn.Dropout` module.
    Known limits: the call must be in a method of an `nn.Module` class of the file, or in a
    function of the file that such a method calls; the file must put a model in eval mode
    (`.eval()` or `.train(False)`); a call under a test of a `training` flag, or whose
    arguments read one, or in a function decorated to run with grad off (a sampler), is left
    alone.
    """

    code = "GT548"
    name = "functional-dropout-ignores-eval"
    message = ("`{call}` leaves `training` at its default, True: it drops activations also "
               "after `.eval()` (line {line}), so evaluation is random; pass "
               "`training=self.training` or use `nn.Dropout`")
    triggers = ("dropout",)
    gate_statements = True
    examples = [
        Bad("""
            import torch.nn as nn
            import torch.nn.functional as F

            class Head(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 2)

                def forward(self, x):
                    return self.fc(F.dropout(x, p=0.3))

            model = Head()
            model.eval()
            """, at=(10, 23)),
        Good("""
            import torch.nn as nn
            import torch.nn.functional as F

            class Head(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 2)

                def forward(self, x):
                    return self.fc(F.dropout(x, p=0.3, training=self.training))

            model = Head()
            model.eval()
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if (ctx.qualified_name(node.func) or "") not in ALWAYS_ON or len(node.args) >= 3 \
                or any(k.arg in ("training", None) for k in node.keywords) \
                or any(isinstance(a, ast.Starred) for a in node.args):
            return
        fn = ctx.function
        if fn is None or _reads_training(node) or _inference_only(fn, ctx):
            return
        if not _module_method(ctx, fn) and (ctx.class_def is not None
                                            or not _called_from_module(ctx, fn)):
            return
        for s in ctx.stmts:  # `if self.training:` around it
            if isinstance(s, (ast.If, ast.While)) and _reads_training(s.test):
                return
        for e in ctx.exprs:
            if isinstance(e, ast.IfExp) and _reads_training(e.test):
                return
        p = node.args[1] if len(node.args) > 1 else next(
            (k.value for k in node.keywords if k.arg == "p"), None)
        if isinstance(p, ast.Constant) and p.value == 0 or _rate_follows_training(p, fn, ctx):
            return
        ev = _evaluates(ctx)
        if ev is None:
            return
        yield self.report(node, ctx, related=(Related(
            ctx.path, ev.lineno, "the model is put in eval mode here", ctx.column(ev)),),
            call=ctx.source(node), line=ev.lineno)
