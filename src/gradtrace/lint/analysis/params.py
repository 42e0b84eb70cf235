"""What happens to a module's parameters: facts any rule may use (cached per file).

Which modules' ``.parameters()`` an optimizer's params argument lists
(:func:`param_sources_of`); which calls build a new module (:func:`module_ctor`); which helpers
of the file set ``requires_grad`` on every parameter of a module they are given
(:func:`flag_call`), and which replace its submodules with new ones, so that it holds new
parameter objects afterwards (:func:`replaces_submodules_of`).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.foreign_kinds import DEFINITIONS
from gradtrace.lint.analysis.modules import NOT_MODULES
from gradtrace.lint.analysis.objects import field_source
from gradtrace.lint.analysis.reach import Def, called_function
from gradtrace.lint.analysis.vocabulary import MODEL_FACTORIES, NOT_MODEL_RE, PRETRAINED_MODEL_RE
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

PARAM_ITERS = ("parameters", "named_parameters")
FLAG = "requires_grad"
# walks over a module's submodules (their loop variables stand for the module)
WALKS = ("named_children", "named_modules", "children", "modules")


def _flag(v: ast.AST | None) -> bool | None:
    """The constant ``True``/``False`` ``v`` is, else None."""
    return v.value if isinstance(v, ast.Constant) and isinstance(v.value, bool) else None


def param_sources_of(expr: ast.AST, scope: Scope, line: int, depth: int = 0
                     ) -> list[tuple[str, ast.AST]] | None:
    """The modules whose ``.parameters()`` ``expr`` (an optimizer's params argument) lists,
    each with the node naming it, in order; None when some part is filtered or unknown
    (a comprehension, ``filter``, a name bound to something else)."""
    if depth > 6:
        return None
    if isinstance(expr, ast.Call):
        f = expr.func
        if isinstance(f, ast.Attribute) and f.attr in PARAM_ITERS and not expr.args:
            owner = dotted(f.value)
            return [(owner, expr)] if owner else None
        q = scope.ctx.call_name(expr) or ""
        if q in ("list", "tuple", "itertools.chain") and not expr.keywords:
            out: list[tuple[str, ast.AST]] = []
            for a in expr.args:
                got = param_sources_of(a, scope, line, depth + 1)
                if got is None:
                    return None
                out += got
            return out
        return None
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        left = param_sources_of(expr.left, scope, line, depth + 1)
        right = param_sources_of(expr.right, scope, line, depth + 1)
        return None if left is None or right is None else left + right
    if isinstance(expr, (ast.List, ast.Tuple)):
        out = []
        for e in expr.elts:
            got = param_sources_of(e.value if isinstance(e, ast.Starred) else e, scope, line,
                                   depth + 1)
            if got is None:
                return None
            out += got
        return out
    if isinstance(expr, ast.Dict):
        for k, v in zip(expr.keys, expr.values):
            if isinstance(k, ast.Constant) and k.value == "params":
                return param_sources_of(v, scope, line, depth + 1)
        return None
    if isinstance(expr, ast.Name):
        b = scope.binding_before(expr.id, line)
        if b is None or b.value is None or isinstance(b.stmt, ast.AugAssign) \
                or len(scope.bindings.get(expr.id, ())) > 1:
            return None
        return param_sources_of(b.value, scope, b.line, depth + 1)
    return None


def param_loop_var(loop: ast.AST) -> tuple[str, str] | None:
    """``(p, model)`` for ``for p in model.parameters()`` / ``for n, p in
    model.named_parameters()``."""
    if not isinstance(loop, (ast.For, ast.AsyncFor)):
        return None
    return param_iter_var(loop.target, loop.iter)


def param_iter_var(t: ast.expr, it: ast.expr) -> tuple[str, str] | None:
    """``(p, model)`` for a ``for`` target and iterable (a loop's, or a comprehension's
    clause) that walk ``model.parameters()`` / ``model.named_parameters()``."""
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
            and it.func.attr in PARAM_ITERS):
        return None
    owner = dotted(it.func.value)
    if it.func.attr == "named_parameters":
        if not (isinstance(t, ast.Tuple) and len(t.elts) == 2):
            return None
        t = t.elts[1]
    var = dotted(t)
    return (var, owner) if var and owner else None


def helper_flag(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[int, int | bool] | None:
    """``(i, v)`` when ``fn`` sets ``requires_grad`` on every parameter of its ``i``-th
    argument to ``v``: a constant, or the index of the argument holding the value
    (``def requires_grad(m, b): for p in m.parameters(): p.requires_grad_(b)``)."""
    names = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    if names[:1] == ["self"]:
        return None
    for s in walk(fn):
        got = param_loop_var(s)
        if got is None or got[1] not in names or len(s.body) != 1:  # type: ignore[attr-defined]
            continue
        var, owner = got
        body = s.body[0]  # type: ignore[attr-defined]
        value: ast.expr | None = None
        if isinstance(body, ast.Assign) and len(body.targets) == 1 \
                and dotted(body.targets[0]) == f"{var}.{FLAG}":
            value = body.value
        elif isinstance(body, ast.Expr) and isinstance(body.value, ast.Call) \
                and dotted(body.value.func) == f"{var}.requires_grad_":
            value = body.value.args[0] if body.value.args else ast.Constant(True)
        if value is None:
            continue
        if _flag(value) is not None:
            return names.index(owner), bool(_flag(value))
        if isinstance(value, ast.Name) and value.id in names:
            return names.index(owner), names.index(value.id)
    return None


def flag_call(call: ast.Call, ctx: Context) -> tuple[ast.expr, bool] | None:
    """``(module, value)`` for a call of a helper of the file that sets ``requires_grad`` on
    all of a module's parameters (``requires_grad(m, True)``, ``freeze(m)``)."""
    if not isinstance(call.func, ast.Name):
        return None
    fn = ctx.analysis.functions.get(call.func.id)
    got = helper_flag(fn) if fn is not None else None
    if got is None or got[0] >= len(call.args):
        return None
    i, v = got
    if isinstance(v, bool):
        return call.args[i], v
    arg = call.args[v] if v < len(call.args) else None
    if _flag(arg) is not None:
        return call.args[i], bool(_flag(arg))
    return None


def module_ctor(node: ast.AST, ctx: Context) -> bool:
    """A call that builds a new module (``nn.Linear(...)``, ``MyNet()``, ``resnet50()``)."""
    if not isinstance(node, ast.Call):
        return False
    q = ctx.call_name(node) or ""
    last = q.rpartition(".")[2]
    if q.startswith("torch.nn.") and last[:1].isupper():
        return q not in NOT_MODULES and q.count(".") == 2 or q.startswith("torch.nn.modules.")
    if isinstance(node.func, ast.Name) and node.func.id in ctx.analysis.module_classes:
        return True
    if last == "from_pretrained" and isinstance(node.func, ast.Attribute):
        cls = dotted(node.func.value) or ""
        cls = cls.rpartition(".")[2]
        return bool(PRETRAINED_MODEL_RE.search(cls)) and not NOT_MODEL_RE.search(cls)
    return q.startswith(MODEL_FACTORIES) and last[:1].islower()


def builds_module(fn: ast.FunctionDef | ast.AsyncFunctionDef, ctx: Context) -> bool:
    """Whether every ``return`` of the file's function ``fn`` hands back a module it has just
    built (``return nn.Sequential(...)``, ``net = Net(); ...; return net.to(dev)``)."""
    def make() -> bool:
        from gradtrace.lint.analysis.objects import strip_same
        scope = ctx.scope(fn)
        rets = [s for s in scope.stmts if isinstance(s, ast.Return)]
        if not rets:
            return False
        for r in rets:
            v = strip_same(r.value) if r.value is not None else None
            if isinstance(v, ast.Name):
                bs = scope.bindings.get(v.id, ())
                if len(bs) != 1 or bs[0].value is None or bs[0].line > r.lineno:
                    return False
                v = strip_same(bs[0].value)
            if v is None or not module_ctor(v, ctx):
                return False
        return True
    return ctx.memo("analysis-builds-module", fn, make)


PARAMETER_CTORS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})


