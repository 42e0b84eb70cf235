"""Functions and methods of a script that no code the script runs can reach.

# NOTE [unreached defs]
``def reset(self): self.v = 0.0`` on a spiking neuron, called only by ``def reset_net(net):
for m in net.modules(): m.reset()``, which nothing calls: running the script never resets
the state, however often the file names ``reset``. NOTE [uncalled methods] sets aside a method
nobody names; this goes one step further and follows the names: a def of the file is reached
when its name is read (a name, an attribute, a non-doc string ``getattr`` could read) by code
that is not inside a def (module-level statements, class bodies), or inside a def already
reached, up to a fixed point. Names are matched by spelling alone (any def spelt ``reset`` is
reached once one ``.reset`` is read by reached code): an over-approximation of what runs, so
"unreached" stays sound. Only in a script (a module-level statement calls something); a
library's functions are called by its users. Never unreached: dunder methods, the methods
``nn.Module`` itself defines or calls (``forward``, ``train``...), decorated defs (a decorator
may register them), and the methods of a class with a base that is neither ``nn.Module``,
``object`` nor a class of the file built on those (a framework calls its hooks).
Read by GT528 (NOTE [carried state]): a reset of the carried attribute counts only if reached.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.module_api import MODULE_METHODS, ROOT_BASES

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_PLAIN_DECORATORS = frozenset({"staticmethod", "classmethod"})


def unreached_nodes(ctx: Context) -> frozenset[int]:
    """``id`` of every node inside a def of the script that nothing run reaches
    (NOTE [unreached defs])."""
    return ctx.memo("unreached-nodes", ctx.tree, lambda: _unreached(ctx))


def _script(tree: ast.AST) -> bool:
    """A module-level statement calls something (NOTE [uncalled methods]'s reading; a
    ``__main__`` guard alone does not make a library module a script)."""
    return any(isinstance(s, (ast.Expr, ast.Assign)) and isinstance(s.value, ast.Call)
               for s in getattr(tree, "body", []))


def _candidates(ctx: Context) -> list[ast.AST]:
    out: list[ast.AST] = []
    for s in getattr(ctx.tree, "body", []):
        if isinstance(s, _DEFS):
            out.append(s)
        elif isinstance(s, ast.ClassDef) and _plain_bases(ctx, s, set()):
            out.extend(m for m in s.body if isinstance(m, _DEFS))
    return [d for d in out if not d.name.startswith("__")  # type: ignore[attr-defined]
            and d.name not in MODULE_METHODS  # type: ignore[attr-defined]
            and all(isinstance(x, ast.Name) and x.id in _PLAIN_DECORATORS
                    for x in d.decorator_list)]  # type: ignore[attr-defined]


def _plain_bases(ctx: Context, node: ast.ClassDef, seen: set[str]) -> bool:
    """Every base of ``node`` is ``nn.Module``, ``object`` or a class of the file built on
    those only (no framework calls its methods)."""
    if node.keywords:
        return False
    for b in node.bases:
        if (ctx.qualified_name(b) or "") in ROOT_BASES or isinstance(b, ast.Name) \
                and b.id == "object":
            continue
        own = ctx.analysis.classes.get(b.id) if isinstance(b, ast.Name) else None
        if own is None or own.name in seen:
            return False
        seen.add(own.name)
        if not _plain_bases(ctx, own.node, seen):
            return False
    return True


def _names(nodes: list[ast.AST], docs: set[int]) -> tuple[set[str], list[str]]:
    names: set[str] = set()
    texts: list[str] = []
    for n in nodes:
        if isinstance(n, ast.Attribute):
            names.add(n.attr)
        elif isinstance(n, ast.Name):
            names.add(n.id)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs:
            texts.append(n.value)
    return names, texts


def _unreached(ctx: Context) -> frozenset[int]:
    if not _script(ctx.tree):
        return frozenset()
    cands = _candidates(ctx)
    if not cands:
        return frozenset()
    inside = {id(x): d for d in cands for x in ast.walk(d) if x is not d}
    docs = {id(s.value) for s in ast.walk(ctx.tree) if isinstance(s, ast.Expr)}
    outer = [n for n in ast.walk(ctx.tree) if id(n) not in inside]
    live, texts = _names(outer, docs)
    by_name: dict[str, list[ast.AST]] = {}
    for d in cands:
        by_name.setdefault(d.name, []).append(d)  # type: ignore[attr-defined]
    reached: set[int] = set()
    todo = [d for d in cands if _read(d.name, live, texts)]  # type: ignore[attr-defined]
    while todo:
        d = todo.pop()
        if id(d) in reached:
            continue
        reached.add(id(d))
        names, more = _names([x for x in ast.walk(d) if x is not d], docs)
        texts.extend(more)
        for name in names - live:
            live.add(name)
            todo.extend(by_name.get(name, ()))
        if more:  # a string read may name any def
            todo.extend(c for c in cands if id(c) not in reached
                        and _read(c.name, live, texts))  # type: ignore[attr-defined]
    return frozenset(id(x) for d in cands if id(d) not in reached for x in ast.walk(d))


def _read(name: str, live: set[str], texts: list[str]) -> bool:
    return name in live or any(name in t for t in texts)
