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
from gradtrace.lint.nodes import of_types

if TYPE_CHECKING:
    from gradtrace.lint.analysis.modules import ClassInfo
    from gradtrace.lint.context import Context

_AUTOGRAD_ATTRS = frozenset({"backward", "manual_backward"})
_AUTOGRAD_FUNCS = frozenset({"torch.autograd.grad", "torch.autograd.backward"})


def manual_backward_owners(ctx: Context) -> ManualOwners | frozenset[str]:
    """The dotted names (``mine``, ``self.crit``) the file binds only to instances of a plain
    class of the project whose own ``backward`` runs no autograd (NOTE [manual backward]),
    as a container asked with ``in`` (NOTE [owners on demand])."""
    if ".backward(" not in ctx.code:
        return frozenset()
    return ctx.memo("manual-backward-owners", ctx.tree, lambda: ManualOwners(ctx))


class ManualOwners:
    """The names of :func:`manual_backward_owners`, each judged when first asked.

    # NOTE [owners on demand]
    A name is an owner when every assignment the file makes to it builds an instance of a
    plain class with its own ``backward`` (:func:`_manual`), and no ``for``/``with``/walrus
    binds it. Judging every assigned name of the file (a :func:`built_class` per ``x =
    f(...)``, which may read another file of the project) cost a twentieth of the check of
    dense training code, to answer for the few receivers of ``.backward(`` the steps analysis
    asks about (``loss``, ``mine``). The file's bindings are grouped by name in one pass; a
    name is judged on its own bindings when asked, and remembered: the same answer, since a
    name's verdict never depended on another name's."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._assigns: dict[str, list[ast.stmt]] = {}
        self._other: set[str] = set()  # bound by a `for`, `with` or walrus somewhere
        self._known: dict[str, bool] = {}
        for n in of_types(ctx.tree, _BINDERS):
            if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                    name = dotted(t)
                    if name:
                        self._assigns.setdefault(name, []).append(n)
            else:
                self._other.update(name for t in _bound(n) if (name := dotted(t)))

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str) or name not in self._assigns:
            return False  # never assigned: not bound to a class's instance here
        got = self._known.get(name)
        if got is None:
            got = self._known[name] = name not in self._other and all(
                self._builds_manual(n) for n in self._assigns[name])
        return got

    def _builds_manual(self, n: ast.stmt) -> bool:
        """Whether assignment ``n`` builds an instance of a class with a manual backward."""
        if not (isinstance(n, ast.Assign) and len(n.targets) == 1
                and isinstance(n.value, ast.Call)):
            return False
        from gradtrace.lint.analysis.built_classes import built_class
        got = built_class(self._ctx, n.value)
        return got is not None and _manual(got[0], got[1])


_BINDERS = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor, ast.With,
            ast.AsyncWith, ast.NamedExpr)


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
