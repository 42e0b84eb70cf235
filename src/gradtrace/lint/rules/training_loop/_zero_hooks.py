"""Gradient hooks that zero what they receive (NOTE [zeroing hook]).

# NOTE [zeroing hook]
``p.register_hook(h)`` replaces ``p``'s gradient by what ``h`` returns. A hook whose every
``return`` gives zeros (``torch.zeros_like(g)``, ``torch.zeros(g.shape)``, ``g * 0``,
``g.masked_fill(m, 0)`` keeps part) "freezes" the parameter against the loss, but an
optimizer's weight decay does not go through the gradient hook: ``SGD``/``Adam`` add
``weight_decay * p`` after it and ``AdamW`` shrinks ``p`` directly, so the parameter moves
anyway (pytorch#38581). The hook is a lambda, a function of the file, or an instance of a class
of the file with ``__call__``.
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

ZEROS = frozenset({"zeros", "zeros_like"})


def _zero(e: ast.AST | None, ctx: Context) -> bool:
    """``e`` is a tensor of zeros: ``torch.zeros(...)``, ``torch.zeros_like(g)``,
    ``g.new_zeros(...)``, ``g * 0``, ``g.mul(0)``, ``g.zero_()``, ``g.fill_(0)``,
    ``g.masked_fill(m, 0)`` (partly)."""
    def is0(x: ast.AST) -> bool:
        return isinstance(x, ast.Constant) and not isinstance(x.value, bool) and x.value == 0
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mult):
        return is0(e.left) or is0(e.right)
    if not isinstance(e, ast.Call):
        return False
    q = ctx.qualified_name(e.func) or ""
    if q.startswith("torch.") and q.rpartition(".")[2] in ZEROS:
        return True
    if isinstance(e.func, ast.Attribute):
        a = e.func.attr
        if a in ("new_zeros", "zero_", "zeros_like"):
            return True
        if a in ("mul", "mul_", "fill_") and e.args and is0(e.args[0]):
            return True
        if a in ("masked_fill", "masked_fill_") and len(e.args) == 2 and is0(e.args[1]):
            return True
    return False


def _returns_zero(fn: ast.AST, ctx: Context) -> bool:
    """Every ``return`` of ``fn`` (a lambda's body) gives zeros; at least one return."""
    if isinstance(fn, ast.Lambda):
        return _zero(fn.body, ctx)
    rets = [r for r in walk(fn) if isinstance(r, ast.Return)]
    return bool(rets) and all(_zero(r.value, ctx) for r in rets)


def _hook_body(h: ast.expr, ctx: Context, depth: int = 0) -> ast.AST | None:
    """The code a registered hook runs: a lambda, a function of the file by name, the
    ``__call__`` of a class of the file built in place (``Hook(name)``)."""
    if isinstance(h, ast.Lambda):
        return h
    if isinstance(h, ast.Name):
        fn = ctx.analysis.functions.get(h.id)
        if fn is not None or depth:
            return fn
        # `hook = Hook(name); p.register_hook(hook)`: every binding of the name in the file
        values = [n.value for n in walk(ctx.tree) if isinstance(n, ast.Assign)
                  and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
                  and n.targets[0].id == h.id]
        bodies = [_hook_body(v, ctx, 1) for v in values]
        return bodies[0] if bodies and all(
            b is not None and _returns_zero(b, ctx) for b in bodies) else None
    if isinstance(h, ast.Call) and isinstance(h.func, ast.Name):
        info = ctx.analysis.classes.get(h.func.id)
        return info.methods.get("__call__") if info is not None else None
    return None


def _owner(recv: ast.expr, loops: dict[str, str]) -> str | None:
    """The model whose parameter ``recv`` is: ``model.fc.weight`` -> ``model``; a loop
    variable over ``net.parameters()`` / ``net.named_parameters()`` -> ``net``."""
    if isinstance(recv, ast.Name):
        return loops.get(recv.id)
    d = dotted(recv)
    return d.split(".")[0] if d and "." in d else None


def _passed_as(name: str, at: ast.Call, ctx: Context) -> list[str]:
    """The models the file's calls hand to the top-level function holding ``at`` as its
    parameter ``name`` (``def freeze(module): ...`` called as ``freeze(model.encoder)`` ->
    ``model``)."""
    fn = next((f for f in ctx.analysis.functions.values()
               if any(x is at for x in walk(f))), None)
    if fn is None:
        return []
    names = [a.arg for a in fn.args.args]
    if name not in names:
        return []
    i = names.index(name)
    out = []
    for c in walk(ctx.tree):
        if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == fn.name:
            arg = c.args[i] if i < len(c.args) else next(
                (k.value for k in c.keywords if k.arg == name), None)
            if arg is not None and (d := dotted(arg)):
                out.append(d.split(".")[0])
    return out


def _param_loops(tree: ast.AST) -> dict[str, str]:
    """Loop variable -> the model it walks (``for n, p in model.named_parameters():``)."""
    out: dict[str, str] = {}
    for n in walk(tree):
        if isinstance(n, (ast.For, ast.AsyncFor)) and isinstance(n.iter, ast.Call) \
                and isinstance(n.iter.func, ast.Attribute) \
                and n.iter.func.attr in ("parameters", "named_parameters") \
                and (m := dotted(n.iter.func.value)):
            t = n.target.elts[-1] if isinstance(n.target, ast.Tuple) and n.target.elts \
                else n.target
            if isinstance(t, ast.Name):
                out[t.id] = m.split(".")[0]
    return out


def zeroing_hooks(ctx: Context) -> list[tuple[ast.Call, str]]:
    """(``register_hook`` call, model name) for each zeroing hook put on a parameter."""
    def make() -> list[tuple[ast.Call, str]]:
        loops = _param_loops(ctx.tree)
        out = []
        for n in walk(ctx.tree):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr == "register_hook" and len(n.args) == 1 \
                    and (m := _owner(n.func.value, loops)) is not None:
                body = _hook_body(n.args[0], ctx)
                if body is not None and _returns_zero(body, ctx):
                    out.append((n, m))
                    out.extend((n, a) for a in _passed_as(m, n, ctx))
        return out
    return ctx.memo("gt552-zero-hooks", ctx.tree, make)


def decayed_optimizers(ctx: Context, decay_of) -> Iterator[tuple[ast.Call, str, str]]:
    """(optimizer construction, model name, decay) for each ``torch.optim`` optimizer of the
    file built over ``<model>...parameters()`` with weight decay."""
    for n in walk(ctx.tree):
        if not (isinstance(n, ast.Call) and n.args and (ctx.qualified_name(n.func) or "")
                .startswith("torch.optim.")):
            continue
        p = n.args[0]
        if not (isinstance(p, ast.Call) and isinstance(p.func, ast.Attribute)
                and p.func.attr in ("parameters", "named_parameters")
                and (m := dotted(p.func.value))):
            continue
        decay = decay_of(n, ctx)
        if decay is not None:
            yield n, m.split(".")[0], decay
