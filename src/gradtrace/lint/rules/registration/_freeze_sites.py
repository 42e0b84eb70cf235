"""What the freezing rules of :mod:`freezing` read around a freeze: a module attribute (GT407:
set to a tensor just before), a head assigned then reloaded or its root rebound (GT408), a new
part wrapped after a freeze (GT409), and an optimizer that keeps only trainable parameters
(also used by frozen.py, fixed.py, unfrozen_calls.py)."""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.owners import home
from gradtrace.lint.analysis.objects import strip_same
from gradtrace.lint.analysis.params import builds_module, module_ctor
from gradtrace.lint.analysis.project import foreign_function
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.registration._grad_flags import GradFlag
from gradtrace.lint.rules.registration._modules import (
    covers, module_classes, module_ctor, owns_params)


def _class_module_attr(ctx: Context, attr: str) -> bool:
    """Whether the enclosing module class assigns ``self.<attr> = <module>`` somewhere."""
    cls = ctx.class_def
    if cls is None or cls.name not in module_classes(ctx):
        return False
    for n in walk(cls):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 \
                and dotted(n.targets[0]) == f"self.{attr}" and module_ctor(n.value, ctx):
            return True
    return False


_TOUCH = frozenset({"requires_grad", "requires_grad_", "parameters", "named_parameters",
                    "modules", "children", "apply", "load_state_dict"})


def _fresh_unfrozen(ctx: Context, name: str, node: ast.Assign) -> bool:
    """# NOTE [fresh part unfrozen]
    ``self.head = conv1x1(c, k)`` right after a loop freezing every parameter, then
    ``self.head.requires_grad = True``: the last statement of the block binding ``name``
    builds a new module (a module constructor, or a function of the file or project every
    ``return`` of which builds one) and nothing in between freezes, loads or walks
    parameters: the new part's parameters already require grad, the flag set on the module
    has nothing to undo (slimmable-medical-segmentation's heads). A part frozen after it is
    built (``requires_grad_(False)`` in between) or set to False is still reported."""
    if not (isinstance(node.value, ast.Constant) and node.value.value is True):
        return False
    parent = ctx.stmts[-2] if len(ctx.stmts) > 1 else ctx.tree
    block = next((b for f in ("body", "orelse", "finalbody")
                  if node in (b := getattr(parent, f, None) or [])), None)
    for s in reversed(block[:block.index(node)] if block else []):
        if not any(isinstance(n, (ast.Attribute, ast.Name)) and isinstance(n.ctx, ast.Store)
                   and dotted(n) == name for n in walk(s)):
            if any(isinstance(n, ast.Attribute) and n.attr in _TOUCH for n in walk(s)):
                return False
            continue
        if not (isinstance(s, ast.Assign) and len(s.targets) == 1
                and dotted(s.targets[0]) == name and isinstance(s.value, ast.Call)):
            return False
        if module_ctor(s.value, ctx):
            return True
        fn = ctx.analysis.callee(s.value, ctx.function) or foreign_function(ctx, s.value)
        return fn is not None and builds_module(fn, home(ctx, fn))
    return False


def _set_to_tensor_before(ctx: Context, name: str, node: ast.stmt) -> bool:
    """The last statement of ``node``'s own block that binds ``name`` before it binds a
    tensor (``self.skip = nn.Parameter(alpha)`` then ``self.skip.requires_grad = False``, in
    the arm where the attribute is no module, another arm building a layer)."""
    parent = ctx.stmts[-2] if len(ctx.stmts) > 1 else ctx.tree
    block = next((b for f in ("body", "orelse", "finalbody")
                  if node in (b := getattr(parent, f, None) or [])), None)
    if block is None:
        return False
    for s in reversed(block[:block.index(node)]):
        if not any(isinstance(n, (ast.Attribute, ast.Name)) and isinstance(n.ctx, ast.Store)
                   and dotted(n) == name for n in walk(s)):
            continue
        if not (isinstance(s, ast.Assign) and len(s.targets) == 1
                and dotted(s.targets[0]) == name and isinstance(s.value, ast.Call)):
            return False
        made = dotted(s.value.func) or ""
        return made.rpartition(".")[2] == "Parameter" or made.startswith("torch.") \
            and not module_ctor(s.value, ctx)
    return False


