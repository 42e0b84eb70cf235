"""Which layers of a model a walk of hook registrations reaches.

# NOTE [layers a hook walk reaches]
Per-sample-gradient extensions, attribution tools and second-order optimizers hook a whole
model, not one layer: ``for m in model.modules(): m.register_full_backward_hook(h)``, often
only on leaves (``if len(list(m.children())) == 0``) or on some classes
(``if isinstance(m, (nn.Conv2d, nn.Linear))``), or through a recursive helper that hooks a
module when it has no children and otherwise calls itself on each child. The model is
usually handed in (``BatchGrad(net)``, ``Explainer(model)``), or the hooking function is
given to ``model.apply(fn)``, which calls it on every module: the model's kind
(NOTE [kinds], NOTE [parameter kinds]) names a module class of the file or an
``nn.Sequential(...)`` call.

:func:`hook_walk` reads the walk around a registration call: the model walked, and which
modules the tests around the call let through (every module, every leaf, or the classes of an
``isinstance`` test; any other test, a ``continue`` or ``break`` in the loop: unknown, None).
:func:`hooked_writes` finds the in-place writes of the model's methods into the output of an
attribute layer the walk hooks (``out = self.bn(h)`` then ``out += skip``).
:func:`model_layers` lists the layers the model is built from, in the file: the ``torch.nn``
layer calls assigned to ``self`` attributes of its class and of the classes of the file it
holds (transitively), and the positional layers of ``nn.Sequential(...)`` calls, each with the
layer whose output it receives as such: the one just before it in its ``Sequential``, or, in a
class, the attribute layer a method runs it on (``self.act(self.lin(x))``, ``h = self.lin(x)``
then ``self.act(h)``).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Iterator

from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.context import FUNCTION_TYPES

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

WALKS = frozenset({"modules", "named_modules"})
CHILDREN = frozenset({"children", "named_children"})
SEQUENTIAL = "torch.nn.Sequential"
CONTAINERS = frozenset({SEQUENTIAL, "torch.nn.ModuleList"})
MAX_CLASSES = 24


@dataclass(frozen=True)
class Walk:
    """The model whose modules get the hook, where it is read, and the classes let through
    (None: every module, or every leaf: each layer a leaf)."""

    model: ast.expr
    where: ast.AST
    line: int
    classes: frozenset[str] | None


def hook_walk(call: ast.Call, ctx: Context) -> list[Walk]:
    """The walks that hand ``recv.register_...(...)`` (``call``, being visited) each module of
    a model; empty when ``recv`` is not such a module or the tests around it are unknown."""
    recv = call.func.value if isinstance(call.func, ast.Attribute) else None
    if not isinstance(recv, ast.Name):
        return []
    classes: frozenset[str] | None = None
    for s in reversed(ctx.stmts[:-1]):
        if isinstance(s, ast.If):
            if _inside(call, s.orelse):
                return []
            got = _admitted(s.test, recv.id, ctx)
            if got is False:
                return []
            if got is not True:
                classes = got if classes is None else classes & got
        elif isinstance(s, (ast.For, ast.AsyncFor)):
            model = _walked(s, recv.id)
            if model is None or any(isinstance(n, (ast.Continue, ast.Break))
                                    for n in ast.walk(s)):
                return []
            where = ctx.function or ctx.tree
            return [Walk(model, where, s.lineno, classes)]
        elif isinstance(s, FUNCTION_TYPES):
            return _recursive(s, recv.id, classes, ctx)
        elif not isinstance(s, (ast.With, ast.AsyncWith, ast.Try)):
            return []
    return []


def _inside(node: ast.AST, body: list[ast.stmt]) -> bool:
    return any(n is node for s in body for n in ast.walk(s))


def _walked(loop: ast.For | ast.AsyncFor, name: str) -> ast.expr | None:
    """``model`` for ``for name in model.modules()`` / ``for _, name in
    model.named_modules()``."""
    it, t = loop.iter, loop.target
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
            and it.func.attr in WALKS):
        return None
    if it.func.attr == "named_modules" and isinstance(t, ast.Tuple) and len(t.elts) == 2:
        t = t.elts[1]
    return it.func.value if isinstance(t, ast.Name) and t.id == name else None


def _admitted(test: ast.expr, name: str, ctx: Context) -> frozenset[str] | bool | None:
    """What ``if test:`` lets through for the module ``name``: True (every leaf), the
    qualified classes of an ``isinstance`` test, False (a test on something else)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        parts = [_admitted(v, name, ctx) for v in test.values]
        if all(isinstance(p, frozenset) for p in parts):
            return frozenset().union(*parts)  # type: ignore[arg-type]
        return False
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Name) \
            and test.func.id == "isinstance" and len(test.args) == 2 \
            and isinstance(test.args[0], ast.Name) and test.args[0].id == name:
        types = test.args[1].elts if isinstance(test.args[1], ast.Tuple) else [test.args[1]]
        names = [ctx.qualified_name(t) for t in types]
        return frozenset(names) if all(names) else False  # type: ignore[arg-type]
    return True if _leaf_test(test, name) else False


