"""The function of this file a call runs, with the caller's names for its parameters.

``helper(model)``, ``self.method()`` and ``obj.method()`` on an instance of a class of this file
(the receiver's kind read where the call is, or passed by every caller of the enclosing
function, two calls up): rules that follow an effect (a mode switch, a grad-mode context)
one or two calls away share this.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Callable

from gradtrace.lint.analysis.calls import (
    _every_statement, ascii_code, own_nodes, statements_on, word_lines,
)
from gradtrace.lint.analysis.instance_methods import held_method
from gradtrace.lint.analysis.kinds import MODULE, OBJECT, Kind
from gradtrace.lint.grad_modes import FUNCTION_TYPES
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.statement_shapes import argument_default

if TYPE_CHECKING:
    from gradtrace.lint.analysis.facts import Analysis
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

Fn = ast.FunctionDef | ast.AsyncFunctionDef
Sites = list[tuple[ast.Call, ast.AST]]  # calls, each with the function or module making it
MAX_HOPS = 2


def resolve(ctx: Context, where: ast.AST, call: ast.Call) -> tuple[Fn, dict[str, str]] | None:
    """(function of this file that ``call`` runs, its parameter -> the caller's dotted
    argument): ``helper(model)``, ``self.method()``, ``obj.method()`` on an instance of a
    class of this file (``self`` then maps to ``obj``)."""
    a = ctx.analysis
    fn = a.callee(call, where)
    f = call.func
    mapping: dict[str, str] = {}
    if fn is None and isinstance(f, ast.Attribute):
        recv = dotted(f.value)
        if recv is None or recv == "self":
            return None
        k = a.kind_in(f.value, where, call.lineno)
        cls = a.classes.get(k.cls or "") if k is not None and k.what in (MODULE, OBJECT) \
            else None
        fn = cls.methods.get(f.attr) if cls is not None else None
        if fn is None:
            return None
        mapping["self"] = recv
    elif fn is not None and isinstance(f, ast.Attribute):
        mapping["self"] = "self"
    if fn is None or fn is where:
        return None
    for p, v in a.arguments(fn, call).items():
        d = dotted(v)
        if d:
            mapping[p] = d
    return fn, mapping


# NOTE [parameter kinds]
# A parameter's kind is what every call of its function in this file passes for it (one
# caller, or all agreeing; a top-level function's calls in the project's other files too:
# NOTE [kinds by the callers]): ``def train(model, opt)`` called as ``train(Net(), SGD(...))``,
# ``self.step(batch)`` from a method of the same class, ``obj.step(b)`` on an instance of it,
# ``Cls(model)`` for ``__init__``; a call that passes nothing for it gives the default value's
# kind. Unknown (None) when a caller passes an unknown kind or another kind, when the function
# is also used without being called here (a hook, a callback, ``partial(fn, ...)``, a base of
# another class): its other callers are not seen. A recursive call passing the parameter on
# unchanged is no caller. Each (function, parameter) is computed once per file; chains of
# parameters through callers stop after MAX_PARAM_HOPS functions.
MAX_PARAM_HOPS = 4
# The kinds each call in the project's other files passes for a parameter
# (NOTE [kinds by the callers]): :mod:`.foreign_params` puts its reader here when it loads (it
# reads the project's call sites, which read this module's, so this module cannot import it).
OTHER_KINDS: list[Callable[[Context, ast.AST, str], list[Kind] | None]] = []
_TYPE_CHECKS = frozenset({"isinstance", "issubclass", "type", "super"})  # no escape


def param_kind(a: Analysis, fn: ast.AST, name: str) -> Kind | None:
    """The kind of parameter ``name`` of ``fn`` from the file's calls
    (NOTE [parameter kinds])."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    ctx = a.ctx
    memo: dict[tuple[int, str], Kind | None] = ctx.memo("param-kinds", ctx.tree, dict)
    key = (id(fn), name)
    if key in memo:
        return memo[key]
    hops: list[int] = ctx.memo("param-kinds-hops", ctx.tree, lambda: [0])
    if hops[0] >= MAX_PARAM_HOPS:
        return None
    memo[key] = None  # recursion guard
    hops[0] += 1
    try:
        memo[key] = k = _param_kind(a, fn, name)
    finally:
        hops[0] -= 1
    return k


