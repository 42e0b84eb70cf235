"""Facts that cross a function: what an object's fields hold, what a callee's parameters are
given, which names a function reads from the module (its globals).

# NOTE [fields]
``pruner = Pruner(model)`` with ``Pruner.__init__`` saying ``self.model = model`` makes
``pruner.model`` the caller's ``model``: :func:`field_source` answers with the argument
expression the constructor call passed (``model``), in the caller's scope, so a rule that sees
a method replace ``self.model.fc`` knows which module of the caller lost its parameters; the
same holds for plain records (``tle = TLE(bstar=x.item())`` then ``tle.bstar``).
:func:`passed_values` is the other direction: what the file's calls of a function pass for one
of its parameters (``as_tensor((C1, C2))`` for ``def as_tensor(data)``).
:func:`global_reads` lists the module-level names a function reads without binding them.
Each answer is computed on first use and memoised per file (``ctx.memo``).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.modules import DEFS
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import bfs_walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

# methods that hand back the same object (``model.to(device)``, ``m.train()``)
SAME_OBJECT = frozenset({"to", "cuda", "cpu", "train", "eval", "float", "double", "half"})


def strip_same(e: ast.expr) -> ast.expr:
    """``model`` for ``model.to(dev).train()``."""
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr in SAME_OBJECT:
        e = e.func.value
    return e


def ctor_arguments(init: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call
                   ) -> dict[str, ast.expr] | None:
    """Parameter name -> argument for ``Cls(...)`` running ``init`` (``self`` skipped);
    None when a ``*args``/``**kw`` argument hides the pairing."""
    a = init.args
    names = [x.arg for x in (*a.posonlyargs, *a.args)][1:]
    if any(isinstance(x, ast.Starred) for x in call.args) or \
            any(k.arg is None for k in call.keywords):
        return None
    out = dict(zip(names, call.args))
    out.update({k.arg: k.value for k in call.keywords if k.arg is not None})
    return out


def constructor_call(receiver: ast.expr, scope: Scope, line: int) -> ast.Call | None:
    """The ``Cls(...)`` call of a class of the file that built the object ``receiver`` (a
    name) holds at ``line``."""
    from gradtrace.lint.analysis.facts import unpacked_value
    name = dotted(receiver)
    if name is None or "." in name:
        return None
    b = scope.binding_before(name, line)
    if b is None or isinstance(b.stmt, ast.AugAssign):
        return None
    value = unpacked_value(b, name)
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) \
            and value.func.id in scope.ctx.analysis.classes:
        return value
    return None


def field_source(receiver: ast.expr, attr: str, scope: Scope, line: int) -> ast.expr | None:
    """The expression the caller passed that ``receiver.<attr>`` holds: ``model`` for
    ``pruner.model`` after ``pruner = Pruner(model)`` where ``__init__`` sets
    ``self.model = model`` (NOTE [fields]). None: unknown, or set from anything else."""
    call = constructor_call(receiver, scope, line)
    if call is None:
        return None
    assert isinstance(call.func, ast.Name)
    cls = scope.ctx.analysis.classes[call.func.id]
    init = cls.methods.get("__init__")
    info = cls.attrs.get(attr)
    if init is None or info is None or info.method is not init or info.later:
        return None
    value = strip_same(info.value) if info.value is not None else None
    if not isinstance(value, ast.Name) or value.id not in _params(init):
        return None
    init_scope = scope.ctx.scope(init)
    if init_scope.binding_before(value.id, info.stmt.lineno + 1) is not None:
        return None  # the parameter was rebound before it was stored
    binds = ctor_arguments(init, call)
    return binds.get(value.id) if binds is not None else None


def passed_values(fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str, ctx: Context
                  ) -> list[tuple[ast.expr, ast.AST]]:
    """What the file's calls of the function ``fn`` pass for its parameter ``name``, with the
    function (or module) each call is in; empty when a call passes nothing for it."""
    return ctx.analysis.argument_values(fn, name)


def global_reads(fn: ast.FunctionDef | ast.AsyncFunctionDef, ctx: Context) -> frozenset[str]:
    """Names ``fn`` reads that are neither its parameters nor bound in it but bound at module
    level (its globals)."""
    def make() -> frozenset[str]:
        scope = ctx.scope(fn)
        own = set(_params(fn)) | set(scope.bindings)
        top = ctx.scope(ctx.tree)
        return frozenset(n for n in scope.loads if n not in own and n in top.bindings)
    return ctx.memo("analysis-global-reads", fn, make)


# tensor methods that hand back a Python number (``tolist``: a list of them)
NUMBER_METHODS = frozenset({"item", "tolist", "numel", "dim", "ndimension", "nelement"})
NUMBER_FUNCS = frozenset({"float", "int", "len", "round", "bool", "math.sqrt", "math.log",
                          "math.exp", "math.fabs", "abs"})


def _number_expr(e: ast.AST | None, ctx: Context) -> bool:
    """``float(...)``, ``len(...)``, ``x.item()``, a numeric constant, arithmetic of those."""
    if isinstance(e, ast.Constant):
        return isinstance(e.value, (int, float)) and not isinstance(e.value, bool)
    if isinstance(e, ast.BinOp):
        return _number_expr(e.left, ctx) and _number_expr(e.right, ctx)
    if isinstance(e, ast.UnaryOp):
        return _number_expr(e.operand, ctx)
    if isinstance(e, ast.Call):
        if isinstance(e.func, ast.Attribute) and e.func.attr in NUMBER_METHODS:
            return True
        q = ctx.qualified_name(e.func) or ""
        return q in NUMBER_FUNCS and not (q == "abs" and not _number_expr(
            e.args[0] if e.args else None, ctx))
    return False


def returns_number(fn: ast.AST, ctx: Context) -> bool:
    """A lambda or a function of the file whose every ``return`` is a Python number."""
    if isinstance(fn, ast.Lambda):
        return _number_expr(fn.body, ctx)
    if not isinstance(fn, DEFS):
        return False
    rets = [s for s in bfs_walk(fn) if isinstance(s, ast.Return)]
    return bool(rets) and all(_number_expr(r.value, ctx) for r in rets)


def number_call(ctx: Context, where: ast.AST, call: ast.Call) -> bool:
    """``call`` gives a Python number: it runs a function of the file whose every ``return``
    is one, or it calls an object of a class of the file (bound here, or passed for a
    parameter by every caller) whose ``__call__`` returns one, reading the parameters as this
    call's arguments (``loss_compute(out, y, y.numel())`` with ``SimpleLossCompute.__call__``
    ending in ``return loss.item() * norm``)."""
    from gradtrace.lint.analysis.kinds import OBJECT
    a = ctx.analysis
    fn = a.callee(call, where)
    if fn is not None:
        return returns_number(fn, ctx)

    def numbers(k: object) -> bool:
        cls = a.classes.get(k.cls or "") \
            if k is not None and k.what == OBJECT else None  # type: ignore[attr-defined]
        method = cls.methods.get("__call__") if cls is not None else None
        if method is None:
            return False
        names = _params(method)[1:]
        binds = {**dict(zip(names, call.args)),
                 **{k.arg: k.value for k in call.keywords if k.arg is not None}}
        rets = [r for r in bfs_walk(method) if isinstance(r, ast.Return)]
        return bool(rets) and all(_bound_number(r.value, binds, ctx) for r in rets)

    k = a.kind_in(call.func, where, call.lineno)
    if k is not None or not isinstance(call.func, ast.Name) \
            or not isinstance(where, DEFS) or not a._is_param(where, call.func.id):
        return numbers(k)
    vals = a.argument_values(where, call.func.id)  # type: ignore[arg-type]
    return bool(vals) and all(numbers(a.kind_in(v, w, v.lineno)) for v, w in vals)


def _bound_number(e: ast.AST | None, binds: dict[str, ast.expr], ctx: Context) -> bool:
    """:func:`_number_expr`, a parameter standing for the argument the call gave it."""
    if isinstance(e, ast.Name) and e.id in binds:
        return _number_expr(binds[e.id], ctx)
    if isinstance(e, ast.BinOp):
        return _bound_number(e.left, binds, ctx) and _bound_number(e.right, binds, ctx)
    if isinstance(e, ast.UnaryOp):
        return _bound_number(e.operand, binds, ctx)
    return _number_expr(e, ctx)


def number_callable_field(cls: object, attr: str, ctx: Context) -> bool:
    """Whether ``self.<attr>`` of the class is a callable the constructor was given
    (``self.get_reward = get_reward``) and every construction in the file passes a lambda or a
    function of the file returning a Python number (``Agent(net, lambda s: float(...))``)."""
    def make() -> bool:
        init = cls.methods.get("__init__")  # type: ignore[attr-defined]
        info = cls.attrs.get(attr)  # type: ignore[attr-defined]
        if init is None or info is None or info.method is not init or info.later \
                or attr in cls.methods or not isinstance(info.value, ast.Name):  # type: ignore
            return False
        vals = ctx.analysis.argument_values(init, info.value.id)
        if not vals:
            return False
        for v, _ in vals:
            fn = ctx.analysis.functions.get(v.id) if isinstance(v, ast.Name) else v
            if fn is None or not returns_number(fn, ctx):
                return False
        return True
    return ctx.memo("analysis-number-field-" + attr, cls.node, make)  # type: ignore


def is_record_class(ctx: Context, name: str) -> bool:
    """A plain class of the file (no bases, not a module) whose ``__init__`` only stores its
    arguments in fields (``self.bstar = bstar``) and that has no ``__call__``: its objects hold
    what they were built from (NOTE [fields])."""
    def make() -> bool:
        cls = ctx.analysis.classes.get(name)
        if cls is None or cls.is_module or cls.node.bases or "__call__" in cls.methods:
            return False
        init = cls.methods.get("__init__")
        if init is None:
            return False
        params = set(_params(init))
        for s in init.body:
            if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant):
                continue  # docstring
            if not (isinstance(s, ast.Assign) and len(s.targets) == 1
                    and isinstance(s.targets[0], ast.Attribute)
                    and dotted(s.targets[0].value) == "self"
                    and isinstance(s.value, ast.Name) and s.value.id in params):
                return False
        return True
    return ctx.memo("analysis-record-class-" + name, ctx.tree, make)


def _params(fn: ast.AST) -> list[str]:
    a = getattr(fn, "args", None)
    if a is None or not isinstance(fn, DEFS):
        return []
    return [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg)
            if x is not None]
