"""Which methods of a module class run with its graph: ``forward`` is not the only one.

# NOTE [trained methods]
A module's graph is built by whatever method computes the training output, and that is not
always ``forward``: detection heads call ``head.forward_single(feat)`` once per level, a model
exposes ``model.encode(x)`` / ``model.compute_loss(batch)`` that the training loop calls, and
``forward`` itself hands work to ``self._block(x)``. A method runs with the graph when it is
``forward`` (or a module's ``__call__``, a Lightning ``training_step``), when such a method
calls it through ``self`` or hands it on (``multi_apply(self.forward_single, feats)``),
transitively, or when the file calls it on an instance of the class (``head.m(x)``,
``self.head.m(x)``: the instance's kind read by the analysis layer, NOTE [kinds]) somewhere
grad is not disabled around the call, and then the methods it reaches through ``self``.
Found once per file; a rule asks :func:`runs_with_graph`. A method only called under
``torch.no_grad()`` (an ``evaluate``/``predict``) is not one.
"""
from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import function_scopes, scope_nodes, walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

SEEDS = ("forward", "__call__", "training_step")  # what torch / Lightning call with grad on
CALLED_RE = re.compile(r"\.\s*(\w+)\s*\(")
SKIPPED = frozenset({"__init__", "extra_repr", "reset_parameters", "_init_weights",
                     "init_weights", "state_dict", "load_state_dict"})


def runs_with_graph(ctx: Context, cls: str, method: str) -> bool:
    """Whether ``method`` of the module class ``cls`` of the file runs with its graph
    (NOTE [trained methods])."""
    if method in SEEDS[:2]:
        return True
    table: dict[str, frozenset[str]] = ctx.memo("trained-methods", ctx.tree,
                                                lambda: _table(ctx))
    return method in table.get(cls, frozenset())


def _table(ctx: Context) -> dict[str, frozenset[str]]:
    a = ctx.analysis
    out: dict[str, frozenset[str]] = {}
    mods = [info for info in a.classes.values() if info.is_module]
    if not mods:
        return out
    spelt = set(CALLED_RE.findall(ctx.code))  # `.name(` anywhere in the code: one scan
    wanted = {m for info in mods for m in info.methods
              if m not in SEEDS and m not in SKIPPED and m in spelt}
    called = _instance_method_calls(ctx, wanted) if wanted else set()
    for info in mods:
        seeds = [m for m in SEEDS if m in info.methods]
        seeds += [m for m in info.methods if (info.name, m) in called]
        out[info.name] = _closure(info.methods, seeds)
    return out


def _closure(methods: dict, seeds: list[str]) -> frozenset[str]:
    """``seeds`` and the methods they call or hand on through ``self`` (``self.m(x)``,
    ``map(self.m, feats)``), transitively."""
    seen: set[str] = set()
    todo = list(seeds)
    while todo:
        m = todo.pop()
        fn = methods.get(m)
        if fn is None or m in seen or m in SKIPPED:
            continue
        seen.add(m)
        todo.extend(n.attr for n in walk(fn) if isinstance(n, ast.Attribute)
                    and n.attr in methods and dotted(n.value) == "self")
    return frozenset(seen)


def _instance_method_calls(ctx: Context, wanted: set[str]) -> set[tuple[str, str]]:
    """(class, method) for every ``inst.method(...)`` of an instance of a module class of the
    file, ``method`` one of ``wanted``, outside a grad-off block."""
    a = ctx.analysis
    own = {c.name for c in a.classes.values() if c.is_module}
    out: set[tuple[str, str]] = set()
    for fn in function_scopes(ctx.tree):
        scope = None
        for n in scope_nodes(fn):
            if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                    and n.func.attr in wanted):
                continue
            recv = n.func.value
            if isinstance(recv, ast.Name) and recv.id == "self":
                continue
            if not isinstance(recv, (ast.Name, ast.Attribute)):
                continue
            k = a.kind_in(recv, fn, n.lineno)
            if k is None or k.what != MODULE or k.cls not in own:
                continue
            scope = scope or ctx.scope(fn)
            if scope.grad_off_at(n) is None:
                out.add((k.cls, n.func.attr))
    return out
