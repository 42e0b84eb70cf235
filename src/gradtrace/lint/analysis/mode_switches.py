"""Mode-switch methods of a module class, and a freeze one mode leaves to the next.

# NOTE [mode switches]
``def set_first_phase(self): self.forward = self._pretrain_step`` and ``def
set_second_phase(self, freeze_encoder=True): self.forward = self._probe_step;
self.encoder.requires_grad_(not freeze_encoder)``: methods of one module class (``__init__``
aside) that each assign the same ``self.<attr>`` as a statement of their body switch the
object between modes. A switch that may freeze a submodule ``self.<sub>`` (its
``requires_grad_`` / a loop over its ``parameters()`` setting ``requires_grad`` to anything but
a constant True, with the argument of some call of the switch allowing False) leaves it
frozen for every other mode, unless that mode's switch sets it again. :func:`kept_freezes`
answers, per class of the file, (switch that does not restore, its assignment, the submodule,
the freezing statement) when the other mode uses the submodule (the method it installs, or
``forward`` when the mode value is not one of its methods, reads ``self.<sub>``) and the file
trains in that mode: a call of the switch on an instance of the class, then a ``backward()``
in the same function. A switch that sets ``requires_grad`` on anything, or hands
``self.<sub>`` to a call, counts as restoring (nothing is known of it).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, NamedTuple

from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import function_scopes, scope_nodes

if TYPE_CHECKING:
    from gradtrace.lint.analysis.modules import ClassInfo
    from gradtrace.lint.context import Context

DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


class KeptFreeze(NamedTuple):
    """A mode switch that leaves ``sub`` frozen by another switch's ``freeze``."""
    switch: ast.FunctionDef | ast.AsyncFunctionDef
    assign: ast.Assign
    sub: str
    freezer: ast.FunctionDef | ast.AsyncFunctionDef
    freeze: ast.stmt
    call: ast.Call  # the call of ``switch`` that trains in its mode


def kept_freezes(ctx: Context, info: ClassInfo) -> list[KeptFreeze]:
    """The kept freezes of the module class ``info`` (NOTE [mode switches])."""
    if not info.is_module:
        return []
    groups: dict[str, dict[str, ast.Assign]] = {}
    for m in info.methods.values():
        if m.name == "__init__":
            continue
        for s in m.body:
            if isinstance(s, ast.Assign) and len(s.targets) == 1:
                t = dotted(s.targets[0]) or ""
                if t.startswith("self.") and t.count(".") == 1:
                    groups.setdefault(t, {}).setdefault(m.name, s)
    groups = {k: v for k, v in groups.items() if len(v) > 1}
    if not groups:
        return []
    calls = _calls(ctx, info)
    out = []
    for switches in groups.values():
        for fname in switches:
            fm = info.methods[fname]
            for sub, freeze in _freezes(fm):
                if not any(_may_freeze(fm, freeze, c) for c, _fn in calls.get(fname, ())):
                    continue
                for aname, assign in switches.items():
                    am = info.methods[aname]
                    if aname == fname or _restores(am, info, set()) \
                            or not _uses(info, assign.value, sub):
                        continue
                    trained = next((c for c, fn in calls.get(aname, ()) if _trains_after(fn, c)),
                                   None)
                    if trained is not None:
                        out.append(KeptFreeze(am, assign, sub, fm, freeze, trained))
    return out


def _calls(ctx: Context, info: ClassInfo) -> dict[str, list[tuple[ast.Call, ast.AST]]]:
    """method name -> (call on an instance of the class, enclosing function or module)."""
    an = ctx.analysis
    out: dict[str, list[tuple[ast.Call, ast.AST]]] = {}
    for fn in function_scopes(ctx.tree):
        if an.class_of(fn) is info:
            continue
        for n in scope_nodes(fn):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr in info.methods and dotted(n.func.value):
                k = an.kind_in(n.func.value, fn, n.lineno)
                if k is not None and k.what == MODULE \
                        and (k.cls or "").rpartition(".")[2] == info.name:
                    out.setdefault(n.func.attr, []).append((n, fn))
    return out


