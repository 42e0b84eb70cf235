"""GT130: a residual updated by subtracting the straight-through output of a layer run on it."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.modules import ClassInfo
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule


def _detach_of(e: ast.AST) -> ast.AST | None:
    """``(q - x).detach()`` -> ``q - x``."""
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr == "detach" and not e.args:
        return e.func.value
    return None


def _straight_through(e: ast.AST, x: str) -> bool:
    """``x + (q - x).detach()`` (either order of the sum): equal to ``q`` in value, with the
    gradient of ``x`` (the identity)."""
    if not (isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add)):
        return False
    for a, b in ((e.left, e.right), (e.right, e.left)):
        inner = _detach_of(b)
        if dotted(a) == x and isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Sub) \
                and dotted(inner.right) == x:
            return True
    return False


def _st_forward(cls: ClassInfo, ctx: Context) -> int | None:
    """The line where the class's ``forward`` makes the straight-through value it returns
    (alone or first in a tuple) from its first input; None when it does not."""
    def make() -> int | None:
        fwd = cls.methods.get("forward")
        if fwd is None or len(fwd.args.args) < 2:
            return None
        x = fwd.args.args[1].arg
        st: dict[str, int] = {}
        for s in sorted((n for n in walk(fwd) if isinstance(n, ast.Assign)),
                        key=lambda n: n.lineno):
            if len(s.targets) == 1 \
                    and isinstance(s.targets[0], ast.Name):
                if _straight_through(s.value, x):
                    st[s.targets[0].id] = s.lineno
                elif s.targets[0].id in st:
                    st.pop(s.targets[0].id)  # rebound afterwards to something else
        for s in walk(fwd):
            if isinstance(s, ast.Return) and s.value is not None:
                v = s.value.elts[0] if isinstance(s.value, ast.Tuple) and s.value.elts \
                    else s.value
                if isinstance(v, ast.Name) and v.id in st:
                    return st[v.id]
                if _straight_through(v, x):
                    return s.lineno
        return None
    return ctx.memo("gt130-st-forward", cls.node, make)


def _layer_classes(call: ast.Call, fn: ast.AST, cls: ClassInfo | None, ctx: Context
                   ) -> list[ClassInfo]:
    """The module classes of the file a call ``layer(r)`` may run: ``self.q(r)``, or a loop
    variable over ``self.layers`` (``enumerate`` too), by the classes built in that
    attribute's value."""
    classes = ctx.analysis.classes
    f = call.func
    attr = None
    if isinstance(f, ast.Attribute) and dotted(f.value) == "self":
        attr = f.attr
    elif isinstance(f, ast.Name):
        for loop in walk(fn):
            if isinstance(loop, ast.For) and f.id in {n.id for n in walk(loop.target)
                                                      if isinstance(n, ast.Name)}:
                it = loop.iter
                if isinstance(it, ast.Call) and (dotted(it.func) or "") == "enumerate" \
                        and it.args:
                    it = it.args[0]
                name = dotted(it) or ""
                if name.startswith("self.") and name.count(".") == 1:
                    attr = name[5:]
    if attr is None or cls is None or attr not in cls.attrs or cls.attrs[attr].value is None:
        return []
    return [classes[n.func.id] for n in walk(cls.attrs[attr].value)  # type: ignore[union-attr]
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
            and n.func.id in classes and classes[n.func.id].is_module]


class ResidualMinusStraightThrough(Rule):
    """A residual is updated by subtracting the straight-through output of the layer it was
    just given: `q = layer(r)` (`q = r + (quantize - r).detach()` inside), `r = r - q`.

    Why: a straight-through output equals the quantized value, but its gradient with respect
    to the input is the identity. `r - q` then has a gradient of exactly zero with respect to
    `r`: every later stage (the next quantizer of a residual VQ, its commitment loss) sends no
    gradient back to the encoder, silently. Subtract the value without its straight-through
    path: `r = r - q.detach()` (or the quantized codes themselves).
    Known limits: the layer is `self.<attr>` or a loop over `self.<attr>`, built from a class
    of the file whose `forward` returns `x + (q - x).detach()` (alone or first) of its input.
    """

    code = "GT130"
    name = "residual-minus-straight-through"
    message = ("`{q}` is the straight-through output of `{layer}` run on `{r}` (its gradient "
               "with respect to `{r}` is the identity, line {line}): `{r} - {q}` has zero "
               "gradient, so nothing after it trains what made `{r}`; subtract `{q}.detach()`")
    triggers = ("detach",)
    gate_statements = True
    statement_triggers = (" - ", "-=")  # `r - q`, `r -= q`
    examples = [
        Bad("""
            import torch.nn as nn

            class VQ(nn.Module):
                def forward(self, x):
                    q = self.lookup(x)
                    q = x + (q - x).detach()
                    return q, self.loss(q, x)

            class ResidualVQ(nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.layers = nn.ModuleList([VQ() for _ in range(n)])

                def forward(self, x):
                    residual, out = x, 0.
                    for layer in self.layers:
                        q, loss = layer(residual)
                        residual = residual - q
                        out = out + q
                    return out
            """, at=(18, 12)),
        Good("""
            import torch.nn as nn

            class VQ(nn.Module):
                def forward(self, x):
                    q = self.lookup(x)
                    q = x + (q - x).detach()
                    return q, self.loss(q, x)

            class ResidualVQ(nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.layers = nn.ModuleList([VQ() for _ in range(n)])

                def forward(self, x):
                    residual, out = x, 0.
                    for layer in self.layers:
                        q, loss = layer(residual)
                        residual = residual - q.detach()
                        out = out + q
                    return out
            """),
    ]

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> Iterator[Finding]:
        yield from self._check(node, node.targets[0] if len(node.targets) == 1 else None,
                               node.value, ctx)

    def visit_AugAssign(self, node: ast.AugAssign, ctx: Context) -> Iterator[Finding]:
        if isinstance(node.op, ast.Sub):
            yield from self._check(node, node.target, ast.BinOp(
                left=node.target, op=ast.Sub(), right=node.value), ctx)

    def _check(self, node: ast.stmt, target: ast.AST | None, value: ast.AST, ctx: Context
               ) -> Iterator[Finding]:
        if not (isinstance(target, ast.Name) and isinstance(value, ast.BinOp)
                and isinstance(value.op, ast.Sub) and dotted(value.left) == target.id
                and isinstance(value.right, ast.Name)):
            return
        fn = ctx.function
        if fn is None:
            return
        r, q = target.id, value.right.id
        cls = ctx.analysis.class_of(fn)
        for s in walk(fn):
            if not (isinstance(s, ast.Assign) and len(s.targets) == 1
                    and isinstance(s.value, ast.Call) and s.lineno < node.lineno
                    and len(s.value.args) >= 1 and dotted(s.value.args[0]) == r):
                continue
            t = s.targets[0]
            first = t.elts[0] if isinstance(t, ast.Tuple) and t.elts else t
            if dotted(first) != q:
                continue
            for layer in _layer_classes(s.value, fn, cls, ctx):
                line = _st_forward(layer, ctx)
                if line is not None:
                    yield self.report(node, ctx, related=(Related(
                        ctx.path, line, "the straight-through output"),),
                        q=q, r=r, layer=ctx.source(s.value.func), line=line)
                    return