def _param_kind(a: Analysis, fn: Fn, name: str) -> Kind | None:
    sites = _sites(a, fn)
    if sites is None:
        return None
    kinds = OTHER_KINDS[0](a.ctx, fn, name) if a.class_of(fn) is None and OTHER_KINDS \
        else []
    if kinds is None or not sites and not kinds:
        return None  # NOTE [kinds by the callers]: the calls in the project's other files
    ctx = a.ctx
    for call, where in sites:
        binds = _binds(a, fn, call)
        if binds is None:
            return None
        v = binds.get(name)
        if v is None and _spread(call):  # NOTE [arguments before a spread]
            return None
        if v is None:
            d = argument_default(name, fn)
            if d is None:
                return None
            k = a.kind_in(d, ctx.tree, fn.lineno)
        elif where is fn and isinstance(v, ast.Name) and v.id == name:
            continue  # `f(model, n - 1)` inside `f`: the parameter passed on
        else:
            k = a.kind_in(v, where, call.lineno)
            local = where is ctx.tree and set(ctx.scope(fn).bindings)
            k = k and _translated(k, fn, binds, local)
        if k is None:
            return None
        kinds.append(k)
    return agreed(kinds)


def agreed(kinds: list[Kind]) -> Kind | None:
    """The kind all of ``kinds`` are (the node kept when they share it), or None."""
    if not kinds:
        return None
    k = kinds[0]
    if any((x.what, x.cls, x.requires_grad, x.over) != (k.what, k.cls, k.requires_grad, k.over)
           for x in kinds):
        return None
    if any(x.node is not k.node for x in kinds):
        k = Kind(k.what, k.cls, k.requires_grad, k.over)
    return k


def _translated(k: Kind, fn: Fn, binds: dict[str, ast.expr],
                local: set[str] | bool) -> Kind | None:
    """``k`` (read at the caller) with its parameter owners renamed to ``fn``'s parameters
    (``train(net, SGD(net.parameters()))``: over ``model`` inside ``def train(model, opt)``);
    owners ``fn`` cannot see leave them unknown (``local``: the names ``fn`` binds, when the
    caller is the module, whose globals ``fn`` sees; False otherwise)."""
    if not k.over:
        return k
    names = {d: p for p, v in binds.items() if (d := dotted(v))}
    over = set()
    for o in k.over:
        root, dot, rest = o.partition(".")
        if o in names:
            over.add(names[o])
        elif root in names:
            over.add(names[root] + dot + rest)
        elif local is not False and root != "self" and root not in _own_names(fn) \
                and root not in local:
            over.add(o)  # a global of the module, visible in `fn` too
        else:
            return Kind(k.what, k.cls, k.requires_grad, frozenset(), k.node)
    return Kind(k.what, k.cls, k.requires_grad, frozenset(over), k.node)


def _own_names(fn: Fn) -> set[str]:
    a = fn.args
    return {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg)
            if x is not None}


def _spread(call: ast.Call) -> bool:
    return any(isinstance(x, ast.Starred) for x in call.args)


def _binds(a: Analysis, fn: Fn, call: ast.Call) -> dict[str, ast.expr] | None:
    """Parameter -> argument of ``call`` (``Cls(...)`` binds ``__init__``'s parameters after
    ``self``); None when a ``**kw`` hides which argument goes where.

    # NOTE [arguments before a spread]
    The positional arguments before the first ``*args`` bind the first parameters, as
    Python binds them (``validate(decoder, *val)``: ``decoder`` is the first); the
    parameters after them come from the spread and stay unknown (no default stands in)."""
    if any(k.arg is None for k in call.keywords):
        return None
    if fn.name == "__init__" and isinstance(call.func, ast.Name):
        names = [x.arg for x in (*fn.args.posonlyargs, *fn.args.args)][1:]
        args = call.args[:next((i for i, x in enumerate(call.args)
                                if isinstance(x, ast.Starred)), len(call.args))]
        return {**dict(zip(names, args)),
                **{k.arg: k.value for k in call.keywords if k.arg is not None}}
    return a.arguments(fn, call)


