"""What the file's forward hooks keep: ``m.register_forward_hook(fn)`` where ``fn`` stores the
module's output somewhere the program reads later.

# NOTE [hook stores]
A forward hook runs at the end of every call of the module it is registered on, and sees that
call's output (its last positional parameter). When it stores the output (``cache[key] =
output``, ``self.feats = output.detach()``, ``outs.append(output)``), the container or
attribute holds *what the hooked module's last run made*: a value with a graph when that run
had grad on, a constant when it ran under ``no_grad`` / ``inference_mode`` (or when the hook
stores a detached copy). A read of the store is therefore a read of a run of the hooked module
that the code does not spell at the read. The hook is found from its registration: a function
of the file (``register_forward_hook(hook)``), a method (``self._hook``), a lambda, or the
function a factory of the file returns (``get_activation("s_f1")``, ``self._hook(self.cache,
i)``: the factory's parameters stand for the call's arguments). Where the store goes is named
in the registering function's terms (``activation``, ``self.student_cache``, ``self.latents``);
the hooked module likewise (``student[i]`` in ``__init__`` that stores ``self.student =
student`` is ``self.student``; ``model[0]`` is ``model``; ``getattr(self.vit, name)`` is
``self.vit``). Nothing else (pre-hooks, backward hooks, ``nonlocal`` rebinding) is read.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.analysis.file_parents import file_parents

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
CUT_METHODS = frozenset({"detach", "detach_", "numpy", "tolist", "item"})


@dataclass(frozen=True)
class HookStore:
    """One store of a forward hook's output (NOTE [hook stores])."""

    register: ast.Call   # `m.register_forward_hook(fn)`
    module: str          # the hooked module's root, in the registering function's terms
    target: str          # where the output is kept, in the same terms
    store: ast.stmt      # the hook's statement that keeps it
    detached: bool       # a cut copy is kept (`output.detach()`, `.data`)
    where: ast.AST       # the function (or module) that registers the hook


def hook_stores(ctx: Context) -> list[HookStore]:
    """Every store of a forward hook's output in the file, found once per file."""
    if not ctx.mentions("register_forward_hook"):
        return []
    return ctx.memo("hook-stores", ctx.tree, lambda: list(_find(ctx)))


def stores_into(ctx: Context, target: str, where: ast.AST | None = None) -> list[HookStore]:
    """The hook stores that keep an output in ``target`` (registered in ``where``'s class
    when ``target`` is an attribute of ``self``)."""
    out = []
    for h in hook_stores(ctx):
        if h.target != target:
            continue
        if target.startswith("self.") and where is not None:
            a, b = ctx.analysis.class_of(h.where), ctx.analysis.class_of(where)
            if a is None or b is None or a.node is not b.node:
                continue
        out.append(h)
    return out


def _find(ctx: Context):
    parents = file_parents(ctx)
    for call in walk(ctx.tree):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and call.func.attr == "register_forward_hook" and call.args):
            continue
        where = _enclosing(call, parents) or ctx.tree
        module = _module_root(call.func.value, where)
        got = _hook_function(ctx, call.args[0], where)
        if module is None or got is None:
            continue
        fn, closure, method = got
        params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
        if method:
            params = params[1:]
        if len(params) < 3:
            continue
        out = params[-1]
        for s in walk(fn):
            got2 = _stored(s, out, closure, method, params)
            if got2 is not None:
                target, detached = got2
                yield HookStore(call, module, target, s, detached, where)  # type: ignore[arg-type]


def _enclosing(node: ast.AST, parents: dict[int, ast.AST]) -> ast.AST | None:
    n = parents.get(id(node))
    while n is not None and not isinstance(n, DEFS):
        n = parents.get(id(n))
    return n


def _module_root(e: ast.AST, where: ast.AST) -> str | None:
    for _ in range(12):
        if isinstance(e, ast.Subscript):
            e = e.value
        elif isinstance(e, ast.Call) and isinstance(e.func, ast.Name) \
                and e.func.id == "getattr" and e.args:
            e = e.args[0]
        elif isinstance(e, ast.Attribute) and not (
                isinstance(e.value, ast.Name) and e.value.id == "self"):
            e = e.value
        else:
            break
    name = dotted(e) if isinstance(e, (ast.Name, ast.Attribute)) else None
    if name is None or "." in name or not isinstance(where, DEFS):
        return name
    for s in walk(where):  # `self.student, self.teacher = student, teacher`
        if isinstance(s, ast.Assign):
            for t in s.targets:
                pairs = zip(t.elts, s.value.elts) if isinstance(t, ast.Tuple) and isinstance(
                    s.value, ast.Tuple) and len(t.elts) == len(s.value.elts) else [(t, s.value)]
                for tt, v in pairs:
                    if isinstance(v, ast.Name) and v.id == name and isinstance(
                            tt, ast.Attribute) and dotted(tt) == "self." + tt.attr:
                        return "self." + tt.attr
    return name


