"""What a module *built by an expression* gives back when called.

# NOTE [module results]
One answer for every rule (the in-place rules GT602/GT603/GT605, the numerics readers of
:mod:`.module_outputs`, GT115's ``forward_of``): the expression that builds it
(``nn.ReLU()``, ``nn.Sequential(conv, nn.ReLU())``, ``Block(dim, activation='relu')``, a helper
of the file ``ConvModule(...)`` that returns a Sequential, ``nn.ModuleList([Block(d) for _ in
range(n)])``) is read down to the ways its result is made (:class:`Made`):
- a library layer's construction (``LIB``): ``nn.Sequential``'s last layer, nested or given
  as ``*layers`` from a list of the same function (its literal, then its ``append`` calls);
- an expression returned by the ``forward`` (or ``__call__``) of a module class of the file
  (``EXPR``, read in that method's scope); a return that calls ``self.<attr>`` is that attribute's
  own result; every ``return`` is one possible result, except the arms of an ``if`` on a
  constructor flag (``if self.activation == 'relu':``) that the constructing call decides;
- the module's input, or a view of it (``INPUT``): the caller's argument is the value;
- a file function called to build the module: what each of its returns builds.
``container`` is set for ``nn.ModuleList``/``nn.ModuleDict``: the result is what one block
gives back (``self.blocks[i](x)``, ``for blk in self.blocks: x = blk(x)``), every block being a
possible one. A rule decides whether it needs one possible result or all of them. Each
expression is read once per file (cached on the context); a cycle reads as unknown.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

from gradtrace.lint.analysis.added_layers import added_last
from gradtrace.lint.analysis.appended import appended_blocks
from gradtrace.lint.analysis.default_layer import default_layer_class
from gradtrace.lint.analysis.flag_truth import truth_under as _truth
from gradtrace.lint.analysis.init_arguments import init_arguments
from gradtrace.lint.analysis.last_pass import varies_by_pass
from gradtrace.lint.analysis.looped_layers import looped_last
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.analysis.modules import ClassInfo
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
SEQUENTIAL = frozenset({"torch.nn.Sequential", "torch.nn.modules.container.Sequential"})


def bound_value(e: ast.AST, scope: Scope, line: int,
                flags: dict[str, object] | None = None) -> ast.AST:
    """A local name: the value of its last single-target assignment before ``line``, else
    ``e``; an assignment in an ``if`` arm the read is not in counts only when ``flags`` (the
    constructor's, :func:`constructor_flags`) take that arm, and is passed over when they
    skip it (Xception's ``if not self.activate_first: x = self.relu2(x)``)."""
    if isinstance(e, ast.Name):
        b = scope.binding_before(e.id, line)
        if b is not None and b.value is not None and isinstance(b.stmt, ast.Assign) \
                and len(b.stmt.targets) == 1:
            use = scope.statement_of(e)
            arms = dict(scope.branches.get(id(use), ())) if use is not None else {}
            other = [(k, v) for k, v in scope.branches.get(id(b.stmt), ()) if arms.get(k) != v]
            if other and not flags:
                return e  # a branch no constructor flag decides: it may not run
            taken = [_arm_taken(scope, k, v, flags or {}) for k, v in other]
            if all(taken):
                return b.value
            if False in taken and None not in taken and b.line < line:
                return bound_value(e, scope, b.line, flags)
    return e


def _arm_taken(scope: Scope, if_id: int, body: bool, flags: dict[str, object]) -> bool | None:
    ifs = scope.ctx.memo("module-results-ifs", scope.node, lambda: {
        id(n): n for n in walk(scope.node) if isinstance(n, ast.If)})
    test = ifs[if_id].test if if_id in ifs else None
    t = _truth(test, flags) if test is not None else None
    return None if t is None else t == body


LIB, EXPR, INPUT = "lib", "expr", "input"
CONTAINERS = frozenset({"torch.nn.ModuleList", "torch.nn.ModuleDict",
                        "torch.nn.modules.container.ModuleList",
                        "torch.nn.modules.container.ModuleDict"})
VIEWS = frozenset({"view", "view_as", "squeeze", "unsqueeze", "permute", "transpose", "t",
                   "unflatten", "narrow", "select", "expand"})
MAX_DEPTH = 6


@dataclass(frozen=True)
class Made:
    """One way a module's result is made: ``node`` is the library layer's construction
    (``LIB``, ``qname`` its class), an expression of ``cls``'s forward (``EXPR``, read in
    ``ctx.scope(fn)``), or the input's name (``INPUT``)."""

    how: str
    node: ast.AST
    qname: str = ""
    fn: ast.AST | None = None


@dataclass(frozen=True)
class Built:
    """What a module built by one expression gives back (NOTE [module results])."""

    makes: tuple[Made, ...]
    container: bool = False


def forward_of(info: ClassInfo) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The method a module call runs: ``forward``, else a ``__call__`` defined instead."""
    return info.methods.get("forward") or info.methods.get("__call__")


def built(e: ast.AST, ctx: Context, where: ast.AST | None, depth: int = 0) -> Built | None:
    """What the module built by ``e`` (read in the function ``where``, None: the module level)
    gives back when called; None when not known. Cached per expression on the context."""
    memo: dict[int, Built | None] = ctx.memo("module-results", ctx.tree, dict)
    key = id(e)
    if key in memo:
        return memo[key]
    memo[key] = None  # a cycle builds nothing
    got = _built(e, ctx, where, depth) if depth < MAX_DEPTH else None
    memo[key] = got
    return got


def _built(e: ast.AST, ctx: Context, where: ast.AST | None, depth: int) -> Built | None:
    if isinstance(e, ast.Name):
        v = _local_value(e, ctx, where)
        return built(v, ctx, where, depth + 1) if v is not None else None
    if not isinstance(e, ast.Call):
        return None
    q = ctx.qualified_name(e.func) or ""
    if q in SEQUENTIAL:
        last = sequential_last(e, ctx, where)
        return built(last, ctx, where, depth + 1) if last is not None else None
    if q in CONTAINERS:
        elts = _container_elements(e, ctx, where)  # every block: each may be the one called
        got = _union([built(x, ctx, where, depth + 1) for x in elts]) if elts else None
        return Built(got.makes, True) if got is not None and not got.container else None
    if isinstance(e.func, ast.Name):
        info = ctx.analysis.classes.get(e.func.id)
        if info is not None:
            return _class_built(info, e, ctx, depth, where) if info.is_module else None
        helper = ctx.analysis.functions.get(e.func.id)
        if helper is not None:
            return _union([built(r.value, ctx, helper, depth + 1)
                           for r in reachable_returns(helper)])
    if q.startswith("torch.nn.") and q.rpartition(".")[2][:1].isupper():
        return Built((Made(LIB, e, q),))
    if isinstance(e.func, ast.Subscript) and isinstance(e.func.value, ast.Dict) \
            and e.func.value.values:  # `{"ReLU": nn.ReLU}[cfg["type"]]()`: one class for all keys
        qs = {ctx.qualified_name(v) or "" for v in e.func.value.values}
        q = qs.pop() if len(qs) == 1 else ""
        if q.startswith("torch.nn.") and q.rpartition(".")[2][:1].isupper():
            return Built((Made(LIB, e, q),))
    if isinstance(e.func, ast.Name):  # NOTE [layer class given by a default]
        q = default_layer_class(e.func.id, where, ctx) or ""  # `activation(**act_params)`
        return Built((Made(LIB, e, q),)) if q else None
    return None


def _union(got: list[Built | None]) -> Built | None:
    """Every possible result of several builders (None: one is unknown, or they mix a container
    and a module)."""
    known = [g for g in got if g is not None]
    if not got or len(known) < len(got) or len({g.container for g in known}) > 1:
        return None
    return Built(tuple(m for g in known for m in g.makes), known[0].container)


def _local_value(e: ast.Name, ctx: Context, where: ast.AST | None) -> ast.AST | None:
    scope = ctx.scope(where or ctx.tree)
    b = scope.binding_before(e.id, e.lineno + 1)
    if b is None or b.value is None or not isinstance(b.stmt, ast.Assign) \
            or len(b.stmt.targets) != 1 or not isinstance(b.stmt.targets[0], ast.Name):
        return None
    return b.value


def _list_last(e: ast.AST, ctx: Context, where: ast.AST | None, line: int) -> ast.AST | None:
    """The last element of a local list ``e``: its literal's last, or its last ``append`` (or
    the last element of the list literal its last ``extend`` is given)."""
    if isinstance(e, ast.List):
        return e.elts[-1] if e.elts and not isinstance(e.elts[-1], ast.Starred) else None
    if isinstance(e, ast.ListComp):
        return e.elt
    if not isinstance(e, ast.Name):
        return None
    last: ast.AST | None = None
    for n in walk(where or ctx.tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and isinstance(n.func.value, ast.Name) and n.func.value.id == e.id \
                and n.lineno < line:
            arg = n.args[0] if len(n.args) == 1 else None
            if n.func.attr == "extend" and isinstance(arg, (ast.List, ast.Tuple)) and arg.elts \
                    and not isinstance(arg.elts[-1], ast.Starred):
                arg = arg.elts[-1]  # `layers.extend([nn.Linear(a, b), act])`: its last
            elif n.func.attr != "append":
                arg = None
                if n.func.attr in ("extend", "insert", "pop"):
                    return None
            if arg is not None and (last is None or n.lineno >= last.lineno):  # type: ignore[attr-defined]
                last, call = arg, n
    if last is not None:  # `if i == 0: layers.append(act)` in the loop: not known
        return None if varies_by_pass(where or ctx.tree, call) else last
    v = _local_value(e, ctx, where)
    return _list_last(v, ctx, where, line) if isinstance(v, (ast.List, ast.ListComp)) else None


def sequential_last(e: ast.Call, ctx: Context, where: ast.AST | None) -> ast.AST | None:
    if not e.args and not e.keywords:
        return added_last(e, ctx)  # NOTE [added layers]
    if e.keywords or not e.args:
        return None
    last = e.args[-1]
    if isinstance(last, ast.Starred):
        return _list_last(last.value, ctx, where, e.lineno) if len(e.args) == 1 else None
    if len(e.args) == 1 and isinstance(last, ast.Call) \
            and (ctx.qualified_name(last.func) or "").endswith("OrderedDict") and last.args:
        pair = _list_last(last.args[0], ctx, where, e.lineno)  # OrderedDict([("relu", ...)])
        return pair.elts[-1] if isinstance(pair, ast.Tuple) and len(pair.elts) == 2 else None
    return last


def sequential_layers(e: ast.Call, ctx: Context, where: ast.AST | None) -> list[ast.AST]:
    """The layers an ``nn.Sequential`` call runs, in order: its positional arguments, or the
    elements of a local list literal given as ``*layers`` ([] when not known, or when the
    list is changed after its literal)."""
    if e.keywords or not e.args:
        return []
    if len(e.args) == 1 and isinstance(e.args[0], ast.Starred):
        v = e.args[0].value
        lit = _local_value(v, ctx, where) if isinstance(v, ast.Name) else v
        if not isinstance(lit, ast.List) or isinstance(v, ast.Name) and any(
                isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and isinstance(n.func.value, ast.Name) and n.func.value.id == v.id
                for n in walk(where or ctx.tree)):
            return []
        return [] if any(isinstance(x, ast.Starred) for x in lit.elts) else list(lit.elts)
    return [] if any(isinstance(a, ast.Starred) for a in e.args) else list(e.args)


def _container_elements(e: ast.Call, ctx: Context, where: ast.AST | None) -> list[ast.AST]:
    """Every block a ``ModuleList``/``ModuleDict`` holds (a literal's elements, a
    comprehension's element, a local list's literal and ``append`` calls, or the ``append``
    calls on what an empty one is assigned to: ``self.levels = nn.ModuleList()`` then
    ``self.levels.append(block)`` in a loop); [] when not known."""
    if not e.args and not e.keywords:
        return appended_blocks(e, ctx, where)
    if len(e.args) != 1 or e.keywords:
        return []
    a = e.args[0]
    if isinstance(a, ast.Dict):
        return list(a.values) if None not in a.keys else []  # type: ignore[arg-type]
    if isinstance(a, (ast.DictComp, ast.ListComp, ast.GeneratorExp)):
        return [a.value if isinstance(a, ast.DictComp) else a.elt]
    if isinstance(a, ast.Name):
        v = _local_value(a, ctx, where)
        if v is None:
            return []
        out = [] if isinstance(v, ast.List) and not v.elts else _container_elements(
            ast.Call(func=e.func, args=[v], keywords=[]), ctx, where)
        if not out and not (isinstance(v, ast.List) and not v.elts):
            return []
        for n in walk(where or ctx.tree):
            if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) \
                    and n.target.id == a.id:
                return []
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and isinstance(n.func.value, ast.Name) and n.func.value.id == a.id \
                    and n.lineno < e.lineno:
                if n.func.attr != "append" or len(n.args) != 1:
                    return []  # extend/insert/+=: not followed
                out.append(n.args[0])
        return out
    if isinstance(a, ast.List) and not any(isinstance(x, ast.Starred) for x in a.elts):
        return list(a.elts)
    return []


def reachable_returns(fn: ast.AST, flags: dict[str, object] | None = None) -> list[ast.Return]:
    got = list(_reachable(fn.body, flags or {}))  # type: ignore[attr-defined]
    return [] if any(r.value is None for r in got) else got


def _reachable(body: list[ast.stmt], flags: dict[str, object]) -> Iterator[ast.Return]:
    """The returns of ``body`` that may run, skipping the arms of an ``if`` that ``flags``
    (``self.<attr>`` -> the constant the constructor gave it) decide against."""
    for s in body:
        if isinstance(s, ast.Return):
            yield s
            return
        if isinstance(s, (*DEFS, ast.ClassDef)):
            continue
        if isinstance(s, ast.If):
            t = _truth(s.test, flags)
            arms = [s.body, s.orelse] if t is None else [s.body if t else s.orelse]
            for arm in arms:
                yield from _reachable(arm, flags)
            if all(_always_returns(arm) for arm in arms):
                return
            continue
        for f in ("body", "orelse", "finalbody"):
            yield from _reachable(getattr(s, f, None) or [], flags)
        for h in getattr(s, "handlers", ()):
            yield from _reachable(h.body, flags)


def _always_returns(body: list[ast.stmt]) -> bool:
    if not body:
        return False
    last = body[-1]
    if isinstance(last, (ast.Return, ast.Raise)):
        return True
    return isinstance(last, ast.If) and _always_returns(last.body) \
        and _always_returns(last.orelse)


def constructor_flags(info: ClassInfo, call: ast.Call) -> dict[str, object]:
    """``self.<attr>`` -> the constant the constructing ``call`` gives it: ``self.activation =
    activation`` in ``__init__`` and ``activation='relu'`` passed (or defaulted)."""
    init = info.methods.get("__init__")
    if init is None or any(isinstance(a, ast.Starred) for a in call.args) \
            or any(k.arg is None for k in call.keywords):
        return {}
    a = init.args
    params = [p.arg for p in (*a.posonlyargs, *a.args)][1:]
    given: dict[str, ast.expr] = dict(zip(params, call.args))
    given.update((k.arg, k.value) for k in call.keywords if k.arg)
    pos_defaults = dict(zip(params[len(params) - len(a.defaults):], a.defaults))
    pos_defaults.update((p.arg, d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None)
    out: dict[str, object] = {}
    for name, attr in info.attrs.items():
        v = attr.value
        if attr.later or attr.method is not init or not isinstance(v, ast.Name):
            continue
        arg = given.get(v.id, pos_defaults.get(v.id))
        if isinstance(arg, ast.Constant):
            out[name] = arg.value
    return out


def constructor_values(info: ClassInfo, call: ast.Call, where: ast.AST | None
                       ) -> dict[str, object]:
    """``__init__``'s argument -> the constant the constructing ``call`` gives it (or its
    default); an argument passed on from the enclosing function (``Conv(c, act=act)`` in
    another ``__init__``) counts as that function's default for it."""
    return {p: v.value for p, v in init_arguments(info, call, where) if isinstance(v, ast.Constant)}