def _sites(a: Analysis, fn: Fn) -> list[tuple[ast.Call, ast.AST]] | None:
    """Every call of ``fn`` in the file with the function (or module) making it; None when
    ``fn`` is also used without a call we can see (NOTE [parameter kinds])."""
    cls = a.class_of(fn)
    if cls is None:
        if a.functions.get(fn.name) is not fn:
            return None  # a nested function, or one defined twice
        calls, named, _ = _uses(a.ctx, fn.name)
        if named and _named_outside(a.ctx, fn.name):
            return None
        return [(c, w) for c, w in calls if isinstance(c.func, ast.Name)
                and (w is a.ctx.tree or not _local(a.ctx, w, fn.name))]
    if fn.name == "__init__":
        calls, named, _ = _uses(a.ctx, cls.name)
        if named or cls.name in _base_names(a):
            return None  # a subclass calls it through `super().__init__(...)`
        return [(c, w) for c, w in calls if isinstance(c.func, ast.Name)]
    if fn.name.startswith("__") or fn.name == "forward" and cls.is_module \
            or cls.methods.get(fn.name) is not fn:
        return None  # `forward` runs through `__call__`; a method defined twice
    calls, _, self_refs = _uses(a.ctx, fn.name)
    if self_refs:
        return None  # `self.register_forward_hook(self.hook)`
    out = []
    for c, w in calls:
        f = c.func
        if not isinstance(f, ast.Attribute):
            continue
        if isinstance(f.value, ast.Name) and f.value.id == "self":
            if a.class_of(w) is cls:
                out.append((c, w))
            continue
        k = a.kind_in(f.value, w, c.lineno)
        if k is not None and k.cls == cls.name:
            out.append((c, w))
    return out


def function_sites(a: Analysis, fn: Fn) -> list[tuple[ast.Call, ast.AST]] | None:
    """Every call of ``fn`` in the file with the function (or module) making it
    (NOTE [parameter kinds]: None when ``fn`` is also used without a call we can see); a
    ``classmethod``/``staticmethod`` is also called through its class (``SO2.from_matrix(m)``,
    ``cls.is_valid(m)`` in a method of the class); a plain class's ``__call__`` runs on a
    call of an instance (NOTE [instance calls])."""
    cls = a.class_of(fn)
    if cls is not None and fn.name == "__call__" and not cls.is_module \
            and cls.methods.get("__call__") is fn:  # `norm(image)` on an instance
        return _instance_sites(a, cls.name)
    sites = _sites(a, fn)
    if sites is None or cls is None or not any(
            dotted(d) in ("classmethod", "staticmethod") for d in fn.decorator_list):
        return sites
    seen = {id(c) for c, _ in sites}
    for c, w in _uses(a.ctx, fn.name)[0]:
        f = c.func
        if id(c) not in seen and isinstance(f, ast.Attribute) \
                and isinstance(f.value, ast.Name) and (
                f.value.id == cls.name or f.value.id == "cls" and a.class_of(w) is cls):
            sites.append((c, w))
    return sites


def object_sites(a: Analysis, cls: str) -> list[tuple[ast.Call, ast.AST]]:
    """The calls of the names the file binds to an instance of the plain class ``cls``."""
    return _instance_sites(a, cls)


def module_sites(a: Analysis, cls: str, qual: str | None = None
                 ) -> list[tuple[ast.Call, ast.AST]]:
    """The calls of the names the file binds to an instance of the module class ``cls``
    (``net = Net()`` then ``net(x)``: each runs its ``forward``); ``qual``: the class's
    qualified name when it is imported (``post.PostProcessor``, the kind's class)."""
    return _instance_sites(a, cls, MODULE, qual)


def _instance_sites(a: Analysis, cls: str, what: str = OBJECT, qual: str | None = None
                    ) -> list[tuple[ast.Call, ast.AST]]:
    """The calls of the names the file binds to an instance of the plain class ``cls``
    (``norm = Normalize(...)``, ``self.norm = Normalize(...)``; then ``norm(x)``), found by
    the names' words (NOTE [call sites]) and checked by their kind."""
    def make() -> list[tuple[ast.Call, ast.AST]]:
        out: list[tuple[ast.Call, ast.AST]] = []
        made, _, _ = _uses(a.ctx, cls)
        names = set()
        for c, w in made:
            s = a.ctx.scope(w).statement_of(c)
            if isinstance(s, ast.Assign) and s.value is c and len(s.targets) == 1:
                d = dotted(s.targets[0])
                if d:
                    names.add(d)
        for d in sorted(names):
            out.extend(_called_kinds(a, d).get((what, qual or cls), ()))
        return out
    return a.ctx.memo(f"instance-sites:{what}:{cls}:{qual}", a.ctx.tree, make)