def replaced_params(fn: ast.FunctionDef | ast.AsyncFunctionDef, ctx: Context) -> frozenset[str]:
    """Parameters of ``fn`` whose submodules it replaces with newly built modules."""
    def make() -> frozenset[str]:
        a = fn.args
        params = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
        # loop variables walking a parameter's submodules stand for that parameter
        alias: dict[str, str] = {}
        for n in walk(fn):
            if isinstance(n, (ast.For, ast.AsyncFor)) and isinstance(n.iter, ast.Call) \
                    and isinstance(n.iter.func, ast.Attribute) and n.iter.func.attr in WALKS:
                owner = (dotted(n.iter.func.value) or "").partition(".")[0]
                if owner in params:
                    for t in walk(n.target):
                        if isinstance(t, ast.Name):
                            alias[t.id] = owner
            elif isinstance(n, (ast.For, ast.AsyncFor)) and isinstance(n.target, ast.Name) \
                    and isinstance(n.iter, ast.Attribute) \
                    and (dotted(n.iter) or "").partition(".")[0] == "self":
                alias[n.target.id] = "self"  # `for layer in self.block:` walks own submodules
        built = _built_locals(fn, ctx)
        out: set[str] = set()
        for n in walk(fn):
            target, value = None, None
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) \
                    and n.func.id == "setattr" and len(n.args) == 3:
                target, value = n.args[0], n.args[2]
            elif isinstance(n, ast.Assign) and len(n.targets) == 1 \
                    and isinstance(n.targets[0], ast.Attribute):
                target, value = n.targets[0].value, n.value
            elif isinstance(n, ast.Assign) and len(n.targets) == 1 \
                    and isinstance(n.targets[0], ast.Subscript) \
                    and isinstance(n.targets[0].value, ast.Attribute):
                target, value = n.targets[0].value, n.value  # `layer.adapters[k] = Adapter()`
            root = (dotted(target) or "").partition(".")[0] if target is not None else ""
            root = alias.get(root, root)
            if isinstance(value, ast.Name) and value.id in built:
                value = built[value.id]  # `new = nn.Embedding(...); self.m.wte = new`
            if root in params and value is not None and (module_ctor(value, ctx) or (
                    ctx.call_name(value) in PARAMETER_CTORS)):
                # `self.scale = nn.Parameter(...)` in a method, `model.emb.weight =
                # nn.Parameter(table)` in a helper: a new parameter object
                out.add(root)
        return frozenset(out)
    return ctx.memo("gt4-replaced-params", fn, make)


