"""GT408's reading of a freeze that names a part built anew (NOTE [new part frozen])."""
from __future__ import annotations

import ast
from typing import NamedTuple

from gradtrace.lint.analysis.fresh_heads import built_part, given_values
from gradtrace.lint.analysis.objects import strip_same
from gradtrace.lint.analysis.project import shown_path
from gradtrace.lint.flow import Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import function_scopes
from gradtrace.lint.rules.registration._freeze_sites import _head_assignments, _rebound, _reloaded
from gradtrace.lint.rules.registration._grad_flags import GradFlag
from gradtrace.lint.rules.registration._modules import covers, optimizer_builds, owns_params


class Victim(NamedTuple):
    """What a freeze reaches that was set up to train: where (``path`` None: this file)."""

    line: int
    what: str
    part: str
    path: str | None = None
    column: int = 0


def freeze_victim(scope: Scope, f: GradFlag, before: list[GradFlag]) -> Victim | None:
    """The part set up to train that the freeze ``f`` reaches (GT408): one unfrozen by an
    earlier flag of ``before``, a head assigned under ``f.root`` before it, or ``f.root``
    itself just built (:func:`new_part_frozen`)."""
    for g in reversed(before):
        if g.value and not g.conditional and g.root != f.root and covers(f.root, g.root) \
                and not scope.exclusive(f.stmt, g.stmt) \
                and not _rebound(scope, f.root, g.stmt.lineno, f.stmt):
            return Victim(g.stmt.lineno, "the part unfrozen at", g.root)
    if f.root == "self":
        return None  # a module freezing all it built so far (prefix/adapter tuning)
    heads = [h for h in _head_assignments(scope, f.root, f.stmt.lineno)
             if not scope.exclusive(f.stmt, h) and not _reloaded(scope, h, f.stmt)
             and not _rebound(scope, f.root, h.lineno, f.stmt)]
    if heads:
        return Victim(heads[-1].lineno, "the new", dotted(heads[-1].targets[0]) or "")
    return new_part_frozen(scope, f)


def new_part_frozen(scope: Scope, f: GradFlag) -> Victim | None:
    """# NOTE [new part frozen]
    ``model.fc = nn.Linear(512, 10)`` (or ``net.fc = ...; return net`` in the function,
    of the file or of the project, whose result ``model`` holds: NOTE [part built anew]),
    then ``model.fc.requires_grad_(False)`` or a loop setting ``requires_grad = False`` on
    each of ``model.fc.parameters()``, outside any loop, in a function (or script) that
    builds an optimizer over the parameters of ``model`` or of ``model.fc`` (for
    ``self.backbone.fc`` in a method of a module class: anywhere in the file, over an
    instance of the class, :func:`_instance_trained`): the only part
    with random weights never trains. Silent when the new value builds no parameter
    (``nn.Identity()``), when the part is an attribute of ``self`` (a fixed random target
    network built by its module), and when anything may give the part values after it is
    built, in either function (:func:`given_values`: a load, an ``nn.init`` call, a copy)."""
    if scope.loops_of(f.stmt):
        return None
    got = built_part(scope, f.root, f.stmt)
    if got is None or not owns_params(got.stmt.value, got.ctx):
        return None
    here = got.scope is scope
    if given_values(scope, f.root, got.stmt.lineno if here else 0, f.stmt):
        return None
    if not here and given_values(got.scope, dotted(got.stmt.targets[0]) or "",
                                 got.stmt.lineno, got.stmt):
        return None
    if not any(covers(src, f.root) and not scope.exclusive(o.stmt, f.stmt)
               for o in optimizer_builds(scope) for src in o.sources) \
            and not (f.root.startswith("self.") and _instance_trained(scope)):
        return None
    path = None if got.ctx is scope.ctx else shown_path(got.ctx.path, scope.ctx.path)
    return Victim(got.stmt.lineno, "new", dotted(got.stmt.targets[0]) or f.root, path,
                  got.ctx.column(got.stmt))


def _instance_trained(scope: Scope) -> bool:
    """``scope`` is a method of a module class of the file, and a function (or the script) of
    the file builds an optimizer over the parameters of an instance of it (``net =
    Classifier(10)``, then ``Adam(net.parameters())``)."""
    ctx = scope.ctx
    info = ctx.analysis.class_of(scope.node)
    if info is None or not info.is_module:
        return False
    for node in function_scopes(ctx.tree):
        other = ctx.scope(node)
        for o in optimizer_builds(other):
            for src in o.sources:
                b = other.binding_before(src.partition(".")[0], o.stmt.lineno + 1)
                made = strip_same(b.value) if b is not None and b.value is not None else None
                if isinstance(made, ast.Call) and isinstance(made.func, ast.Name) \
                        and made.func.id == info.node.name:
                    return True
    return False
