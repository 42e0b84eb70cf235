"""GT461: a part frozen by `requires_grad=False` keeps its BatchNorm statistics moving under
`model.train()` (the static twin of GT841)."""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.norm_layers import holds_running_norm, is_running_norm
from gradtrace.lint.analysis.objects import constructor_call
from gradtrace.lint.analysis.params import FLAG, flag_call
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.leaf._tensors import is_false

STEP_CALLS = ("backward", "step")
PARAM_ITERS = ("parameters", "named_parameters")
COMPOUND = (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith, ast.Try,
            ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
MODULE_ITERS = ("children", "named_children", "modules", "named_modules")


@dataclass(frozen=True)
class _Freeze:
    stmt: ast.stmt
    part: ast.expr     # the module frozen (``net[:-1]``, ``model.bn``, ``backbone``)
    whole: str         # its dotted owner (``net``, ``model.bn``, ``model`` for a loop over it)
    partial: bool      # only some of ``whole`` (a slice, a name filter, some children)
    norm_aimed: bool   # the freeze picks normalisation layers (``isinstance(m, nn.BatchNorm2d)``)
    flag: ast.stmt     # the statement that sets the flag (inside a loop: the assignment)


def _false_flag(s: ast.AST, var: str) -> bool:
    """``var.requires_grad = False``, ``var.requires_grad_(False)`` (``var`` a dotted name or
    ``var.weight``/``var.bias``)."""
    if isinstance(s, ast.Assign) and len(s.targets) == 1:
        t = s.targets[0]
        return isinstance(t, ast.Attribute) and t.attr == FLAG and is_false(s.value) \
            and _under(dotted(t.value), var)
    if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
        f = s.value.func
        return isinstance(f, ast.Attribute) and f.attr == "requires_grad_" \
            and bool(s.value.args) and is_false(s.value.args[0]) and _under(dotted(f.value), var)
    return False


def _under(name: str | None, var: str) -> bool:
    return name is not None and (name == var or name.startswith(var + "."))


def _picks_norm(loop: ast.stmt, ctx: Context) -> bool:
    """A loop whose body tests ``isinstance(m, nn.BatchNorm2d)`` (or a tuple holding one)."""
    for n in walk(loop):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) \
                and n.func.id == "isinstance" and len(n.args) == 2:
            kinds = n.args[1].elts if isinstance(n.args[1], ast.Tuple) else [n.args[1]]
            if any("Norm" in (ctx.qualified_name(k) or "") for k in kinds):
                return True
    return False


def _owner(var: str, s: ast.stmt, scope: Scope, ctx: Context
           ) -> tuple[str, bool, bool, bool] | None:
    """``(whole, partial, norm_aimed, stops_tracking)`` when ``var`` is the target of an enclosing loop over a
    module's children or modules (``for name, child in model.named_children():``)."""
    for loop in reversed(scope.loops_of(s)):
        if not isinstance(loop, (ast.For, ast.AsyncFor)):
            continue  # a `while` loop binds no target
        t = loop.target
        tv = dotted(t.elts[-1]) if isinstance(t, ast.Tuple) and t.elts else dotted(t)
        it = loop.iter
        if tv != var:
            continue
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) \
                and it.func.attr in MODULE_ITERS and dotted(it.func.value):
            return dotted(it.func.value), True, _picks_norm(loop, ctx), \
                _stops_tracking(loop, var)  # type: ignore[return-value]
        return None
    return None


# NOTE [statistics no longer tracked]: ``for m in backbone.modules(): if isinstance(m,
# nn.BatchNorm2d): m.track_running_stats = False`` next to the freeze of ``m``'s parameters:
# a norm layer that no longer tracks normalises with the batch's statistics in train mode and
# writes nothing into its running buffers (torch 2.13 passes them only when tracking), so
# ``model.train()`` moves no statistics of the frozen part.
def _stops_tracking(loop: ast.stmt, var: str) -> bool:
    return any(isinstance(n, ast.Assign) and len(n.targets) == 1 and is_false(n.value)
               and isinstance(t := n.targets[0], ast.Attribute)
               and t.attr == "track_running_stats" and dotted(t.value) == var for n in walk(loop))