def _called_kinds(a: Analysis, d: str) -> dict[tuple[str, str | None], Sites]:
    """The calls ``d(...)`` of the file (``d`` a dotted name), with the function or module
    making each, grouped by the kind (what, class) of the called ``d``; once per name: a
    script binds ``model`` in every training function, to an instance of another class each
    time, and each class asked again about every call of ``model`` (quadratic)."""
    def make() -> dict[tuple[str, str | None], Sites]:
        out: dict[tuple[str, str | None], Sites] = {}
        for c, w in _uses(a.ctx, d.rpartition(".")[2])[0]:
            if dotted(c.func) == d:
                k = a.kind_in(c.func, w, c.lineno)
                if k is not None:
                    out.setdefault((k.what, k.cls), []).append((c, w))
        return out
    return a.ctx.memo("called-kinds:" + d, a.ctx.tree, make)


def _base_names(a: Analysis) -> set[str | None]:
    """The bases of the file's classes as written (``nn.Module``, ``Block``), once per file:
    asked for every ``__init__`` parameter, a scan of every class made a file of many
    classes quadratic."""
    return a.ctx.memo("class-base-names", a.ctx.tree, lambda: {
        dotted(b) for c in a.classes.values() for b in c.node.bases})


def _uses(ctx: Context, name: str) -> tuple[list[tuple[ast.Call, ast.AST]], bool, bool]:
    """(calls ``name(...)`` and ``x.name(...)`` with the function or module making each,
    whether the plain name is also used as a value, whether ``self.name`` is), one pass over
    the statements naming it (NOTE [call sites]), cached per file and name."""
    def make() -> tuple[list[tuple[ast.Call, ast.AST]], bool, bool]:
        found = statements_on(ctx, word_lines(ctx, (name,))) if ascii_code(ctx) \
            else _every_statement(ctx)
        calls: list[tuple[ast.Call, ast.AST]] = []
        named = self_ref = False
        for s, outer in found:
            where = next((o for o in reversed(outer) if isinstance(o, FUNCTION_TYPES)),
                         ctx.tree)
            plain: set[int] = set()  # called names, and the arguments of type checks
            for n in own_nodes(s):  # pre-order: a call comes before its parts
                cls = n.__class__
                if cls is ast.Call:
                    f = n.func  # type: ignore[attr-defined]
                    if (f.__class__ is ast.Name and f.id == name) or (
                            f.__class__ is ast.Attribute and f.attr == name):
                        calls.append((n, where))  # type: ignore[arg-type]
                    plain.add(id(f))
                    if f.__class__ is ast.Name and f.id in _TYPE_CHECKS:
                        plain.update(id(x) for x in n.args)  # type: ignore[attr-defined]
                elif cls is ast.Name:
                    if n.id == name and n.ctx.__class__ is ast.Load \
                            and id(n) not in plain:  # type: ignore[attr-defined]
                        named = True
                elif cls is ast.Attribute and n.attr == name and id(n) not in plain and \
                        dotted(n.value) == "self":  # type: ignore[attr-defined]
                    self_ref = True
        return calls, named, self_ref
    return ctx.memo("param-kinds-uses:" + name, ctx.tree, make)


def _named_outside(ctx: Context, name: str) -> bool:
    """The file reads ``name`` as a value (not a call) somewhere it is not a variable of the
    function reading it: ``contrastive_loss = 0`` ... ``return contrastive_loss`` inside
    ``def contrastive_loss(...)`` reads the running sum, not the function."""
    for s, outer in statements_on(ctx, word_lines(ctx, (name,))) if ascii_code(ctx) \
            else _every_statement(ctx):
        where = next((o for o in reversed(outer) if isinstance(o, FUNCTION_TYPES)), ctx.tree)
        if where is not ctx.tree and _local(ctx, where, name):
            continue
        called = {id(x) for n in own_nodes(s) if isinstance(n, ast.Call) for x in (
            n.func, *(n.args if isinstance(n.func, ast.Name) and n.func.id in _TYPE_CHECKS
                      else ()))}
        if any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
               and id(n) not in called for n in own_nodes(s)):
            return True
    return False


def _local(ctx: Context, fn: ast.AST, name: str) -> bool:
    """``name`` is a variable of ``fn`` (bound there, not declared ``global``): its reads
    there are not the file's function of that name (``contrastive_loss = 0`` inside ``def
    contrastive_loss(...)``, the running sum it returns)."""
    if name not in ctx.scope(fn).bindings:
        return False
    return not any(isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names
                   for n in walk(fn))