def _leaf_test(test: ast.expr, name: str) -> bool:
    """``len(list(m.children())) == 0``, ``not list(m.children())``, ``not any(...)``."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 \
            and isinstance(test.ops[0], ast.Eq) and isinstance(test.comparators[0], ast.Constant) \
            and test.comparators[0].value == 0 and isinstance(test.left, ast.Call) \
            and isinstance(test.left.func, ast.Name) and test.left.func.id == "len":
        return bool(test.left.args) and _children_of(test.left.args[0], name)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _children_of(test.operand, name)
    return False


def _children_of(e: ast.expr, name: str) -> bool:
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Name) \
            and e.func.id in ("list", "tuple", "any") and len(e.args) == 1:
        e = e.args[0]
    return isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
        and e.func.attr in CHILDREN and isinstance(e.func.value, ast.Name) \
        and e.func.value.id == name


def _recursive(fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str,
               classes: frozenset[str] | None, ctx: Context) -> list[Walk]:
    """A helper that hooks its parameter ``name`` and calls itself on ``name``'s children:
    the models its other callers hand it, each walked to its leaves at least."""
    if not any(a.arg == name for a in fn.args.args):
        return []
    if not any(isinstance(n, ast.Call) and _children_of(n, name) for n in ast.walk(fn)) \
            or not any(isinstance(n, ast.Call) and _names_fn(n.func, fn.name)
                       for n in ast.walk(fn)):
        return _applied(fn, name, classes, ctx)
    return [Walk(v, where, getattr(v, "lineno", 0), classes)
            for v, where in _handed(fn, name, ctx) if where is not fn]


def _applied(fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str,
             classes: frozenset[str] | None, ctx: Context) -> list[Walk]:
    """``model.apply(fn)``: ``fn`` is called on every module of ``model`` (its first
    parameter, after ``self`` for a method)."""
    params = [a.arg for a in fn.args.args]
    if params[:1] == ["self"]:
        params = params[1:]
    if params[:1] != [name]:
        return []
    return [Walk(call.func.value, where, call.lineno, classes)  # type: ignore[attr-defined]
            for call, where in _apply_calls(ctx) if _refers(call.args[0], fn, where, ctx)]


def _refers(arg: ast.expr, fn: ast.FunctionDef | ast.AsyncFunctionDef, where: ast.AST,
            ctx: Context) -> bool:
    """``arg`` is ``fn``: its name, or the method read on ``self`` or on an instance of its
    class."""
    cls = ctx.analysis.class_of(fn)
    if isinstance(arg, ast.Name):
        return cls is None and arg.id == fn.name
    if not (cls is not None and isinstance(arg, ast.Attribute) and arg.attr == fn.name):
        return False
    if isinstance(arg.value, ast.Name) and arg.value.id == "self":
        return ctx.analysis.class_of(where) is cls
    k = ctx.analysis.kind_in(arg.value, where, arg.lineno)
    return k is not None and k.cls == cls.node.name


def _apply_calls(ctx: Context) -> list[tuple[ast.Call, ast.AST]]:
    """Every ``x.apply(one_argument)`` of the file, with the function (or module) it is in."""
    def make() -> list[tuple[ast.Call, ast.AST]]:
        out = []
        todo: list[tuple[ast.AST, ast.AST]] = [(ctx.tree, ctx.tree)]
        while todo:
            node, where = todo.pop()
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute) \
                        and child.func.attr == "apply" and len(child.args) == 1 \
                        and not child.keywords:
                    out.append((child, where))
                todo.append((child, child if isinstance(child, FUNCTION_TYPES) else where))
        return out
    return ctx.memo("hook-walk-applies", ctx.tree, make)


def _handed(fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str, ctx: Context
            ) -> list[tuple[ast.expr, ast.AST]]:
    """What the file passes for ``name``: the callers of a function, or the
    ``self.<method>(...)`` calls of its class's other methods."""
    a = ctx.analysis
    cls = a.class_of(fn)
    if cls is None or fn.name == "__init__":
        return a.argument_values(fn, name)
    out = []
    for m in cls.methods.values():
        for n in ast.walk(m):
            if m is not fn and isinstance(n, ast.Call) and _names_fn(n.func, fn.name) \
                    and isinstance(n.func, ast.Attribute):
                v = a.arguments(fn, n).get(name)
                if v is None:
                    return []
                out.append((v, m))
    return out


def _names_fn(f: ast.expr, name: str) -> bool:
    return (isinstance(f, ast.Name) and f.id == name) or (
        isinstance(f, ast.Attribute) and f.attr == name and isinstance(f.value, ast.Name)
        and f.value.id == "self")


def admits(classes: frozenset[str] | None, layer: ast.Call, ctx: Context) -> bool:
    """The walk hooks the module ``layer`` builds."""
    return classes is None or "torch.nn.Module" in classes \
        or (ctx.qualified_name(layer.func) or "") in classes


