"""Receivers whose ``.backward(...)`` is a plain class's own method, not autograd's.

# NOTE [manual backward]
A class of the project that is neither a module nor a ``torch.autograd.Function`` (its bases
are ``object`` or such classes of the project) may define its own ``backward`` method: a NumPy
re-implementation of a layer (``MyLinear.backward(grad_out)`` returning ``grad_out @ W``), a
hand-written loss whose ``backward()`` returns ``2 * (y_hat - y) / n``. When that method runs
no autograd itself (no ``.backward(...)``, ``torch.autograd.grad``/``backward`` or
``manual_backward`` call in it), ``obj.backward(g)`` on an instance computes what the class
says and nothing else: no graph is walked, no ``.grad`` is filled, nothing is freed. A name is
such a receiver when every assignment the file makes to it builds an instance of such a class
(:func:`~gradtrace.lint.analysis.built_classes.built_class`, this file or another file of the
project): ``mine = MyLinear(w.numpy()); mine.backward(np.ones_like(out))``. A class whose
``backward`` runs autograd (a mixed-precision helper's ``backward(self, loss)`` calling
``loss.backward()``) is an owner that differentiates its argument (NOTE [backward callers]).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.plain_classes import plain_lineage
from gradtrace.lint.names import dotted

if TYPE_CHECKING:
    from gradtrace.lint.analysis.modules import ClassInfo
    from gradtrace.lint.context import Context

_AUTOGRAD_ATTRS = frozenset({"backward", "manual_backward"})
_AUTOGRAD_FUNCS = frozenset({"torch.autograd.grad", "torch.autograd.backward"})


def manual_backward_owners(ctx: Context) -> frozenset[str]:
    """The dotted names (``mine``, ``self.crit``) the file binds only to instances of a plain
    class of the project whose own ``backward`` runs no autograd (NOTE [manual backward])."""
    if ".backward(" not in ctx.code:
        return frozenset()
    return ctx.memo("manual-backward-owners", ctx.tree, lambda: _owners(ctx))


def _owners(ctx: Context) -> frozenset[str]:
    from gradtrace.lint.analysis.built_classes import built_class
    manual: dict[str, bool] = {}
    for n in ast.walk(ctx.tree):
        if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for t in targets:
                name = dotted(t)
                if not name:
                    continue
                got = built_class(ctx, n.value) if isinstance(n.value, ast.Call) \
                    and isinstance(n, ast.Assign) and len(targets) == 1 else None
                ok = got is not None and _manual(got[0], got[1])
                manual[name] = manual.get(name, True) and ok
        elif isinstance(n, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith,
                            ast.NamedExpr)):
            for t in _bound(n):
                name = dotted(t)
                if name:
                    manual[name] = False  # bound to something else too
    return frozenset(k for k, v in manual.items() if v)


def _bound(n: ast.AST) -> list[ast.expr]:
    if isinstance(n, (ast.For, ast.AsyncFor)):
        return list(ast.walk(n.target))
    if isinstance(n, ast.NamedExpr):
        return [n.target]
    return [x for i in getattr(n, "items", ()) if i.optional_vars is not None
            for x in ast.walk(i.optional_vars)]


def _manual(cctx: Context, cls: ClassInfo) -> bool:
    """A plain class of the project whose ``backward`` method runs no autograd."""
    if not plain_lineage(cls):
        return False  # a module, torch's Function, another package's class
    m = cls.method("backward")
    if m is None or any(dotted(d) in ("staticmethod", "classmethod") for d in m.decorator_list):
        return False
    for n in ast.walk(m):
        if isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Attribute) and f.attr in _AUTOGRAD_ATTRS:
                return False
            if (cctx.qualified_name(f) or "") in _AUTOGRAD_FUNCS:
                return False
    return True
