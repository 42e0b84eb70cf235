"""GT438 for a module kept on ``self`` and trained in another method (NOTE [module kept on self]).

# NOTE [module kept on self]
A class (a trainer, a runner, a solver) builds a module in ``__init__`` and keeps it:
``self.encoder = Encoder(cfg)`` / ``self.encoder = make_encoder(cfg)`` (a constructor of torch,
of the file or of another file of the project, or a factory of the project:
NOTE [module built by a factory], NOTE [foreign module kinds]), builds its optimizers there
over other modules only (``self.opt = Adam(self.head.parameters())``, every optimizer of the
class known over named parameters, none assigned again), and a method calls
``self.encoder(...)`` with grad on, runs ``backward()`` and steps exactly one of those
optimizers after the call (in the loop around the call, or in the method itself when the
method is the per-batch step): the encoder's parameters get gradients and never change. As
for a module of a script, anything else done to ``self.encoder`` anywhere in the file (handed
to something, its parameters or state read (a comprehension that only measures or snapshots
them aside), frozen, loaded, put in eval mode, assigned again,
``x.encoder`` read through another object) keeps it silent, and so does a class that freezes,
loads or evaluates itself, a factory that does, and a call whose output the loss climbs. The
class's bases must all be shown (``object``, a torch module class, classes of the file with
such bases): a trainer base of a library or of another file may build optimizers or handle
the module in code not read here.

The module and the optimizer may also be handed to the constructor (``Loop(core, top,
opt).go()``, ``__init__`` keeping ``self.core = core``): the class built by exactly one call
of the file and named nowhere else, the module built once by the caller before that call and
only handed to it (or measured), the optimizer built by the caller before it; its sources
are read through the same hand-off (``top`` given as ``self.top``). Reported at the
caller's optimizer, as for a module of a script.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Callable, Iterator

from gradtrace.lint.analysis.built_classes import built_class
from gradtrace.lint.analysis.kinds import OPTIMIZER
from gradtrace.lint.analysis.maximized import maximized
from gradtrace.lint.analysis.params import module_ctor
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import child_nodes, walk
from gradtrace.lint.rules.registration._factory import factory_built
from gradtrace.lint.rules.registration._handed import measured
from gradtrace.lint.rules.registration._modules import covers, optimizer_builds, step_lines

if TYPE_CHECKING:
    from gradtrace.lint.analysis.modules import ClassInfo
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

Built = tuple["Context", ast.Call]
# (the optimizer's name, its sources, its statement, the module's name, its statement, the
# trained call, the method holding it); names as the code that built them spells them
# an optimizer: (its sources in `self`'s terms, its statement, its name, its sources as named)
Opt = tuple[frozenset[str], ast.stmt, str, frozenset[str]]
COMPREHENSIONS = (ast.ListComp, ast.GeneratorExp, ast.SetComp, ast.DictComp)
Kept = tuple[str, frozenset[str], ast.stmt, str, ast.stmt, ast.Call, ast.AST]


def kept_on_self(ctx: Context, cls: ClassInfo, keeps_fixed: tuple[str, ...],
                 owns: Callable[[ast.Call, Context], bool],
                 fixed: Callable[[ast.Call, Context], bool],
                 handled: frozenset[str]) -> Iterator[Kept]:
    """The modules of ``cls`` kept on ``self``, in no optimizer of the class, and run in a
    method that backpropagates and steps one of them (NOTE [module kept on self])."""
    init = cls.methods.get("__init__")
    if init is None or init not in cls.node.body or not _whole(ctx, cls, 0):
        return
    params = {a.arg for a in (*init.args.posonlyargs, *init.args.args, *init.args.kwonlyargs)}
    given = {n: i.value.id for n, i in cls.init_attrs.items()
             if isinstance(i.value, ast.Name) and i.value.id in params}
    made = _construction(ctx, cls, init) if given else None
    # what the caller names each parameter kept on `self` (NOTE [module kept on self])
    alias = {made[2][p].id: "self." + n for n, p in given.items() if made is not None
             and isinstance(made[2].get(p), ast.Name)}  # type: ignore[union-attr]
    opts: dict[str, Opt] = {}
    for name, info in cls.attrs.items():
        if info.later or info.method is not init and name in given:
            continue
        if name in given:
            got = _handed_optimizer(ctx, made, given[name], alias)
            if got is not None:
                opts[name] = got
            continue
        k = cls.attr_kind(name)
        if k is None or k.what != OPTIMIZER:
            continue
        over = frozenset(_in_self_terms(x, given) for x in k.over)
        if not k.over or info.method is not init or "" in over:
            return  # an optimizer over unknown parameters, or built again: not known
        opts[name] = (over, info.stmt, "self." + name, k.over)
    if not opts or any(i.later for n, i in cls.attrs.items() if n in opts):
        return
    iscope = ctx.scope(init)
    for name, info in cls.init_attrs.items():
        me = "self." + name
        if info.later or info.buffer \
                or any(covers(s, me) or covers(me, s) for o in opts.values() for s in o[0]):
            continue
        if name in given:  # handed to the constructor: built by the caller
            site = _handed_module(ctx, made, given[name], keeps_fixed, handled)
            if site is None:
                continue
            v, label, where = site
        elif isinstance(info.value, ast.Call):
            v, label, where = info.value, me, info.stmt
        else:
            continue
        scope = made[0] if name in given else iscope  # type: ignore[index]
        built = _built(ctx, v, scope, where.lineno, keeps_fixed)
        if built is None or not owns(built[1], built[0]) or fixed(built[1], built[0]):
            continue
        calls = _only_called(ctx, cls, name, info.stmt, handled)
        if not calls:
            continue
        hit = _trained(ctx, calls, opts)
        if hit is not None:
            o, call, fn = hit
            yield opts[o][2], opts[o][3], opts[o][1], label, where, call, fn


Made = tuple["Scope", ast.Call, dict[str, ast.expr]]


def _in_self_terms(source: str, given: dict[str, str]) -> str:
    """An optimizer source of ``__init__`` in ``self``'s terms: ``model.head`` where
    ``self.net = model`` is ``self.net.head``; "" when not known (a parameter of ``__init__``
    or another name not kept on ``self`` as it is)."""
    root = source.partition(".")[0]
    if root == "self":
        return source
    attr = next((a for a, p in given.items() if p == root), None)
    return "self." + attr + source[len(root):] if attr is not None else ""


def _whole(ctx: Context, cls: ClassInfo, depth: int) -> bool:
    """Every base of ``cls`` is ``object``, a torch module class or a class of the file with
    the same property: no code the file does not show (a trainer base of a library or of
    another file building optimizers, hooks, callbacks) runs on ``self``."""
    for b in cls.node.bases:
        q = ctx.qualified_name(b) or ""
        own = ctx.analysis.classes.get(b.id) if isinstance(b, ast.Name) else None
        if q == "object" or q.startswith("torch.nn.") and q.count(".") == 2:
            continue
        if own is None or own is cls or depth > 4 or not _whole(ctx, own, depth + 1):
            return False
    return not cls.node.keywords


def _construction(ctx: Context, cls: ClassInfo, init: ast.AST) -> Made | None:
    """(the caller's scope, the call, the argument given for each parameter of
    ``__init__``) of the one construction of ``cls`` in the file, the class named nowhere
    else (a base, a callback, another file may build it otherwise: None)."""
    calls: list[tuple[ast.Call, ast.AST]] = []
    named = 0
    todo: list[tuple[ast.AST, ast.AST]] = [(ctx.tree, ctx.tree)]
    while todo:
        n, owner = todo.pop()
        if isinstance(n, ast.Name) and n.id == cls.node.name:
            named += 1
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) \
                and n.func.id == cls.node.name:
            calls.append((n, owner))
        inner = n if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) else owner
        todo.extend((c, inner) for c in child_nodes(n))
    if len(calls) != 1 or named != 1:
        return None
    call, owner = calls[0]
    a = init.args  # type: ignore[attr-defined]
    names = [x.arg for x in (*a.posonlyargs, *a.args)][1:]
    if len(call.args) > len(names) or any(isinstance(x, ast.Starred) for x in call.args) \
            or any(k.arg is None for k in call.keywords):
        return None
    got: dict[str, ast.expr] = dict(zip(names, call.args))
    got.update((k.arg, k.value) for k in call.keywords if k.arg)
    return ctx.scope(owner), call, got


def _handed_optimizer(ctx: Context, made: Made | None, param: str, alias: dict[str, str]
                      ) -> Opt | None:
    """(sources in ``self``'s terms, its statement, its caller's name, the sources as the
    caller names them) of the optimizer the caller built before the construction and handed
    to ``param``; None: not such."""
    if made is None or not isinstance(made[2].get(param), ast.Name):
        return None
    scope, call, got = made
    name = got[param].id  # type: ignore[attr-defined]
    builds = [o for o in optimizer_builds(scope) if o.name == name]
    if len(builds) != 1 or builds[0].stmt.lineno >= call.lineno or not builds[0].sources:
        return None
    o = builds[0]
    srcs = frozenset(next((alias[c] + s[len(c):] for c in alias if covers(c, s)), s)
                     for s in o.sources)
    return srcs, o.stmt, name, o.sources


def _handed_module(ctx: Context, made: Made | None, param: str, keeps_fixed: tuple[str, ...],
                   handled: frozenset[str]) -> tuple[ast.Call, str, ast.stmt] | None:
    """(the call that built it, its caller's name, the statement) of the module the caller
    built once and only handed to ``param`` of the construction (or measured); None: not
    such."""
    if made is None or not isinstance(made[2].get(param), ast.Name):
        return None
    scope, call, got = made
    name = got[param].id  # type: ignore[attr-defined]
    bs = scope.bindings.get(name, [])
    if len(bs) != 1 or not isinstance(bs[0].value, ast.Call) or scope.loops_of(bs[0].stmt) \
            or bs[0].line >= call.lineno:
        return None
    skip: set[int] = {id(got[param])}
    for s in scope.stmts:
        for n in walk(s):
            skip.update(id(x) for x in measured(n, name))
    for s in scope.stmts:
        if s is bs[0].stmt or isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef,
                                              ast.ClassDef)):
            continue
        if not _plain_reads(s, name, skip, handled):
            return None
    return bs[0].value, name, bs[0].stmt


def _plain_reads(n: ast.AST, name: str, skip: set[int], handled: frozenset[str]) -> bool:
    """Every reading of ``name`` in ``n`` is skipped or a non-handling attribute read."""
    if id(n) in skip:
        return True
    if isinstance(n, ast.Attribute) and (dotted(n) or "").partition(".")[0] == name:
        parts = (dotted(n) or "").split(".")[1:]
        return not (set(parts) & handled) and isinstance(n.ctx, ast.Load)
    if isinstance(n, ast.Name) and n.id == name:
        return False
    if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return True
    return all(_plain_reads(c, name, skip, handled) for c in child_nodes(n))


def _built(ctx: Context, v: ast.Call, scope: Scope, line: int,
           keeps_fixed: tuple[str, ...]) -> Built | None:
    """(the class's file context, a bare constructor call of it) for a module built by
    ``v``: a constructor of torch or the file, a factory of the project, a module class of
    another file of the project."""
    if module_ctor(v, ctx):
        return ctx, v
    got = factory_built(v, ctx, scope, line, keeps_fixed)
    if got is not None:
        return got
    f = v.func
    b = scope.binding_before(f.id, line) if isinstance(f, ast.Name) else None
    if b is not None and not isinstance(b.stmt, (ast.Import, ast.ImportFrom)):
        return None  # a local name: not the import
    got_cls = built_class(ctx, v) if isinstance(f, (ast.Name, ast.Attribute)) else None
    if got_cls is None or got_cls[0] is ctx or not got_cls[1].is_module:
        return None
    return got_cls[0], ast.Call(func=ast.Name(got_cls[1].node.name, ast.Load()), args=[],
                                keywords=[])


class _SelfReads:
    """The walk of :func:`_only_called` (an object, not a recursive closure: NOTE [gc])."""

    def __init__(self, cls: ClassInfo, name: str, bind: ast.stmt, handled: frozenset[str]
                 ) -> None:
        self.name, self.bind, self.handled = name, bind, handled
        self.out: list[tuple[ast.Call, ast.AST]] = []
        self.methods = {id(m) for m in cls.node.body if isinstance(m, (ast.FunctionDef,
                                                                          ast.AsyncFunctionDef))}
        self.owner: list[ast.AST] = []
        self.skip: set[int] = set()

    def method(self) -> ast.AST | None:
        return next((o for o in self.owner if id(o) in self.methods), None)

    def visit(self, n: ast.AST) -> bool:
        name, bind, handled, out, owner, skip, visit, method = (
            self.name, self.bind, self.handled, self.out, self.owner, self.skip, self.visit,
            self.method)
        if id(n) in skip:
            return True
        if isinstance(n, COMPREHENSIONS):  # `[p.clone() for p in t.<name>.parameters()]`
            for g in n.generators:
                for c in walk(g.iter):
                    if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and \
                            isinstance(c.func.value, ast.Attribute) and c.func.value.attr == name:
                        skip.update(id(x) for x in measured(n, dotted(c.func.value) or ""))
        if n is bind:
            return visit(bind.value) if isinstance(bind, (ast.Assign, ast.AnnAssign)) \
                and bind.value is not None else False
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            owner.append(n)
            try:
                return all(visit(c) for c in child_nodes(n))
            finally:
                owner.pop()
        if isinstance(n, ast.Call) and _is_self_attr(n.func, name):
            m = method()
            if m is None:
                return False
            out.append((n, m))
            return all(visit(a) for a in [*n.args, *(k.value for k in n.keywords)])
        if isinstance(n, ast.Attribute) and n.attr == name:
            return False  # a bare `self.<name>` (stored, handed over) or `x.<name>`
        if isinstance(n, ast.Attribute):
            parts = (dotted(n) or "").split(".")
            if len(parts) > 2 and parts[0] == "self" and parts[1] == name:
                return not (set(parts[2:]) & handled) and isinstance(n.ctx, ast.Load) \
                    and method() is not None
        return all(visit(c) for c in child_nodes(n))


def _only_called(ctx: Context, cls: ClassInfo, name: str, bind: ast.stmt,
                 handled: frozenset[str]) -> list[tuple[ast.Call, ast.AST]] | None:
    """(call, method) of every ``self.<name>(...)`` in the class's own methods when every
    other reading of ``<name>`` in the file (``bind``, its first assignment, aside) is
    ``self.<name>.<attr>`` there with no handling attribute (None: it is handed over, stored,
    assigned, frozen, loaded, read through another object or in another class)."""
    w = _SelfReads(cls, name, bind, handled)
    return w.out if w.visit(ctx.tree) else None


def _is_self_attr(e: ast.AST, name: str) -> bool:
    return isinstance(e, ast.Attribute) and e.attr == name and isinstance(e.value, ast.Name) \
        and e.value.id == "self"


def _trained(ctx: Context, calls: list[tuple[ast.Call, ast.AST]],
             opts: dict[str, Opt]
             ) -> tuple[str, ast.Call, ast.AST] | None:
    """(optimizer attribute, call, method): a call with grad on, after which its loop (or,
    outside a loop, its method) runs ``backward()`` and steps exactly one optimizer."""
    for c, fn in calls:
        scope = ctx.scope(fn)
        if scope.grad_off_at(c) is not None or _detached(c, scope):
            continue
        loops = scope.loops_of(c)
        region: ast.AST = loops[-1] if loops else fn
        stmt = scope.statement_of(c)
        if stmt is None or maximized(c, stmt, region):
            continue
        start = region.lineno if loops else c.lineno
        end = region.end_lineno or region.lineno
        if not any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                   and n.func.attr == "backward" and start <= n.lineno <= end
                   for n in walk(region)):
            continue
        stepped = [o for o in opts if any(start <= ln <= end
                                          for ln in step_lines(scope, "self." + o))]
        if len(stepped) == 1:
            return stepped[0], c, fn
    return None


def _detached(call: ast.Call, scope) -> bool:  # type: ignore[no-untyped-def]
    """``self.m(x).detach()``: the module gets no gradient."""
    stmt = scope.statement_of(call)
    return stmt is not None and any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
        and n.func.attr in ("detach", "detach_", "item", "tolist") and n.func.value is call
        for n in walk(stmt))