def _class_built(info: ClassInfo, call: ast.Call, ctx: Context, depth: int,
                 where: ast.AST | None = None) -> Built | None:
    fwd = forward_of(info)
    if fwd is None:
        return None
    flags = constructor_flags(info, call)
    rets = reachable_returns(fwd, flags)
    given = constructor_values(info, call, where)
    if not rets:
        return None
    scope = ctx.scope(fwd)
    a = fwd.args
    params = [p.arg for p in (*a.posonlyargs, *a.args)][1:2]
    makes: list[Made] = []
    for r in rets:
        v = _unview(bound_value(_unview(r.value), scope, r.lineno, flags))  # type: ignore[arg-type]
        if isinstance(v, ast.Name) and v.id in params:
            makes.append(Made(INPUT, v, fn=fwd))
            continue
        sub = _attr_built(v, info, ctx, depth, given)
        last = looped_last(v, fwd, info, ctx, call, where) if sub is None else None
        if last is not None:  # NOTE [looped layers]
            sub = built(last[0], ctx, last[1], depth + 1)
            sub = sub if sub is not None and not sub.container else None
        if sub is not None:
            makes.extend(sub.makes)
            continue
        makes.append(Made(EXPR, v, fn=fwd))
    return Built(tuple(makes))


def basic_index(s: ast.AST) -> bool:
    """``x[:, 0]``, ``x[..., :-1]``, ``x[None]``: basic indexing of a tensor gives a view of it
    (a mask or a list of indices copies). One plain index (``xs[0]``, ``xs[1:]``) may as well
    take an element or a copy of a Python list, so only a tuple of them, an ``...`` or a
    ``None`` counts."""
    parts = s.elts if isinstance(s, ast.Tuple) else [s]
    if not isinstance(s, ast.Tuple) and not (
            isinstance(s, ast.Constant) and (s.value is None or s.value is Ellipsis)):
        return False
    return all(isinstance(p, ast.Slice) or isinstance(p, ast.Constant) and (
        p.value is None or p.value is Ellipsis or isinstance(p.value, int))
        or isinstance(p, ast.UnaryOp) and isinstance(p.operand, ast.Constant) for p in parts)