def _head_assignments(scope: Scope, root: str, before: int) -> list[ast.Assign]:
    out = []
    for s in scope.stmts:
        if s.lineno >= before:
            break
        if isinstance(s, ast.Assign) and len(s.targets) == 1:
            t = dotted(s.targets[0])
            if t and t.startswith(root + ".") and owns_params(s.value, scope.ctx):
                out.append(s)
    return out


def _reloaded(scope: Scope, head: ast.Assign, freeze: ast.stmt) -> bool:
    """A ``load_state_dict`` on the head or a module holding it runs between the head's
    assignment and the freeze (``model.fc = nn.Linear(...)``, ``model.load_state_dict(sd)``):
    the head holds trained weights, and freezing the whole loaded model is a fixed model (a
    feature extractor, a scorer), not a new head frozen by mistake."""
    part = dotted(head.targets[0]) or ""
    return any(m.receiver and covers(m.receiver, part) and
               head.lineno < m.stmt.lineno < freeze.lineno and
               not scope.exclusive(m.stmt, freeze) for m in scope.calls_to("load_state_dict"))


def _rebound(scope: Scope, root: str, first: int, freeze: ast.stmt) -> bool:
    """``root`` is bound anew between line ``first`` and the freeze, to a value computed
    without the old object (``net = models.resnet50(...)`` again, the course notebook's second
    experiment): the freeze reaches the new object, not what was set up on the old one.
    ``net = net.to(device)`` or ``net = nn.DataParallel(net)`` keep the old object's parameters."""
    return any(b.value is not None and not scope.exclusive(b.stmt, freeze) and not any(
        isinstance(n, (ast.Name, ast.Attribute)) and dotted(n) == root for n in walk(b.value))
        for b in scope.bindings_within(root, first + 1, freeze.lineno - 1))


def _new_part(scope: Scope, f: GradFlag, target: str, line: int) -> bool:
    """``self.X = nn.Parameter(...)`` after a module froze all it had built so far, on an
    attribute not set before that freeze: a new trainable part (adapter, prompt tuning), not a
    frozen weight re-wrapped (the freeze never covered it). Or the module that owns ``target``
    was replaced by a newly built one between the freeze and ``line`` (``self.model.out =
    nn.Linear(...)`` after freezing ``self.model``, then its bias re-made): the freeze set the
    flags of the old module's parameters, and the new head is trainable by design."""
    if f.root == "self" and target.count(".") == 1 and not any(
            b.line < f.stmt.lineno for b in scope.bindings.get(target, ())):
        return True
    owners = [target.rpartition(".")[0]]
    while owners[-1].count(".") > f.root.count("."):
        owners.append(owners[-1].rpartition(".")[0])
    return any(f.stmt.lineno < b.line < line and not scope.exclusive(b.stmt, f.stmt)
               and module_ctor(strip_same(b.value), scope.ctx)
               for o in owners if covers(f.root, o) and o != f.root
               for b in scope.bindings.get(o, ()) if b.value is not None)


def trainable_only_filter(call: ast.Call, scope: Scope) -> bool:
    """Whether an optimizer's params keep only ``requires_grad`` ones (``filter``, ``if``),
    directly or through a name bound to such a list just before."""
    args = [*call.args[:1], *(k.value for k in call.keywords if k.arg == "params")]
    for a in list(args):
        if isinstance(a, ast.Name):
            b = scope.binding_before(a.id, call.lineno)
            if b is not None and b.value is not None:
                args.append(b.value)
    return any(isinstance(n, ast.Attribute) and n.attr == "requires_grad"
               for a in args for n in walk(a))
