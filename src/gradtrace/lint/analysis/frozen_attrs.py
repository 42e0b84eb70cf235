"""Which submodules of a module class of the file every instance of it runs frozen.

# NOTE [frozen submodules]
``text_encoder.requires_grad_(False)`` (then LoRA layers attached), or ``for name, p in
model.named_parameters(): p.requires_grad = 'lora_' in name``: the weights of
``self.embeddings`` inside the class's ``forward`` then require no grad. :func:`frozen_attr`
answers for ``self.<attr>`` of a class when the file builds instances of it and freezes every
one of them (the freeze found by the instance's kind, read by the analysis layer):
- ``inst.requires_grad_(False)``, or ``for p in inst.parameters(): p.requires_grad = False``
  (``p.requires_grad_(False)``);
- ``for n, p in inst.named_parameters(): p.requires_grad = <test of n>`` whose test is false
  for the attribute's weight (``'<attr>.weight'``): a constant, ``'s' in n``, ``n.startswith``,
  ``n.endswith``, ``not``, ``and``, ``or``.
Nothing is known when the file also sets ``requires_grad`` to True anywhere but in that loop
(or in a method nothing runs: NOTE [uncalled methods]), or builds an instance it does not
freeze.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.analysis.uncalled import uncalled_nodes
from gradtrace.lint.nodes import function_scopes, scope_nodes

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


def frozen_attr(ctx: Context, cls: str, attr: str) -> ast.stmt | None:
    """The statement freezing ``self.<attr>`` of every instance of the module class ``cls``
    the file builds (NOTE [frozen submodules]); None when not known."""
    table = ctx.memo("frozen-instances", ctx.tree, lambda: _freezes(ctx))
    got = table.get(cls)
    if not got:
        return None
    built, freezes = got
    if built != len(freezes):
        return None
    found = None
    for stmt, test in freezes:
        if test is not None and _truth(test[1], test[0], attr + ".weight") is not False:
            return None
        found = found or stmt
    return found


def _freezes(ctx: Context) -> dict[str, tuple[int, list[tuple[ast.stmt, tuple | None]]]]:
    """class -> (instances the file builds, their freezes: (statement, (name var, test) of a
    named_parameters loop, or None for a whole freeze)); {} when something is unfrozen."""
    a = ctx.analysis
    out: dict[str, tuple[int, list]] = {}
    loop_sets: set[int] = set()
    for fn in function_scopes(ctx.tree):
        for n in scope_nodes(fn):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
                info = a.classes.get(n.func.id)
                if info is not None and info.is_module:
                    built, fr = out.get(info.name, (0, []))
                    out[info.name] = (built + 1, fr)
    if not out:
        return {}
    for fn in function_scopes(ctx.tree):
        for n in scope_nodes(fn):
            got = _freeze(n, fn, ctx, loop_sets)
            if got is not None:
                cls, stmt, test = got
                if cls in out:
                    out[cls][1].append((stmt, test))
    for n in ast.walk(ctx.tree):  # anything set back to True outside those loops
        if isinstance(n, ast.Assign) and id(n) not in loop_sets and any(
                isinstance(t, ast.Attribute) and t.attr == "requires_grad" for t in n.targets) \
                and not (isinstance(n.value, ast.Constant) and n.value.value is False) \
                or isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr == "requires_grad_" and not (
                    n.args and isinstance(n.args[0], ast.Constant) and n.args[0].value is False):
            if id(n) not in uncalled_nodes(ctx):  # NOTE [uncalled methods]
                return {}
    return out


def _freeze(n: ast.AST, fn: ast.AST, ctx: Context, loop_sets: set[int]
            ) -> tuple[str, ast.stmt, tuple | None] | None:
    a = ctx.analysis
    if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call):
        c = n.value
        if isinstance(c.func, ast.Attribute) and c.func.attr == "requires_grad_" and c.args \
                and isinstance(c.args[0], ast.Constant) and c.args[0].value is False:
            k = a.kind_in(c.func.value, fn, n.lineno)
            if k is not None and k.what == MODULE and k.cls in a.classes:
                return k.cls, n, None  # type: ignore[return-value]
        return None
    if not (isinstance(n, ast.For) and isinstance(n.iter, ast.Call)
            and isinstance(n.iter.func, ast.Attribute) and len(n.body) == 1):
        return None
    meth = n.iter.func.attr
    k = a.kind_in(n.iter.func.value, fn, n.lineno)
    if k is None or k.what != MODULE or k.cls not in a.classes:
        return None
    body = n.body[0]
    if meth == "parameters" and isinstance(n.target, ast.Name):
        p = n.target.id
        if _sets_flag(body, p) is False:
            return k.cls, n, None  # type: ignore[return-value]
        return None
    if meth == "named_parameters" and isinstance(n.target, ast.Tuple) \
            and len(n.target.elts) == 2 and all(isinstance(x, ast.Name) for x in n.target.elts):
        name, p = (x.id for x in n.target.elts)  # type: ignore[attr-defined]
        if isinstance(body, ast.Assign) and len(body.targets) == 1 \
                and isinstance(body.targets[0], ast.Attribute) \
                and body.targets[0].attr == "requires_grad" \
                and isinstance(body.targets[0].value, ast.Name) \
                and body.targets[0].value.id == p:
            loop_sets.add(id(body))
            return k.cls, n, (name, body.value)  # type: ignore[return-value]
    return None


def _sets_flag(s: ast.stmt, p: str) -> bool | None:
    """``p.requires_grad = <constant>`` / ``p.requires_grad_(<constant>)``: the constant."""
    if isinstance(s, ast.Assign) and len(s.targets) == 1 \
            and isinstance(s.targets[0], ast.Attribute) and s.targets[0].attr == "requires_grad" \
            and isinstance(s.targets[0].value, ast.Name) and s.targets[0].value.id == p \
            and isinstance(s.value, ast.Constant):
        return bool(s.value.value)
    if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) \
            and isinstance(s.value.func, ast.Attribute) and s.value.func.attr == "requires_grad_" \
            and isinstance(s.value.func.value, ast.Name) and s.value.func.value.id == p \
            and s.value.args and isinstance(s.value.args[0], ast.Constant):
        return bool(s.value.args[0].value)
    return None


def _truth(e: ast.expr, var: str, value: str) -> bool | None:
    """``e`` with the name ``var`` bound to the string ``value`` (None: not known)."""
    if isinstance(e, ast.Constant):
        return bool(e.value)
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
        t = _truth(e.operand, var, value)
        return None if t is None else not t
    if isinstance(e, ast.BoolOp):
        vals = [_truth(v, var, value) for v in e.values]
        want = isinstance(e.op, ast.Or)
        if want in vals:
            return want
        return None if None in vals else not want
    if isinstance(e, ast.Compare) and len(e.ops) == 1 and isinstance(e.left, ast.Constant) \
            and isinstance(e.left.value, str) and isinstance(e.comparators[0], ast.Name) \
            and e.comparators[0].id == var and isinstance(e.ops[0], (ast.In, ast.NotIn)):
        inside = e.left.value in value
        return inside if isinstance(e.ops[0], ast.In) else not inside
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and isinstance(e.func.value, ast.Name) and e.func.value.id == var \
            and e.func.attr in ("startswith", "endswith") and len(e.args) == 1 \
            and isinstance(e.args[0], ast.Constant) and isinstance(e.args[0].value, str):
        s = e.args[0].value
        return value.startswith(s) if e.func.attr == "startswith" else value.endswith(s)
    return None


def call_freezes(ctx: Context, call: ast.Call, name: str) -> bool:
    """``call`` turns off ``requires_grad`` on every parameter of the module it is given as
    ``name``: ``name.requires_grad_(False)``, or a function of the file or of another file of
    the project (NOTE [project index]) that loops over that argument's ``parameters()`` setting
    ``requires_grad`` to False, a constant or a parameter the call gives False (rome's
    ``nethook.set_requires_grad(False, layer)``, CycleGAN's ``set_requires_grad(nets,
    False)``, a loop over ``*models`` or a list argument included)."""
    f = call.func
    if isinstance(f, ast.Attribute) and f.attr == "requires_grad_" \
            and isinstance(f.value, ast.Name) and f.value.id == name:
        return bool(call.args) and _is_false(call.args[0])
    if not any(isinstance(a, ast.Name) and a.id == name
               for a in [*call.args, *(k.value for k in call.keywords)]):
        return False
    fn = ctx.analysis.functions.get(f.id) if isinstance(f, ast.Name) else None
    if fn is None:
        from gradtrace.lint.analysis.project import foreign_function
        fn = foreign_function(ctx, call)
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    values, holders = _bind(fn.args, call, name)
    if not holders:
        return False
    mods = set(holders)
    for n in ast.walk(fn):  # `for m in models:` over a holder: `m` holds the module too
        if isinstance(n, ast.For) and isinstance(n.iter, ast.Name) and n.iter.id in holders \
                and isinstance(n.target, ast.Name):
            mods.add(n.target.id)
    for n in ast.walk(fn):
        if not (isinstance(n, ast.For) and isinstance(n.target, ast.Name)
                and isinstance(n.iter, ast.Call) and isinstance(n.iter.func, ast.Attribute)
                and n.iter.func.attr == "parameters"
                and isinstance(n.iter.func.value, ast.Name) and n.iter.func.value.id in mods):
            continue
        p = n.target.id
        for s in ast.walk(n):
            v = None
            if isinstance(s, ast.Assign) and len(s.targets) == 1 \
                    and isinstance(s.targets[0], ast.Attribute) \
                    and s.targets[0].attr == "requires_grad" \
                    and isinstance(s.targets[0].value, ast.Name) and s.targets[0].value.id == p:
                v = s.value
            elif isinstance(s, ast.Call) and isinstance(s.func, ast.Attribute) \
                    and s.func.attr == "requires_grad_" and isinstance(s.func.value, ast.Name) \
                    and s.func.value.id == p and s.args:
                v = s.args[0]
            if v is not None:
                if isinstance(v, ast.Name) and v.id in values:
                    v = values[v.id]
                return _is_false(v)
    return False


def _bind(a: ast.arguments, call: ast.Call, name: str
          ) -> tuple[dict[str, ast.expr], set[str]]:
    """The call's arguments by parameter name (defaults filled in), and the parameters that
    receive ``name`` (the ``*args`` one when it lands there; a list or tuple literal holding
    it counts)."""
    pos = [*a.posonlyargs, *a.args]
    values: dict[str, ast.expr] = dict(zip([x.arg for x in pos[len(pos) - len(a.defaults):]],
                                           a.defaults))
    values.update({x.arg: d for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
    holders: set[str] = set()
    if any(isinstance(x, ast.Starred) for x in call.args):
        return values, holders

    def gets(e: ast.expr) -> bool:
        return isinstance(e, ast.Name) and e.id == name or isinstance(
            e, (ast.List, ast.Tuple)) and any(isinstance(x, ast.Name) and x.id == name
                                              for x in e.elts)
    for i, e in enumerate(call.args):
        if i < len(pos):
            values[pos[i].arg] = e
            if gets(e):
                holders.add(pos[i].arg)
        elif a.vararg is not None and gets(e):
            holders.add(a.vararg.arg)
    for k in call.keywords:
        if k.arg is not None:
            values[k.arg] = k.value
            if gets(k.value):
                holders.add(k.arg)
    return values, holders


def _is_false(e: ast.expr) -> bool:
    return isinstance(e, ast.Constant) and e.value is False