def hooked_writes(walk: Walk, ctx: Context) -> Iterator[tuple[ast.stmt, ast.Call]]:
    """In-place writes, in the methods of the model's classes, into the output of an
    attribute layer the walk hooks: ``out = self.norm(h)`` then ``out += skip`` (or
    ``out.add_(skip)``), with the layer call ``self.norm`` was built by."""
    a = ctx.analysis
    k = a.kind_in(walk.model, walk.where, walk.line)
    if k is None or k.what != MODULE or k.cls not in a.module_classes:
        return
    seen: set[str] = set()
    for _ in _class_layers(k.cls, seen, ctx):
        pass
    for name in seen:
        for c in a.classes[name].lineage():
            attrs = {n: x.value for n, x in c.attrs.items() if isinstance(x.value, ast.Call)}
            for m in c.methods.values():
                for st in ast.walk(m):
                    target = _written(st)
                    if target is None:
                        continue
                    b = ctx.scope(m).binding_before(target, st.lineno)
                    attr = _self_call(b.value) if b is not None and isinstance(
                        b.stmt, ast.Assign) else None
                    layer = attrs.get(attr) if attr is not None else None
                    if layer is not None and (ctx.qualified_name(layer.func) or "").startswith(
                            "torch.nn.") and admits(walk.classes, layer, ctx):
                        yield st, layer  # type: ignore[misc]


def _written(st: ast.AST) -> str | None:
    """The name ``st`` writes in place: ``n += v``, ``n.add_(v)``."""
    if isinstance(st, ast.AugAssign) and isinstance(st.target, ast.Name):
        return st.target.id
    if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) \
            and isinstance(st.value.func, ast.Attribute) and isinstance(st.value.func.value, ast.Name):
        a = st.value.func.attr
        if a.endswith("_") and not a.startswith("_"):
            return st.value.func.value.id
    return None


def model_layers(walk: Walk, ctx: Context) -> Iterator[tuple[ast.Call, ast.Call | None]]:
    """Each layer call the walked model is built from, with the layer before it in its
    ``nn.Sequential`` (None: not in one, or first)."""
    a = ctx.analysis
    k = a.kind_in(walk.model, walk.where, walk.line)
    if k is None or k.what != MODULE:
        return
    seen: set[str] = set()
    if k.cls in a.module_classes:
        yield from _class_layers(k.cls, seen, ctx)
    elif k.cls == SEQUENTIAL and isinstance(k.node, ast.Call):
        yield from _call_layers(k.node, None, seen, ctx)


def _class_layers(name: str, seen: set[str], ctx: Context
                  ) -> Iterator[tuple[ast.Call, ast.Call | None]]:
    if name in seen or len(seen) > MAX_CLASSES:
        return
    seen.add(name)
    info = ctx.analysis.classes[name]
    for c in info.lineage():
        attrs = {n: a.value for n, a in c.attrs.items() if isinstance(a.value, ast.Call)}
        fed = _fed(c.methods.values(), ctx)
        for n, value in attrs.items():
            yield from _call_layers(value, None, seen, ctx)
            for b in fed.get(n, ()):
                if b in attrs and ctx.qualified_name(attrs[b].func):
                    yield value, attrs[b]


def _fed(methods: Iterable[ast.FunctionDef | ast.AsyncFunctionDef], ctx: Context
         ) -> dict[str, set[str]]:
    """``{a: {b}}`` when a method runs ``self.a`` on the output of ``self.b`` itself:
    ``self.a(self.b(x))``, or ``h = self.b(x)`` then ``self.a(h)``."""
    out: dict[str, set[str]] = {}
    for m in methods:
        for n in ast.walk(m):
            a = _self_call(n)
            if a is None or len(n.args) != 1:  # type: ignore[attr-defined]
                continue
            arg = n.args[0]  # type: ignore[attr-defined]
            if isinstance(arg, ast.Name):
                bound = ctx.scope(m).binding_before(arg.id, n.lineno)
                arg = bound.value if bound is not None and isinstance(
                    bound.stmt, ast.Assign) else None
            b = _self_call(arg)
            if b is not None:
                out.setdefault(a, set()).add(b)
    return out


def _self_call(n: ast.AST | None) -> str | None:
    """``a`` for ``self.a(...)``."""
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
            and isinstance(n.func.value, ast.Name) and n.func.value.id == "self":
        return n.func.attr
    return None


def _call_layers(call: ast.Call, before: ast.Call | None, seen: set[str], ctx: Context
                 ) -> Iterator[tuple[ast.Call, ast.Call | None]]:
    q = ctx.qualified_name(call.func) or ""
    if q in CONTAINERS:
        args = call.args
        if q != SEQUENTIAL and len(args) == 1 and isinstance(args[0], (ast.List, ast.Tuple)):
            args = args[0].elts
        prev = None
        for x in args:
            if isinstance(x, ast.Call):
                yield from _call_layers(x, prev if q == SEQUENTIAL else None, seen, ctx)
            prev = x if isinstance(x, ast.Call) else None
    elif isinstance(call.func, ast.Name) and call.func.id in ctx.analysis.module_classes:
        yield from _class_layers(call.func.id, seen, ctx)
    elif q.startswith("torch.nn."):
        yield call, before
