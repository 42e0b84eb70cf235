"""GT559: a trainer class steps an optimizer over its model only, while the loss it
backpropagates runs a module of its own that has layers (a projector in a distillation loss, a
classifier inside a loss module).

# NOTE [optimizer owners across methods]
Which modules' parameters an optimizer of a class holds, read across its methods: the
optimizer stepped in a method (``optimizer.step()`` / ``self.optimizer.step()``) is bound in that
method or in any method of the class (``self.optimizer = ...``), built by ``torch.optim`` or by
a helper of the file (kinds: NOTE [construction sites]); each owner the kind names is read where
the optimizer was built: ``self.<x>`` as it is, a local alias (``opt_model = self.model``) through
its binding, in the method or in the helper method it was built by. One owner that cannot be
read so, or one optimizer the class steps or binds that is not known, and nothing is said.

# NOTE [loss modules]
The modules a backward's loss runs: the calls ``self.<a>(...)`` / ``self.<a>.<method>(...)`` in
the statements that bind the loss in that method (``loss = ...``, ``self.loss += ...``) and,
transitively, the local names they read, outside ``no_grad`` and not detached. ``self.<a>`` is
what ``__init__`` (or the method) binds it to, or the module every construction of the class in
the file passes for it (NOTE [module given by the builder]); a class of the file whose layers
with parameters that method reads (a plain helper object: the modules it holds and calls, one
level further).
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.calls import call_sites
from gradtrace.lint.analysis.kinds import OPTIMIZER
from gradtrace.lint.analysis.modules import ClassInfo
from gradtrace.lint.analysis.steps import backward_loss
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.inplace._ops import given_module
from gradtrace.lint.rules.leaf._tensors import is_parameter_call, node_mentions
from gradtrace.lint.rules.registration._modules import covers, module_ctor
from gradtrace.lint.rules.registration.outside import _class_keeps_fixed, _surely_owns_params

Fn = ast.FunctionDef | ast.AsyncFunctionDef
# what, done to a loss module anywhere in the file, says its parameters are handled
HANDLED = frozenset({"parameters", "named_parameters", "state_dict", "load_state_dict",
                     "requires_grad_", "eval", "modules", "named_modules", "children"})


def _self_attr(e: ast.AST | None) -> str | None:
    """``x`` for ``self.x``."""
    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self":
        return e.attr
    return None


def _owner(o: str, m: Fn, build: ast.stmt, ctx: Context) -> list[tuple[str, ast.stmt]] | None:
    """(``self``-relative owner, the statement that chose it) for an owner ``o`` the kind of the
    optimizer built at ``build`` in method ``m`` names
    (NOTE [optimizer owners across methods]); a container of modules
    (``nn.ModuleList([self.student])``) gives each element, chosen at ``build``."""
    if o == "self" or o.startswith("self."):
        return [(o, build)]
    head = o.partition(".")[0]
    fns: list[Fn] = [m]
    v = getattr(build, "value", None)
    if isinstance(v, ast.Call):
        callee = ctx.analysis.local_callee(v, ctx.scope(m), build.lineno)
        if callee is not None and ctx.analysis.class_of(callee) is ctx.analysis.class_of(m):
            fns.append(callee)
    for fn in fns:
        bs = ctx.scope(fn).bindings.get(head, ())
        if len(bs) == 1 and bs[0].value is not None:
            v = bs[0].value
            got = dotted(v)
            if got is not None and (got == "self" or got.startswith("self.")):
                return [(got + o[len(head):], bs[0].stmt)]
            elems = _container_elements(v, ctx) if o == head else None
            reads = [x for x in walk(fn) if isinstance(x, ast.Name) and x.id == head
                     and isinstance(x.ctx, ast.Load)]
            if elems and all(build.lineno <= x.lineno <= (build.end_lineno or build.lineno)
                             for x in reads):  # the list grows nowhere else (`.append`)
                return [(x, build) for x in elems]
    return None


def _container_elements(v: ast.AST, ctx: Context) -> list[str] | None:
    """``nn.ModuleList([self.a, self.b])`` / ``nn.Sequential(self.a)``: ``self.a``, ``self.b``."""
    if not isinstance(v, ast.Call) or ctx.call_name(v) not in (
            "torch.nn.ModuleList", "torch.nn.Sequential"):
        return None
    items = v.args[0].elts if len(v.args) == 1 and isinstance(v.args[0], (ast.List, ast.Tuple)) \
        else v.args
    names = [dotted(x) for x in items]
    if not names or any(x is None or not x.startswith("self.") for x in names):
        return None
    return names  # type: ignore[return-value]


def _opt_builds(cls: ClassInfo, ctx: Context) -> dict[str, list[tuple[ast.stmt, Fn]]] | None:
    """``self.<attr>`` -> its binding statements, for every attribute of the class that is
    stepped (``self.x.step()``); None when one is bound nowhere in the class."""
    out: dict[str, list[tuple[ast.stmt, Fn]]] = {}
    for m in cls.methods.values():
        for n in walk(m):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr in ("step", "zero_grad"):
                a = _self_attr(n.func.value)
                if a is None:
                    continue
                info = cls.attrs.get(a)
                if info is None:
                    return None
                out[a] = [(s, info.method if s is info.stmt else _method_of(s, cls))
                          for s in (info.stmt, *info.later)]
    return out


def _method_of(s: ast.stmt, cls: ClassInfo) -> Fn:
    for m in cls.methods.values():
        if m.lineno <= s.lineno <= (m.end_lineno or m.lineno):
            return m
    raise LookupError(s.lineno)


def _held(stmts: list[tuple[ast.stmt, Fn]], ctx: Context
          ) -> list[tuple[str, ast.stmt, ast.stmt]] | None:
    """(owner, choosing statement, build statement) of every build of one optimizer; None
    when one build or one owner is unknown."""
    out = []
    for s, m in stmts:
        v = getattr(s, "value", None)
        if not isinstance(s, ast.Assign) or not isinstance(v, ast.Call):
            return None
        k = ctx.analysis.kind(v, ctx.scope(m), s.lineno)
        if k is None or k.what != OPTIMIZER or not k.over:
            return None
        for o in k.over:
            got = _owner(o, m, s, ctx)
            if got is None:
                return None
            out += [(x, chose, s) for x, chose in got]
    return out


def _loss_calls(fn: Fn, loss: ast.expr, ctx: Context) -> list[tuple[str, ast.Call]]:
    """(attribute, call) for the calls of ``self.<a>`` the loss runs (NOTE [loss modules])."""
    scope = ctx.scope(fn)
    todo = [loss]
    seen: set[str] = set()
    out: list[tuple[str, ast.Call]] = []
    while todo:
        e = todo.pop()
        for n in walk(e):
            if isinstance(n, ast.Call):
                f = n.func
                a = _self_attr(f) or (_self_attr(f.value) if isinstance(f, ast.Attribute) else None)
                if a is not None and scope.grad_off_at(n) is None:
                    out.append((a, n))
            name = dotted(n) if isinstance(n, (ast.Name, ast.Attribute)) else None
            if name is None or name in seen or isinstance(getattr(n, "ctx", None), ast.Store):
                continue
            seen.add(name)
            for b in scope.bindings.get(name, ()):
                if b.value is not None and b.stmt is not None:
                    todo.append(b.value)
                if isinstance(b.stmt, ast.AugAssign):
                    todo.append(b.stmt.value)
    return out


def _output_given(cls: ClassInfo, m: Fn, loss: ast.expr, ctx: Context) -> bool:
    """The loss ``m`` backpropagates is its parameter, and a caller of the file hands it the
    output of the same instance (``loss = box(x); box.update(loss)``): the module's
    ``forward`` made it (NOTE [loss modules])."""
    a = m.args
    params = [x.arg for x in (*a.posonlyargs, *a.args)]
    if not isinstance(loss, ast.Name) or loss.id not in params[1:] \
            or ctx.scope(m).bindings.get(loss.id):
        return False
    i = params.index(loss.id) - 1
    for call, _, encl in call_sites(ctx, m.name):
        f = call.func
        if not isinstance(f, ast.Attribute) or len(call.args) <= i \
                or not isinstance(call.args[i], ast.Name):
            continue
        recv = dotted(f.value)
        fn = next((e for e in reversed(encl) if isinstance(e, (ast.FunctionDef,
                                                                ast.AsyncFunctionDef))), ctx.tree)
        b = ctx.scope(fn).binding_before(call.args[i].id, call.lineno)
        v = b.value if b is not None else None
        if recv and isinstance(v, ast.Call) and dotted(v.func) == recv:
            k = ctx.analysis.kind(v.func, ctx.scope(fn), call.lineno)
            if k is not None and k.cls == cls.name:
                return True
    return False


def _detached(call: ast.Call, fn: Fn) -> bool:
    return any(isinstance(x, ast.Attribute) and x.value is call
               and x.attr in ("detach", "item", "tolist") for x in walk(fn))


def _attr_call(cls: ClassInfo, a: str, ctx: Context) -> ast.Call | None:
    """The construction of the module ``self.<a>`` holds (NOTE [loss modules])."""
    info = cls.attrs.get(a)
    if info is None or info.later:
        return None
    v = info.value
    if isinstance(v, ast.Name) and info.method.name == "__init__":
        got = given_module(info.method, v.id, ctx)
        v = got[0] if got is not None else None
    return v if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) else None


def _trained_layers(call: ast.Call, method: str, ctx: Context, depth: int = 0) -> list[str]:
    """Attributes of the class built by ``call`` that hold layers with parameters read by
    its ``method`` (``__call__``: ``forward``); for a plain object, its modules of the file
    with such layers that the method calls."""
    cls = ctx.analysis.classes.get(call.func.id)  # type: ignore[attr-defined]
    if cls is None or depth > 1 or _class_keeps_fixed(call, ctx):
        return []
    fn = cls.method("forward" if method == "__call__" and cls.is_module else method)
    if fn is None:
        return []
    read: set[str] = set()
    todo, seen = [fn], set()
    while todo:  # the method and the methods of the class it calls on ``self``
        f = todo.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        for x in walk(f):
            if _self_attr(x) is not None:
                sub = cls.method(x.attr)  # type: ignore[attr-defined]
                if sub is not None:
                    todo.append(sub)
                else:
                    read.add(x.attr)  # type: ignore[attr-defined]
    out = []
    for a in sorted(read):
        info = cls.attrs.get(a)
        v = info.value if info is not None else None
        if not isinstance(v, ast.Call) or info.later:
            continue
        if cls.is_module and is_parameter_call(v, ctx) and not _frozen_param(v):
            out.append(a)  # `self.centers = nn.Parameter(...)` (a center loss)
        if not module_ctor(v, ctx):
            continue
        if any(k.arg in ("affine", "elementwise_affine") and isinstance(k.value, ast.Constant)
               and k.value.value is False for k in v.keywords):
            continue  # a norm without weights
        if cls.is_module and _surely_owns_params(v, ctx) and not _class_keeps_fixed(v, ctx):
            out.append(a)
        elif not cls.is_module and isinstance(v.func, ast.Name):
            called = {(_self_attr(x.func.value) if isinstance(x.func, ast.Attribute) else None,
                       x.func.attr if isinstance(x.func, ast.Attribute) else "")
                      for x in walk(fn) if isinstance(x, ast.Call)}
            called |= {(_self_attr(x.func), "__call__") for x in walk(fn)
                       if isinstance(x, ast.Call)}
            for who, meth in called:
                if who == a and _trained_layers(v, meth, ctx, depth + 1):
                    out.append(a)
                    break
    return out


def _frozen_param(v: ast.Call) -> bool:
    """``nn.Parameter(t, requires_grad=False)``: a constant kept on the module."""
    return any(k.arg == "requires_grad" and not (isinstance(k.value, ast.Constant)
                                                 and k.value.value is True) for k in v.keywords) \
        or len(v.args) > 1


def _handled(names: set[str], ctx: Context) -> bool:
    """A name of the loss module (its attribute, the variable passed for it) whose parameters,
    state or mode the file handles anywhere (``loss_fn.parameters()``, ``.eval()``...)."""
    for n in walk(ctx.tree):
        if isinstance(n, ast.Attribute) and n.attr in HANDLED:
            if set((dotted(n.value) or "").split(".")) & names:
                return True
    return False


class LossModuleOutsideOptimizer(Rule):
    """A trainer class steps an optimizer over its model only, while the loss it backpropagates
    runs a module of its own with trainable layers (a projector, a classifier inside the loss).

    Why: `self.optimizer = self.build_optimizer(self.model)` and a loss computed by
    `self.criterion(...)`, whose class holds an `nn.Linear` it applies: the layer gets gradients
    at every step, but no optimizer holds it, so it stays at its random initialisation forever
    and the model is trained against a fixed random projection, silently (verified on torch
    2.13). Give the loss module's parameters to the optimizer (a second group), or freeze it.
    Known limits: the optimizers the class steps must all be built in the class (directly or
    by a helper of the file) over `self.<module>` parameters
    (NOTE [optimizer owners across methods]); the loss module must be a class of the file bound on `self` (in `__init__`, in
    the step's method, or given by every construction of the class: NOTE [loss modules]);
    a loss module whose parameters, state or mode the file handles anywhere is taken as intended.
    """

    code = "GT559"
    name = "loss-module-outside-optimizer"
    message = ("`{opt}` holds only the parameters of {owners}, but the loss backpropagated at "
               "line {bline} runs `self.{attr}` ({cls}), whose layers {layers} get gradients "
               "and never change")
    triggers = ("backward",)
    examples = [
        Bad("""
            import torch
            from torch import nn
            class ProjLoss(nn.Module):
                def __init__(self, d):
                    super().__init__()
                    self.proj = nn.Linear(d, d)
                def forward(self, s, t):
                    return (self.proj(s) - t).pow(2).mean()
            class Trainer:
                def __init__(self, model, d):
                    self.model = model
                    self.criterion = ProjLoss(d)
                def fit(self, batches):
                    self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
                    for x, t in batches:
                        loss = self.criterion(self.model(x), t)
                        self.opt.zero_grad()
                        loss.backward()
                        self.opt.step()
            """, at=(14, 8)),
        Good("""
            import torch
            from torch import nn
            class ProjLoss(nn.Module):
                def __init__(self, d):
                    super().__init__()
                    self.proj = nn.Linear(d, d)
                def forward(self, s, t):
                    return (self.proj(s) - t).pow(2).mean()
            class Trainer:
                def __init__(self, model, d):
                    self.model = model
                    self.criterion = ProjLoss(d)
                def fit(self, batches):
                    params = [*self.model.parameters(), *self.criterion.parameters()]
                    self.opt = torch.optim.SGD(params, lr=0.1)
                    for x, t in batches:
                        loss = self.criterion(self.model(x), t)
                        self.opt.zero_grad()
                        loss.backward()
                        self.opt.step()
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        if not ctx.mentions("optim"):
            return
        for cls in ctx.analysis.classes.values():
            if node_mentions(ctx, cls.node, "backward"):
                yield from self._class(cls, ctx)

    def _class(self, cls: ClassInfo, ctx: Context) -> Iterator[Finding]:
        builds = None
        for m in cls.methods.values():
            for n in walk(m):
                loss = backward_loss(n, ctx) if isinstance(n, ast.Call) else None
                if loss is None:
                    continue
                if builds is None:
                    builds = _opt_builds(cls, ctx)
                    if builds is None:
                        return
                yield from self._step(cls, m, n, loss, builds, ctx)

    def _step(self, cls: ClassInfo, m: Fn, back: ast.Call, loss: ast.expr,
              builds: dict[str, list[tuple[ast.stmt, Fn]]], ctx: Context) -> Iterator[Finding]:
        scope = ctx.scope(m)
        held: list[tuple[str, ast.stmt, ast.stmt]] = []
        opt_name = None
        for c in walk(m):
            if not (isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                    and c.func.attr == "step" and c.lineno > back.lineno):
                continue
            r = dotted(c.func.value)
            if r is None:
                continue
            a = _self_attr(c.func.value)
            if a is not None:
                got = _held(builds.get(a, []), ctx) if a in builds else None
            else:
                bs = scope.bindings.get(r, ())
                got = _held([(b.stmt, m) for b in bs], ctx) if bs else None
            if not got:
                return
            held += got
            opt_name = opt_name or r
        if not held or opt_name is None:
            return
        owners = {o for o, _, _ in held}
        calls = _loss_calls(m, loss, ctx)
        fwd = cls.methods.get("forward") if cls.is_module else None
        if fwd is not None and _output_given(cls, m, loss, ctx):
            calls += [c for r in walk(fwd) if isinstance(r, ast.Return) and r.value is not None
                      for c in _loss_calls(fwd, r.value, ctx)]
        for attr, call in calls:
            if any(covers(o, f"self.{attr}") for o in owners) or _detached(call, m):
                continue
            made = _attr_call(cls, attr, ctx)
            if made is None:
                continue
            meth = call.func.attr if _self_attr(call.func) is None else "__call__"  # type: ignore
            layers = [x for x in _trained_layers(made, meth, ctx)
                      if not any(covers(o, f"self.{attr}.{x}") or covers(f"self.{attr}.{x}", o)
                                 for o in owners)]
            if not layers:
                continue
            names = {attr}
            info = cls.attrs[attr]
            if isinstance(info.value, ast.Name):
                names.add(info.value.id)
            for site, _ in ctx.analysis.call_sites(info.method) if isinstance(
                    info.value, ast.Name) else ():
                x = ctx.analysis.arguments(info.method, site).get(info.value.id)  # type: ignore
                if isinstance(x, ast.Name):
                    names.add(x.id)
            if _handled(names, ctx):
                continue
            owner, chose, build = held[0]
            yield self.report(chose, ctx, related=[
                Related(ctx.path, build.lineno, f"`{opt_name}` is built here",
                        ctx.column(build)),
                Related(ctx.path, call.lineno, f"`self.{attr}` runs in the loss here",
                        ctx.column(call))],
                opt=opt_name, owners=", ".join(f"`{o}`" for o in sorted(owners)),
                bline=back.lineno, attr=attr, cls=made.func.id,  # type: ignore[attr-defined]
                layers=", ".join(f"`{x}`" for x in layers))
            return