def _freezes(scope: Scope, ctx: Context) -> list[_Freeze]:
    def make() -> list[_Freeze]:
        out: list[_Freeze] = []
        for s in scope.stmts:
            got = _freeze_of(s, scope, ctx)
            if got is not None:
                out.append(got)
        return out
    return ctx.memo("gt461-freezes", scope.node, make)


def _freeze_of(s: ast.stmt, scope: Scope, ctx: Context) -> _Freeze | None:
    part: ast.expr | None = None
    partial = False
    if isinstance(s, (ast.For, ast.AsyncFor)):
        it = s.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
                and it.func.attr in PARAM_ITERS):
            return None
        var = _loop_var(s)
        if var is None:
            return None
        direct = any(_false_flag(b, var) for b in s.body)
        if not direct and not any(_false_flag(b, var) for b in walk(s) if b is not s):
            return None
        part, partial = it.func.value, not direct
    elif isinstance(s, (ast.Expr, ast.Assign)):
        v = s.value
        t = s.targets[0] if isinstance(s, ast.Assign) and len(s.targets) == 1 else None
        if isinstance(t, ast.Attribute) and t.attr == FLAG and is_false(v):
            part, partial = t.value, True  # `m.weight.requires_grad = False`
            if isinstance(part, ast.Attribute) and part.attr in ("weight", "bias"):
                part = part.value
        elif isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
                and v.func.attr == "requires_grad_" and v.args and is_false(v.args[0]):
            part = v.func.value
        elif isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
                and v.func.attr == "apply" and len(v.args) == 1 \
                and isinstance(v.args[0], ast.Lambda) and _lambda_freezes(v.args[0]):
            part = v.func.value
        elif isinstance(v, ast.Call) and (got := flag_call(v, ctx)) is not None \
                and got[1] is False:
            part = got[0]
    if part is None:
        return None
    base = part.value if isinstance(part, ast.Subscript) else part
    whole = dotted(base)
    if whole is None:
        return None
    partial = partial or base is not part
    norm_aimed = False
    if "." not in whole and (own := _owner(whole, s, scope, ctx)) is not None:
        if own[3]:
            return None  # NOTE [statistics no longer tracked]
        whole, partial, norm_aimed = own[0], True, own[2]
    flag = s
    if isinstance(s, (ast.For, ast.AsyncFor)):
        var = _loop_var(s)
        flag = next((b for b in walk(s) if isinstance(b, ast.stmt) and b is not s
                     and var is not None and _false_flag(b, var)), s)
    return _Freeze(s, part, whole, partial, norm_aimed, flag)


def _constructor_freezes(model: str, ctx: Context) -> list[tuple[_Freeze, Scope]]:
    """Freezes of part of ``self.<x>`` made in the constructor of the class being visited
    (or in a method it calls as ``self.<method>()``): they hold for every other method."""
    cls = ctx.analysis.class_of(ctx.function)
    init = cls.methods.get("__init__") if cls is not None else None
    if init is None or ctx.function is init:
        return []
    fns = [init] + [m for n in walk(init) if isinstance(n, ast.Call)
                    and (m := ctx.analysis.callee(n, init)) is not None
                    and m is not init and m is not ctx.function]
    out: list[tuple[_Freeze, Scope]] = []
    for fn in fns:
        sc = ctx.scope(fn)
        out.extend((z, sc) for z in _freezes(sc, ctx)
                   if z.whole == model or z.whole.startswith(model + "."))
    return out


def _loop_var(loop: ast.For | ast.AsyncFor) -> str | None:
    t = loop.target
    return dotted(t.elts[-1]) if isinstance(t, ast.Tuple) and t.elts else dotted(t)


def _lambda_freezes(fn: ast.Lambda) -> bool:
    """``lambda m: m.requires_grad_(False)``."""
    b = fn.body
    return isinstance(b, ast.Call) and isinstance(b.func, ast.Attribute) \
        and b.func.attr == "requires_grad_" and bool(b.args) and is_false(b.args[0])


