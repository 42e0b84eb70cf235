"""GT401's fills through a local of ``__init__`` bound once to a layer (``conv_j =
nn.Conv1d(...)``; ``self.convs.append(conv_j)``): the call that made it decides."""
from __future__ import annotations

import ast

from gradtrace.lint.context import Context
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.leaf._tensors import is_parameter_call
from gradtrace.lint.rules.registration._modules import statements


# `Module` methods that return the module itself (the layer moved or cast in place)
MOVES = frozenset({"to", "cuda", "cpu", "float", "double", "half", "bfloat16"})


def bound_once(v: ast.AST, fill: ast.stmt, init: ast.FunctionDef | None, ctx: Context
                ) -> ast.AST:
    """The value a fill hands over when it is a local of ``__init__`` bound there once to a
    torch layer or a Parameter (``conv_j = nn.Conv1d(...)``; ``self.convs.append(conv_j)``,
    murenn's MuReNNDirect): the call that made it; else ``v`` itself (a parameter of
    ``__init__``, a loop target or a name bound twice may hold anything; a class of the file
    may only wrap modules registered elsewhere: imitation's ``PreferenceModel(member)`` around
    the members of an ensemble the holder already stores)."""
    if not isinstance(v, ast.Name) or init is None \
            or not init.lineno <= fill.lineno <= (init.end_lineno or 0):
        return v
    a = init.args
    if v.id in {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if x}:
        return v
    stores = [n for n in walk(init) if isinstance(n, ast.Name) and n.id == v.id
              and isinstance(n.ctx, (ast.Store, ast.Del))]
    binds = [n for n in statements(init) if isinstance(n, ast.Assign) and len(n.targets) == 1
             and isinstance(n.targets[0], ast.Name) and n.targets[0].id == v.id]
    if len(stores) != 1 or len(binds) != 1 or not isinstance(binds[0].value, ast.Call) \
            or binds[0].lineno > fill.lineno:
        return v
    if handed_elsewhere(init, v.id, fill):
        return v
    made = built = binds[0].value
    while isinstance(built.func, ast.Attribute) and built.func.attr in MOVES \
            and isinstance(built.func.value, ast.Call):
        built = built.func.value  # `nn.Embedding(...).to(device)`: `Module.to` returns itself
    q = ctx.call_name(built) or ""
    if built is not made:  # (a moved Parameter is a plain tensor: only a torch layer counts)
        return made if q.startswith("torch.nn.") and not is_parameter_call(built, ctx) else v
    return made if q.startswith("torch.nn.") or is_parameter_call(made, ctx) else v


def handed_elsewhere(init: ast.FunctionDef, name: str, fill: ast.stmt) -> bool:
    """The local ``name`` is also handed to another call (``blk.attn.qkv = _LoRA_qkv(w_a,
    ...)``, SAMed) or stored elsewhere (``blk.proj = w``): the layer may be registered there,
    the list only a handle to it."""
    for n in walk(init):
        if isinstance(n, ast.Call) and not any(n is c for c in walk(fill)) and any(
                isinstance(a, ast.Name) and a.id == name
                for a in [*n.args, *(k.value for k in n.keywords)]):
            return True
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Name) and n.value.id == name:
            return True
    return False


def appended_once(e: ast.AST, init: ast.FunctionDef | None, ctx: Context) -> ast.AST:
    """:func:`bound_once` for an element ``e`` appended to a local list of ``__init__``
    (``conv_layer = nn.Sequential(...)``; ``convolutions.append(conv_layer)``; ``self.convs =
    list(convolutions)``): the statement holding ``e`` is its fill."""
    if not isinstance(e, ast.Name) or init is None:
        return e
    fill = next((s for s in statements(init) if isinstance(s, ast.Expr)
                 and any(n is e for n in walk(s))), None)
    return bound_once(e, fill, init, ctx) if fill is not None else e