def _freezes(m: ast.AST) -> list[tuple[str, ast.stmt]]:
    """(``self.<sub>``, statement) for each write of ``requires_grad`` on a submodule's
    weights in ``m`` that is not a constant True."""
    out = []
    for n in scope_nodes(m):
        if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call) \
                and isinstance(n.value.func, ast.Attribute) \
                and n.value.func.attr == "requires_grad_":
            sub = dotted(n.value.func.value) or ""
            v = n.value.args[0] if n.value.args else None
            if sub.startswith("self.") and sub.count(".") == 1 and v is not None and not _true(v):
                out.append((sub, n))
        elif isinstance(n, ast.For) and isinstance(n.iter, ast.Call) \
                and isinstance(n.iter.func, ast.Attribute) \
                and n.iter.func.attr == "parameters" and isinstance(n.target, ast.Name):
            sub = dotted(n.iter.func.value) or ""
            vs = [s.value for s in n.body if isinstance(s, ast.Assign) and len(s.targets) == 1
                  and isinstance(s.targets[0], ast.Attribute)
                  and s.targets[0].attr == "requires_grad"
                  and dotted(s.targets[0].value) == n.target.id]
            if sub.startswith("self.") and sub.count(".") == 1 and vs \
                    and not any(_true(v) for v in vs):
                out.append((sub, n))
    return out


def _true(v: ast.AST) -> bool:
    return isinstance(v, ast.Constant) and v.value is True


def _may_freeze(m: ast.FunctionDef | ast.AsyncFunctionDef, freeze: ast.stmt,
                call: ast.Call) -> bool:
    """Whether ``freeze`` may set False when ``m`` is called by ``call``: the value (and the
    tests of the ``if`` statements around it) read only the method's arguments and
    constants; unknown counts as may."""
    env = _bind(m, call)
    if isinstance(freeze, ast.Expr):
        v = freeze.value.args[0]  # type: ignore[attr-defined]
    else:
        v = next(s.value for s in freeze.body  # type: ignore[attr-defined]
                 if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Attribute)
                 and s.targets[0].attr == "requires_grad")
    if _eval(v, env) is True:
        return False
    for s in ast.walk(m):
        if isinstance(s, ast.If) and s.lineno < freeze.lineno <= (s.end_lineno or s.lineno):
            inside = any(freeze is b or freeze in ast.walk(b) for b in s.body)
            t = _eval(s.test, env)
            if t is not None and t is not inside:
                return False
    return True


def _bind(m: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call) -> dict[str, object]:
    args = [a.arg for a in (*m.args.posonlyargs, *m.args.args)][1:]
    env: dict[str, object] = {}
    defaults = m.args.defaults
    for a, d in zip(args[len(args) - len(defaults):], defaults):
        if isinstance(d, ast.Constant):
            env[a] = d.value
    for a, v in zip(args, call.args):
        env[a] = v.value if isinstance(v, ast.Constant) else _UNKNOWN
    for k in call.keywords:
        if k.arg is not None:
            env[k.arg] = k.value.value if isinstance(k.value, ast.Constant) else _UNKNOWN
        else:
            return {}
    return env


_UNKNOWN = object()


def _eval(e: ast.AST, env: dict[str, object]) -> bool | None:
    if isinstance(e, ast.Constant):
        return bool(e.value)
    if isinstance(e, ast.Name):
        v = env.get(e.id, _UNKNOWN)
        return None if v is _UNKNOWN else bool(v)
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
        t = _eval(e.operand, env)
        return None if t is None else not t
    return None


def _restores(m: ast.AST, info: ClassInfo, seen: set[str]) -> bool:
    """``m`` (or a method of the class it calls on ``self``) sets ``requires_grad`` on
    anything, or hands a ``self`` attribute to a call."""
    for n in scope_nodes(m):
        if isinstance(n, ast.Attribute) and n.attr in ("requires_grad_", "requires_grad") \
                and not (n.attr == "requires_grad" and isinstance(n.ctx, ast.Load)):
            return True
        if isinstance(n, ast.Call):
            if any((dotted(a) or "").startswith("self.") for a in n.args):
                return True
            f = n.func
            if isinstance(f, ast.Attribute) and dotted(f.value) == "self" \
                    and f.attr in info.methods and f.attr not in seen:
                seen.add(f.attr)
                if _restores(info.methods[f.attr], info, seen):
                    return True
    return False


def _uses(info: ClassInfo, value: ast.AST, sub: str) -> bool:
    """The mode ``value`` installs runs ``sub``: the method of the class it names reads it,
    or, when it names none, ``forward`` does."""
    name = value.attr if isinstance(value, ast.Attribute) and dotted(value.value) == "self" \
        else None
    m = info.methods.get(name) if name else None
    if m is None:
        if name and name not in info.methods and isinstance(value, ast.Attribute):
            return False
        m = info.methods.get("forward")
    return m is not None and any(isinstance(n, ast.Attribute) and dotted(n) == sub
                                 for n in scope_nodes(m))


def _trains_after(fn: ast.AST, call: ast.Call) -> bool:
    """A ``backward()`` call in ``fn`` after ``call``."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr == "backward" and n.lineno > call.lineno
               for n in scope_nodes(fn))
