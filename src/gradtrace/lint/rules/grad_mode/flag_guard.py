"""GT222: `set_grad_enabled(flag)` is off in every run that reaches the backward of its loss."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.steps import backward_loss
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule

# What the tests around a statement say about a flag's spelling: ("eq", value),
# ("oneof", values), ("ne", values) or ("truth", bool).
Facts = dict[str, tuple[str, object]]


def _const(e: ast.expr) -> tuple[bool, object]:
    return (True, e.value) if isinstance(e, ast.Constant) else (False, None)


def _consts(e: ast.expr) -> frozenset | None:
    if isinstance(e, (ast.Tuple, ast.List, ast.Set)) and e.elts \
            and all(isinstance(x, ast.Constant) for x in e.elts):
        return frozenset(x.value for x in e.elts)  # type: ignore[attr-defined]
    return None


def _compare(e: ast.expr) -> tuple[str, str, object] | None:
    """``X == c`` / ``X != c`` / ``X in (c, ...)`` / ``X not in (...)`` as (key, op, value)."""
    if not isinstance(e, ast.Compare) or len(e.ops) != 1:
        return None
    left, op, right = e.left, e.ops[0], e.comparators[0]
    if isinstance(op, (ast.Eq, ast.NotEq)):
        for x, c in ((left, right), (right, left)):
            ok, v = _const(c)
            if ok and (key := dotted(x)):
                return key, "eq" if isinstance(op, ast.Eq) else "ne", v
    if isinstance(op, (ast.In, ast.NotIn)) and (key := dotted(left)) \
            and (vals := _consts(right)) is not None:
        return key, "in" if isinstance(op, ast.In) else "notin", vals
    return None


def _learn(test: ast.expr, holds: bool, facts: Facts) -> None:
    """Add what ``test`` being ``holds`` says about flags."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _learn(test.operand, not holds, facts)
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And if holds else ast.Or):
        for v in test.values:
            _learn(v, holds, facts)
        return
    if (key := dotted(test)) is not None:
        facts[key] = ("truth", holds)
        return
    cmp = _compare(test)
    if cmp is None:
        return
    key, op, v = cmp
    if op in ("ne", "notin"):
        op, holds = ("eq" if op == "ne" else "in"), not holds
    if op == "eq":
        facts[key] = ("eq", v) if holds else ("ne", frozenset({v}))
    else:
        facts[key] = ("oneof", v) if holds else ("ne", v)


def _value(e: ast.expr, facts: Facts) -> bool | None:
    """The truth of ``e`` under ``facts`` (None: not decided by them)."""
    if isinstance(e, ast.Constant):
        return bool(e.value)
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
        v = _value(e.operand, facts)
        return None if v is None else not v
    if isinstance(e, ast.BoolOp):
        vals = [_value(x, facts) for x in e.values]
        stop = isinstance(e.op, ast.Or)  # the value that decides the whole
        return stop if stop in vals else (not stop if None not in vals else None)
    if (key := dotted(e)) is not None:
        fact = facts.get(key)
        if fact is None:
            return None
        return fact[1] if fact[0] == "truth" else bool(fact[1]) if fact[0] == "eq" else None
    cmp = _compare(e)
    if cmp is None or cmp[0] not in facts:
        return None
    key, op, v = cmp
    kind, known = facts[key]
    vals = frozenset({v}) if op in ("eq", "ne") else v
    if kind == "eq":
        inside: bool | None = known in vals  # type: ignore[operator]
    elif kind == "oneof":
        inside = True if known <= vals else False if not (known & vals) else None  # type: ignore[operator]
    elif kind == "ne":
        inside = False if vals <= known else None  # type: ignore[operator]
    else:
        return None
    return None if inside is None else inside if op in ("eq", "in") else not inside