def _holds(model: str, recv: ast.expr, f: _Freeze, scope: Scope, line: int) -> bool:
    """Whether ``model`` holds the frozen part and more: a submodule of it, some of its
    parameters, or a module handed to its constructor (``Classifier(backbone)``)."""
    if f.whole == model:
        return f.partial
    if f.whole.startswith(model + "."):
        return True
    call = constructor_call(recv, scope, line)
    return call is not None and any(
        dotted(a) == f.whole for a in (*call.args, *(k.value for k in call.keywords)))


def _resets(region: list[ast.stmt], model: str, ctx: Context) -> bool:
    """Whether something in ``region`` may put a part back in eval mode: ``x.eval()`` on
    anything but ``model`` (or what holds it), ``x.apply(...)``, ``x.train(False)``, or a call
    of a function or method of the file that calls ``.eval()``."""
    for s in region:
        if isinstance(s, COMPOUND):
            continue
        for n in walk(s):
            if not isinstance(n, ast.Call):
                continue
            f = n.func
            if isinstance(f, ast.Attribute):
                if f.attr == "eval" and not _under(model, dotted(f.value) or "\0") \
                        or f.attr == "apply" or f.attr == "train" and n.args:
                    return True
                if _calls_eval(f.attr, ctx):
                    return True
            elif isinstance(f, ast.Name) and _calls_eval(f.id, ctx):
                return True
    return False


def _calls_eval(name: str, ctx: Context) -> bool:
    """Whether a function or method of the file called ``name`` calls ``.eval()``."""
    memo: dict[str, bool] = ctx.memo("gt461-eval-names", ctx.tree, dict)
    if name not in memo:
        fns = [c.methods[name] for c in ctx.analysis.classes.values() if name in c.methods]
        if name in ctx.analysis.functions:
            fns.append(ctx.analysis.functions[name])
        memo[name] = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                         and n.func.attr == "eval" for fn in fns for n in walk(fn))
    return memo[name]


def _what(z: _Freeze, ctx: Context) -> str:
    if z.partial and dotted(z.part) is not None and not isinstance(z.part, ast.Subscript):
        return f"part of `{z.whole}` is"
    return f"`{ctx.source(z.part)}` is"