def _def_named(ctx: Context, name: str, where: ast.AST) -> ast.AST | None:
    for s in walk(where):
        if isinstance(s, DEFS) and s.name == name and s is not where:
            return s
    return ctx.analysis.functions.get(name)


def _hook_function(ctx: Context, e: ast.AST, where: ast.AST
                   ) -> tuple[ast.AST, dict[str, str], bool] | None:
    """The hook's function, what its free names stand for, and whether it takes ``self``."""
    if isinstance(e, ast.Lambda):
        return e, {}, False
    if isinstance(e, ast.Name):
        fn = _def_named(ctx, e.id, where)
        return (fn, {}, False) if fn is not None else None
    if isinstance(e, ast.Attribute) and dotted(e) == "self." + e.attr:
        cls = ctx.analysis.class_of(where)
        fn = cls.methods.get(e.attr) if cls is not None else None
        return (fn, {}, not _static(fn)) if fn is not None else None
    if isinstance(e, ast.Call):
        got = _hook_function(ctx, e.func, where)
        if got is None or isinstance(got[0], ast.Lambda):
            return None
        factory, _, method = got
        params = [a.arg for a in factory.args.args][1 if method else 0:]  # type: ignore[attr-defined]
        closure = {p: dotted(a) for p, a in zip(params, e.args) if dotted(a) is not None}
        inner = _returned_def(factory)
        return (inner, closure, False) if inner is not None else None  # type: ignore[return-value]
    return None


def _static(fn: ast.AST) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "staticmethod"
               for d in getattr(fn, "decorator_list", ()))


def _returned_def(factory: ast.AST) -> ast.AST | None:
    for s in walk(factory):
        if isinstance(s, ast.Return) and s.value is not None:
            if isinstance(s.value, ast.Lambda):
                return s.value
            if isinstance(s.value, ast.Name):
                return next((d for d in walk(factory) if isinstance(d, DEFS)
                             and d.name == s.value.id and d is not factory), None)
    return None


def _stored(s: ast.AST, out: str, closure: dict[str, str], method: bool,
            params: list[str]) -> tuple[str, bool] | None:
    """``(target, detached)`` when statement ``s`` keeps the output ``out``."""
    if isinstance(s, ast.Assign) and len(s.targets) == 1:
        value, t = s.value, s.targets[0]
    elif isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and isinstance(
            s.value.func, ast.Attribute) and s.value.func.attr == "append" \
            and len(s.value.args) == 1:
        value, t = s.value.args[0], s.value.func.value
    else:
        return None
    detached = _of_output(value, out)
    if detached is None:
        return None
    if isinstance(t, ast.Subscript):
        t = t.value
    name = dotted(t) if isinstance(t, (ast.Name, ast.Attribute)) else None
    if name is None:
        return None
    if name.startswith("self."):
        return (name, detached) if method and name.count(".") == 1 else None
    if "." in name or name in params:
        return None
    return closure.get(name, name), detached


def _of_output(e: ast.AST, out: str) -> bool | None:
    """Whether ``e`` is the output (False), a cut copy of it (True), or neither (None):
    ``output``, ``output[0]``, ``output.clone()``, ``output.detach()``, ``output.data``."""
    cut = False
    for _ in range(8):
        if isinstance(e, ast.Name):
            return cut if e.id == out else None
        if isinstance(e, ast.Subscript):
            e = e.value
        elif isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute):
            cut |= e.func.attr in CUT_METHODS
            e = e.func.value
        elif isinstance(e, ast.Attribute):
            cut |= e.attr == "data"
            e = e.value
        else:
            return None
    return None


def run_between(ctx: Context, fn: ast.AST, target: str, start: int, end: int) -> bool:
    """Whether ``fn`` runs, strictly between lines ``start`` and ``end``, a module whose
    forward hook keeps its output in ``target`` (NOTE [hook stores]): a read of ``target``
    after that run reads the hook's store, not the function's own earlier binding."""
    modules = {h.module for h in stores_into(ctx, target, fn)}
    if not modules:
        return False
    return any(isinstance(n, ast.Call) and start < n.lineno < end and dotted(n.func) in modules
               for n in walk(fn))


def last_run(ctx: Context, fn: ast.AST, store: HookStore, line: int) -> ast.Call | None:
    """The last call in ``fn`` before ``line`` that runs ``store``'s hooked module."""
    runs = [n for n in walk(fn) if isinstance(n, ast.Call) and n.lineno < line
            and dotted(n.func) == store.module]
    return max(runs, key=lambda n: (n.lineno, n.col_offset)) if runs else None
