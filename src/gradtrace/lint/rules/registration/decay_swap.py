"""GT477: the weight-decay groups swapped: the biases (and norms) are decayed, the rest not."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.registration.decay_names import _strings, any_name_test, name_list

COMPS = (ast.ListComp, ast.GeneratorExp, ast.SetComp)


def _selects_biases(strings: list[str]) -> bool:
    """# NOTE [bias-selecting name list]
    torch.nn layers name their bias parameter ``bias`` (``fc.bias``, ``LayerNorm.bias``): a list
    of name fragments tested with ``any(f in name ...)`` that holds ``"bias"`` (or a dotted name
    ending in it) picks every bias of the model."""
    return any(s == "bias" or s.endswith(".bias") for s in strings)


def _decay(group: ast.Dict) -> str | None:
    """``"zero"`` for ``"weight_decay": 0``, ``"set"`` for any other value given, None when
    the group sets none (it takes the optimizer's)."""
    for k, v in zip(group.keys, group.values):
        if isinstance(k, ast.Constant) and k.value == "weight_decay":
            if isinstance(v, ast.Constant) and isinstance(v.value, (int, float)):
                return "zero" if v.value == 0 else "set"
            return "set"
    return None


def _group_of(fn: ast.AST, target: str | ast.AST) -> ast.Dict | None:
    """The param-group dict of ``fn`` whose ``"params"`` is the list ``target`` (a name, or
    the comprehension node itself)."""
    for d in walk(fn):
        if not isinstance(d, ast.Dict):
            continue
        for k, v in zip(d.keys, d.values):
            if isinstance(k, ast.Constant) and k.value == "params" and (
                    v is target or isinstance(v, ast.Name) and v.id == target):
                return d
    return None


def _appended(body: list[ast.stmt], var: str) -> str | None:
    """The list ``body`` appends the loop's parameter to: ``decay.append(p)``, alone."""
    names = {s.value.func.value.id for s in body  # type: ignore[attr-defined]
             if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
             and isinstance(s.value.func, ast.Attribute) and s.value.func.attr == "append"
             and isinstance(s.value.func.value, ast.Name) and len(s.value.args) == 1
             and isinstance(s.value.args[0], ast.Name) and s.value.args[0].id == var}
    return names.pop() if len(names) == 1 else None


class DecayGroupsSwapped(Rule):
    """The weight-decay groups are swapped: the parameters whose names hold `bias` (the
    no-decay list) go to the group that is decayed, the others to `"weight_decay": 0.0`.

    Why: the recipe `no_decay = ["bias", "LayerNorm.weight"]`, `any(nd in n for nd in
    no_decay)` over `model.named_parameters()` picks the biases and norm weights to *exempt*
    them. Appending the picked ones to the decayed list (or testing `not any(...)` for the
    exempt group) inverts it: every weight matrix trains without decay and the biases and norm
    scales are pulled toward zero (BalancingGroups' `get_bert_optim`). Nothing fails. Put the
    matching names in the group with `"weight_decay": 0.0`.
    Known limits: the list must be a literal of strings (or a name bound to one in the
    function) holding `"bias"` (NOTE [bias-selecting name list]), tested in an `if` of a loop
    over `named_parameters()` whose two arms append the parameter to two lists, or in the
    comprehensions of the groups; both groups must be dicts of the function, the one with the
    unmatched parameters saying `"weight_decay": 0`.
    """

    code = "GT477"
    name = "decay-groups-swapped"
    message = ("the parameters whose names match {names} (the biases and norms) go to the "
               "decayed group (line {line}), and the others to `\"weight_decay\": 0`: the "
               "groups are swapped, the weight matrices are never decayed and the biases are")
    triggers = ("any(",)  # the test's line (the loop's `named_parameters` may be above it)
    examples = [
        Bad("""
            import torch
            def make_optimizer(model, wd):
                no_decay = ["bias", "LayerNorm.weight"]
                decay, rest = [], []
                for n, p in model.named_parameters():
                    if any(nd in n for nd in no_decay):
                        decay.append(p)
                    else:
                        rest.append(p)
                return torch.optim.AdamW([{"params": decay, "weight_decay": wd},
                                          {"params": rest, "weight_decay": 0.0}], lr=1e-3)
            """, at=(7, 12)),
        Good("""
            import torch
            def make_optimizer(model, wd):
                no_decay = ["bias", "LayerNorm.weight"]
                decay, rest = [], []
                for n, p in model.named_parameters():
                    if any(nd in n for nd in no_decay):
                        rest.append(p)
                    else:
                        decay.append(p)
                return torch.optim.AdamW([{"params": decay, "weight_decay": wd},
                                          {"params": rest, "weight_decay": 0.0}], lr=1e-3)
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        got = any_name_test(node)
        if got is None:
            return
        scope = ctx.scope()
        stmt = scope.statement_of(node)
        strings = _strings(name_list(got[1], scope, node.lineno))
        if stmt is None or strings is None or not _selects_biases(strings):
            return
        fn = scope.node
        negated = any(isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not)
                      and n.operand is node for n in walk(stmt))
        if isinstance(stmt, ast.If) and any(n is node for n in walk(stmt.test)):
            yield from self._loop(stmt, negated, strings, fn, ctx, scope)
            return
        comp = next((c for c in walk(stmt) if isinstance(c, COMPS) and any(
            any(n is node for n in walk(i)) for g in c.generators for i in g.ifs)), None)
        if comp is None or negated:
            return  # the comprehension of the matched names is the one read
        mine = _group_of(fn, comp) or self._named_group(stmt, comp, fn)
        if mine is None or _decay(mine) != "set":
            return
        other = [d for d in walk(fn) if isinstance(d, ast.Dict) and d is not mine
                 and _decay(d) == "zero" and _group_params_negated(d, got[0])]
        if other:
            yield self._report(comp, mine, strings, ctx)

    def _loop(self, s: ast.If, negated: bool, strings: list[str], fn: ast.AST,
              ctx: Context, scope: Scope) -> Iterator[Finding]:
        loops = [lp for lp in scope.loops_of(s) if isinstance(lp, ast.For)
                 and isinstance(lp.target, ast.Tuple) and len(lp.target.elts) == 2
                 and isinstance(lp.target.elts[1], ast.Name)
                 and isinstance(lp.iter, ast.Call) and isinstance(lp.iter.func, ast.Attribute)
                 and lp.iter.func.attr == "named_parameters"]
        if not loops or not s.orelse:
            return
        var = loops[-1].target.elts[1].id  # type: ignore[attr-defined]
        hit, miss = _appended(s.body, var), _appended(s.orelse, var)
        if negated:
            hit, miss = miss, hit
        if hit is None or miss is None or hit == miss:
            return
        g_hit, g_miss = _group_of(fn, hit), _group_of(fn, miss)
        if g_hit is None or g_miss is None or _decay(g_hit) != "set" \
                or _decay(g_miss) != "zero":
            return
        at = next(x for x in (s.orelse if negated else s.body) if isinstance(x, ast.Expr))
        yield self._report(at, g_hit, strings, ctx)

    def _report(self, at: ast.AST, group: ast.Dict, strings: list[str], ctx: Context
                ) -> Finding:
        return self.report(at, ctx, related=(Related(
            ctx.path, group.lineno, "this group is decayed", ctx.column(group)),),
            names="`" + "`, `".join(strings[:3]) + "`", line=group.lineno)

    @staticmethod
    def _named_group(stmt: ast.stmt, comp: ast.AST, fn: ast.AST) -> ast.Dict | None:
        """``decay = [p for n, p in ... if any(...)]`` then ``{"params": decay, ...}``."""
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and stmt.value is comp \
                and isinstance(stmt.targets[0], ast.Name):
            return _group_of(fn, stmt.targets[0].id)
        return None


def _group_params_negated(d: ast.Dict, var: str) -> bool:
    """The group's ``"params"`` is a comprehension over the names that a ``not any(... in
    var ...)`` keeps (the unmatched ones)."""
    for k, v in zip(d.keys, d.values):
        if isinstance(k, ast.Constant) and k.value == "params" and isinstance(v, COMPS):
            return any(isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not)
                       and isinstance(n.operand, ast.Call) and isinstance(n.operand.func, ast.Name)
                       and n.operand.func.id == "any" for g in v.generators for i in g.ifs
                       for n in walk(i))
    return False



