"""GT767: an advantage made from the critic's values without a detach weighs the policy term."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.analysis.regressions import operands, regressed
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import holds_line, scope_nodes, statements, walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.leaf._tensors import mention_lines
from gradtrace.lint.rules.leaf._writes import own_statements

# views and copies that keep the graph (`values.squeeze(-1)`)
KEEPS = frozenset({"squeeze", "unsqueeze", "view", "flatten", "reshape", "float", "view_as"})
# calls whose result is a log-probability or a probability ratio: the policy side of a term
POLICY_CALLS = frozenset({"log_prob", "log_softmax", "log", "logsumexp", "exp", "gather"})


def _plain(e: ast.AST) -> str | None:
    """The dotted name ``e`` reads through graph-keeping views; None when it is detached
    (``.detach()``, ``.item()``, ``.data``) or anything else."""
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in KEEPS:
        e = e.func.value
    name = dotted(e) if isinstance(e, (ast.Name, ast.Attribute)) else None
    return None if name is None or name.endswith(".data") else name


def _fitted(n: ast.AST, ctx: Context, scope: Scope) -> tuple[str, ast.AST] | None:
    """(values, target) when ``n`` regresses the name ``values`` on ``target``
    (:func:`.regressions.regressed`; either order, the name first that is one)."""
    got = regressed(n, ctx, scope)
    for a, b in ((got[0], got[1]), (got[1], got[0])) if got is not None else ():
        name = _plain(a)
        if name is not None:
            return name, b
    return None


def _params(fn: ast.AST) -> set[str]:
    a = getattr(fn, "args", None)
    return set() if a is None else {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)}


def _may_fit(n: ast.AST, values: set[str]) -> bool:
    """By shape only: ``n`` may regress one of ``values``."""
    got = operands(n)
    return got is not None and (_plain(got[0]) in values or _plain(got[1]) in values)


def _names(e: ast.AST) -> set[str]:
    return {n.id for n in walk(e) if isinstance(n, ast.Name)}


class AdvantageKeepsCriticGraph(Rule):
    """An advantage computed from the critic's values without `.detach()` weighs the policy
    term: the policy loss trains the critic too.

    Why: in an actor-critic update, `advantage = returns - values` is a constant weight of the
    log-probabilities; when `values` still carries the critic's graph, `-(log_prob *
    advantage)` backpropagates into the critic as well, pushing its values to shrink the
    policy term instead of to predict the returns (the value loss is fought by the policy
    loss; checked on torch 2.13: the critic's gradient differs from the one with a detached
    baseline). Detach the baseline: `returns - values.detach()` (or `value.item()`).
    Known limits: the advantage must be assigned to a name in the function (or script) that
    fits the same values by a regression loss (`F.mse_loss`, `smooth_l1_loss`, an
    `nn.MSELoss`, `(values - returns) ** 2`), and multiply a log-probability, a ratio, a
    model's output (a module, or a callable argument of the function) or a value unpacked
    with the critic's values; the function must name a regression loss, `pow`, `log_prob` or
    `log_softmax` (a `** 2` value loss next to `torch.log(probs)` is not read).
    """

    code = "GT767"
    name = "advantage-keeps-critic-graph"
    message = ("`{adv}` is computed from `{values}` without `.detach()`, and `{values}` is fit "
               "by its own loss (line {fit}): the policy term `{term}` (line {line}) also "
               "backpropagates into the critic and fights its value loss; use "
               "`{values}.detach()` in the advantage")
    triggers = ("mse_loss", "l1_loss", "huber_loss", "MSELoss", "L1Loss", "HuberLoss", "pow",
                "log_prob", "log_softmax")  # the value loss or the policy term it needs
    examples = [
        Bad("""
            import torch.nn.functional as F

            def update(actor, critic, opt, states, returns):
                log_probs = actor(states)
                values = critic(states).squeeze(-1)
                advantage = returns - values
                policy_loss = -(log_probs * advantage).mean()
                value_loss = F.mse_loss(values, returns)
                opt.zero_grad()
                (policy_loss + value_loss).backward()
                opt.step()
            """, at=(6, 4)),
        Good("""
            import torch.nn.functional as F

            def update(actor, critic, opt, states, returns, mask):
                log_probs = actor(states)
                values = critic(states).squeeze(-1)
                advantage = returns - values.detach()
                policy_loss = -(log_probs * advantage).mean()
                value_loss = F.mse_loss(values, returns)
                td = returns - values
                masked = (td * mask).pow(2).mean()
                opt.zero_grad()
                (policy_loss + value_loss + masked).backward()
                opt.step()
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        yield from self._scope(node, ctx)  # the script, then each function naming a word
        lines = mention_lines(ctx, *self.triggers)  # (node_mentions, by bisection)
        for fn in statements(node) if lines else ():
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                    and holds_line(lines, fn.lineno, fn.end_lineno or fn.lineno):
                yield from self._scope(fn, ctx)

    def _scope(self, node: ast.AST, ctx: Context) -> Iterator[Finding]:
        if not any(map(_is_sub, own_statements(node.body))):  # type: ignore[attr-defined]
            return  # (the statements only: the same assignments `scope_nodes` holds)
        nodes = list(scope_nodes(node))
        subs = [n for n in nodes if _is_sub(n)]
        if not subs or not any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult)
                               for n in nodes):
            return  # the cheap tests before any data flow
        values = {v for a in subs for v in (_plain(a.value.left),  # type: ignore[attr-defined]
                                            _plain(a.value.right)) if v is not None}
        maybe = [n for n in nodes if _may_fit(n, values)]
        if not maybe:
            return
        scope = ctx.scope(node)
        fits = [f + (n,) for n in maybe if (f := _fitted(n, ctx, scope)) is not None]
        for assign in subs:
            found = self._advantage(assign, fits, nodes, scope, ctx)
            if found is not None:
                yield found

    def _advantage(self, assign: ast.Assign, fits: list, nodes: list[ast.AST], scope: Scope,
                   ctx: Context) -> Finding | None:
        adv = assign.targets[0].id  # type: ignore[attr-defined]
        sub = assign.value
        if len(scope.bindings.get(adv, [])) != 1 or scope.grad_off_at(assign) is not None:
            return None
        for side, other in ((sub.right, sub.left), (sub.left, sub.right)):  # type: ignore
            values = _plain(side)
            if values is None or values == adv:
                continue
            fit = next((f for f in fits if f[0] == values and _names(f[1]) & _names(other)),
                       None)
            if fit is None or not _live(side, assign, scope, ctx):
                continue
            term = self._term(adv, values, nodes, scope, ctx)
            if term is None:
                continue
            return self.report(assign, ctx, related=(
                Related(ctx.path, fit[2].lineno, f"`{values}` is fit here", ctx.column(fit[2])),
                Related(ctx.path, term.lineno, "the advantage weighs this term",
                        ctx.column(term))),
                adv=adv, values=values, fit=fit[2].lineno, term=ctx.source(term),
                line=term.lineno)
        return None

    def _term(self, adv: str, values: str, nodes: list[ast.AST], scope: Scope,
              ctx: Context) -> ast.BinOp | None:
        """The product ``policy * adv`` whose other factor is a policy quantity."""
        vb = scope.binding_before(values.partition(".")[0], 10**9)
        for n in nodes:
            if not (isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult)):
                continue
            for side, other in ((n.left, n.right), (n.right, n.left)):
                if _plain(side) != adv or {adv, values} & _names(other):
                    continue
                if any(self._policy(x, vb, scope, ctx, n.lineno) for x in _names(other)):
                    return n
        return None

    def _policy(self, name: str, vb: object, scope: Scope, ctx: Context, line: int,
                depth: int = 0) -> bool:
        """Whether ``name`` is a log-probability, a ratio or a model's output, or was unpacked
        in the same statement as the critic's values (``for (log_prob, value), R in ...``)."""
        b = scope.binding_before(name, line)
        if b is None or depth > 2:
            return False
        if vb is not None and b.stmt is getattr(vb, "stmt", None):
            return True
        value = b.value if b.value is not None else \
            b.stmt.value if isinstance(b.stmt, ast.Assign) else None  # `tour, lp = actor(x)`
        if value is None:
            return False
        for c in walk(value):
            if not isinstance(c, ast.Call):
                continue
            if isinstance(c.func, ast.Attribute) and c.func.attr in POLICY_CALLS \
                    or (ctx.qualified_name(c.func) or "").rpartition(".")[2] in POLICY_CALLS:
                return True
            k = ctx.analysis.kind(c.func, scope, b.line)
            if k is not None and k.what == MODULE or isinstance(c.func, ast.Name) \
                    and c.func.id in _params(scope.node):  # `actor(states)`, a model passed in
                return True
        return any(self._policy(x, vb, scope, ctx, b.line, depth + 1)
                   for x in _names(value) if x != name)


def _live(e: ast.AST, at: ast.stmt, scope: Scope, ctx: Context) -> bool:
    """The critic's values, as the advantage reads them, may carry a graph (the shared
    tracer): ``with torch.no_grad(): values = critic(s)`` again after the value loss's step
    holds none."""
    from gradtrace.lint.analysis.origins import origins
    return origins(ctx, scope.node).trace(e, at, at.lineno).live


def _is_sub(n: ast.AST) -> bool:
    """``adv = <a> - <b>``: the assignment the rule starts from."""
    return isinstance(n, ast.Assign) and len(n.targets) == 1 \
        and isinstance(n.targets[0], ast.Name) and isinstance(n.value, ast.BinOp) \
        and isinstance(n.value.op, ast.Sub)
