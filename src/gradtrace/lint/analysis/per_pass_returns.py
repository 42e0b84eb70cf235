"""A method whose result every caller makes anew in a module's ``forward``.

# NOTE [made anew on every forward pass]
``def init_hidden(self, n): return (nn.Parameter(torch.zeros(n, h)).to(self.device), ...)``
called only as ``(h, c) = self.cell.init_hidden(n)`` inside the model's ``forward``: what it
returns is built again on every forward pass and bound to the pass's local names. Whatever
it is (a Parameter or the plain copy a move made of it), no optimizer built before training
holds it and no module registers it: nothing trains it, and a move changes nothing. The
calls are every ``x.name(...)`` of the project (its file and, through the reverse index,
NOTE [reverse index], the other files: an over-approximation, sound for "every call"); each
must be a whole ``Assign`` value (a ``self.name(...)`` in another class that defines
``name`` itself, and is no base of the method's class, calls that class's method: not
counted) bound to plain local names (a name or a tuple of names) in
a ``forward`` method of a module class, and no read of those names in that ``forward`` may
store them on an attribute (``self.h0 = h``) or hand them to ``register_parameter``,
``register_buffer`` or ``add_param_group``. A call outside a ``forward`` counts the same when
it starts a loop's recurrence: every bound name is rebound inside a loop of that function by
a call that reads it (``hidden = decoder.init_hidden(n)``, then ``out, hidden = decoder(out,
hidden)`` on each step of a decoding helper's ``__call__``), and no ``torch.optim`` call there
reads it: the value is the loop's initial state, replaced on its first pass. No call seen, a name read as a value (handed
to ``getattr``), a project too large: no fact. The cost is one reverse-index look-up per
method asked about (memoised per file, at most MAX_READERS files parsed: a model zoo of
copies calls its cells' ``init_hidden`` from many files), made only where GT403 would
otherwise report a returned value.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.grad_modes import FUNCTION_TYPES
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.analysis.modules import ClassInfo
    from gradtrace.lint.context import Context

MAX_READERS = 48  # files holding `.name(` parsed; more: no fact
KEEPERS = frozenset({"register_parameter", "register_buffer", "add_param_group"})


def made_each_pass(ctx: Context, fn: ast.AST | None) -> bool:
    """Every call of the method ``fn`` binds its result to local names of a module's
    ``forward`` that keeps nothing of it (NOTE [made anew on every forward pass])."""
    if not isinstance(fn, FUNCTION_TYPES) or fn.name.startswith("__") or fn.name == "forward":
        return False
    return ctx.memo("made-each-pass", fn, lambda: _all_per_pass(ctx, fn))


def _all_per_pass(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    from gradtrace.lint.analysis.callers import _method_sites, readers
    cls = ctx.analysis.class_of(fn)
    if cls is None or cls.methods.get(fn.name) is not fn:
        return False
    found = readers(ctx, f".{fn.name}(".encode(), limit=MAX_READERS)
    if found is None:
        return False
    sites = []
    for octx in [ctx, *found]:
        got = _method_sites(octx, fn.name)
        if got is None:
            return False  # `x.name` read as a value
        sites += [(octx, c, w) for c, w in got if not own_method(octx, c, w, cls)]
    return bool(sites) and all(_per_pass(octx, call, where) for octx, call, where in sites)


def own_method(octx: Context, call: ast.Call, where: ast.AST, cls: ClassInfo) -> bool:
    """``self.name(...)`` in a method of another class that defines ``name`` itself (and is
    no base of ``fn``'s class): it calls that class's method, not ``fn``."""
    f = call.func
    if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
            and f.value.id == "self"):
        return False
    owner = octx.analysis.class_of(where)
    if owner is None or owner.node is cls.node or f.attr not in owner.methods:
        return False
    return owner.name not in {(dotted(b) or "").rpartition(".")[2] for b in cls.node.bases}


def _per_pass(octx: Context, call: ast.Call, where: ast.AST) -> bool:
    if not isinstance(where, FUNCTION_TYPES):
        return False
    st = next((s for s in walk(where) if isinstance(s, ast.Assign) and s.value is call), None)
    if st is None:
        return False
    names: set[str] = set()
    for t in st.targets:
        elts = t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]
        if not all(isinstance(e, ast.Name) for e in elts):
            return False
        names.update(e.id for e in elts)  # type: ignore[attr-defined]
    if where.name == "forward":
        owner = octx.analysis.class_of(where)
        if owner is None or not owner.is_module:
            return False
    elif not _recurrent_start(where, names) or any(
            isinstance(s, ast.Call) and (octx.qualified_name(s.func) or "").startswith(
                "torch.optim") and any(_reads(a, names) for a in [*s.args, *s.keywords])
            for s in walk(where)):
        return False  # elsewhere only a loop's initial state, which no optimizer holds
    for s in walk(where):
        if isinstance(s, (ast.Global, ast.Nonlocal)) and names & set(s.names):
            return False
        if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and s.value is not None \
                and _reads(s.value, names) and any(
                    isinstance(t, ast.Attribute) for t in _targets(s)):
            return False  # `self.h0 = h`: kept on an object
        if isinstance(s, ast.Call) and isinstance(s.func, ast.Attribute) \
                and s.func.attr in KEEPERS and any(_reads(a, names) for a in s.args):
            return False
    return True


def _recurrent_start(where: ast.AST, names: set[str]) -> bool:
    """Every one of ``names`` is rebound inside a loop of ``where`` by a call that reads it
    (``out, hidden = decoder(out, hidden)``): the value made by the call asked about is the
    loop's initial state, replaced on its first pass."""
    rebound: set[str] = set()
    for loop in walk(where):
        if not isinstance(loop, (ast.For, ast.AsyncFor, ast.While)):
            continue
        for s in walk(loop):
            if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call):
                rebound |= {n for n in names if n in {e.id for e in _targets(s)
                                                      if isinstance(e, ast.Name)}
                            and _reads(s.value, {n})}
    return rebound == names


def _targets(s: ast.Assign | ast.AugAssign | ast.AnnAssign) -> list[ast.expr]:
    out: list[ast.expr] = []
    for t in (s.targets if isinstance(s, ast.Assign) else [s.target]):
        out.extend(t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])
    return out


def _reads(e: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names and isinstance(n.ctx, ast.Load)
               for n in ast.walk(e))
