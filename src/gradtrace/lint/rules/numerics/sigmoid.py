"""GT756: the log of a sigmoid (or of one minus it), differentiated, instead of `logsigmoid`."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.analysis.module_outputs import output_made_by
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.numerics._ops import has_positive_shift, in_training, resolve, strip, \
    torch_op
from gradtrace.lint.rules.numerics._values import UNIT_RANGE
from gradtrace.lint.rules.numerics.softmax import _from_model
from gradtrace.lint.excerpt import excerpt

SIGMOID_MODULES = frozenset({"torch.nn.Sigmoid", "torch.nn.modules.activation.Sigmoid"})
LOGS = ("log", "log2", "log10")
GUARDS = frozenset({"clamp", "clip", "clamp_", "clamp_min", "clamp_max", "tanh", "hardtanh"})


def _sigmoid(e: ast.AST, ctx: Context, scope: Scope | None = None) -> ast.Call | None:
    """The sigmoid call ``e`` is: ``torch.sigmoid(x)``, ``F.sigmoid``, ``x.sigmoid()``, an
    ``nn.Sigmoid`` module called (a name, a ``self`` attribute, or built in place), an
    ``nn.Sequential`` whose last layer is one; names are read in ``scope`` (default: the
    function being visited)."""
    if not isinstance(e, ast.Call):
        return None
    got = torch_op(e, ctx)
    if got is not None and got[0] in ("sigmoid", "expit"):
        return e
    f = e.func
    if isinstance(f, ast.Call) and (ctx.qualified_name(f.func) or "") in SIGMOID_MODULES:
        return e
    if isinstance(f, (ast.Name, ast.Attribute)):
        k = ctx.analysis.kind(f, scope, e.lineno)
        if k is not None and k.what == MODULE and (k.cls or "") in SIGMOID_MODULES:
            return e
        if k is not None and k.what == MODULE and k.cls == "torch.nn.Sequential" and \
                isinstance(k.node, ast.Call) and k.node.args and \
                isinstance(k.node.args[-1], ast.Call) and \
                (ctx.qualified_name(k.node.args[-1].func) or "") in SIGMOID_MODULES:
            return e  # `nn.Sequential(..., nn.Sigmoid())` called
    return None


def _one_minus(e: ast.AST) -> ast.AST | None:
    """``1 - s`` / ``1.0 - s``: ``s``."""
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Sub) and \
            isinstance(e.left, ast.Constant) and e.left.value == 1:
        return e.right
    return None


def _find(operand: ast.AST, ctx: Context, line: int) -> tuple[ast.Call, bool, bool] | None:
    """(the sigmoid, whether the log takes ``1 - sigmoid``, whether it is what a module call
    gives back) for a log's operand, also through names bound once in the function and the
    ``forward`` of a module called (NOTE [module outputs])."""
    for e in (operand, _one_minus(operand)):
        if e is None:
            continue
        e = strip(e)
        s = _sigmoid(e, ctx)
        inner = e
        if s is None and isinstance(e, (ast.Name, ast.Attribute)):
            inner = strip(resolve(e, ctx, line))
            s = _sigmoid(inner, ctx) if inner is not e else None
        via_model = False
        if s is None and isinstance(inner, ast.Call):  # a model whose forward ends in one
            s = output_made_by(inner, ctx.scope(), ctx, strip, _sigmoid)  # type: ignore[assignment]
            via_model = s is not None
        if s is not None:
            return s, e is not operand, via_model
    return None


def _guarded_input(s: ast.Call, ctx: Context) -> bool:
    """The sigmoid's input is clamped (or bounded by tanh) in the expression."""
    for n in walk(s):
        if isinstance(n, ast.Call) and n is not s:
            got = torch_op(n, ctx)
            name = got[0] if got else (ctx.qualified_name(n.func) or "").rpartition(".")[2]
            if name in GUARDS:
                return True
    return False


def _unit_input(s: ast.Call, ctx: Context, line: int) -> bool:
    """The sigmoid's input is itself an op whose value lies in [-1, 1] (a cosine similarity,
    a tanh...), directly or through a name bound once: the sigmoid stays within
    [0.27, 0.74] and its log is finite with a finite derivative."""
    x = s.args[0] if s.args else s.func.value if isinstance(s.func, ast.Attribute) else None
    if x is None:
        return False
    x = _unsigned(strip(x))  # `sigmoid(-cos)`: a negated bounded value is bounded
    if isinstance(x, (ast.Name, ast.Attribute)):
        x = _unsigned(strip(resolve(x, ctx, line)))
    if not isinstance(x, ast.Call):
        return False
    got = torch_op(x, ctx)
    return got is not None and got[0] in UNIT_RANGE


