"""What a class inherits: the bases of a class, in its file or another file of the project,
and the kind of an attribute only a base assigns.

# NOTE [inherited attributes]
``class Trainer(BaseTrainer)`` whose methods read ``self.optimizer`` and ``self.scheduler``
while only ``BaseTrainer.__init__`` assigns them (``self.optimizer = torch.optim.SGD(...)``):
Python's attribute lookup finds the instance's attribute wherever the class chain set it, so
``self.optimizer`` in the subclass is the optimizer the base built. :func:`lineage` gives the
class chain, nearest first, each base resolved in this file or through the project index
(NOTE [project index]) in the file that defines it, with that file's context; None when some
base cannot be resolved (``nn.Module`` and ``object`` aside: they assign no attribute of the
instance), since an unseen base may set or step anything. :func:`inherited_kind` is the kind
of ``self.<name>`` that the class does not assign itself, from the nearest base that does.
Across files only what is spelt the same in both is carried: a scheduler, a loader, an
optimizer over ``self``'s own parts (``self.model.parameters()``: the same instance; a
constructor argument's name means nothing here, so it is dropped), a module (its class kept
only when it is torch's, as NOTE [foreign module kinds]); never the constructing node, which
belongs to the other file's tree.
"""
from __future__ import annotations

import ast
from dataclasses import replace
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.foreign_kinds import DEFINITIONS
from gradtrace.lint.analysis.kinds import LOADER, MODULE, OPTIMIZER, SCHEDULER, Kind

if TYPE_CHECKING:
    from gradtrace.lint.analysis.modules import ClassInfo
    from gradtrace.lint.context import Context

# bases that set no attribute of the instance and step nothing
QUIET_BASES = frozenset({"object", "torch.nn.Module", "torch.nn.modules.module.Module",
                         "abc.ABC", "ABC"})
CARRIED = frozenset({SCHEDULER, LOADER, OPTIMIZER, MODULE})
MAX_CLASSES = 12


def lineage(ctx: Context, cls: ClassInfo, foreign: bool = True
            ) -> list[tuple[Context, ClassInfo]] | None:
    """``cls`` and its bases, nearest first, each with the context of its file
    (NOTE [inherited attributes]); None when a base is neither quiet, of the file, nor (with
    ``foreign``) a class the project index resolves."""
    out: list[tuple[Context, ClassInfo]] = []
    seen: set[int] = set()
    todo: list[tuple[Context, ClassInfo]] = [(ctx, cls)]
    while todo:
        c_ctx, c = todo.pop(0)
        if id(c.node) in seen:
            continue
        seen.add(id(c.node))
        out.append((c_ctx, c))
        if len(out) > MAX_CLASSES or c.node.keywords:
            return None
        for b in c.node.bases:
            got = _base(c_ctx, b, foreign)
            if got is None:
                return None
            if got is not True:
                todo.append(got)  # type: ignore[arg-type]
    return out


def _base(ctx: Context, b: ast.expr, foreign: bool) -> tuple[Context, ClassInfo] | bool | None:
    """A base expression resolved: True for a quiet base, (context, class) for a class of the
    file or of another file of the project, None otherwise."""
    q = ctx.qualified_name(b) or ""
    if q in QUIET_BASES or isinstance(b, ast.Name) and b.id == "object":
        return True
    classes = ctx.analysis.classes
    if isinstance(b, ast.Name) and b.id in classes:
        return ctx, classes[b.id]
    if not foreign:
        return None
    got = DEFINITIONS[0](ctx, b) if DEFINITIONS and isinstance(
        b, (ast.Name, ast.Attribute)) else None
    if got is None or not isinstance(got[1], ast.ClassDef):
        return None
    octx, node = got
    c = octx.analysis.classes.get(node.name)
    return (octx, c) if c is not None and c.node is node else None


def inherited_kind(ctx: Context, cls: ClassInfo, name: str) -> Kind | None:
    """The kind of ``self.<name>`` that ``cls`` never assigns, from the nearest base that
    does (NOTE [inherited attributes]); None when unknown."""
    if not cls.node.bases:
        return None
    # a module class's bases are read in its own file only: a model file subclasses imported
    # layers everywhere, and parsing each of their files for every attribute costs
    # (NOTE [foreign module kinds]); a trainer or runner (no module) is read across files
    chain = ctx.memo("inherited-lineage", cls.node, lambda: lineage(ctx, cls, not cls.is_module))
    for c_ctx, c in (chain or ())[1:]:
        if name not in c.attrs:
            continue
        k = c.attr_kind(name)
        if k is None or c_ctx is ctx:
            return k
        return _carried(k)
    return None


def _carried(k: Kind) -> Kind | None:
    """A kind read in another file, in terms this file can use (NOTE [inherited attributes])."""
    if k.what not in CARRIED:
        return None
    if k.what == MODULE:
        return Kind(MODULE, cls=k.cls if (k.cls or "").startswith("torch.") else None)
    over = frozenset(o for o in k.over if o == "self" or o.startswith("self."))
    return replace(k, over=over, node=None)
