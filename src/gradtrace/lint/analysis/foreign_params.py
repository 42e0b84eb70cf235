"""What the project's other files pass for a parameter of a top-level function of this file.

# NOTE [kinds by the callers]
``def train_step(model, epochs, optimizer, loss_fn, scheduler, loader): ... optimizer.zero_grad();
loss.backward(); scheduler.step()`` says nothing by itself of what ``optimizer`` and
``scheduler`` are; its calls do (``pipeline.py``: ``optimizer = torch.optim.Adam(...)``,
``scheduler = StepLR(optimizer, ...)``, ``train_step(model, n, optimizer, loss_fn, scheduler,
...)``). The kind of a parameter (NOTE [parameter kinds]) is what every call passes for it: the
calls of the file and, for a top-level function, the calls in the project's other files
(NOTE [reverse index]), each argument's kind read in its own file by that file's kinds layer.
One fact for every rule: there is no second reading of "what the callers hand in".

A kind read in another file is carried in this file's terms: an optimizer's or a parameter
iterable's owners (``over``) and the constructing node are the other file's, so they are
dropped; a module or object of a class of the other file keeps the class spelt with that
file's module name (``models.Net``), so that no class of this file is taken for it; a torch
class keeps its own name. A caller of another file whose argument's kind is unknown, a
``**kw`` call, or two callers that disagree leave the parameter unknown. No project around the
file (a buffer, a snippet), a search the reverse index cannot answer (too many files naming
the function, an import it cannot follow) adds no caller: the file's own calls decide, as
before. Only the checked file reads its callers elsewhere: a file read through the project
index answers from its own calls (no search from a search, and the same answer whichever file
is checked).
"""
from __future__ import annotations

import ast
import os
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.kinds import MODULE, OBJECT, Kind
from gradtrace.lint.grad_modes import FUNCTION_TYPES
from gradtrace.lint.statement_shapes import argument_default

if TYPE_CHECKING:
    from gradtrace.lint.analysis.callers import Site
    from gradtrace.lint.context import Context


def other_sites(ctx: Context, fn: ast.AST) -> list[Site]:
    """The calls of ``fn`` (a top-level function of the checked file) in the project's other
    files; empty when there are none, no project, or the reverse index cannot tell."""
    from gradtrace.lint.analysis.callers import foreign_sites
    from gradtrace.lint.analysis.project_files import depth_of
    if not isinstance(fn, FUNCTION_TYPES) or fn not in ctx.tree.body or depth_of(ctx) \
            or not os.path.isfile(ctx.path):
        return []
    return ctx.memo("other-sites", fn, lambda: foreign_sites(ctx, fn) or [])


def other_kinds(ctx: Context, fn: ast.AST, name: str) -> list[Kind] | None:
    """The kind each call of ``fn`` in another file passes for ``name``, in this file's terms
    (NOTE [kinds by the callers]); None when one of them is unknown."""
    out: list[Kind] = []
    for s in other_sites(ctx, fn):
        if any(k.arg is None for k in s.call.keywords):
            return None
        a = s.ctx.analysis
        v = a.arguments(fn, s.call).get(name)  # type: ignore[arg-type]
        if v is None:
            if any(isinstance(x, ast.Starred) for x in s.call.args):
                return None  # NOTE [arguments before a spread]
            d = argument_default(name, fn)
            k = ctx.analysis.kind_in(d, ctx.tree, fn.lineno) if d is not None else None
        else:
            k = _carried(a.kind_in(v, s.where, s.call.lineno), s.ctx)
        if k is None:
            return None
        out.append(k)
    return out


def _carried(k: Kind | None, octx: Context) -> Kind | None:
    if k is None:
        return None
    cls = k.cls
    if k.what in (MODULE, OBJECT) and cls and not cls.startswith("torch."):
        if "." not in cls:
            cls = os.path.splitext(os.path.basename(octx.path))[0] + "." + cls
        cls = octx.path + ":" + cls
        if k.what == MODULE and isinstance(k.node, ast.Call):
            if len(_MADE) > 5_000:
                _MADE.clear()
            _MADE[cls] = (octx, k.node)
    return Kind(k.what, cls, k.requires_grad)


from gradtrace.lint.analysis.carried import _MADE  # noqa: E402 - the carried modules


def carried_attr_kind(cls: str | None, attr: str) -> Kind | None:
    """``model.encoder`` with ``model`` a parameter every caller hands a module built in its
    own file (NOTE [kinds by the callers]): a module when that class's ``__init__`` makes
    ``self.encoder`` one (only modulehood is carried, NOTE [foreign module kinds]); None
    otherwise."""
    from gradtrace.lint.analysis.foreign_kinds import foreign_attr_kind
    got = _MADE.get(cls or "")
    if got is None:
        return None
    octx, call = got
    own = octx.analysis.classes.get(call.func.id) if isinstance(call.func, ast.Name) else None
    if own is None:
        return foreign_attr_kind(octx, call, attr)
    k = own.attr_kind(attr) if own.is_module else None
    if k is None or k.what != MODULE:
        return None
    return Kind(MODULE, cls=k.cls if (k.cls or "").startswith("torch.") else None)


from gradtrace.lint.analysis.callees import OTHER_KINDS  # noqa: E402 - after other_kinds

OTHER_KINDS.append(other_kinds)