class GradFlagOffAtBackward(Rule):
    """`torch.set_grad_enabled(flag)` computes the loss with grad off in every run that reaches
    its `backward()`.

    Why: `with torch.set_grad_enabled(phase == "train"):` is the usual way to run one loop for
    training and evaluation; the backward sits under `if phase == "train":`. When the two
    tests disagree (the flag inverted, `phase == "val"`; another spelling of the phase,
    `"training"` against `"train"`; `not is_train` against `if is_train`), the loss that
    reaches `backward()` was computed with grad off: it has no `grad_fn`, and `backward()`
    raises `RuntimeError: element 0 of tensors does not require grad and does not have a
    grad_fn` (pytorch-facts.md#no-graph-loss). Make the flag true exactly where the backward runs.
    Known limits: one function; the flag and the test must read the same name or attribute
    (`==`, `!=`, `in`, `not`, `and`, `or` of constants), not rebound in between (a `for` over
    the phases is fine).
    """

    code = "GT222"
    name = "grad-flag-off-at-backward"
    message = ("`{call}` is false whenever `{backward}` (line {line}) runs, since that runs "
               "{guard}: the loss is computed with grad off and `backward()` raises "
               "`element 0 of tensors does not require grad`; make the flag true where the "
               "backward runs")
    triggers = ("set_grad_enabled",)
    gate_statements = "function"
    examples = [
        Bad("""
            import torch

            def run_epoch(model, loader, opt, crit, phase):
                for x, y in loader:
                    with torch.set_grad_enabled(phase == "val"):
                        loss = crit(model(x), y)
                    if phase == "train":
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
            """, at=(5, 8)),
        Bad("""
            import torch

            def fit(model, loaders, opt, crit):
                for phase in ("train", "val"):
                    model.train(phase == "train")
                    for x, y in loaders[phase]:
                        with torch.set_grad_enabled(phase == "training"):
                            out = model(x)
                            loss = crit(out, y)
                            if phase == "train":
                                opt.zero_grad()
                                loss.backward()
                                opt.step()
            """, at=(7, 12)),
        Good("""
            import torch

            def fit(model, loaders, opt, crit):
                for phase in ("train", "val"):
                    for x, y in loaders[phase]:
                        with torch.set_grad_enabled(phase == "train"):
                            loss = crit(model(x), y)
                            if phase == "train":
                                opt.zero_grad()
                                loss.backward()
                                opt.step()
            """),
        Good("""
            import torch

            def step(model, x, y, opt, crit, is_train, phase):
                with torch.set_grad_enabled(is_train and phase != "test"):
                    loss = crit(model(x), y)
                if is_train:
                    loss.backward()
                    opt.step()
            """),
    ]

    def visit_With(self, node: ast.With, ctx: Context) -> Iterator[Finding]:
        flag = next((it.context_expr.args[0] for it in node.items
                     if isinstance(it.context_expr, ast.Call) and it.context_expr.args
                     and (ctx.qualified_name(it.context_expr.func) or "")
                     == "torch.set_grad_enabled"), None)
        if flag is None or isinstance(flag, ast.Constant) or ctx.function is None:
            return
        scope = ctx.scope()
        ifs = {id(s): s for s in scope.stmts if isinstance(s, ast.If)}
        first, last = node.lineno, node.end_lineno or node.lineno
        for mc in scope.calls_to("backward"):
            loss = backward_loss(mc.call, ctx)
            if not isinstance(loss, ast.Name):
                continue
            b = scope.binding_before(loss.id, mc.call.lineno)
            if b is None or not first < b.line <= last \
                    or not _steady(flag, node, mc.stmt, scope):
                continue
            facts: Facts = {}
            guards = [(ifs[k], body) for k, body in scope.branches.get(id(mc.stmt), ())
                      if k in ifs]
            for test, holds in ((g.test, body) for g, body in guards):
                _learn(test, holds, facts)
            if guards and _value(flag, facts) is False:
                g, body = next(((g, body) for g, body in reversed(guards)
                                if _value(flag, _facts_of(g, body)) is False), guards[-1])
                guard = ("under `if " if body else "in the `else` of `if ") + ctx.source(g.test)
                yield self.report(
                    node, ctx, call=ctx.source(node.items[0].context_expr),
                    backward=ctx.source(mc.call), line=mc.call.lineno, guard=guard + ":`",
                    related=[Related(ctx.path, mc.call.lineno, "this backward runs only where "
                                     "the flag is false", ctx.column(mc.call))])
                return


def _facts_of(g: ast.If, body: bool) -> Facts:
    facts: Facts = {}
    _learn(g.test, body, facts)
    return facts


def _steady(flag: ast.expr, w: ast.With, stmt: ast.stmt, scope) -> bool:
    """Whether every name the flag reads has the same value at the ``with`` and at ``stmt``:
    never bound in the function, or bound only by a ``for`` around both."""
    for n in walk(flag):
        key = dotted(n) if isinstance(n, (ast.Name, ast.Attribute)) else None
        if key is None:
            continue
        for b in scope.bindings.get(key, ()):
            loop = b.stmt
            if not isinstance(loop, (ast.For, ast.AsyncFor)) \
                    or loop not in scope.loops.get(id(w), ()) \
                    or loop not in scope.loops.get(id(stmt), ()):
                return False
    return True
