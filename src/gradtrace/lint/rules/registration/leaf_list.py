"""GT790: the optimizer is given a hand-written list of leaf tensors that leaves one out."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.grad_values import GRAD_FACTORIES
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule

GRADIENT_CALLS = frozenset({"torch.autograd.grad", "torch.autograd.backward"})


def _leaves(ctx: Context) -> dict[str, ast.stmt]:
    """Names bound once at the module level to a tensor factory given ``requires_grad=True``
    (``w1 = torch.empty((n, m), requires_grad=True)``): hand-made weights."""
    bound: dict[str, list[ast.stmt]] = {}
    for s in ctx.tree.body:
        if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            for t in targets:
                for n in walk(t):
                    if isinstance(n, ast.Name):
                        bound.setdefault(n.id, []).append(s)
    out = {}
    for name, stmts in bound.items():
        s = stmts[0]
        if len(stmts) == 1 and isinstance(s, ast.Assign) and len(s.targets) == 1 \
                and isinstance(s.targets[0], ast.Name) and isinstance(s.value, ast.Call) \
                and (ctx.qualified_name(s.value.func) or "") in GRAD_FACTORIES \
                and any(k.arg == "requires_grad" and isinstance(k.value, ast.Constant)
                        and k.value.value is True for k in s.value.keywords):
            out[name] = s
    return out


def _listed(call: ast.Call, owner: ast.AST, ctx: Context) -> tuple[ast.AST, list[str]] | None:
    """(the list literal, its names) an optimizer call is given as its parameters: the literal
    itself, or a name the same function binds once to one (``params = [w1, w2]``)."""
    arg = call.args[0] if call.args else next(
        (k.value for k in call.keywords if k.arg == "params"), None)
    if isinstance(arg, ast.Name):
        b = [x for x in ctx.scope(owner).bindings.get(arg.id, ())]
        arg = b[0].value if len(b) == 1 else None
    if not isinstance(arg, (ast.List, ast.Tuple)) or not arg.elts \
            or not all(isinstance(e, ast.Name) for e in arg.elts):
        return None
    return arg, [e.id for e in arg.elts]  # type: ignore[attr-defined]


def _given(e: ast.AST | None, owner: ast.AST, ctx: Context, depth: int = 0) -> set[str] | None:
    """Every name an optimizer's parameters argument holds, through names bound once (in the
    function or at the module level) to list literals and their ``+`` (``G_params +
    Q_params``); None when any part is not known (``model.parameters()``, param groups)."""
    if depth > 4 or e is None:
        return None
    if isinstance(e, (ast.List, ast.Tuple)):
        out: set[str] = set()
        for x in e.elts:
            got = _given(x, owner, ctx, depth + 1)
            if got is None:
                return None
            out |= got
        return out
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
        a, b = _given(e.left, owner, ctx, depth + 1), _given(e.right, owner, ctx, depth + 1)
        return None if a is None or b is None else a | b
    if isinstance(e, ast.Name):
        for where in (owner, ctx.tree):
            b = ctx.scope(where).bindings.get(e.id, ())
            if len(b) == 1 and isinstance(b[0].value, (ast.List, ast.Tuple, ast.BinOp)):
                return _given(b[0].value, where, ctx, depth + 1)
            if b:
                break
        return {e.id}
    return None


def _managed(name: str, ctx: Context) -> bool:
    """The file updates ``name`` itself or asks for its gradient on purpose: a write into it
    (``w -= lr * w.grad``, ``w.data.add_(...)``, ``w.grad = ...``) outside ``torch.nn.init``,
    or ``torch.autograd.grad(..., w)``."""
    for n in walk(ctx.tree):
        if isinstance(n, (ast.AugAssign, ast.Assign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for t in targets:
                root = t
                while isinstance(root, (ast.Attribute, ast.Subscript)):
                    root = root.value
                if isinstance(root, ast.Name) and root.id == name and root is not t:
                    return True  # `w.data[...] = `, `w.grad = `
                if isinstance(n, ast.AugAssign) and isinstance(t, ast.Name) and t.id == name:
                    return True
        elif isinstance(n, ast.Call):
            q = ctx.qualified_name(n.func) or ""
            if q in GRADIENT_CALLS and any(isinstance(x, ast.Name) and x.id == name
                                           for a in n.args[1:] for x in walk(a)):
                return True
            f = n.func
            if isinstance(f, ast.Attribute) and f.attr.endswith("_") \
                    and not q.startswith("torch.nn.init."):
                root = f.value
                while isinstance(root, (ast.Attribute, ast.Subscript)):
                    root = root.value
                if isinstance(root, ast.Name) and root.id == name and f.attr != "requires_grad_":
                    return True
    return False


class LeafLeftOutOfOptimizerList(Rule):
    """The optimizer is given a hand-written list of weights made with `requires_grad=True`
    (`Adam([w1, w2])`), and another weight made the same way, which the model's functions
    use, is not in it.

    Why: a tensor made with `requires_grad=True` gets a `.grad` at every `backward()`, but
    only the tensors an optimizer holds are changed by `step()`: the one left out of the list
    keeps its initial value for the whole training, silently (spytorch's recurrent SNN
    tutorial trained `w1` and `w2` with `params = [w1, w2]`, `v1` never moved: verified on
    torch 2.13). Add it to the list.
    Known limits: the weights must be bound once at the module level with `requires_grad=True`
    in a tensor factory, and the list must be a literal of names (given directly or bound once
    to a name in the optimizer's function); a weight the file updates by hand, writes through
    `.data`/`.grad`, or differentiates with `torch.autograd.grad` is left alone.
    """

    code = "GT790"
    name = "leaf-left-out-of-optimizer-list"
    message = ("`{leaf}` is made with `requires_grad=True` (line {line}) like `{given}` and "
               "`{fn}` uses it, but this list given to `{opt}` leaves it out: it gets a "
               "`.grad` at every backward and `step()` never changes it")
    triggers = ("requires_grad",)
    examples = [
        Bad("""
            import torch

            w1 = torch.randn(4, 8, requires_grad=True)
            v1 = torch.randn(8, 8, requires_grad=True)
            w2 = torch.randn(8, 2, requires_grad=True)

            def run(x):
                h = torch.tanh(x @ w1)
                h = torch.tanh(h @ v1)
                return h @ w2

            def train(batches):
                opt = torch.optim.Adam([w1, w2], lr=1e-2)
                for x, y in batches:
                    loss = ((run(x) - y) ** 2).mean()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
            """, at=(13, 27)),
        Good("""
            import torch

            w1 = torch.randn(4, 8, requires_grad=True)
            v1 = torch.randn(8, 8, requires_grad=True)
            w2 = torch.randn(8, 2, requires_grad=True)
            delta = torch.zeros(4, requires_grad=True)

            def run(x):
                return torch.tanh(torch.tanh((x + delta) @ w1) @ v1) @ w2

            def train(batches):
                opt = torch.optim.Adam([w1, v1, w2], lr=1e-2)
                for x, y in batches:
                    loss = ((run(x) - y) ** 2).mean()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    with torch.no_grad():
                        delta += 0.01 * delta.grad.sign()
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        leaves = _leaves(ctx)
        if len(leaves) < 2:
            return
        lists = []
        given: set[str] = set()
        for owner in [ctx.tree, *(f for f in walk(ctx.tree) if isinstance(f, FUNCTION_TYPES))]:
            for n in (walk(owner) if owner is not ctx.tree else
                      (x for s in ctx.tree.body if not isinstance(s, (*FUNCTION_TYPES, ast.ClassDef))
                       for x in walk(s))):
                if not isinstance(n, ast.Call):
                    continue
                q = ctx.qualified_name(n.func) or ""
                last = q.rpartition(".")[2]
                if not q.startswith("torch.optim.") or "lr_scheduler" in q \
                        or not last[:1].isupper():
                    continue
                held = _given(n.args[0] if n.args else next(
                    (k.value for k in n.keywords if k.arg == "params"), None), owner, ctx)
                if held is None:
                    return  # an optimizer over something else too: not a hand-made list
                given |= held
                got = _listed(n, owner, ctx)
                if got is not None and any(x in leaves for x in got[1]):
                    lists.append((n, got[0], got[1], q))
        if not lists:
            return
        for leaf, made in leaves.items():
            if leaf in given or _managed(leaf, ctx):
                continue
            user = next((f for f in walk(ctx.tree) if isinstance(f, FUNCTION_TYPES) and any(
                isinstance(x, ast.Name) and x.id == leaf and isinstance(x.ctx, ast.Load)
                for x in walk(f))), None)
            if user is None:
                continue
            call, lit, names, q = lists[0]
            yield self.report(lit, ctx, related=(Related(
                ctx.path, made.lineno, f"`{leaf}` is made here", ctx.column(made)),),
                leaf=leaf, line=made.lineno, given="`, `".join(n for n in names if n in leaves),
                fn=user.name, opt=q.rpartition(".")[2])
