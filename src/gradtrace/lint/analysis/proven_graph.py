"""Whether a graph shared by two backward passes is proven from the code in sight.

# NOTE [proven shared graph]
The graph-lifetime rules (GT509 first) pair two ``backward()`` passes through one value
``t``. On unseen code they were almost never right (sessions 35-38: 0 real of 20 GT509 at
first contact) because the link was assumed where the code does not show it: ``t`` made by a
method of an object built in another file (xuance's ``self.policy.model_forward(...)``), or
the loss reached from ``t`` only through a call whose body is out of sight and may detach
(1d-tokenizer's ``loss_module(..., mode="discriminator")``, xuance's
``self.policy.actor_critic_forward(posteriors, ...)``, which starts from
``posteriors.detach()``). :func:`proven_link` asks both ends:

- the source: ``t`` or a value it is computed from is made by a call of a module in a proven
  form (:func:`proven_model_call`: a name bound to a module here, ``self(x)``, a function or
  class of this file, a bare callable name or ``self.<attr>(x)``, ``model.<attr>(x)`` on a
  plain name when a module class of this file registers ``<attr>`` as a layer, a forward
  method such as ``vae.encode``), or by a helper of this file whose return carries a graph,
  or is itself backpropagated, or a tensor made to require grad;
- the path: every call between ``t`` and the loss that reads ``t`` is transparent to the
  graph (:func:`_transparent`: a torch function, a tensor method, a builtin, a function of
  this file, a module bound here); a call of anything else (another object's attribute, a
  parameter's method, a callable passed in) may detach inside, so the pair is not proven.
Otherwise the rule stays silent. GT506 (the carried value) and GT507 (a module's output
made before the loop) ask the source side only (session 40): their path runs through the
loop's own calls. A bare callable name (``model(x)``, ``criterion(y, t)``
with ``criterion`` a parameter) counts on the source side (the usual training function) but
not on the path side unless bound to a module in sight.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.cuts import DETACHING_METHODS, NUMBER_FUNCS, TENSOR_METHODS
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.analysis.model_calls import bound_module, model_calls, runs_model
from gradtrace.lint.analysis.project import foreign_callee, foreign_method
from gradtrace.lint.analysis.reach import called_function, value_of
from gradtrace.lint.analysis.vocabulary import FORWARD_METHODS
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import bfs_walk

if TYPE_CHECKING:
    from gradtrace.lint.analysis.graph_deps import Graphs
    from gradtrace.lint.flow import Binding

# builtins that pass their tensor arguments' graph through (or compute nothing of them)
_BUILTINS = frozenset({"sum", "abs", "min", "max", "pow", "tuple", "list", "zip", "map",
                       "enumerate", "reversed", "sorted", "dict", "getattr", "print"})
_TORCH = ("torch.", "F.", "nn.functional.", "functional.")


def proven_model_call(g: Graphs, call: ast.Call, line: int) -> bool:
    """``call`` runs a module in a form the code in sight proves (NOTE [proven shared graph])."""
    scope, ctx = g.scope, g.ctx
    callee = dotted(call.func) or ""
    if callee in ("self", "self.forward") or bound_module(ctx, scope, callee, line) \
            or called_function(call, scope, line) is not None:
        return True
    f = call.func
    if isinstance(f, ast.Name):
        return True
    if isinstance(f, ast.Attribute):
        owner = dotted(f.value) or ""
        if owner == "self":
            return True  # `self.encoder(x)`, `self.compute_loss(x)`
        if isinstance(f.value, ast.Name) and _layer_of_a_file_class(g, f.attr):
            return True  # `model.backbone(x)`: a layer some module class of the file registers
        return f.attr in FORWARD_METHODS and (
            bound_module(ctx, scope, owner, line) or owner.count(".") <= 1)
    return False


def _layer_of_a_file_class(g: Graphs, attr: str) -> bool:
    """A module class of this file registers ``self.<attr>`` as a module: ``model.<attr>(x)`` on
    a plain name (a training function's ``model`` argument) runs a layer in sight."""
    classes = g.ctx.analysis.classes
    return any(c.is_module and attr in c.attrs and (k := c.attr_kind(attr)) is not None
               and k.what == MODULE for c in classes.values())


def proven_source(g: Graphs, t: Binding) -> bool:
    """``t`` or a value it is computed from holds a graph by code in sight."""
    v = value_of(t)
    cands = [t] + ([x for x in g.deps(v, t.line).bindings] if v is not None else [])
    for x in cands:
        if not g.direct(x):
            continue
        if g.backpropagated(x):
            return True
        vx = value_of(x)
        if vx is None:
            continue
        if isinstance(vx, ast.Call) and called_function(vx, g.scope, x.line) is not None:
            return True  # a helper or class of this file (NOTE [helper results])
        if any(proven_model_call(g, call, x.line) for _, call in model_calls(vx)):
            return True
        if any(isinstance(a, ast.Name) and _leaf(g, a.id, x.line)
               for n in bfs_walk(vx) if isinstance(n, ast.Call) for a in n.args):
            return True
    return False


def _leaf(g: Graphs, name: str, line: int) -> bool:
    from gradtrace.lint.analysis.graph_deps import _grad_leaf
    return _grad_leaf(g.scope.binding_before(name, line))


def _transparent(g: Graphs, call: ast.Call, line: int) -> bool:
    """A call that passes its arguments' graph on, by code in sight."""
    f = call.func
    callee = dotted(f) or ""
    if callee.startswith(_TORCH) or callee in _BUILTINS or callee in NUMBER_FUNCS:
        return True
    if (g.ctx.qualified_name(f) or "").startswith("torch."):
        return True
    if isinstance(f, ast.Attribute) and (f.attr in TENSOR_METHODS or f.attr in
                                         DETACHING_METHODS or f.attr in ("get", "items",
                                                                         "values", "keys")):
        return True  # `x.mean()`, `out.get('v')`, `x.detach()` (cuts, not hides)
    if isinstance(f, ast.Attribute) and not isinstance(f.value, (ast.Name, ast.Attribute)):
        return True  # `(a - b).pow(2)`, `out[0].sum()`: a method of a computed tensor
    if callee == "self" or bound_module(g.ctx, g.scope, callee, line) \
            or called_function(call, g.scope, line) is not None \
            or foreign_callee(g.ctx, call, g.scope, line) is not None \
            or foreign_method(g.ctx, call, g.scope, line) is not None:
        return True  # a body in sight, here or in the project (NOTE [project index])
    if _flagged(call) or callee in g.ctx.imports.aliases or callee in g.ctx.imports.package:
        return False  # a mode picked by a constant, or a function of another file
    if isinstance(f, ast.Name):  # a callable passed in: `head(feats)`, `criterion(out, y)`
        return _is_param(g, f.id) or runs_model(g.ctx, g.scope, f.id, line) or all(
            sc.binding_before(f.id, line) is None for sc in (g.scope, g.ctx.scope(g.ctx.tree)))
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id != "self":
        return _layer_of_a_file_class(g, f.attr)  # `model.cls_head(feats)`
    return isinstance(f, ast.Attribute) and dotted(f.value) == "self" \
        and runs_model(g.ctx, g.scope, callee, line)  # `self.head(feats)`


def _flagged(call: ast.Call) -> bool:
    """A constant string or bool argument: the call picks an arm of a body out of sight
    (``loss_module(x, recon, mode="discriminator")``)."""
    return any(isinstance(a, ast.Constant) and isinstance(a.value, (str, bool))
               for a in [*call.args, *(k.value for k in call.keywords)])


def _is_param(g: Graphs, name: str) -> bool:
    node = g.scope.node
    args = getattr(node, "args", None)
    return isinstance(args, ast.arguments) and name in {
        a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}


def opaque_calls(g: Graphs, loss: ast.AST, line: int, t: Binding) -> list[ast.Call]:
    """The calls between ``t`` and ``loss`` that read ``t`` (or a value computed from it) and
    are not :func:`_transparent`."""
    chain = [x for x in g.deps(loss, line).bindings if x is t or (
        value_of(x) is not None and any(
            y is t for y in g.deps(value_of(x), x.line).bindings))]  # type: ignore[arg-type]
    names = {x.name for x in chain} | {t.name}
    exprs = [(loss, line)] + [(value_of(x), x.line) for x in chain if x is not t]
    out: list[ast.Call] = []
    for e, ln in exprs:
        if e is None:
            continue
        for n in bfs_walk(e):
            if not isinstance(n, ast.Call):
                continue
            args = [*n.args, *(k.value for k in n.keywords)]
            if isinstance(n.func, ast.Attribute):
                args.append(n.func.value)
            if any(isinstance(m, ast.Name) and m.id in names for a in args
                   for m in bfs_walk(a)) and not _transparent(g, n, ln):
                out.append(n)
    return out


def proven_link(g: Graphs, t: Binding, loss1: ast.AST, line1: int, loss2: ast.AST,
                line2: int) -> bool:
    """NOTE [proven shared graph]: ``t``'s graph is proven and reaches both losses in sight,
    or through the same call out of sight (``vq_loss(imgs, recons, optimizer_idx=0)`` in both:
    if it keeps ``recons``'s graph both passes need it; if it cuts it, the first pass trains
    nothing of the producer either)."""
    if not proven_source(g, t):
        return False
    o1, o2 = opaque_calls(g, loss1, line1, t), opaque_calls(g, loss2, line2, t)
    d1, d2 = {ast.dump(c) for c in o1}, {ast.dump(c) for c in o2}
    return d1 == d2
