"""Shared facts for GT4xx: which classes are modules, which calls build modules, and where a
function freezes or unfreezes parameters. Pure functions of the tree (cached per file/scope)."""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.vocabulary import MODEL_FACTORIES, PARAM_LIKE_RE
from gradtrace.lint.analysis.kinds import OPTIMIZER
from gradtrace.lint.analysis.params import module_ctor
from gradtrace.lint.flow import MODULE
from gradtrace.lint.names import dotted
from gradtrace.lint.rules.leaf._tensors import is_optimizer_call
from gradtrace.lint.rules.registration._foreign_layers import foreign_layer
from gradtrace.lint.rules.registration._foreign_optim import (
    foreign_optimizer_over, foreign_steppers)
from gradtrace.lint.nodes import of_types, statements, walk  # noqa: F401 (statements: re-exported)
from gradtrace.lint.rules.registration._stateless import (
    PARAM_LAYER_RE, module_classes, param_free_classes, stateless_classes,
)

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope


def pretrained_root(node: ast.AST, ctx: Context) -> bool:
    """A call loading a pretrained model (torchvision/timm factory, ``*Model.from_pretrained``)."""
    if not isinstance(node, ast.Call):
        return False
    q = ctx.call_name(node) or ""
    return module_ctor(node, ctx) and (q.startswith(MODEL_FACTORIES) or q.endswith(
        ".from_pretrained"))


def owns_params(node: ast.AST, ctx: Context, buffers_count: bool = True) -> bool:
    """Whether a module-building call surely or probably creates parameters (not
    ``buffers_count``: a class of the file holding buffers, numbers and plain objects only
    creates none: ``param_free_classes``)."""
    if not module_ctor(node, ctx):
        return False
    assert isinstance(node, ast.Call)
    q = ctx.call_name(node) or ""
    last = q.rpartition(".")[2]
    if isinstance(node.func, ast.Name) and node.func.id in module_classes(ctx):
        return node.func.id not in stateless_classes(ctx) and (
            buffers_count or node.func.id not in param_free_classes(ctx))
    if not q.startswith("torch.nn."):
        return True
    if q in ("torch.nn.Sequential", "torch.nn.ModuleList"):
        return any(isinstance(a, ast.Starred) or owns_params(a, ctx) or foreign_layer(a, ctx)
                   for a in node.args) or \
            any(isinstance(a, (ast.List, ast.ListComp)) for a in node.args)
    return bool(PARAM_LAYER_RE.match(last))


def is_module_expr(scope: Scope, expr: ast.AST, line: int) -> bool:
    """Whether ``expr`` (a name or ``self.x``) holds a module at ``line``."""
    if scope.kind(expr, line) == MODULE:
        return True
    name = dotted(expr)
    if name is None:
        return False
    root, _, attr = name.rpartition(".")
    if root and "." not in root and not PARAM_LIKE_RE.search(attr):
        rb = scope.binding_before(root, line)
        if rb is not None and rb.value is not None and pretrained_root(_strip(rb.value), scope.ctx):
            return True  # `model.encoder` of a pretrained model: a submodule
    b = scope.binding_before(name, line)
    if b is not None and b.value is not None:
        return module_ctor(_strip(b.value), scope.ctx)
    if b is not None and isinstance(b.stmt, (ast.For, ast.AsyncFor)):
        return _iterates_modules(b.stmt, name)
    return False


SELF_RETURNING = frozenset({"to", "cuda", "cpu", "train", "eval", "float", "double", "half",
                            "bfloat16", "requires_grad_", "apply", "type"})


def _strip(e: ast.AST) -> ast.AST:
    """``Net()`` for ``Net().to(device).eval()`` (module methods that return self)."""
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr in SELF_RETURNING:
        e = e.func.value
    return e


def _iterates_modules(loop: ast.For | ast.AsyncFor, name: str) -> bool:
    it = loop.iter
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)):
        return False
    m = it.func.attr
    if m in ("modules", "children") and dotted(loop.target) == name:
        return True
    t = loop.target
    return m in ("named_modules", "named_children") and isinstance(t, ast.Tuple) \
        and len(t.elts) == 2 and dotted(t.elts[1]) == name