def _unview(e: ast.AST) -> ast.AST:
    while True:
        if isinstance(e, ast.Subscript) and basic_index(e.slice):
            e = e.value
        elif isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
                and e.func.attr in VIEWS:
            e = e.func.value
        else:
            return e


def _attr_built(v: ast.AST, info: ClassInfo, ctx: Context, depth: int,
                given: dict[str, object] | None = None) -> Built | None:
    """``self.<attr>(...)`` (or ``self.<attr>[i](...)``) of a class: what that attribute's
    module gives back; an attribute built by a conditional expression on ``__init__``'s
    arguments (``nn.ReLU(True) if act == 'relu' else nn.Mish()``) by the arm the constructing
    call's arguments (``given``: :func:`constructor_values`) pick."""
    if not isinstance(v, ast.Call):
        return None
    f, elem = v.func, False
    if isinstance(f, ast.Subscript):
        f, elem = f.value, True
    if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
            and f.value.id == "self"):
        return None
    attr = info.attrs.get(f.attr)
    if attr is None or attr.later or attr.value is None:
        return None
    value = attr.value
    if isinstance(value, ast.IfExp):
        t = _truth(value.test, {"$" + k: x for k, x in (given or {}).items()})
        if t is None:
            return None
        value = value.body if t else value.orelse
    got = built(value, ctx, attr.method, depth + 1)
    return got if got is not None and got.container == elem else None


