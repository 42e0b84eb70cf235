"""GT703-GT704: autograd entry points given a value whose gradient is not what training needs."""
from __future__ import annotations

import ast
from dataclasses import replace
from typing import Any, Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.registration._callers import class_calls

# torch.distributions families where sample = loc + scale * noise (noise free of loc)
LOCATION_SCALE = frozenset({
    "torch.distributions.Normal", "torch.distributions.normal.Normal",
    "torch.distributions.LogNormal", "torch.distributions.Laplace",
    "torch.distributions.Cauchy", "torch.distributions.Gumbel",
    "torch.distributions.StudentT", "torch.distributions.MultivariateNormal",
    "torch.distributions.multivariate_normal.MultivariateNormal",
    "torch.distributions.LowRankMultivariateNormal",
})
INDEPENDENT = frozenset({"torch.distributions.Independent",
                         "torch.distributions.independent.Independent"})


def _location_scale(e: ast.AST | None, ctx: Context) -> str | None:
    """The family's short name when ``e`` builds a location-scale distribution."""
    if not isinstance(e, ast.Call):
        return None
    q = ctx.qualified_name(e.func) or ""
    if q in INDEPENDENT and e.args:
        return _location_scale(e.args[0], ctx)
    return q.rpartition(".")[2] if q in LOCATION_SCALE else None