def _built_locals(fn: ast.FunctionDef | ast.AsyncFunctionDef, ctx: Context
                  ) -> dict[str, ast.expr]:
    """Local names ``fn`` binds once, to a newly built module or Parameter."""
    seen: dict[str, int] = {}
    out: dict[str, ast.expr] = {}
    for n in walk(fn):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 \
                and isinstance(n.targets[0], ast.Name):
            name = n.targets[0].id
            seen[name] = seen.get(name, 0) + 1
            if module_ctor(n.value, ctx) or ctx.call_name(n.value) in PARAMETER_CTORS:
                out[name] = n.value
    return {k: v for k, v in out.items() if seen[k] == 1}


def replaced_fields(fn: ast.FunctionDef | ast.AsyncFunctionDef, ctx: Context
                    ) -> tuple[str, ...]:
    """Attributes ``x`` of ``self`` whose submodules the method ``fn`` replaces with new
    modules (``self.model.fc1 = nn.Linear(...)``: ``model``), in source order."""
    def make() -> tuple[str, ...]:
        out: list[str] = []
        for n in walk(fn):
            if isinstance(n, ast.Assign) and len(n.targets) == 1 \
                    and isinstance(n.targets[0], ast.Attribute) and module_ctor(n.value, ctx):
                parts = (dotted(n.targets[0]) or "").split(".")
                if len(parts) >= 3 and parts[0] == "self" and parts[1] not in out:
                    out.append(parts[1])
        return tuple(out)
    return ctx.memo("analysis-replaced-fields", fn, make)


