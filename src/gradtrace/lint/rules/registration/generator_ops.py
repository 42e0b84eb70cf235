"""GT449: a `parameters()` generator used as a list: added, indexed or measured."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule

GENERATORS = frozenset({"parameters", "named_parameters", "buffers", "named_buffers",
                        "children", "named_children", "modules", "named_modules"})
# nn.Module's signatures of these methods: (most positional arguments, keyword names). A call
# that passes anything else is another class's method of the same name (psutil's
# `Process.children(recursive=True)` returns a list).
_SIGNATURES: dict[str, tuple[int, frozenset[str]]] = {
    "parameters": (1, frozenset({"recurse"})),
    "buffers": (1, frozenset({"recurse"})),
    "named_parameters": (3, frozenset({"prefix", "recurse", "remove_duplicate"})),
    "named_buffers": (3, frozenset({"prefix", "recurse", "remove_duplicate"})),
    "children": (0, frozenset()),
    "named_children": (0, frozenset()),
    "modules": (0, frozenset()),
    "named_modules": (3, frozenset({"memo", "prefix", "remove_duplicate"})),
}


def _generator_call(e: ast.AST, ctx: Context) -> ast.Call | None:
    """``e`` when it is ``<module>.parameters()`` (or another of nn.Module's generator
    methods)."""
    if not (isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute)
            and e.func.attr in GENERATORS):
        return None
    if e.func.attr in _own_methods(ctx):  # a class of the file defines its own `parameters`
        return None
    most, names = _SIGNATURES[e.func.attr]
    if len(e.args) > most or any(k.arg is not None and k.arg not in names for k in e.keywords):
        return None  # not nn.Module's method: its signature takes no such argument
    k = ctx.analysis.kind(e.func.value, None, e.lineno)
    if k is not None and not k.is_module:
        return None
    return e


def _own_methods(ctx: Context) -> frozenset[str]:
    """Generator method names that a class of the file defines itself (its own ``parameters``
    may return a list)."""
    def make() -> frozenset[str]:
        return frozenset(f.name for c in ast.walk(ctx.tree) if isinstance(c, ast.ClassDef)
                         for f in c.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                         and f.name in GENERATORS)
    return ctx.memo("gt449-own", ctx.tree, make)


class ParametersGeneratorAsList(Rule):
    """A `module.parameters()` generator is added to another, indexed, or given to `len()`.

    Why: `parameters()` (like `named_parameters()`, `buffers()`, `children()`, `modules()`)
    returns a one-shot generator, not a list. `a.parameters() + b.parameters()` raises
    `TypeError: unsupported operand type(s) for +: 'generator' and 'generator'` when the
    optimizer is built; `model.parameters()[0]` raises "'generator' object is not
    subscriptable" and `len(model.parameters())` "object of type 'generator' has no len()"
    (hdr-nerf's warm-up optimizer). To join several modules' parameters use
    `itertools.chain(a.parameters(), b.parameters())` or
    `list(a.parameters()) + list(b.parameters())`; make a list before indexing.
    Known limits: the generator call itself, or a local name bound to it once and used on a
    later statement of the same function.
    """

    code = "GT449"
    name = "parameters-generator-as-list"
    message = ("`{src}` is a one-shot generator, not a list: {how} raises TypeError; "
               "{remedy}")
    triggers = ("parameters", "buffers", "children", "modules")
    gate_statements = True
    examples = [
        Bad("""
            import torch
            opt = torch.optim.Adam(encoder.parameters() + decoder.parameters(), lr=1e-3)
            """, at=(2, 23)),
        Bad("""
            first = model.parameters()[0]
            """, at=(1, 8)),
        Good("""
            import itertools
            import torch
            opt = torch.optim.Adam(itertools.chain(encoder.parameters(), decoder.parameters()))
            both = list(encoder.parameters()) + list(decoder.parameters())
            first = next(model.parameters())
            """),
    ]

    def visit_BinOp(self, node: ast.BinOp, ctx: Context) -> Iterator[Finding]:
        if not isinstance(node.op, ast.Add):
            return
        inner = node.left
        while isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Add):
            if _generator_call(inner.left, ctx) or _generator_call(inner.right, ctx):
                return  # `a + b + c`: reported once, at the innermost sum that holds one
            inner = inner.left
        for side in (node.left, node.right):
            g = _generator_call(side, ctx)
            if g is not None:
                yield self.report(node, ctx, src=ctx.source(side)[:50],
                                  how="adding it with `+`",
                                  remedy="join with itertools.chain(...) or list(...) + list(...)")
                return

    def visit_Subscript(self, node: ast.Subscript, ctx: Context) -> Iterator[Finding]:
        if isinstance(node.ctx, ast.Load) and _generator_call(node.value, ctx) is not None:
            yield self.report(node, ctx, src=ctx.source(node.value)[:50],
                              how="indexing it", remedy="make a list first: "
                              f"list({ctx.source(node.value)[:40]})")

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if isinstance(node.func, ast.Name) and node.func.id == "len" and len(node.args) == 1 \
                and _generator_call(node.args[0], ctx) is not None:
            yield self.report(node, ctx, src=ctx.source(node.args[0])[:50],
                              how="`len()` of it", remedy="count with sum(1 for _ in ...) or "
                              "make a list first")

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> Iterator[Finding]:
        """``params = model.parameters()`` then ``params[0]`` / ``len(params)`` / ``params +
        ...`` on a later line (those lines hold no trigger word)."""
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name) \
                or _generator_call(node.value, ctx) is None:
            return
        name = node.targets[0].id
        scope = ctx.scope()
        if len(scope.bindings.get(name, ())) != 1:
            return
        for st in scope.stmts:
            if st.lineno <= (node.end_lineno or node.lineno) or hasattr(st, "body"):
                continue
            for n in walk(st):
                use = n.value if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load) \
                    else n.args[0] if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) \
                    and n.func.id == "len" and len(n.args) == 1 else None
                how = "indexing it" if isinstance(n, ast.Subscript) else "`len()` of it"
                if use is None and isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add):
                    use = next((x for x in (n.left, n.right) if isinstance(x, ast.Name)
                                and x.id == name), None)
                    how = "adding it with `+`"
                if isinstance(use, ast.Name) and use.id == name:
                    yield self.report(n, ctx, src=name, how=how, remedy="bind a list: "
                                      f"{name} = list({ctx.source(node.value)[:40]})")
                    return