class LogProbOfReparameterisedSample(Rule):
    """The log-probability of a sample drawn with `rsample()` from the same distribution: its
    gradient with respect to the mean is zero.

    Why: `rsample()` draws `loc + scale * eps`, so `d.log_prob(d.rsample())` only sees `eps`
    and `scale`: the `loc` terms cancel and the mean head gets an all-zero gradient (verified
    on torch 2.13, pytorch issue 10943). A score-function loss (REINFORCE, `-(logp *
    advantage)`) needs `a = d.sample()` (no gradient through the action; the gradient flows
    through `log_prob`'s parameters); keep `rsample()` only where the action itself feeds the
    loss (SAC's `Q(s, a)`).
    Known limits: only location-scale families (`Normal`, `MultivariateNormal`, `Laplace`,
    `Cauchy`, `LogNormal`, `Gumbel`, `StudentT`, and `Independent` of them) built in the same
    function, and a sample used for nothing but that `log_prob`.
    """

    code = "GT704"
    name = "log-prob-of-reparameterised-sample"
    message = ("`{sample}` is drawn with `rsample()` and used only in `{dist}.log_prob(...)` "
               "(line {line}): the mean cancels out of the log-probability of a reparameterised "
               "{family} sample, so a loss built from it gives the mean a zero gradient; use "
               "`{dist}.sample()` for a score-function (REINFORCE) loss")
    triggers = ("rsample",)
    gate_statements = True
    examples = [
        Bad("""
            import torch
            from torch.distributions import Normal

            def policy_loss(mean_head, std_head, x, advantage):
                d = Normal(mean_head(x), std_head(x).exp())
                a = d.rsample()
                logp = d.log_prob(a)
                return -(logp * advantage).mean()
            """, at=(6, 4)),
        Good("""
            import torch
            from torch.distributions import Normal

            def policy_loss(mean_head, std_head, x, advantage):
                d = Normal(mean_head(x), std_head(x).exp())
                a = d.sample()
                return -(d.log_prob(a) * advantage).mean()

            def actor_loss(actor, critic, s, alpha):
                mu, log_std = actor(s)
                d = Normal(mu, log_std.exp())
                a = d.rsample()
                return (alpha * d.log_prob(a).sum(-1) - critic(s, a)).mean()
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        f = node.func
        if not (isinstance(f, ast.Attribute) and f.attr == "rsample"):
            return
        d = dotted(f.value)
        if d is None:
            return
        scope = ctx.scope()
        db = scope.binding_before(d, node.lineno)
        family = _location_scale(db.value if db is not None else None, ctx)
        if family is None:
            return
        parent, at, sample = ctx.parent, node, ctx.source(node)
        if isinstance(parent, ast.Assign) and parent.value is node and len(parent.targets) == 1 \
                and isinstance(parent.targets[0], ast.Name):
            name = parent.targets[0].id
            loads = [n for n in walk(ctx.function or ctx.tree) if isinstance(n, ast.Name)
                     and n.id == name and isinstance(n.ctx, ast.Load)]
            if len(loads) != 1 or len(scope.bindings.get(name, [])) != 1:
                return  # the action is used elsewhere (the environment, a critic) or rebound
            use = next((c for c in walk(ctx.function or ctx.tree) if isinstance(c, ast.Call)
                        and len(c.args) == 1 and c.args[0] is loads[0]), None)
            at, sample = parent, name
        else:
            use = parent
        if not (isinstance(use, ast.Call) and isinstance(use.func, ast.Attribute)
                and use.func.attr == "log_prob" and dotted(use.func.value) == d):
            return
        yield self.report(at, ctx, related=(Related(ctx.path, use.lineno,
                                                    "its log-probability is taken here",
                                                    ctx.column(use)),),
                          sample=sample, dist=d, line=use.lineno, family=family)


LOSS_SUFFIX = "Loss"


def _default(fn: ast.AST, name: str, cls: str, ctx: Context) -> ast.expr | None:
    """The default of parameter ``name`` of ``cls.__init__`` (``fn``) when no call of the
    class in this file passes that argument."""
    a = getattr(fn, "args", None)
    if a is None:
        return None
    pos = [*a.posonlyargs, *a.args]
    defaults = dict(zip([x.arg for x in pos[len(pos) - len(a.defaults):]], a.defaults))
    defaults.update((x.arg, d) for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None)
    if name not in defaults:
        return None
    index = [x.arg for x in pos].index(name) - 1 if name in [x.arg for x in pos] else 10**6
    for _, call in class_calls(ctx, cls):
        if len(call.args) > index or any(k.arg in (name, None) for k in call.keywords) \
                or any(isinstance(x, ast.Starred) for x in call.args):
            return None
    return defaults[name]


def _none_reduction(call: ast.Call, fn: ast.AST, ctx: Context, cls: str = "") -> bool:
    """``reduction='none'`` (also through a local name of ``fn``, or a parameter of ``fn``
    whose default no caller overrides) or ``reduce=False``."""
    for k in call.keywords:
        v = k.value
        if isinstance(v, ast.Name):
            b = ctx.scope(fn).binding_before(v.id, call.lineno)
            if b is not None and b.value is not None:
                v = b.value
            elif b is None:
                v = _default(fn, v.id, cls, ctx) or v
        if k.arg == "reduction" and isinstance(v, ast.Constant) and v.value == "none":
            return True
        if k.arg == "reduce" and isinstance(v, ast.Constant) and v.value is False:
            return True
    return False


class UnreducedLossReturnedByForward(Rule):
    """A module's `forward` returns the output of a loss built with `reduction='none'`, and the
    caller calls `backward()` on it.

    Why: with `reduction='none'` the criterion returns one value per element. `forward`
    hands that tensor back unchanged, so `loss = model(x, y); loss.backward()` runs on a
    non-scalar and raises `RuntimeError: grad can be implicitly created only for scalar
    outputs` (verified on torch 2.13). Build the criterion with the default `reduction='mean'`
    (or reduce in `forward`: `.mean()`, a masked sum), or pass `gradient=` to `backward`.
    Known limits: the criterion must be an `nn.*Loss` stored on `self` in `__init__` (the
    reduction a constant or a local name bound to one), `forward` must return its output
    unchanged, and the model's output must be backpropagated in the same file without a
    reduction.
    """

    code = "GT703"
    needs_step = True  # NOTE [step files]
    name = "unreduced-loss-returned-by-forward"
    message = ("`self.{attr}` is built with reduction='none', and `{cls}.forward` returns its "
               "per-element output unchanged: `{loss}.backward()` (line {line}) raises 'grad can "
               "be implicitly created only for scalar outputs'; keep the default reduction or "
               "reduce in `forward`")
    message_guard = (
        "`{loss}` is reduced only when `{test}`: `{cls}.forward` returns `self.{attr}`'s "
        "per-element output (reduction='none'), so on the other branch `{loss}.backward()` "
        "(line {line}) raises 'grad can be implicitly created only for scalar outputs'; "
        "reduce it on every path")
    triggers = ("reduction", "reduce=")
    examples = [
        Bad("""
            import torch.nn as nn
            class SpanModel(nn.Module):
                def __init__(self, hidden=8, tags=5):
                    super().__init__()
                    self.fc = nn.Linear(hidden, tags)
                    reduction = "none"
                    self.criterion = nn.CrossEntropyLoss(reduction=reduction)
                def forward(self, x, y):
                    return self.criterion(self.fc(x), y)
            model = SpanModel()
            loss = model(x, y)
            loss.backward()
            """, at=(7, 8)),
        Good("""
            import torch.nn as nn
            class SpanModel(nn.Module):
                def __init__(self, hidden=8, tags=5):
                    super().__init__()
                    self.fc = nn.Linear(hidden, tags)
                    self.criterion = nn.CrossEntropyLoss(reduction="none")
                def forward(self, x, y, mask):
                    per_token = self.criterion(self.fc(x), y)
                    return (per_token * mask).sum() / mask.sum()
            model = SpanModel()
            loss = model(x, y, mask)
            loss.backward()
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        if not ctx.mentions(".backward("):
            return
        an = ctx.analysis
        unreduced: dict[str, tuple[str, ast.stmt]] = {}
        for cls in an.classes.values():
            fwd = cls.methods.get("forward")
            if not cls.is_module or fwd is None:
                continue
            for name, info in cls.attrs.items():
                v = info.value
                if info.later or info.method.name != "__init__" or not isinstance(v, ast.Call):
                    continue
                q = ctx.qualified_name(v.func) or ""
                if q.startswith("torch.nn.") and q.endswith(LOSS_SUFFIX) \
                        and _none_reduction(v, info.method, ctx, cls.name) \
                        and _returns_output(fwd, name):
                    unreduced[cls.name] = (name, info.stmt)
        if not unreduced:
            return
        for fn in [node, *(n for n in walk(node) if isinstance(n, (ast.FunctionDef,
                                                                     ast.AsyncFunctionDef)))]:
            scope = ctx.scope(fn)
            for m in scope.calls_to("backward"):
                if m.call.args or m.call.keywords or "." in m.receiver:
                    continue
                b = scope.binding_before(m.receiver, m.stmt.lineno)
                v = b.value if b is not None else None
                guard = None
                if not isinstance(v, ast.Call) or _reduced(v, m.receiver):
                    b, guard = _reduced_only_under_if(scope, m.receiver, m.stmt)
                    v = b.value if b is not None else None
                if not isinstance(v, ast.Call):
                    continue
                k = an.kind_in(v.func, fn, b.line)  # type: ignore[union-attr]
                if k is not None and k.cls in _WRAPPERS and isinstance(k.node, ast.Call) \
                        and k.node.args:  # `model = DataParallel(model)`: the wrapped class
                    k = an.kind_in(k.node.args[0], fn, k.node.lineno)
                if k is None or k.what != MODULE or k.cls not in unreduced:
                    continue
                attr, stmt = unreduced.pop(k.cls)
                if guard is not None:  # NOTE [reduced on one branch]
                    f = self.report(guard, ctx, related=(Related(
                        ctx.path, m.call.lineno, "backward() on the per-element loss",
                        ctx.column(m.call)), Related(ctx.path, stmt.lineno, f"`self.{attr}` "
                        "is built with reduction='none' here", ctx.column(stmt))),
                        attr=attr, cls=k.cls, loss=m.receiver, line=m.call.lineno)
                    yield replace(f, message=self.message_guard.format(
                        test=ctx.source(guard.test), loss=m.receiver, cls=k.cls, attr=attr,
                        line=m.call.lineno))
                    continue
                yield self.report(stmt, ctx, related=(Related(
                    ctx.path, m.call.lineno, "backward() on the per-element loss",
                    ctx.column(m.call)),), attr=attr, cls=k.cls, loss=m.receiver,
                    line=m.call.lineno)


_REDUCE = frozenset({"mean", "sum"})
_WRAPPERS = frozenset({"torch.nn.DataParallel", "torch.nn.parallel.DistributedDataParallel",
                       "torch.nn.parallel.DataParallel"})


def _reduced(v: ast.expr, name: str) -> bool:
    """``v`` is ``name.mean()`` / ``name.sum()`` (a reduction of the loss to one number)."""
    return isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
        and v.func.attr in _REDUCE and not v.args and not v.keywords \
        and isinstance(v.func.value, ast.Name) and v.func.value.id == name


def _reduced_only_under_if(scope: Any, name: str, use: ast.stmt
                           ) -> tuple[Any, ast.If | None]:
    """# NOTE [reduced on one branch]
    ``loss = model(...)``, then ``if n_gpu > 1: loss = loss.mean()`` and ``loss.backward()``
    after that ``if`` (the multi-GPU scripts' "mean() to average on multi-gpu"): when the
    model returns a per-element loss, the only reduction runs on one branch, and on the other
    the backward gets a non-scalar. Returns the first binding of ``name`` (the model call) and
    the ``if`` holding every reduction when every later binding before ``use`` reads ``name``
    (``loss / accum`` too) and no reduction runs outside an ``if`` that ``use`` is not in."""
    bs = scope.bindings_before(name, use.lineno)
    if len(bs) < 2:
        return None, None
    guard = None
    for b in bs[1:]:
        if not isinstance(b.value, ast.expr) or not any(
                isinstance(n, ast.Name) and n.id == name for n in walk(b.value)):
            return None, None
        if not _reduced(b.value, name):
            continue
        ifs = [s for s in scope.stmts if isinstance(s, ast.If) and s.lineno <= b.line
               <= (s.end_lineno or s.lineno) and not s.lineno <= use.lineno
               <= (s.end_lineno or s.lineno)]
        if not ifs or guard is not None:
            return None, None
        guard = max(ifs, key=lambda s: s.lineno)
        if any(b.stmt is x for x in guard.orelse) or guard.orelse:
            return None, None
    return (bs[0], guard) if guard is not None else (None, None)


def _returns_output(fwd: ast.AST, attr: str) -> bool:
    """Whether ``forward`` returns ``self.<attr>(...)`` unchanged on its last statement
    (directly or through one local name)."""
    body = getattr(fwd, "body", [])
    last = body[-1] if body else None
    if not isinstance(last, ast.Return) or last.value is None:
        return False
    v = last.value
    if isinstance(v, ast.Name):
        assigns = [s for s in body if isinstance(s, ast.Assign) and len(s.targets) == 1
                   and isinstance(s.targets[0], ast.Name) and s.targets[0].id == v.id]
        if len(assigns) != 1:
            return False
        v = assigns[0].value
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
            and v.func.attr == attr and dotted(v.func.value) == "self":
        return True
    return any(isinstance(s, ast.If) and any(  # a branch's return: `if labels is not None:`
        isinstance(r, ast.Return) and isinstance(r.value, ast.Call)
        and isinstance(r.value.func, ast.Attribute) and r.value.func.attr == attr
        and dotted(r.value.func.value) == "self" for r in s.body) for s in body)