def first_layer(e: ast.AST, ctx: Context, where: ast.AST | None, depth: int = 0) -> str | None:
    """The library layer (its qualified name) that first reads the input of the module built
    by ``e``: an ``nn.Sequential``'s first layer (nested, through a local name or a helper of
    the file with one return), else the layer itself; None when not known."""
    if depth > MAX_DEPTH:
        return None
    if isinstance(e, ast.Name):
        v = _local_value(e, ctx, where)
        return first_layer(v, ctx, where, depth + 1) if v is not None else None
    if not isinstance(e, ast.Call):
        return None
    q = ctx.qualified_name(e.func) or ""
    if q in SEQUENTIAL:
        head = e.args[0] if e.args and not e.keywords else None
        return None if head is None or isinstance(head, ast.Starred) \
            else first_layer(head, ctx, where, depth + 1)
    if isinstance(e.func, ast.Name) and e.func.id not in ctx.analysis.classes:
        helper = ctx.analysis.functions.get(e.func.id)
        rets = reachable_returns(helper) if helper is not None else []
        return first_layer(rets[0].value, ctx, helper, depth + 1) if len(rets) == 1 else None
    return q if q.startswith("torch.nn.") else None


def first_layers(e: ast.AST, ctx: Context, where: ast.AST | None) -> frozenset[str] | None:
    """Every library layer that may first read the input of the module built by ``e``: a
    helper of the file with several returns (``return nn.GroupNorm(g, d)`` on a flag, else
    ``return nn.LayerNorm(d)``) gives each return's :func:`first_layer`; None when one is not
    known."""
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) \
            and e.func.id not in ctx.analysis.classes:
        helper = ctx.analysis.functions.get(e.func.id)
        rets = reachable_returns(helper) if helper is not None else []
        if len(rets) > 1:
            got = [first_layer(r.value, ctx, helper, 1) for r in rets]
            return None if None in got else frozenset(got)  # type: ignore[arg-type]
    one = first_layer(e, ctx, where)
    return None if one is None else frozenset((one,))


def attr_module(f: ast.AST, ctx: Context, fn: ast.AST | None) -> tuple[ast.AST, ast.AST] | None:
    """``self.<attr>`` read in the method ``fn``: (the expression ``__init__`` built it with, the
    method that did), when it is assigned once."""
    if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
            and f.value.id == "self"):
        return None
    info = ctx.analysis.class_of(fn)
    attr = info.attrs.get(f.attr) if info is not None else None
    if attr is None or attr.later or attr.value is None:
        return None
    return attr.value, attr.method