def covers(root: str, name: str) -> bool:
    """Whether the parameters of ``root`` include those of ``name`` (same or a submodule,
    by attribute or by a constant index: ``model`` covers ``model[0]``)."""
    return name == root or name.startswith((root + ".", root + "["))


def param_sources(call: ast.AST) -> set[str]:
    """Dotted receivers of ``.parameters()`` / ``.named_parameters()`` inside ``call``."""
    out: set[str] = set()
    for n in walk(call):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr in ("parameters", "named_parameters"):
            r = dotted(n.func.value)
            if r:
                out.add(r)
    return out


@dataclass(frozen=True)
class OptimizerBuild:
    """``opt = torch.optim.X(<params>)`` in a scope."""

    name: str
    stmt: ast.stmt
    call: ast.Call
    sources: frozenset[str]


def optimizer_builds(scope: Scope) -> list[OptimizerBuild]:
    """Optimizer constructions bound to a name in this scope, in source order (cached)."""
    def make() -> list[OptimizerBuild]:
        out = []
        for name, bs in scope.bindings.items():
            for b in bs:
                v = b.value
                if isinstance(v, ast.Call) and is_optimizer_call(v, scope.ctx):
                    srcs = set(param_sources(v))
                    first = v.args[0] if v.args else None
                    if isinstance(first, ast.Name):
                        pb = scope.binding_before(first.id, b.line)
                        if pb is not None and pb.value is not None:
                            srcs |= param_sources(pb.value)
                    out.append(OptimizerBuild(name, b.stmt, v, frozenset(srcs)))
                elif isinstance(v, ast.Call) and \
                        scope.ctx.analysis.local_callee(v, scope, b.line) is not None:
                    k = scope.ctx.analysis.kind(v, scope, b.line)  # a helper of the file
                    if k is not None and k.what == OPTIMIZER and k.over:
                        out.append(OptimizerBuild(name, b.stmt, v, k.over))
                    elif over := _params_keyword(v):
                        out.append(OptimizerBuild(name, b.stmt, v, over))
                elif isinstance(v, ast.Call) and (over := foreign_optimizer_over(
                        scope, v, b.line)):  # NOTE [foreign optimizer builders]
                    out.append(OptimizerBuild(name, b.stmt, v, over))
                elif isinstance(v, ast.Call) and (over := _params_keyword(v)):
                    out.append(OptimizerBuild(name, b.stmt, v, over))  # NOTE [params keyword]
        return sorted(out, key=lambda o: o.stmt.lineno)
    return scope.ctx.memo("gt4-optimizers", scope.node, make)


def _params_keyword(v: ast.Call) -> frozenset[str]:
    """# NOTE [params keyword]
    ``instantiate(cfg.optim, params=model.parameters())`` (Hydra), ``make(spec,
    params=self.net.parameters())``: a call handed a module's parameters as ``params=`` (the
    name of every torch optimizer's first argument) builds the optimizer over them, whatever
    the callee."""
    kw = next((k.value for k in v.keywords if k.arg == "params"), None)
    return frozenset(param_sources(kw)) if isinstance(kw, ast.Call) and isinstance(
        kw.func, ast.Attribute) and kw.func.attr in ("parameters", "named_parameters") \
        else frozenset()


def step_lines(scope: Scope, opt: str) -> list[int]:
    """Lines of ``opt.step(...)`` calls (also ``scaler.step(opt)``)."""
    out = [m.stmt.lineno for m in scope.calls_to("step") if m.receiver == opt]
    out += [m.stmt.lineno for m in scope.calls_to("step")
            if m.call.args and dotted(m.call.args[0]) == opt]
    out += [line for line, _ in handed_to_steppers(scope, opt)]
    out += global_steppers(scope, opt)
    out += foreign_steppers(scope, opt)
    return sorted(out)