def _foreign_function(ctx: Context, call: ast.Call) -> tuple[Context, Def] | None:
    """(its file's context, the function) for a call of a top-level function of another file
    of the project (the project index's look-up: NOTE [project index])."""
    if not DEFINITIONS or not isinstance(call.func, (ast.Name, ast.Attribute)):
        return None
    got = DEFINITIONS[0](ctx, call.func)
    if got is None or got[0] is ctx or not isinstance(got[1], (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    return got[0], got[1]


def foreign_replacement(call: ast.Call, scope: Scope) -> tuple[str, ast.stmt, str] | None:
    """(the other file's path, the statement, what it sets in the caller's names:
    ``model.fc``) where a function of another file replaces a submodule of its argument."""
    if called_function(call, scope, call.lineno) is not None:
        return None
    other = _foreign_function(scope.ctx, call)
    if other is None:
        return None
    octx, fn = other
    got = replaced_params(fn, octx)
    for p, v in scope.ctx.analysis.arguments(fn, call).items():
        if p not in got or not dotted(v):
            continue
        for n in walk(fn):
            t = n.targets[0] if isinstance(n, ast.Assign) and len(n.targets) == 1 else None
            name = dotted(t) if isinstance(t, ast.Attribute) else None
            if name and name.partition(".")[0] == p and module_ctor(n.value, octx):
                return octx.path, n, f"{dotted(v)}.{name.partition('.')[2]}"
    return None


def replaces_submodules_of(call: ast.Call, scope: Scope, line: int) -> str | None:
    """The dotted argument of ``call`` whose submodules the called function replaces: a
    function of this file, or a top-level function of another file of the project
    (``adapt_head(model, n)`` imported from ``heads.py``, whose ``model.fc = nn.Linear(...)``
    is read in that file's terms: NOTE [foreign module kinds])."""
    fn = called_function(call, scope, line)
    if fn is None:  # `model.apply(init)` (NOTE [applied initialiser]), or another file's
        applied = _applied_replacer(call, scope)
        if applied is not None:
            return applied
        other = _foreign_function(scope.ctx, call)
        got = replaced_params(other[1], other[0]) if other is not None else None
        return next((dotted(v) for p, v in scope.ctx.analysis.arguments(
            other[1], call).items() if p in got and dotted(v)), None) if got else None
    got = replaced_params(fn, scope.ctx)
    if not got:
        return None
    for p, v in scope.ctx.analysis.arguments(fn, call).items():
        if p in got and dotted(v):
            return dotted(v)
    if "self" in got and isinstance(call.func, ast.Attribute) and dotted(call.func.value) \
            and dotted(call.func.value) != "self":
        for attr in replaced_fields(fn, scope.ctx):  # `Pruner(model).prune()` replaces
            src = field_source(call.func.value, attr, scope, line)  # `self.model.fc`
            if src is not None and dotted(src):
                return dotted(src)
    if "self" in got and isinstance(call.func, ast.Attribute) and dotted(call.func.value) \
            and dotted(call.func.value) != "self" and fn.args.args \
            and fn.args.args[0].arg == "self":
        return dotted(call.func.value)  # the method replaces its own object's parameters
    if isinstance(call.func, ast.Attribute) and fn.args.args:  # static method: no `self`
        names = [x.arg for x in fn.args.args]
        for p, v in zip(names, call.args):
            if p in got and dotted(v):
                return dotted(v)
    return None


def _applied_replacer(call: ast.Call, scope: Scope) -> str | None:
    """# NOTE [applied initialiser]
    ``model.apply(init)`` runs ``init`` on every submodule of ``model``: when ``init``, a
    function of the file, replaces what its argument holds (``m.weight =
    nn.Parameter(...)``), the call replaces parameters of ``model`` (an optimizer built over
    them before is left with the old tensors)."""
    f = call.func
    if not (isinstance(f, ast.Attribute) and f.attr == "apply" and len(call.args) == 1
            and not call.keywords and isinstance(call.args[0], ast.Name) and dotted(f.value)):
        return None
    from gradtrace.lint.analysis.cuts import top_defs
    fn = top_defs(scope.ctx).get(call.args[0].id)
    if fn is None or not fn.args.args or any(b.stmt is not fn for b in scope.bindings.get(
            call.args[0].id, ())):
        return None  # (a name rebound in the scope may be another callable)
    return dotted(f.value) if fn.args.args[0].arg in replaced_params(fn, scope.ctx) else None
