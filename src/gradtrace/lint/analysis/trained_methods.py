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
from typing import TYPE_CHECKING, Any

from gradtrace.lint.analysis.calls import call_sites
from gradtrace.lint.analysis.kinds import MODULE

FUNCTION_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef)

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

SEEDS = ("forward", "__call__", "training_step")  # what torch / Lightning call with grad on
CALLED_RE = re.compile(r"\.\s*(\w+)\s*\(")
# `\bself\s*\.\s*(\w+)`, the word start tested after the literal (`(?<!\wself)`): a pattern
# opening with `\b` has no first character to skip to (tried at every character, 8x slower)
SELF_ATTR_RE = re.compile(r"self(?<!\wself)\s*\.\s*(\w+)")
SKIPPED = frozenset({"__init__", "extra_repr", "reset_parameters", "_init_weights",
                     "init_weights", "state_dict", "load_state_dict"})


def runs_with_graph(ctx: Context, cls: str, method: str) -> bool:
    """Whether ``method`` of the module class ``cls`` of the file runs with its graph
    (NOTE [trained methods]). Asked lazily: the methods the seeds reach through ``self``
    answer most questions; only when they do not are the file's instance calls read, and
    only of the methods that reach ``method`` (each name searched once per file)."""
    if method in SEEDS[:2]:
        return True
    info = ctx.analysis.classes.get(cls)
    if info is None or not info.is_module:
        return False
    seeded = ctx.memo("trained-methods-of", info.node, lambda: _closure(
        info.methods, [m for m in SEEDS if m in info.methods], ctx))
    if method in seeded:
        return True
    if method in SKIPPED or method not in info.methods:
        return False
    spelt: set[str] = ctx.memo("trained-methods-spelt", ctx.tree,
                               lambda: set(CALLED_RE.findall(ctx.code)))  # one scan
    return any(m not in SEEDS and m not in SKIPPED and m in spelt
               and cls in ctx.memo("trained-methods-on:" + m, ctx.tree,
                                   lambda m=m: _instance_method_calls(ctx, m))
               for m in _reaching(info, method, ctx))


def _reaching(info: Any, method: str, ctx: Context) -> list[str]:
    """The methods of the class from which ``method`` is reached through ``self``
    (:func:`_closure`'s steps backwards: a skipped method neither is reached nor passes
    on), ``method`` included."""
    calls: dict[str, set[str]] = ctx.memo("trained-methods-calls", info.node, lambda: {
        m: set(SELF_ATTR_RE.findall(_text(fn, ctx))) & info.methods.keys()
        for m, fn in info.methods.items() if m not in SKIPPED})
    seen = {method}
    todo = [method]
    while todo:
        m = todo.pop()
        for c, callees in calls.items():
            if m in callees and c not in seen:
                seen.add(c)
                todo.append(c)
    return sorted(seen)


def _text(fn: ast.AST, ctx: Context) -> str:
    lines = ctx.code_lines
    return "\n".join(lines[fn.lineno - 1:fn.end_lineno or fn.lineno])  # type: ignore[attr-defined]


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


def _instance_method_calls(ctx: Context, name: str) -> set[str]:
    """The module classes of the file on an instance of which ``name`` is called
    (``inst.name(...)``, ``self.head.name(...)``) outside a grad-off block (the calls found
    on the lines that spell the name: :func:`~gradtrace.lint.analysis.calls.call_sites`)."""
    a = ctx.analysis
    own = {c.name for c in a.classes.values() if c.is_module}
    out: set[str] = set()
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
        if k is None or k.what != MODULE or k.cls not in own or k.cls in out:
            continue
        if ctx.scope(fn).grad_off_at(n) is None:
            out.add(k.cls)
    return out