def handed_to_steppers(scope: Scope, opt: str) -> list[tuple[int, ast.Call]]:
    """(line, call) of calls handing ``opt`` to a function of the file that steps it
    (``train(model, opt, loader)`` where ``train`` calls ``opt.step()``)."""
    an = scope.ctx.analysis
    out = []
    for n in walk(scope.node) if scope.ctx.mentions(opt) else ():
        if not isinstance(n, ast.Call) or not any(dotted(a) == opt for a in
                                                  [*n.args, *(k.value for k in n.keywords)]):
            continue
        st = scope.statement_of(n)
        if st is None:
            continue
        fn = an.local_callee(n, scope, st.lineno)
        if fn is None:
            continue
        stepped = an.stepped_params(fn)
        if any(dotted(v) == opt and p in stepped for p, v in an.arguments(fn, n).items()):
            out.append((st.lineno, n))
    return out


def global_steppers(scope: Scope, opt: str) -> list[int]:
    """Lines of a script calling a function of the file that steps the script's ``opt``
    itself (``def train(): ... optimizer.step()`` called as ``train(...)``)."""
    ctx = scope.ctx
    if scope.node is not ctx.tree or not ctx.mentions(f"{opt}.step("):
        return []
    an = ctx.analysis
    out = []
    for st in scope.stmts:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for n in walk(st):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
                fn = an.local_callee(n, scope, st.lineno)
                if fn is not None and opt in an.stepped_globals(fn):
                    out.append(n.lineno)
                    break
    return out


def rebound_between(scope: Scope, name: str, start: int, end: int) -> bool:
    return any(start < b.line < end for b in scope.bindings.get(name, ()))


def stale_across_methods(ctx: Context, fn: ast.AST, target: str, line: int,
                         init_too: bool = False, stepped_outside: bool = False
                         ) -> tuple[OptimizerBuild, ast.stmt] | None:
    """For ``self.x = <new module>`` at ``line`` in method ``fn``: the optimizer ``__init__``
    built over ``self.x``'s parameters and a statement of another method that steps it, when
    no method but ``__init__`` builds an optimizer or adds a parameter group, and ``__init__``
    never calls ``fn`` (a set-up method); ``init_too``: ``fn`` may be ``__init__`` itself
    (its re-creation after the build); ``stepped_outside``: when no other method uses the
    optimizer, the build itself stands for the step its users (the script) make."""
    an = ctx.analysis
    cls = an.class_of(fn)
    init = cls.methods.get("__init__") if cls is not None else None
    if cls is None or init is None or fn is init and not init_too or \
            not ctx.mentions("optim"):
        return None
    builds = [b for b in optimizer_builds(ctx.scope(init)) if b.name.startswith("self.")]
    build = next((b for b in builds if any(covers(target, s) or covers(s, target)
                                           for s in b.sources)), None)
    if build is None or any(b.name.startswith("self.") for m in cls.methods.values()
                            if m is not init for b in optimizer_builds(ctx.scope(m))):
        return None  # (or an optimizer is (re)built elsewhere: maybe after this re-creation)
    name = getattr(fn, "name", "")
    for m in cls.methods.values():
        for n in walk(m):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                    n.func.attr == "add_param_group":
                return None
            if m is init and isinstance(n, ast.Call) and dotted(n.func) == f"self.{name}":
                return None  # `__init__` calls it: it builds the model before the optimizer
    for m in cls.methods.values():
        if m is init:
            continue
        sc = ctx.scope(m)
        for ln in step_lines(sc, build.name):
            st = next((s for s in sc.stmts if s.lineno == ln), None)
            if st is not None and not (m is fn and ln < line):
                return build, st
    used = f"{build.name}."
    if stepped_outside and not any(used in ctx.source(n) for m in cls.methods.values()
                                   if m is not init and used in ctx.source(m)  # (a call's text
                                   for n in of_types(m, (ast.Call,))):  # is inside its method's)
        return build, build.stmt  # no method uses it: the script steps it (NOTE [built alike])
    return None
