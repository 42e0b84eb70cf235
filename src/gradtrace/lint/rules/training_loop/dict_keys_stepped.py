"""GT539: a loop meant to step the optimizers held in a dict iterates the dict itself, which
yields its keys (strings), so no optimizer is reached."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.cuts import self_assignments
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule

_CALLS = ("step", "zero_grad")


def _string_keyed(v: ast.expr | None) -> bool:
    """A dict display whose keys are all string constants (``{"G": opt_g}``,
    ``dict(G=opt_g)``)."""
    if isinstance(v, ast.Dict):
        return bool(v.keys) and all(isinstance(k, ast.Constant) and isinstance(k.value, str)
                                    for k in v.keys)
    return (isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "dict"
            and not v.args and bool(v.keywords) and all(k.arg for k in v.keywords))


def _dict_value(it: ast.expr, at: int, ctx: Context) -> ast.expr | None:
    """The string-keyed dict display ``it`` (a name, or ``self.<attr>``) holds at line
    ``at``; None when any of its values may be something else."""
    name = dotted(it) if isinstance(it, (ast.Name, ast.Attribute)) else None
    if name is None:
        return None
    if isinstance(it, ast.Name):
        scope = ctx.scope()
        if name in scope.bindings or ctx.function is None:
            b = scope.binding_before(name, at)
            return b.value if b is not None and _string_keyed(b.value) else None
        bs = ctx.scope(ctx.tree).bindings.get(name) or []  # a global: bound once in the file
        return bs[0].value if len(bs) == 1 and _string_keyed(bs[0].value) else None
    if name.count(".") != 1 or not name.startswith("self."):
        return None
    values = self_assignments(ctx.class_def, name, ctx)
    return values[0] if values and all(_string_keyed(v) for v in values) else None


def _stepped_through(var: str, body: list[ast.AST]) -> ast.Call | None:
    """The first ``<var>.step()`` / ``<var>[k].zero_grad()`` in ``body``: the loop variable
    used as the optimizer (or as a container of them); None when ``var`` is rebound there."""
    hit = None
    for root in body:
        for n in ast.walk(root):
            if isinstance(n, ast.Name) and n.id == var and isinstance(n.ctx, ast.Store):
                return None
            if hit is None and isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr in _CALLS:
                recv = n.func.value
                if isinstance(recv, ast.Subscript):
                    recv = recv.value
                if isinstance(recv, ast.Name) and recv.id == var:
                    hit = n
    return hit


def _loops_over(it: ast.expr, ctx: Context) -> list[ast.Call]:
    """The ``.step()`` / ``.zero_grad()`` calls made through the variable of every loop or
    comprehension over ``it`` in the enclosing class (else function, else module)."""
    where = ctx.class_def or ctx.function or ctx.tree
    spelled = dotted(it)
    out = []
    for n in ast.walk(where):
        if isinstance(n, ast.For) and isinstance(n.target, ast.Name):
            gens = [(n.iter, n.target.id, n.body)]
        elif isinstance(n, (ast.ListComp, ast.SetComp, ast.GeneratorExp)) \
                and len(n.generators) == 1 and isinstance(n.generators[0].target, ast.Name):
            g = n.generators[0]
            gens = [(g.iter, g.target.id, [n.elt])]  # type: ignore[list-item]
        else:
            continue
        for i, var, body in gens:
            c = _stepped_through(var, body) if dotted(i) == spelled else None
            if c is not None:
                out.append(c)
    return out


class OptimizerDictIteratedForKeys(Rule):
    """A loop (or comprehension) meant to step or clear the optimizers held in a dict
    iterates the dict itself, which yields its keys: the strings, never the optimizers.

    `for opt in self.optims: opt.step()` raises AttributeError on a string, but the
    guarded form `[o[k].step() for o in self.optims if k in o]` runs without error: `k in
    o` is a substring test on the key string, False unless the key happens to contain `k`
    (then `o[k]` raises TypeError), so no optimizer ever steps and the weights never change
    while the losses are backpropagated. Iterate `.values()` (or
    `.items()`). Reported when the dict is a display (or `dict(...)` of keywords) whose keys
    are all strings, bound to a name of the function or to `self.<attr>` (every assignment
    in the class a display of that kind), and the loop variable itself (or its item) is
    the receiver of `.step()` or `.zero_grad()`.
    Known limits: a dict built key by key, or returned by a function, is not followed.
    """

    code = "GT539"
    name = "optimizer-dict-iterated-for-keys"
    message = ("iterating `{dict}` (a dict, line {line}) gives its keys, the strings {keys}, not "
               "the optimizers it holds: `{call}` never reaches an optimizer{guard}; iterate "
               "`{dict}.values()`")
    triggers = _CALLS
    examples = [
        Bad("""
            import torch

            class Trainer:
                def __init__(self, gen, disc):
                    self.optims = {"gen": {"opt": torch.optim.Adam(gen.parameters())},
                                   "disc": {"opt": torch.optim.Adam(disc.parameters())}}

                def step(self, loss, part):
                    loss.backward()
                    [optim[part].step() for optim in self.optims if part in optim]
            """, at=(10, 8)),
        Good("""
            import torch

            class Trainer:
                def __init__(self, gen, disc):
                    self.optims = {"gen": {"opt": torch.optim.Adam(gen.parameters())},
                                   "disc": {"opt": torch.optim.Adam(disc.parameters())}}

                def step(self, loss, part):
                    loss.backward()
                    [optim[part].step() for optim in self.optims.values() if part in optim]
            """),
        Good("""
            import torch

            def step_all(gen, disc, loss):
                optims = {"gen": torch.optim.Adam(gen.parameters()),
                          "disc": torch.optim.Adam(disc.parameters())}
                loss.backward()
                for name in optims:
                    optims[name].step()
            """),
    ]

    def visit_For(self, node: ast.For, ctx: Context) -> Iterator[Finding]:
        if isinstance(node.target, ast.Name):
            yield from self._check(node, node.iter, node.target.id, node.body, "", ctx)

    def visit_ListComp(self, node: ast.ListComp, ctx: Context) -> Iterator[Finding]:
        yield from self._comprehension(node, [node.elt], ctx)

    visit_SetComp = visit_ListComp

    def visit_GeneratorExp(self, node: ast.GeneratorExp, ctx: Context) -> Iterator[Finding]:
        yield from self._comprehension(node, [node.elt], ctx)

    def _comprehension(self, node: ast.AST, elts: list[ast.AST],
                       ctx: Context) -> Iterator[Finding]:
        gens = node.generators  # type: ignore[attr-defined]
        if len(gens) != 1 or not isinstance(gens[0].target, ast.Name):
            return
        g = gens[0]
        guard = ""
        if g.ifs:
            guard = (" (the filter tests the key string: it usually lets nothing through, and "
                     "nothing raises)")
        yield from self._check(node, g.iter, g.target.id, elts, guard, ctx)

    def _check(self, node: ast.AST, it: ast.expr, var: str, body: list[ast.AST], guard: str,
               ctx: Context) -> Iterator[Finding]:
        call = _stepped_through(var, body)
        if call is None:
            return
        d = _dict_value(it, node.lineno, ctx)
        if d is None:
            return
        others = [c for c in _loops_over(it, ctx) if c is not call]
        if call.func.attr == "zero_grad" and any(  # type: ignore[attr-defined]
                c.func.attr == "step" for c in others):  # type: ignore[attr-defined]
            return  # told with the step's finding: that loop is why nothing trains
        related = [Related(ctx.path, d.lineno, "the dict is built here", ctx.column(d))]
        related += [Related(ctx.path, c.lineno, "the same loop shape, with the same keys",
                            ctx.column(c)) for c in others]
        keys = [k.value for k in d.keys] if isinstance(d, ast.Dict) \
            else [k.arg for k in d.keywords]  # type: ignore[attr-defined]
        shown = ", ".join(f'"{k}"' for k in keys[:3]) + (", ..." if len(keys) > 3 else "")
        yield self.report(node, ctx, related=related,
                          dict=ctx.source(it), line=d.lineno, keys=shown,
                          call=ctx.source(call), guard=guard)
