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

from gradtrace.lint.analysis.calls import call_sites
from gradtrace.lint.analysis.kinds import MODULE

FUNCTION_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef)

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

SEEDS = ("forward", "__call__", "training_step")  # what torch / Lightning call with grad on
CALLED_RE = re.compile(r"\.\s*(\w+)\s*\(")
SELF_ATTR_RE = re.compile(r"\bself\s*\.\s*(\w+)")
SKIPPED = frozenset({"__init__", "extra_repr", "reset_parameters", "_init_weights",
                     "init_weights", "state_dict", "load_state_dict"})


def runs_with_graph(ctx: Context, cls: str, method: str) -> bool:
    """Whether ``method`` of the module class ``cls`` of the file runs with its graph
    (NOTE [trained methods])."""
    if method in SEEDS[:2]:
        return True
    info = ctx.analysis.classes.get(cls)
    if info is None or not info.is_module:
        return False

    def closure() -> frozenset[str]:
        called: set[tuple[str, str]] = ctx.memo("trained-methods", ctx.tree,
                                                lambda: _called(ctx))
        seeds = [m for m in SEEDS if m in info.methods]
        seeds += [m for m in info.methods if (cls, m) in called]
        return _closure(info.methods, seeds, ctx)
    return method in ctx.memo("trained-methods-of", info.node, closure)


def _called(ctx: Context) -> set[tuple[str, str]]:
    """(class, method) for the methods of the file's module classes called on an instance."""
    mods = [info for info in ctx.analysis.classes.values() if info.is_module]
    spelt = set(CALLED_RE.findall(ctx.code))  # `.name(` anywhere in the code: one scan
    wanted = {m for info in mods for m in info.methods
              if m not in SEEDS and m not in SKIPPED and m in spelt}
    return _instance_method_calls(ctx, wanted) if wanted else set()


def _closure(methods: dict, seeds: list[str], ctx: Context) -> frozenset[str]:
    """``seeds`` and the methods they call or hand on through ``self`` (``self.m(x)``,
    ``map(self.m, feats)``), transitively (read in the code text of each method, comments
    and strings blanked: NOTE [code text])."""
    seen: set[str] = set()
    todo = list(seeds)
    lines = ctx.code_lines
    while todo:
        m = todo.pop()
        fn = methods.get(m)
        if fn is None or m in seen or m in SKIPPED:
            continue
        seen.add(m)
        text = "\n".join(lines[fn.lineno - 1:fn.end_lineno or fn.lineno])
        todo.extend(n for n in SELF_ATTR_RE.findall(text) if n in methods)
    return frozenset(seen)


def _instance_method_calls(ctx: Context, wanted: set[str]) -> set[tuple[str, str]]:
    """(class, method) for every ``inst.method(...)`` of an instance of a module class of the
    file, ``method`` one of ``wanted``, outside a grad-off block (the calls found on the lines
    that spell the name: :func:`~gradtrace.lint.analysis.calls.call_sites`)."""
    a = ctx.analysis
    own = {c.name for c in a.classes.values() if c.is_module}
    out: set[tuple[str, str]] = set()
    for name in sorted(wanted):
        for n, s, outer in call_sites(ctx, name):
            recv = n.func.value if isinstance(n.func, ast.Attribute) else None
            if recv is None or isinstance(recv, ast.Name) and recv.id == "self" \
                    or not isinstance(recv, (ast.Name, ast.Attribute)):
                continue
            fn = next((o for o in reversed((*outer, s)) if isinstance(o, FUNCTION_TYPES)),
                      ctx.tree)
            if fn is s:
                continue  # (a call in a decorator or default of the def itself)
            k = a.kind_in(recv, fn, n.lineno)
            if k is None or k.what != MODULE or k.cls not in own \
                    or (k.cls, name) in out:
                continue
            if ctx.scope(fn).grad_off_at(n) is None:
                out.add((k.cls, name))
    return out
