"""Which functions of the file run with grad off, through which call, and with which of
their parameters given values made there.

# NOTE [grad-off extent]
Grad mode is thread state, not syntax: ``with torch.no_grad(): metrics = self.eval_step(b)``
runs ``eval_step`` and everything it calls with grad off, however far down the call goes: a
helper, ``self.method()``, ``obj.method()`` on an instance of a class of the file, the
``forward`` of a module of the file (``model(x)``, ``self.encoder(x)``) and of the module
classes of the file a container attribute is built from (``nn.Sequential(*[Block() ...])``),
``__call__`` of a plain class of the file. A value computed in that extent (a module output,
a torch op, arithmetic) has no ``grad_fn`` and ``requires_grad=False``: an operation that
needs a graph (``retain_grad()``, ``register_hook``) raises on it
(pytorch-facts: grad mode). Leaves keep their flag (a Parameter, a factory given
``requires_grad=True``), and ``enable_grad()`` inside turns recording back on: neither is
counted. The answer is computed once per file, on first ask, up to ``MAX_HOPS`` calls deep.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

from gradtrace.lint.analysis.callees import resolve
from gradtrace.lint.analysis.kinds import MODULE, OBJECT, Kind
from gradtrace.lint.analysis.reach import disables_grad
from gradtrace.lint.grad_modes import FUNCTION_TYPES, grad_mode_of
from gradtrace.lint.nodes import bfs_walk, child_nodes, function_scopes, scope_nodes

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

Def = ast.FunctionDef | ast.AsyncFunctionDef
MAX_HOPS = 5
_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
# calls whose result is a leaf that keeps (or is given) its own requires_grad flag
LEAF_METHODS = frozenset({"requires_grad_", "parameters", "named_parameters", "parameter"})
LEAF_CALLS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})
# containers whose call runs the modules they hold
CONTAINERS = frozenset({"torch.nn.Sequential", "torch.nn.ModuleList", "torch.nn.ModuleDict"})


@dataclass(frozen=True)
class OffEntry:
    """``fn`` runs with grad off: ``region`` (a ``with`` or a decorated function) turned grad
    off and ``call`` (inside it) leads to ``fn``; ``made``: parameters of ``fn`` given a value
    computed with grad off by that chain."""

    fn: Def
    region: ast.AST
    call: ast.Call | None
    made: frozenset[str]


def grad_off_functions(ctx: Context) -> dict[int, OffEntry]:
    """id(function) -> how it is run with grad off (NOTE [grad-off extent])."""
    return ctx.memo("grad-off-functions", ctx.tree, lambda: _build(ctx))


def region_statements(ctx: Context) -> list[tuple[ast.With | ast.AsyncWith, ast.AST]]:
    """Every ``with`` that turns grad off, with the function (or module) holding it."""
    def make() -> list[tuple[ast.With | ast.AsyncWith, ast.AST]]:
        out = []
        stack: list[tuple[ast.AST, ast.AST]] = [(ctx.tree, ctx.tree)]
        while stack:
            n, where = stack.pop()
            for c in child_nodes(n):
                if isinstance(c, FUNCTION_TYPES):
                    stack.append((c, c))
                elif isinstance(c, (ast.With, ast.AsyncWith)):
                    if any(disables_grad(i.context_expr, ctx) for i in c.items):
                        out.append((c, where))
                    stack.append((c, where))
                elif isinstance(c, (ast.stmt, ast.ExceptHandler, ast.match_case)):
                    stack.append((c, where))
        return out
    return ctx.memo("grad-off-regions", ctx.tree, make)


def _turns_on(s: ast.AST, ctx: Context) -> bool:
    return isinstance(s, (ast.With, ast.AsyncWith)) and any(
        grad_mode_of(i.context_expr, ctx.imports) in ("on", "reset") for i in s.items)


def off_nodes(body: list[ast.stmt], ctx: Context) -> Iterator[ast.AST]:
    """The nodes of ``body`` that run with grad off when ``body`` does: nested functions,
    lambdas and classes left out, and so are ``enable_grad()`` blocks."""
    todo: list[ast.AST] = list(_until_on(body, ctx))
    while todo:
        n = todo.pop()
        if isinstance(n, _NESTED) or _turns_on(n, ctx):
            continue
        yield n
        if isinstance(n, ast.stmt) and hasattr(n, "body"):
            for field, value in ast.iter_fields(n):
                if isinstance(value, list):
                    todo.extend(_until_on(value, ctx) if value and isinstance(
                        value[0], ast.stmt) else value)
                elif isinstance(value, ast.AST):
                    todo.append(value)
        else:
            todo.extend(child_nodes(n))


def _until_on(stmts: list, ctx: Context) -> list:  # type: ignore[type-arg]
    """``stmts`` up to the first statement ``torch.set_grad_enabled(<not False>)``: grad is on
    for those after it (the callee that turns it back on for itself)."""
    for i, s in enumerate(stmts):
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and (ctx.qualified_name(
                s.value.func) or "").endswith("set_grad_enabled") and grad_mode_of(
                s.value, ctx.imports) == "on":
            return stmts[:i]
    return stmts


def off_list(ctx: Context, owner: ast.AST) -> list[ast.AST]:
    """:func:`off_nodes` of the body of ``owner`` (a def or a ``with``), as a list made once per
    file: several rules and their regions ask it of the same functions (read it, never change
    it)."""
    body: list[ast.stmt] = owner.body  # type: ignore[attr-defined]
    return ctx.memo("off-nodes", owner, lambda: list(off_nodes(body, ctx)))


def made_names(nodes: list[ast.AST], where: ast.AST, ctx: Context,
               given: frozenset[str] = frozenset()) -> set[str]:
    """Names that ``nodes`` (run with grad off) bind to a computed value (``given``: names
    already known to hold one), in source order."""
    made = set(given)
    assigns = sorted((n for n in nodes if isinstance(n, (ast.Assign, ast.AnnAssign))
                      and n.value is not None), key=lambda n: (n.lineno, n.col_offset))
    for s in assigns:
        if not computed(s.value, made, where, ctx):  # type: ignore[arg-type]
            continue
        targets = s.targets if isinstance(s, ast.Assign) else [s.target]
        for t in targets:
            for e in ([t] if isinstance(t, ast.Name) else
                      t.elts if isinstance(t, (ast.Tuple, ast.List)) else []):
                if isinstance(e, ast.Name):
                    made.add(e.id)
                elif isinstance(e, ast.Starred) and isinstance(e.value, ast.Name):
                    made.add(e.value.id)
    return made


def computed(e: ast.expr, made: set[str], where: ast.AST, ctx: Context) -> bool:
    """``e``, evaluated with grad off, is a tensor computed there (no graph, no flag):
    arithmetic, a torch op, a module call, a method of a computed value, or a name bound to
    one; never a leaf (a Parameter, ``requires_grad=True``, ``.requires_grad_()``)."""
    if isinstance(e, ast.Name):
        return e.id in made
    if isinstance(e, (ast.BinOp, ast.UnaryOp)):
        return True
    if isinstance(e, (ast.Subscript, ast.Starred)):
        return computed(e.value, made, where, ctx)
    if isinstance(e, ast.Attribute):
        return e.attr not in ("grad", "data", "weight", "bias") and \
            computed(e.value, made, where, ctx)
    if not isinstance(e, ast.Call):
        return False
    if any(k.arg == "requires_grad" for k in e.keywords):
        return False
    f = e.func
    q = ctx.qualified_name(f) or ""
    if q in LEAF_CALLS:
        return False
    if isinstance(f, ast.Attribute) and f.attr in LEAF_METHODS:
        return False
    if q.startswith("torch.") and not q.startswith("torch.nn.Parameter"):
        return any(isinstance(a, (ast.Name, ast.Attribute, ast.Subscript, ast.Call, ast.BinOp))
                   for a in (*e.args, *(k.value for k in e.keywords)))
    if isinstance(f, ast.Attribute) and computed(f.value, made, where, ctx):
        return True
    k = called_kind(f, where, ctx)
    return k is not None and k.what == MODULE


def called_kind(f: ast.expr, where: ast.AST, ctx: Context) -> Kind | None:
    """What the called ``f`` is: read where it is called, or, for a parameter of the
    function, what every call of that function passes."""
    return ctx.analysis.kind_in(f, where, getattr(f, "lineno", 0))  # NOTE [parameter kinds]


def calls_of(ctx: Context, fn: Def) -> list[tuple[ast.Call, ast.AST]]:
    """Every call of ``fn`` in the file (by name, ``self.m()``, ``obj.m()`` on an instance of
    its class), with the function (or module) making it; built once per file."""
    def make() -> dict[str, list[tuple[ast.Call, ast.AST]]]:
        out: dict[str, list[tuple[ast.Call, ast.AST]]] = {}
        for where in function_scopes(ctx.tree):
            for n in scope_nodes(where):
                if isinstance(n, ast.Call):
                    f = n.func
                    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(
                        f, ast.Attribute) else None
                    if name is not None:
                        out.setdefault(name, []).append((n, where))
        return out
    a = ctx.analysis
    got = []
    for n, where in ctx.memo("calls-by-last-name", ctx.tree, make).get(fn.name, ()):
        callee = a.callee(n, where)
        if callee is None:
            r = resolve(ctx, where, n)
            callee = r[0] if r is not None else None
        if callee is None and isinstance(n.func, ast.Attribute) \
                and isinstance(n.func.value, ast.Call):  # `Evaluator(model).run()`
            k = a.kind_in(n.func.value, where, n.lineno)
            cls = a.classes.get(k.cls or "") if k is not None else None
            callee = cls.methods.get(fn.name) if cls is not None else None
        if callee is fn:
            got.append((n, where))
    return got


def _targets(call: ast.Call, where: ast.AST, ctx: Context) -> list[tuple[Def, dict[str, ast.expr]]]:
    """The functions of the file ``call`` runs, each with its parameter -> argument."""
    a = ctx.analysis
    fn = a.callee(call, where)
    if fn is not None and fn is not where:
        return [(fn, a.arguments(fn, call))]
    got = resolve(ctx, where, call)
    if got is not None:
        return [(got[0], a.arguments(got[0], call))]
    k = called_kind(call.func, where, ctx)
    if k is None or k.cls is None:
        return []
    cls = a.classes.get(k.cls)
    if cls is not None:
        m = cls.methods.get("forward" if k.what == MODULE and cls.is_module else
                            "__call__" if k.what == OBJECT else "")
        if m is None:
            return []
        a_ = m.args
        names = [x.arg for x in (*a_.posonlyargs, *a_.args)][1:]
        binds: dict[str, ast.expr] = {}
        for n, v in zip(names, call.args):
            if isinstance(v, ast.Starred):
                break
            binds[n] = v
        binds.update((kw.arg, kw.value) for kw in call.keywords if kw.arg is not None)
        return [(m, binds)]
    if k.what == MODULE and k.cls in CONTAINERS:
        return [(m, {}) for m in _held_forwards(call.func, where, ctx)]
    return []


def _held_forwards(f: ast.expr, where: ast.AST, ctx: Context) -> list[Def]:
    """``forward`` of the module classes of the file that the container attribute ``f``
    (``self.blocks``) is built from in its class."""
    a = ctx.analysis
    if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
            and f.value.id == "self"):
        return []
    cls = a.class_of(where)
    info = cls.attrs.get(f.attr) if cls is not None else None
    if info is None or info.value is None:
        return []
    out = []
    for n in bfs_walk(info.value):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            held = a.classes.get(n.func.id)
            fwd = held.methods.get("forward") if held is not None and held.is_module else None
            if fwd is not None and fwd not in out:
                out.append(fwd)
    return out


def _build(ctx: Context) -> dict[int, OffEntry]:
    out: dict[int, OffEntry] = {}
    todo: list[tuple[OffEntry, int]] = []

    def enter(nodes: list[ast.AST], where: ast.AST, region: ast.AST, first: ast.Call | None,
              given: frozenset[str], hops: int) -> None:
        made = made_names(nodes, where, ctx, given)
        for n in nodes:
            if not isinstance(n, ast.Call):
                continue
            for fn, binds in _targets(n, where, ctx):
                if any(grad_mode_of(d, ctx.imports) in ("on", "reset")
                       for d in fn.decorator_list):
                    continue
                got = frozenset(p for p, v in binds.items() if computed(v, made, where, ctx))
                old = out.get(id(fn))
                if old is not None and got <= old.made:
                    continue
                e = OffEntry(fn, region, first or n, got | (old.made if old else frozenset()))
                out[id(fn)] = e
                todo.append((e, hops + 1))

    for w, where in region_statements(ctx):
        enter(off_list(ctx, w), where, w, None, frozenset(), 0)
    for fn in [*function_scopes(ctx.tree)][1:]:  # the functions, breadth first
        if any(disables_grad(d, ctx) for d in fn.decorator_list) and id(fn) not in out:
            e = OffEntry(fn, fn, None, frozenset())
            out[id(fn)] = e
            todo.append((e, 0))
    while todo:
        e, hops = todo.pop(0)
        if hops > MAX_HOPS:
            continue
        enter(off_list(ctx, e.fn), e.fn, e.region, e.call, e.made, hops)
    return out
