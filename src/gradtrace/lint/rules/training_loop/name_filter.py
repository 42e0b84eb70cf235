"""GT560: a filter on parameter names takes out of the optimizer a layer whose output the model
uses.

# NOTE [used layer filtered out]
``[n for n in model.named_parameters() if "pooler" not in n[0]]`` keeps every parameter whose
name does not hold ``"pooler"``. The names are the attribute paths of the model's classes
(``bert.pooler.dense.weight``): when a class of the file reached from the model's class through
its ``__init__`` attributes binds a learnable layer to exactly that attribute name, the filter
takes that layer out. It is harmless when the layer never gets a gradient (the head drops its
output: ``sequence_output, _ = self.bert(ids)``, NOTE [unused layers]); it is a bug when every
class on the way runs it in ``forward`` and no class on the way drops its output: the layer gets
gradients and the optimizer, built from the filtered list, never changes it. A file that
freezes anything (``requires_grad = False``) is left alone.
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.modules import ClassInfo
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.leaf._tensors import is_optimizer_call
from gradtrace.lint.rules.registration._unused import (
    _learnable, forward_returns, output_layers, tuple_call,
)

COMPS = (ast.ListComp, ast.GeneratorExp, ast.SetComp)


def _word_excluded(comp: ast.AST) -> list[str]:
    """``"w" not in n`` / ``"w" not in n[0]`` conditions of a comprehension over names."""
    out = []
    for g in getattr(comp, "generators", ()):
        for c in g.ifs:
            for n in walk(c):
                if isinstance(n, ast.Compare) and len(n.ops) == 1 \
                        and isinstance(n.ops[0], ast.NotIn) and isinstance(n.left, ast.Constant) \
                        and isinstance(n.left.value, str) and n.left.value.isidentifier():
                    out.append(n.left.value)
    return out


def _named_source(comp: ast.AST, scope, line: int) -> ast.expr | None:  # type: ignore[no-untyped-def]
    """``model`` for a comprehension over ``model.named_parameters()`` (or a name bound to
    ``list(model.named_parameters())``)."""
    it = comp.generators[0].iter  # type: ignore[attr-defined]
    if isinstance(it, ast.Name):
        b = scope.binding_before(it.id, line)
        it = b.value if b is not None else None
    if isinstance(it, ast.Call) and dotted(it.func) in ("list", "tuple") and len(it.args) == 1:
        it = it.args[0]
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) \
            and it.func.attr == "named_parameters":
        return it.func.value
    return None


def _path_to(cls: ClassInfo, word: str, ctx: Context, depth: int = 0
             ) -> list[tuple[ClassInfo, str]] | None:
    """The chain of (class, attribute) from ``cls`` down to a learnable layer bound to the
    attribute ``word``, through module classes of the file (first found, at most 4 deep)."""
    if depth > 4:
        return None
    info = cls.init_attrs.get(word)
    if info is not None and _learnable(info.value, ctx):
        return [(cls, word)]
    for a, i in cls.init_attrs.items():
        v = i.value
        sub = ctx.analysis.classes.get(v.func.id) if isinstance(v, ast.Call) and isinstance(
            v.func, ast.Name) else None
        if sub is not None and sub.is_module and sub is not cls:
            rest = _path_to(sub, word, ctx, depth + 1)
            if rest is not None:
                return [(cls, a), *rest]
    return None


def _runs_it(chain: list[tuple[ClassInfo, str]], ctx: Context) -> bool:
    """Every class on the way runs the next attribute in ``forward``, and one that unpacks its
    outputs (``_, pooled = self.bert(ids)``) reads an output the layer makes and drops none
    that it makes (NOTE [unused layers])."""
    for i, (c, a) in enumerate(chain):
        if a not in c.forward_uses:
            return False
        if i + 1 == len(chain):
            break
        fwd = c.methods.get("forward")
        if fwd is None:
            return False
        loads = {n.id for n in walk(fwd) if isinstance(n, ast.Name)
                 and isinstance(n.ctx, ast.Load)}
        for st in ctx.scope(fwd).stmts:
            if not (tuple_call(st) and dotted(st.value.func) == f"self.{a}"):  # type: ignore
                continue
            made = [_element_layers(chain, i + 1, j, ctx)
                    for j in range(len(st.targets[0].elts))]  # type: ignore[attr-defined]
            if any(m is None for m in made):
                return False
            word = chain[-1][1]
            kept = [j for j, t in enumerate(st.targets[0].elts)  # type: ignore[attr-defined]
                    if not t.id.startswith("_") and t.id in loads]
            if not any(word in made[j] for j in kept) or any(  # type: ignore[operator]
                    word in made[j] for j in range(len(made)) if j not in kept):  # type: ignore
                return False
    return True


def _element_layers(chain: list[tuple[ClassInfo, str]], m: int, j: int, ctx: Context
                    ) -> set[str] | None:
    """The learnable attributes of the last class of ``chain`` that output ``j`` of
    ``chain[m]``'s class's ``forward`` is made from, through forwards that return their
    next module's call as it is (``return self.mixer(x)``). None: unknown."""
    c, a = chain[m]
    fwd = c.methods.get("forward")
    if fwd is None:
        return None
    rets = [r for r in walk(fwd) if isinstance(r, ast.Return) and r.value is not None]
    if m + 1 < len(chain) and rets and all(
            isinstance(r.value, ast.Call) and dotted(r.value.func) == f"self.{a}" for r in rets):
        return _element_layers(chain, m + 1, j, ctx)
    if m + 1 < len(chain):
        return None
    tuples = forward_returns(fwd, len(rets[0].value.elts)) if rets and isinstance(
        rets[0].value, ast.Tuple) else None
    if not tuples or j >= len(tuples[0].elts):
        return None
    return set().union(*(output_layers(t.elts[j], fwd, t.lineno, c, ctx) for t in tuples))


