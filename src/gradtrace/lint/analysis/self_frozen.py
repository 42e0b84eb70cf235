"""Whether every instance of a module class of the file freezes all its weights when it is built.

# NOTE [frozen when built]
A fixed loss network (a CLIP or VGG model wrapped by a perceptual loss) is frozen by its own
``__init__``: ``self.model.requires_grad_(False)``, ``self.requires_grad_(False)``, ``for p in
self.parameters(): p.requires_grad = False``. Its weights then never receive a gradient
(``requires_grad_(False)`` stops autograd from computing one) and
belong in no optimizer: a holder that keeps such modules out of its own ``parameters()`` and
``state_dict()`` (a plain dict of loss networks) loses nothing it trains. :func:`freezes_itself`
says so when ``__init__`` (or a method of the class it calls on ``self``), outside any ``if``,
``for`` over data, ``try`` or ``with``, freezes ``self`` or every attribute it sets to a call
that is not a plain value (a number, a tensor of torch's functions); when the class makes an
``nn.Parameter`` after the freeze, or the file sets ``requires_grad`` back on anywhere, nothing is
known.
"""
from __future__ import annotations

import ast
import builtins
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.frozen_params import file_unfreezes
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

_BUILTINS = frozenset(dir(builtins))


def freezes_itself(name: str, ctx: Context) -> bool:
    """Whether the module class ``name`` of the file freezes all its weights in ``__init__``
    (NOTE [frozen when built])."""
    memo: dict[str, bool] = ctx.memo("frozen-when-built", ctx.tree, dict)
    if name not in memo:
        memo[name] = _freezes(name, ctx)
    return memo[name]


def _freezes(name: str, ctx: Context) -> bool:
    cls = ctx.analysis.classes.get(name)
    init = cls.methods.get("__init__") if cls is not None and cls.is_module else None
    if init is None or file_unfreezes(ctx):
        return False
    frozen: set[str] = set()
    for st in _straight(init, cls, 0):
        frozen.update(_frozen_by(st))
    if "" in frozen:
        return not any(isinstance(n, ast.Call) and (ctx.call_name(n) or "") == "torch.nn.Parameter"
                       and not _inside(n, init) for n in walk(cls.node))
    called = {n.func.attr for n in walk(cls.node) if isinstance(n, ast.Call)
              and isinstance(n.func, ast.Attribute) and dotted(n.func.value) == "self"}
    made = {a: i for a, i in cls.init_attrs.items() if a in called  # `self.net = net` run
            or _may_hold_weights(i.value, ctx)}
    return bool(made) and set(made) <= frozen and not any(
        isinstance(n, ast.Call) and (ctx.call_name(n) or "") == "torch.nn.Parameter"
        for n in walk(cls.node))


def _inside(n: ast.AST, fn: ast.AST) -> bool:
    return getattr(fn, "lineno", 0) <= getattr(n, "lineno", -1) <= (
        getattr(fn, "end_lineno", 0) or 0)


def _straight(fn: ast.AST, cls: object, depth: int) -> list[ast.stmt]:
    """The statements ``fn`` always runs, with those of the methods it calls on ``self`` there
    (two calls deep)."""
    out: list[ast.stmt] = []
    for st in getattr(fn, "body", ()):
        if isinstance(st, (ast.If, ast.Try, ast.With, ast.While)):
            continue
        out.append(st)
        if depth < 2 and isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
            f = st.value.func
            if isinstance(f, ast.Attribute) and dotted(f.value) == "self":
                m = getattr(cls, "methods", {}).get(f.attr)
                if m is not None:
                    out.extend(_straight(m, cls, depth + 1))
    return out


def _frozen_by(st: ast.stmt) -> set[str]:
    """The attributes of ``self`` the statement freezes ("" for ``self`` itself):
    ``self.m.requires_grad_(False)`` (also after ``.eval()``), ``for p in
    self.m.parameters(): p.requires_grad = False``."""
    got: set[str] = set()
    if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
        c = st.value
        if isinstance(c.func, ast.Attribute) and c.func.attr == "requires_grad_" and c.args \
                and isinstance(c.args[0], ast.Constant) and c.args[0].value is False:
            got.add(_owner(c.func.value))
    elif isinstance(st, ast.For) and isinstance(st.target, ast.Name) \
            and isinstance(st.iter, ast.Call) and isinstance(st.iter.func, ast.Attribute) \
            and st.iter.func.attr == "parameters" and any(_clears(s, st.target.id)
                                                         for s in st.body):
        got.add(_owner(st.iter.func.value))
    got.discard("?")
    return got


def _owner(e: ast.expr) -> str:
    """"" for ``self``, ``m`` for ``self.m`` (``self.m.eval()`` too), "?" otherwise."""
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr in ("eval", "to", "cuda", "cpu", "float", "half"):
        e = e.func.value
    d = dotted(e) or ""
    if d == "self":
        return ""
    return d[5:] if d.startswith("self.") and d.count(".") == 1 else "?"


def _clears(s: ast.stmt, var: str) -> bool:
    if isinstance(s, ast.Assign):
        return any(isinstance(t, ast.Attribute) and t.attr == "requires_grad"
                   and dotted(t.value) == var for t in s.targets) \
            and isinstance(s.value, ast.Constant) and s.value.value is False
    return isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) \
        and isinstance(s.value.func, ast.Attribute) and s.value.func.attr == "requires_grad_" \
        and dotted(s.value.func.value) == var and bool(s.value.args) \
        and isinstance(s.value.args[0], ast.Constant) and s.value.args[0].value is False


def _may_hold_weights(v: ast.expr | None, ctx: Context) -> bool:
    """A value that may be (or hold) a module or a parameter: any call but a builtin's or one
    of torch's tensor functions, any container of calls."""
    for n in walk(v) if v is not None else ():
        if isinstance(n, ast.Call):
            q = ctx.call_name(n) or ""
            if q in _BUILTINS and q not in ("list", "dict", "tuple"):
                continue
            last = q.rpartition(".")[2]
            if q.startswith("torch.") and not q.startswith(("torch.nn.", "torch.hub.")) \
                    and last[:1].islower():
                continue
            if isinstance(n.func, ast.Attribute) and not isinstance(n.func.value, ast.Name):
                continue  # a method of a computed value: judged by the value
            return True
    return False