def unpacked_return(a: Analysis, stmt: ast.Assign, name: str, scope: Scope, line: int
                    ) -> Kind | None:
    """``model, opt = setup()``: the kind of the element paired with ``name`` in what every
    ``return`` of the file's function gives back (a tuple of as many values), with the
    owners of an optimizer's parameters renamed to the caller's names."""
    t, call = stmt.targets[0] if len(stmt.targets) == 1 else None, stmt.value
    if not isinstance(t, (ast.Tuple, ast.List)) or not isinstance(call, ast.Call) \
            or any(isinstance(x, ast.Starred) for x in t.elts):
        return None
    j = next((i for i, x in enumerate(t.elts) if dotted(x) == name), None)
    fn = (a.local_callee(call, scope, line) or held_method(a, call, scope, line)) \
        if j is not None else None
    if fn is None or j is None:
        return None
    memo: dict[tuple[int, int], Kind | None] = a.ctx.memo("unpacked-returns", a.ctx.tree, dict)
    key = (id(stmt), j)
    if key not in memo:
        memo[key] = None  # recursion guard
        kinds = []
        for r in a.ctx.scope(fn).stmts:
            if not isinstance(r, ast.Return):
                continue
            v = r.value
            if not isinstance(v, (ast.Tuple, ast.List)) or len(v.elts) != len(t.elts) \
                    or any(isinstance(x, ast.Starred) for x in v.elts):
                return None
            k = a.kind_in(v.elts[j], fn, r.lineno + 1)
            if k is None:
                return None
            kinds.append(_caller_owners(a, k, fn, call, dict(zip(
                [dotted(x) for x in v.elts], [dotted(x) for x in t.elts]))))
        memo[key] = agreed(kinds)
    return memo[key]


def _caller_owners(a: Analysis, k: Kind, fn: Fn, call: ast.Call,
                   returned: dict[str | None, str | None]) -> Kind:
    """``k`` read inside ``fn`` with its owners renamed to the caller's: a parameter to the
    argument, a local returned alongside to the caller's target for it, a global kept."""
    if not k.over:
        return k
    binds = {p: dotted(v) for p, v in a.arguments(fn, call).items()}
    local = a.ctx.scope(fn).bindings
    over = set()
    for o in k.over:
        root, dot, rest = o.partition(".")
        new = binds.get(root) if root in binds else returned.get(root) if root in local \
            else None if root in _own_names(fn) or root == "self" else root
        if new is None:
            return Kind(k.what, k.cls, k.requires_grad, frozenset(), k.node)
        over.add(new + dot + rest)
    return Kind(k.what, k.cls, k.requires_grad, frozenset(over), k.node)


# NOTE [class handed in]
# ``def fit(target_cls, make_model, opt_class)`` called only as ``fit(Quadratic, QuadNet,
# optim.Adam)``: the parameter holds a class of this file, so ``make_model()`` in ``fit``
# builds a ``QuadNet`` as surely as ``QuadNet()`` written there. Every call of the file (one
# at least, none unseen: NOTE [parameter kinds]) passes the same class name (or leaves the
# default, that name), which its caller does not rebind.
def handed_class(a: Analysis, fn: ast.AST, name: str) -> str | None:
    """The class of the file every caller passes for parameter ``name`` of ``fn``."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    memo: dict[tuple[int, str], str | None] = a.ctx.memo("handed-class", a.ctx.tree, dict)
    key = (id(fn), name)
    if key not in memo:
        memo[key] = None  # recursion guard
        memo[key] = _handed_class(a, fn, name)
    return memo[key]


def _handed_class(a: Analysis, fn: Fn, name: str) -> str | None:
    sites = _sites(a, fn)
    if not sites:
        return None
    got: set[str] = set()
    for call, where in sites:
        binds = _binds(a, fn, call)
        if binds is None and a.class_of(fn) is None:
            binds = _positional(fn, call)  # `fit(Quad, QuadNet, **extra)`: `**` binds no more
        if binds is None or name not in binds and _spread(call):
            return None
        v = binds.get(name, argument_default(name, fn))
        if not isinstance(v, ast.Name) or v.id not in a.classes:
            return None
        b = a.ctx.scope(where).binding_before(v.id, call.lineno)
        if b is not None and not isinstance(b.stmt, ast.ClassDef):
            return None
        got.add(v.id)
    return got.pop() if len(got) == 1 else None


def _positional(fn: Fn, call: ast.Call) -> dict[str, ast.expr]:
    """The parameters bound by ``call``'s positional arguments before any ``*args`` (a
    ``**kw`` cannot bind them again)."""
    names = [x.arg for x in (*fn.args.posonlyargs, *fn.args.args)]
    args = call.args[:next((i for i, x in enumerate(call.args)
                            if isinstance(x, ast.Starred)), len(call.args))]
    return dict(zip(names, args))