def _reaches_optimizer(name: str, scope, stmt: ast.stmt, ctx: Context) -> ast.Call | None:  # type: ignore[no-untyped-def]
    """The optimizer call built from ``name`` (directly, or through one list or dict of
    parameter groups bound from it)."""
    names = {name}
    for s in scope.stmts:
        if s.lineno <= stmt.lineno:
            continue
        reads = {n.id for n in walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        if not reads & names:
            continue
        for n in walk(s):
            if isinstance(n, ast.Call) and is_optimizer_call(n, ctx):
                return n
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
            names.add(s.targets[0].id)
    return None


class UsedLayerFilteredFromOptimizer(Rule):
    """A filter on parameter names takes out of the optimizer a layer the model runs and uses.

    Why: `[n for n in model.named_parameters() if "pooler" not in n[0]]` drops every
    parameter under an attribute named `pooler`; the comment copied with it ("the pooler is
    not used") holds for a head that drops the pooled output, not for one that classifies it
    (BERT's multiple-choice head): the pooler gets gradients at every step and the optimizer
    never changes it (verified on torch 2.13). Keep it in the optimizer, or drop it only
    where the head does not read its output (NOTE [used layer filtered out]).
    Known limits: the model must be an instance of a class of the file, and the layer an
    attribute of a module class of the file reached through `__init__` attributes.
    """

    code = "GT560"
    needs_step = True  # NOTE [step files]
    name = "used-layer-filtered-from-optimizer"
    message = ("the filter `'{word}' not in ...` takes `{path}` out of `{opt}`, but the model "
               "runs it and uses its output: it gets gradients and never changes")
    triggers = ("named_parameters",)
    examples = [
        Bad("""
            import torch
            from torch import nn
            class Body(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.enc = nn.Linear(8, 8)
                    self.pool = nn.Linear(8, 8)
                def forward(self, x):
                    h = self.enc(x)
                    return h, self.pool(h.mean(1))
            class Head(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = Body()
                    self.out = nn.Linear(8, 1)
                def forward(self, x):
                    _, pooled = self.body(x)
                    return self.out(pooled)
            model = Head()
            named = [n for n in model.named_parameters() if "pool" not in n[0]]
            opt = torch.optim.AdamW([p for _, p in named], lr=1e-3)
            """, at=(20, 0)),
        Good("""
            import torch
            from torch import nn
            class Body(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.enc = nn.Linear(8, 8)
                    self.pool = nn.Linear(8, 8)
                def forward(self, x):
                    h = self.enc(x)
                    return h, self.pool(h.mean(1))
            class Head(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = Body()
                    self.out = nn.Linear(8, 1)
                def forward(self, x):
                    seq, _ = self.body(x)
                    return self.out(seq)
            model = Head()
            named = [n for n in model.named_parameters() if "pool" not in n[0]]
            opt = torch.optim.AdamW([p for _, p in named], lr=1e-3)
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        if not ctx.mentions("optim") or ctx.mentions("requires_grad = False") \
                or ctx.mentions("requires_grad_(False)"):
            return
        for fn in [ctx.tree, *ctx.analysis.functions.values()]:
            yield from self._scan(fn, ctx)

    def _scan(self, fn: ast.AST, ctx: Context) -> Iterator[Finding]:
        scope = ctx.scope(fn)
        for st in scope.stmts:
            if not (isinstance(st, ast.Assign) and len(st.targets) == 1
                    and isinstance(st.targets[0], ast.Name) and isinstance(st.value, COMPS)):
                continue
            words = _word_excluded(st.value)
            src = _named_source(st.value, scope, st.lineno) if words else None
            k = ctx.analysis.kind(src, scope, st.lineno) if src is not None else None
            cls = ctx.analysis.classes.get(k.cls) if k is not None and k.cls else None
            if cls is None or not cls.is_module:
                continue
            for w in words:
                chain = _path_to(cls, w, ctx)
                if chain is None or not _runs_it(chain, ctx):
                    continue
                opt = _reaches_optimizer(st.targets[0].id, scope, st, ctx)
                if opt is None:
                    continue
                path = ".".join(a for _, a in chain)
                yield self.report(st, ctx, related=[Related(
                    ctx.path, opt.lineno, "the optimizer is built from the filtered list",
                    ctx.column(opt))], word=w, path=f"{dotted(src)}.{path}",
                    opt=dotted(opt.func) or "the optimizer")
                break
