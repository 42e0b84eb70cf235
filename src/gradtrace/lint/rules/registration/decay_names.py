"""GT463: a no-decay name list that matches none of the model's normalisation weights."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.analysis.param_names import Names, call_names, class_names, own_names
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.statement_shapes import argument_default


def _strings(e: ast.AST | None) -> list[str] | None:
    if isinstance(e, (ast.List, ast.Tuple, ast.Set)) and e.elts and all(
            isinstance(x, ast.Constant) and isinstance(x.value, str) for x in e.elts):
        return [x.value for x in e.elts]  # type: ignore[attr-defined]
    return None


def _name_test(g: ast.GeneratorExp) -> tuple[str, ast.expr, bool] | None:
    """``(n, iterable, lowered)`` for ``nd in n for nd in ITER`` / ``nd in n.lower() ...``."""
    if len(g.generators) != 1 or g.generators[0].ifs:
        return None
    gen = g.generators[0]
    c = g.elt
    if not (isinstance(gen.target, ast.Name) and isinstance(c, ast.Compare)
            and len(c.ops) == 1 and isinstance(c.ops[0], ast.In)
            and isinstance(c.left, ast.Name) and c.left.id == gen.target.id):
        return None
    right, lowered = c.comparators[0], False
    if isinstance(right, ast.Call) and isinstance(right.func, ast.Attribute) \
            and right.func.attr == "lower" and not right.args:
        right, lowered = right.func.value, True
    return (right.id, gen.iter, lowered) if isinstance(right, ast.Name) else None


def any_name_test(node: ast.Call) -> tuple[str, ast.expr, bool] | None:
    """:func:`_name_test` of ``any(nd in n for nd in ITER)``; None for any other call."""
    if not (isinstance(node.func, ast.Name) and node.func.id == "any" and len(node.args) == 1
            and isinstance(node.args[0], ast.GeneratorExp)):
        return None
    return _name_test(node.args[0])


def _owner_of_names(var: str, stmt: ast.stmt, scope: Scope) -> ast.expr | None:
    """``model`` when ``var`` is the name of ``for var, p in model.named_parameters()`` (a
    comprehension of the statement or a loop around it)."""
    gens = [g for n in walk(stmt) if isinstance(n, (ast.ListComp, ast.GeneratorExp, ast.SetComp,
                                                     ast.DictComp)) for g in n.generators]
    for t, it in [*((g.target, g.iter) for g in gens),
                  *((lp.target, lp.iter) for lp in scope.loops_of(stmt)
                    if isinstance(lp, (ast.For, ast.AsyncFor)))]:  # a `while` has no target
        if isinstance(t, ast.Tuple) and len(t.elts) == 2 and isinstance(t.elts[0], ast.Name) \
                and t.elts[0].id == var and isinstance(it, ast.Call) \
                and isinstance(it.func, ast.Attribute) and it.func.attr == "named_parameters":
            return it.func.value
    return None


def _no_decay_dict(d: ast.AST) -> bool:
    return isinstance(d, ast.Dict) and any(
        isinstance(k, ast.Constant) and k.value == "weight_decay" and isinstance(v, ast.Constant)
        and v.value == 0 for k, v in zip(d.keys, d.values))


def _exempts(test: ast.Call, stmt: ast.stmt, scope: Scope) -> bool:
    """Whether the parameters the test picks go to a group with ``"weight_decay": 0``: the
    test sits in that group's dict, or in the value of a name that such a dict's ``"params"``
    holds later."""
    if any(_no_decay_dict(d) and any(n is test for n in walk(d)) for d in walk(stmt)
           if isinstance(d, ast.Dict)):
        return True
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)):
        return False
    name = stmt.targets[0].id
    return any(isinstance(d, ast.Dict) and _no_decay_dict(d) and any(
        isinstance(k, ast.Constant) and k.value == "params" and dotted(v) == name
        for k, v in zip(d.keys, d.values)) for s in scope.stmts if s.lineno > stmt.lineno
        for d in walk(s))


def _model_names(owner: ast.expr, scope: Scope, line: int, ctx: Context
                 ) -> tuple[str, Names] | None:
    k = ctx.analysis.kind(owner, scope, line)
    if k is None or k.what != MODULE:
        return None
    if k.cls in ctx.analysis.classes:
        got = class_names(k.cls, ctx)  # type: ignore[arg-type]
    elif isinstance(k.node, ast.Call) and (k.cls or "").startswith("torch.nn."):
        got = call_names(k.node, ctx)
    else:
        return None
    return (k.cls.rpartition(".")[2], got) if got is not None else None  # type: ignore


class NoDecayNamesMissNorms(Rule):
    """A list of name fragments meant to exempt parameters from weight decay matches none of
    the model's normalisation weights: they are decayed.

    Why: `no_decay = ["bias", "LayerNorm.weight"]` tested with `any(nd in n for nd in no_decay)`
    over `model.named_parameters()` exempts what the names contain, and BERT's norm layers are
    named `LayerNorm`. A model whose norms are `self_attn_layer_norm`, `ln_f` or `norm1`
    matches no entry but `bias`: its norm weights are pulled toward zero by weight decay,
    silently (DeepSpeedExamples PR#755). The names are the ones the file's classes give
    (NOTE [parameter names]); the fix is a fragment the names contain, or grouping by module
    type (`isinstance(module, nn.LayerNorm)`).
    Known limits: the list is a literal (assigned or a default argument) of strings, tested
    with `any(x in name ...)` (or `name.lower()`) in a comprehension or loop over
    `model.named_parameters()` whose parameters go to a group with `"weight_decay": 0` (in
    its dict, or through a name its `"params"` holds), and the model's every parameter name is known from the file;
    reported when an entry matches no parameter name and some norm weight matches no entry.
    Also a name built for the parameter of a torch layer that the layer does not have
    (`no_decay.append(f"{mn}.gamma")` for `isinstance(m, nn.LayerNorm)` in a loop over
    `model.named_modules()`; torch layers name theirs `weight` and `bias`), appended to a list
    the function tests names against (`n not in no_decay`): it matches nothing, and the norm
    weights stay decayed.
    """

    code = "GT463"
    name = "no-decay-names-miss-norms"
    message = ("the entries {dead} of this no-decay list match no parameter name of `{cls}`, "
               "and its normalisation weights (`{norm}`...) match no entry: weight decay still "
               "applies to them; list a fragment their names contain")
    triggers = ("named_parameters",)
    examples = [
        Bad("""
            import torch
            from torch import nn
            class Block(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.ln_1 = nn.LayerNorm(8)
                    self.fc = nn.Linear(8, 8)
                def forward(self, x):
                    return self.fc(self.ln_1(x))
            model = Block()
            no_decay = ["bias", "LayerNorm.weight"]
            groups = [
                {"params": [p for n, p in model.named_parameters()
                            if not any(nd in n for nd in no_decay)], "weight_decay": 0.1},
                {"params": [p for n, p in model.named_parameters()
                            if any(nd in n for nd in no_decay)], "weight_decay": 0.0}]
            opt = torch.optim.AdamW(groups, lr=1e-3)
            """, at=(11, 11)),
        Bad("""
            import torch
            from torch import nn
            def groups(model):
                skip = []
                for mn, m in model.named_modules():
                    if isinstance(m, (nn.LayerNorm, nn.GroupNorm)):
                        skip.append(mn + ".scale")
                decay = [p for n, p in model.named_parameters() if n not in skip]
                rest = [p for n, p in model.named_parameters() if n in skip]
                return [{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}]
            """, at=(7, 12)),
        Good("""
            import torch
            from torch import nn
            def groups(model):
                skip = []
                for mn, m in model.named_modules():
                    if isinstance(m, (nn.LayerNorm, nn.GroupNorm)):
                        skip.append(mn + ".weight")
                decay = [p for n, p in model.named_parameters() if n not in skip]
                rest = [p for n, p in model.named_parameters() if n in skip]
                return [{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}]
            """),
        Good("""
            import torch
            from torch import nn
            class Block(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.LayerNorm = nn.LayerNorm(8)
                    self.fc = nn.Linear(8, 8)
                def forward(self, x):
                    return self.fc(self.LayerNorm(x))
            model = Block()
            no_decay = ["bias", "LayerNorm.weight"]
            groups = [
                {"params": [p for n, p in model.named_parameters()
                            if not any(nd in n for nd in no_decay)], "weight_decay": 0.1},
                {"params": [p for n, p in model.named_parameters()
                            if any(nd in n for nd in no_decay)], "weight_decay": 0.0}]
            opt = torch.optim.AdamW(groups, lr=1e-3)
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        got = any_name_test(node)
        if got is None:
            return
        var, it, lowered = got
        scope = ctx.scope()
        stmt = scope.statement_of(node)
        if stmt is None:
            return
        literal = name_list(it, scope, node.lineno)
        owner = _owner_of_names(var, stmt, scope)
        if literal is None or owner is None or not _exempts(node, stmt, scope):
            return
        found = _model_names(owner, scope, node.lineno, ctx)
        if found is None:
            return
        cls, names = found
        reported: set[int] = ctx.memo("gt463-reported", ctx.tree, set)
        if id(literal) in reported:
            return
        entries = _strings(literal) or []
        norm = [n for n, is_norm in names if is_norm and n.endswith("weight")]
        low = (lambda s: s.lower()) if lowered else (lambda s: s)
        unmatched = [n for n in norm if not any(e in low(n) for e in entries)]
        dead = [e for e in entries if not any(e in low(n) for n, _ in names)]
        if unmatched and dead:
            reported.add(id(literal))
            yield self.report(literal, ctx, dead=", ".join(f"`{e!r}`" for e in dead),
                              cls=cls, norm=unmatched[0])

    def visit_For(self, node: ast.For, ctx: Context) -> Iterator[Finding]:
        """``for mn, m in model.named_modules(): if isinstance(m, nn.LayerNorm):
        no_decay.append(f"{mn}.gamma")``: a name built for a torch layer's parameter that the
        layer does not have (it names ``weight``/``bias``), put in a list the function tests
        names against."""
        t, it = node.target, node.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
                and it.func.attr == "named_modules" and isinstance(t, ast.Tuple)
                and len(t.elts) == 2 and all(isinstance(x, ast.Name) for x in t.elts)):
            return
        mn, m = (x.id for x in t.elts)  # type: ignore[attr-defined]
        scope = ctx.scope()
        ifs = {id(s): s for s in scope.stmts if isinstance(s, ast.If)}
        for s in walk(node):
            got = _appended_name(s, mn)
            if got is None:
                continue
            holder, attr = got
            classes = [c for i, in_body in scope.branches.get(id(s), ()) if in_body
                       and i in ifs for c in _isinstance_classes(ifs[i].test, m, s, scope, ctx)]
            known = [own_names(c) for c in classes]
            if not classes or any(k is None for k in known) \
                    or any(attr in k for k in known):  # type: ignore[operator]
                continue
            if not _tested_against(holder, scope):
                continue
            cls = classes[0].rpartition(".")[2]
            yield self.report(s, ctx, dead=f"`.{attr}`", cls=cls, norm=f"{{{mn}}}.weight")
            return

def name_list(it: ast.expr, scope: Scope, line: int) -> ast.expr | None:
    """The string-list literal ``it`` is, names (assigned once before, or a default
    argument of the function)."""
    if _strings(it) is not None:
        return it
    if not isinstance(it, ast.Name):
        return None
    b = scope.binding_before(it.id, line)
    if b is None:
        d = argument_default(it.id, scope.node)
        return d if _strings(d) is not None else None
    v = getattr(b.stmt, "value", None)
    if isinstance(b.stmt, ast.Assign) and len(b.stmt.targets) == 1 \
            and dotted(b.stmt.targets[0]) == it.id and _strings(v) is not None:
        return v
    return None


def _appended_name(s: ast.AST, mn: str) -> tuple[str, str] | None:
    """``(holder, attr)`` for ``holder.append(f"{mn}.attr")`` (or ``mn + ".attr"``)."""
    if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
            and isinstance(s.value.func, ast.Attribute) and s.value.func.attr == "append"
            and len(s.value.args) == 1):
        return None
    holder, a = dotted(s.value.func.value), s.value.args[0]
    suffix: object = None
    if isinstance(a, ast.JoinedStr) and len(a.values) == 2 \
            and isinstance(a.values[0], ast.FormattedValue) \
            and isinstance(a.values[0].value, ast.Name) and a.values[0].value.id == mn \
            and isinstance(a.values[1], ast.Constant):
        suffix = a.values[1].value
    elif isinstance(a, ast.BinOp) and isinstance(a.op, ast.Add) \
            and isinstance(a.left, ast.Name) and a.left.id == mn \
            and isinstance(a.right, ast.Constant):
        suffix = a.right.value
    if holder is None or not isinstance(suffix, str) or not suffix.startswith(".") \
            or not suffix[1:].isidentifier():
        return None
    return holder, suffix[1:]


def _isinstance_classes(test: ast.expr, m: str, s: ast.AST, scope: Scope,
                        ctx: Context) -> list[str]:
    """The qualified classes ``isinstance(m, C)`` tests (``C`` a class, a tuple of classes, or
    the variable of a loop around ``s`` over a literal list of classes)."""
    if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Name)
            and test.func.id == "isinstance" and len(test.args) == 2
            and isinstance(test.args[0], ast.Name) and test.args[0].id == m):
        return []
    c = test.args[1]
    if isinstance(c, ast.Name):
        for lp in scope.loops_of(s):  # type: ignore[arg-type]
            if isinstance(lp, ast.For) and isinstance(lp.target, ast.Name) \
                    and lp.target.id == c.id and isinstance(lp.iter, (ast.List, ast.Tuple)):
                c = lp.iter
                break
    elts = c.elts if isinstance(c, (ast.List, ast.Tuple)) else [c]
    out = [ctx.qualified_name(e) for e in elts]
    return [q for q in out if q] if all(out) else ["?"]


def _tested_against(holder: str, scope: Scope) -> bool:
    """Whether the function tests a name's membership in ``holder`` (``n in no_decay``)."""
    return any(isinstance(n, ast.Compare) and any(isinstance(o, (ast.In, ast.NotIn))
                                                  for o in n.ops)
               and any(dotted(c) == holder for c in n.comparators)
               for st in scope.stmts for n in walk(st))