def _unsigned(e: ast.AST) -> ast.AST:
    """``-x`` / ``+x`` -> ``x`` (the sign keeps a value within [-1, 1] there)."""
    while isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
        e = e.operand
    return e


def _from_argument(e: ast.AST, ctx: Context, line: int, depth: int = 0) -> bool:
    """``e`` is computed from a tensor parameter of the enclosing function (logits a loss
    function or method is given), through names bound in the function (a few steps)."""
    fn = ctx.function
    if fn is None or depth > 3:
        return False
    params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
    params.discard("self")
    for n in walk(e):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            v = resolve(n, ctx, line)
            if v is n:
                if n.id in params and ctx.scope().binding_before(n.id, line) is None:
                    return True
            elif _from_argument(v, ctx, getattr(v, "lineno", line), depth + 1):
                return True
    return False


class LogOfSigmoid(Rule):
    """`torch.log(torch.sigmoid(x))` (or `log(1 - sigmoid(x))`) on a training path: where the
    sigmoid rounds to 0 (or 1) the gradient is NaN.

    Why: in float32 `sigmoid(x)` is exactly 0 below about -88 and exactly 1 above about 17;
    the log is then -inf, and backward multiplies the log's infinite derivative by the
    sigmoid's zero one: `inf * 0` is NaN, which the optimizer writes into the weights
    (kuangliu/pytorch-retinanet#52, checked on torch 2.13). `F.logsigmoid(x)` (and
    `F.logsigmoid(-x)` for `log(1 - sigmoid(x))`) computes the same value stably; a
    `binary_cross_entropy_with_logits` replaces the whole pair.
    Known limits: the sigmoid must be in the log's expression, bound to the name the log
    reads in the same function, or what every `return` of the `forward` of the module called
    there gives back; its input must come from a module call or from a tensor the function
    is given, and not be clamped nor an op whose value lies in [-1, 1] (a cosine
    similarity); `+ eps` inside the log silences it.
    """

    code = "GT756"
    name = "log-of-sigmoid"
    message = ("`{src}` takes the log of {what}: in float32 the sigmoid rounds to exactly "
               "{edge} for {where}, the log is -inf and backward gives NaN gradients (`inf * "
               "0`); use `{stable}` instead")
    triggers = ("log(", "log2(", "log10(")
    gate_statements = True
    examples = [
        Bad("""
            import torch

            def focal_term(x, t):
                xt = x * (2 * t - 1)
                pt = (2 * xt + 1).sigmoid()
                return -(pt.log() * t).sum()

            def train_step(model, x, t, opt):
                focal_term(model(x), t).backward()
                opt.step()
            """, at=(6, 13)),
        Bad("""
            import torch
            import torch.nn as nn

            class Head(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 1)

                def forward(self, x, y):
                    p = torch.sigmoid(self.fc(x))
                    return -(y * torch.log(p) + (1 - y) * torch.log(1 - p)).mean()
            """, at=(11, 21), count=2),
        Good("""
            import torch
            import torch.nn.functional as F

            def train_step(model, x, y, opt):
                z = model(x)
                p = torch.sigmoid(z)
                loss = -(y * F.logsigmoid(z) + (1 - y) * torch.log(1 - p + 1e-7)).mean()
                loss.backward()
                opt.step()
            """),
        Good("""
            import torch

            def score(model, x):
                with torch.no_grad():
                    return torch.log(torch.sigmoid(model(x)))
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        got = torch_op(node, ctx)
        if got is None or got[0] not in LOGS:
            return
        operand = strip(got[1])
        if has_positive_shift(operand, ctx):
            return
        found = _find(operand, ctx, node.lineno)
        if found is None:
            return
        sig, minus, via_model = found
        if _guarded_input(sig, ctx) or _unit_input(sig, ctx, node.lineno) or not (
                via_model or _from_model(sig, ctx, node.lineno)
                or _from_argument(sig, ctx, node.lineno)) or not in_training(ctx, node):
            return
        related = [] if sig.lineno == node.lineno else [
            Related(ctx.path, sig.lineno, "the sigmoid is computed here", ctx.column(sig))]
        src = ctx.source(node)
        inner = ctx.source(sig.args[0]) if sig.args else "x"
        if not sig.args and isinstance(sig.func, ast.Attribute):
            inner = ctx.source(sig.func.value)
        if via_model:  # the sigmoid ends the model's forward: its input is not read here
            inner = "the logits the model returns without the sigmoid"
        yield self.report(node, ctx, related=related,
                          src=excerpt(src),
                          what="one minus a sigmoid" if minus else "a sigmoid",
                          edge="1" if minus else "0",
                          where="inputs above about 17" if minus else "inputs below about -88",
                          stable=f"F.logsigmoid(-({inner}))" if minus else f"F.logsigmoid({inner})")
