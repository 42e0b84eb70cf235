"""Where a module a script builds runs: its own calls, and the calls of an object it is given to.

# NOTE [runs through a holder]
``text_encoder = nn.Embedding(...)``, ``bank = PromptBank(text_encoder)`` whose ``__init__``
stores it (``self.encoder = encoder``) and whose ``get`` runs it (``with
torch.inference_mode(): self._cache[key] = self.encoder(tokens)``), and ``opt =
Adam([*text_encoder.parameters(), ...])``: the optimizer holds a module whose only run is under
grad-off, in another object's method. :func:`name_runs` lists every run of the module a
module-level name holds, with whether grad is off there:

* ``name(...)``: a run where it stands;
* ``Holder(..., name, ...)`` with ``Holder`` a class of the file whose ``__init__`` stores
  that parameter as ``self.<a> = <param>`` and uses it nowhere else: each ``self.<a>(...)``
  in the class's methods is a run (grad off when that method turns it off around the call);
  ``self.<a>.parameters()`` and the other methods that do not run a module
  (:data:`.module_runs.NOT_RUNS`) are not runs;
* ``name.parameters()`` (and the like), a weight read only to be copied or compared
  (``name.weight.clone()``, ``torch.equal(before, name.weight)``): not runs.

Any other use (handed to a function, stored elsewhere, a method of it called, an attribute read
into a computation, a holder that uses the attribute any other way): None, the module may run
with grad there. Only module-level names of a script; a file that freezes anything answers
None (NOTE [weighted modules]).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.module_runs import NOT_RUNS, Run
from gradtrace.lint.analysis.weighted_modules import FREEZE_RE
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import parent_map, walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

# reads of a weight that only copy or compare it
_COPIES = frozenset({"clone", "detach", "data", "grad", "shape", "dtype", "device"})
_COMPARES = frozenset({"torch.equal", "torch.allclose", "print", "len", "id"})


def name_runs(ctx: Context, name: str) -> list[Run] | None:
    """The runs of the module held by the module-level ``name``
    (NOTE [runs through a holder]); None when a use cannot be followed."""
    if FREEZE_RE.search(ctx.code):
        return None
    parents = ctx.memo("script-runs-parents", ctx.tree, lambda: parent_map(ctx.tree))
    runs: list[Run] = []
    for n in walk(ctx.tree):
        if not (isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)):
            continue
        p = parents.get(id(n))
        if isinstance(p, ast.Call) and p.func is n:
            runs.append(Run(p, _off(ctx, p, parents)))
            continue
        if isinstance(p, ast.Attribute):
            if p.attr in NOT_RUNS or _only_copied(ctx, p, parents):
                continue
            return None
        if isinstance(p, ast.Call) and n in p.args:
            held = _holder_runs(ctx, p, p.args.index(n))
            if held is None:
                return None
            runs.extend(held)
            continue
        if isinstance(p, ast.Starred):  # `[*name.parameters()]` is an Attribute above
            return None
        return None
    return runs


def _off(ctx: Context, call: ast.AST, parents: dict[int, ast.AST]) -> bool:
    fn = parents.get(id(call))
    while fn is not None and not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        fn = parents.get(id(fn))
    return ctx.scope(fn or ctx.tree).grad_off_at(call) is not None


def _only_copied(ctx: Context, a: ast.Attribute, parents: dict[int, ast.AST]) -> bool:
    """``name.weight.clone()``, ``torch.equal(before, name.weight)``: read, not computed
    with."""
    p = parents.get(id(a))
    if isinstance(p, ast.Attribute) and p.attr in _COPIES:
        return True
    return isinstance(p, ast.Call) and a in p.args \
        and (ctx.qualified_name(p.func) or dotted(p.func) or "") in _COMPARES


def _holder_runs(ctx: Context, call: ast.Call, i: int) -> list[Run] | None:
    """The runs of the module given at position ``i`` to ``Holder(...)``, a class of the
    file that stores it on ``self`` in ``__init__`` and uses it only by calling it."""
    if any(isinstance(a, ast.Starred) for a in call.args[:i + 1]) \
            or not isinstance(call.func, ast.Name):
        return None
    info = ctx.analysis.classes.get(call.func.id)
    init = info.methods.get("__init__") if info is not None else None
    if init is None:
        return None
    params = [a.arg for a in (*init.args.posonlyargs, *init.args.args)][1:]
    if i >= len(params):
        return None
    param = params[i]
    stores = [n for n in walk(init) if isinstance(n, ast.Name) and n.id == param
              and isinstance(n.ctx, ast.Load)]
    attr = None
    for s in walk(init):
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Name) and s.value.id == param \
                and len(s.targets) == 1 and isinstance(s.targets[0], ast.Attribute) \
                and dotted(s.targets[0].value) == "self":
            attr = s.targets[0].attr
    if attr is None or len(stores) != 1:
        return None  # the parameter is used otherwise too (wrapped, handed on)
    parents = ctx.memo("script-runs-class-parents", info.node, lambda: parent_map(info.node))
    runs: list[Run] = []
    for m in info.methods.values():
        for n in walk(m):
            if not (isinstance(n, ast.Attribute) and n.attr == attr
                    and dotted(n.value) == "self"):
                continue
            p = parents.get(id(n))
            if isinstance(n.ctx, ast.Store):
                if m is init:
                    continue
                return None  # replaced by a method
            if isinstance(p, ast.Call) and p.func is n:
                runs.append(Run(p, ctx.scope(m).grad_off_at(p) is not None))
            elif not (isinstance(p, ast.Attribute) and p.attr in NOT_RUNS):
                return None
    return runs