class FrozenNormInTrainMode(Rule):
    """A part of the model frozen with `requires_grad=False` holds BatchNorm layers, and
    `model.train()` puts them in training mode for the steps that follow: their running
    statistics still change at every forward.

    Why: `requires_grad=False` stops the affine weight and bias, not `running_mean` and
    `running_var`, which a BatchNorm layer in train mode overwrites with each batch's statistics
    (pytorch-facts.md#frozen-norm-statistics). Linear probing and "fixed feature extractor"
    fine-tuning freeze the backbone, then call `model.train()` at the top of each epoch: the
    features the head learns from drift, and the eval-mode model is not the one trained
    (pytorch#86590, lightly#1438, virtex#16). Put the frozen part back in `eval()` after every
    `model.train()`. A freeze aimed at the normalisation layers themselves (`model.bn.
    requires_grad_(False)`, a loop picking `isinstance(m, nn.BatchNorm2d)`) is reported on the
    freeze; a backbone frozen as a whole on the `model.train()` that switches it on.
    Known limits: the BatchNorm must be visible in the file (a torch layer, a Sequential of
    them, a class of the file: NOTE [running statistics]); the freeze, the `train()` call and
    the training steps after it are in one function; `backbone.train()` on the frozen part alone (asking its statistics to
    adapt), a class of the file overriding `train()`, and any `.eval()`, `.apply()` or helper
    calling `.eval()` after the `train()` leave it alone, and so does a file whose module
    classes switch their parts' modes themselves (`self.bn.train(flag)` in `forward`). The
    runtime twin is GT841.
    """

    code = "GT461"
    name = "frozen-norm-in-train-mode"
    message = ("{what} frozen with requires_grad=False (line {line}), but `{model}.train()` puts "
               "its BatchNorm layers in training mode: their running statistics still change at "
               "every forward; put the frozen part in eval() after `{model}.train()`")
    triggers = ("train(",)
    examples = [
        Bad("""
            import torch
            from torch import nn
            net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(),
                                nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 2))
            for p in net[:-1].parameters():
                p.requires_grad = False
            opt = torch.optim.SGD(net[-1].parameters(), lr=0.1)
            for x, y in loader:
                net.train()
                loss = nn.functional.cross_entropy(net(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
            """, at=(9, 4)),
        Good("""
            import torch
            from torch import nn
            net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(),
                                nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 2))
            for p in net[:-1].parameters():
                p.requires_grad = False
            opt = torch.optim.SGD(net[-1].parameters(), lr=0.1)
            for x, y in loader:
                net.train()
                net[:-1].eval()
                loss = nn.functional.cross_entropy(net(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        f = node.func
        if not (isinstance(f, ast.Attribute) and f.attr == "train" and not node.args
                and not node.keywords):
            return
        model = dotted(f.value)
        if model is None or model == "self":
            return
        scope = ctx.scope()
        freezes = [(z, scope) for z in _freezes(scope, ctx) if z.stmt.lineno < node.lineno
                   and not scope.exclusive(z.stmt, scope.statement_of(node) or z.stmt)]
        if not freezes and model.startswith("self."):
            freezes = _constructor_freezes(model, ctx)
        if not freezes:
            return
        region = self._region(node, scope)
        if region is None or _resets(region, model, ctx) or self._overrides_train(ctx):
            return
        for z, zscope in freezes:
            if zscope is scope and not _holds(model, f.value, z, scope, node.lineno) \
                    or zscope is not scope and not (z.whole == model and z.partial
                                                    or z.whole.startswith(model + ".")):
                continue
            line = z.stmt.lineno
            if zscope is not scope:  # frozen in the constructor: asked there
                if holds_running_norm(z.part, zscope, line, ctx) \
                        and not is_running_norm(z.part, zscope, line, ctx):
                    yield self.report(node, ctx, related=[Related(
                        ctx.path, line, "the part is frozen here", ctx.column(z.stmt))],
                        what=_what(z, ctx), line=line, model=model)
                    return
                continue
            if z.norm_aimed or is_running_norm(z.part, scope, line, ctx):
                if self._first_train(node, z, model, scope):
                    yield self.report(z.flag, ctx, related=[Related(
                        ctx.path, node.lineno, f"`{model}.train()` switches it on here",
                        ctx.column(node))], what=_what(z, ctx), line=line, model=model)
            elif holds_running_norm(z.part, scope, line, ctx):
                yield self.report(node, ctx, related=[Related(
                    ctx.path, line, "the part is frozen here", ctx.column(z.stmt))],
                    what=_what(z, ctx), line=line, model=model)
            else:
                continue
            return

    @staticmethod
    def _region(node: ast.Call, scope: Scope) -> list[ast.stmt] | None:
        """The statements from the ``train()`` call to the end of its outermost loop (or of
        the scope), when a backward or an optimizer step runs there; else None."""
        loops = scope.loops_of(node)
        lo = node.lineno
        hi = (loops[0].end_lineno or lo) if loops else 10**9
        region = [s for s in scope.stmts if lo <= s.lineno <= hi]
        steps = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                    and n.func.attr in STEP_CALLS for s in region for n in walk(s)
                    if not isinstance(s, COMPOUND))
        return region if steps else None

    @staticmethod
    def _first_train(node: ast.Call, z: _Freeze, model: str, scope: Scope) -> bool:
        """Whether ``node`` is the first ``model.train()`` after the freeze (one finding per
        freeze)."""
        return not any(z.stmt.lineno < m.stmt.lineno < node.lineno and m.receiver == model
                       and not m.call.args for m in scope.calls_to("train"))

    @staticmethod
    def _overrides_train(ctx: Context) -> bool:
        """Whether a module class of the file manages the modes itself: it defines ``train``,
        or a method switches a part (``self.bn.train(flag)``, ``self.bn.eval()``)."""
        def make() -> bool:
            for c in ctx.analysis.classes.values():
                if not c.is_module:
                    continue
                if "train" in c.methods or any(
                        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                        and n.func.attr in ("train", "eval")
                        and isinstance(n.func.value, ast.Attribute)
                        and dotted(n.func.value.value) == "self"
                        for m in c.methods.values() for n in walk(m)):
                    return True
            return False
        return ctx.memo("gt461-modes-in-class", ctx.tree, make)

