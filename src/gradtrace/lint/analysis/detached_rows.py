"""Parameters a module's method keeps partly fixed by detaching some of their slices.

# NOTE [rows detached in forward]
A method of a module class that joins ``.detach()``ed slices of one of its tensors with a live
slice of the same tensor in one ``torch.cat``/``torch.stack``
(``torch.cat([self.w[:r].detach(), self.w[r:r + 1], self.w[r + 1:].detach()])``, sd-scripts'
DyLoRA; ``torch.cat([self.emb.weight[:n].detach(), self.emb.weight[n:]])``, a textual
inversion keeping the old tokens) trains only the live rows: backward gives the tensor a
gradient whose detached rows are exactly zero, not ``None`` (checked on torch 2.13), so an
optimizer still applies its weight decay (and its momentum) to every row. The pieces are
read straight in the call's list, or through names of the same method bound once to a piece
or to a list of pieces (``nt = [self.w[:r].detach()] if r > 0 else []``; ``cat(nt + [t])``).
The tensor is ``self.<p>`` with ``p`` an ``nn.Parameter`` of the class, or the ``weight`` of a
layer the class builds (``self.emb = nn.Embedding(...)``); :func:`detached_rows` gives, per
such tensor, its construction and the first detached piece. A tensor also read whole, live, in
the same method (``self.w @ x`` next to the ``cat``) trains every row: left out.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.calls import statements_on
from gradtrace.lint.grad_modes import FUNCTION_TYPES
from gradtrace.lint.names import dotted

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

JOINS = frozenset({"torch.cat", "torch.concat", "torch.concatenate", "torch.stack",
                   "torch.hstack", "torch.vstack"})


@dataclass(frozen=True)
class DetachedRows:
    cls: str            # the module class
    tensor: str         # ``self.lora_A``, ``self.emb.weight``
    made: ast.Call      # ``nn.Parameter(...)`` / the layer's constructor, in the class
    detach: ast.Call    # the first ``.detach()`` of a slice
    join: ast.Call      # the ``torch.cat`` that joins it with a live slice


def detached_rows(ctx: Context) -> list[DetachedRows]:
    """Every tensor of a module class of the file that one of its methods joins partly
    detached (NOTE [rows detached in forward]); once per file."""
    return ctx.memo("detached-rows", ctx.tree, lambda: _scan(ctx))


def _scan(ctx: Context) -> list[DetachedRows]:
    if "].detach()" not in ctx.code:  # a slice detached: the whole test for most files
        return []
    lines = [i for i, text in enumerate(ctx.code_lines, 1) if "].detach()" in text]
    methods: dict[int, tuple[ast.ClassDef, ast.AST]] = {}
    for _, outer in statements_on(ctx, lines):  # the methods holding such a slice
        fn = next((o for o in reversed(outer) if isinstance(o, FUNCTION_TYPES)), None)
        i = outer.index(fn) if fn is not None else 0
        if fn is not None and i > 0 and isinstance(outer[i - 1], ast.ClassDef):
            methods[id(fn)] = (outer[i - 1], fn)
    out: list[DetachedRows] = []
    seen: set[tuple[str, str]] = set()
    for cnode, fn in methods.values():
        cls = ctx.analysis.classes.get(cnode.name)
        if cls is None or cls.node is not cnode or not cls.is_module:
            continue
        joins = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and n.args
                 and (ctx.qualified_name(n.func) or "") in JOINS]
        binds = _single_bindings(fn) if joins else {}
        for n in joins:
            dead: dict[str, ast.Call] = {}
            live: set[str] = set()
            for piece in _pieces(n.args[0], binds, 0):
                t, d = _slice_of(piece)
                if t is None:
                    continue
                if d is not None:
                    dead.setdefault(t, d)
                else:
                    live.add(t)
            for t in sorted(set(dead) & live):
                if (cls.name, t) in seen or _read_whole(fn, t):
                    continue
                made = _made(cls, t, ctx)
                if made is not None:
                    seen.add((cls.name, t))
                    out.append(DetachedRows(cls.name, t, made, dead[t], n))
    return out


def _single_bindings(fn: ast.AST) -> dict[str, ast.expr]:
    """Names of ``fn`` bound by exactly one plain ``name = value``."""
    count: dict[str, int] = {}
    value: dict[str, ast.expr] = {}
    for n in ast.walk(fn):
        targets = n.targets if isinstance(n, ast.Assign) else (
            [n.target] if isinstance(n, (ast.AugAssign, ast.AnnAssign, ast.For)) else [])
        for t in targets:
            for x in ast.walk(t):
                if isinstance(x, ast.Name):
                    count[x.id] = count.get(x.id, 0) + 1
                    if isinstance(n, ast.Assign) and len(n.targets) == 1 and t is x:
                        value[x.id] = n.value
    return {k: v for k, v in value.items() if count.get(k) == 1}


def _pieces(e: ast.expr, binds: dict[str, ast.expr], depth: int) -> list[ast.expr]:
    """The tensors a list expression given to ``torch.cat`` holds."""
    if depth > 4:
        return []
    if isinstance(e, (ast.List, ast.Tuple)):
        return [p for x in e.elts for p in _pieces(x, binds, depth + 1)]
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
        return _pieces(e.left, binds, depth + 1) + _pieces(e.right, binds, depth + 1)
    if isinstance(e, ast.IfExp):
        return _pieces(e.body, binds, depth + 1) + _pieces(e.orelse, binds, depth + 1)
    if isinstance(e, ast.Starred):
        return _pieces(e.value, binds, depth + 1)
    if isinstance(e, ast.Name) and e.id in binds:
        return _pieces(binds[e.id], binds, depth + 1)
    return [e]


def _slice_of(e: ast.expr) -> tuple[str | None, ast.Call | None]:
    """(``self.<...>`` sliced, the ``.detach()`` call when the slice is detached)."""
    d = None
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr == "detach" and not e.args:
        d, e = e, e.func.value
    if not isinstance(e, ast.Subscript):
        return None, None
    t = dotted(e.value)
    return (t, d) if t is not None and t.startswith("self.") else (None, None)


def _read_whole(fn: ast.AST, t: str) -> bool:
    """``fn`` reads ``t`` other than as the base of a slice (live and whole)."""
    parents: dict[int, ast.AST] = {}
    for p in ast.walk(fn):
        for c in ast.iter_child_nodes(p):
            parents[id(c)] = p
    for n in ast.walk(fn):
        if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load) and dotted(n) == t:
            up = parents.get(id(n))
            if isinstance(up, ast.Subscript) and up.value is n:
                continue
            if isinstance(up, ast.Attribute):  # `self.w.shape`, `self.w.size(0)`
                continue
            return True
    return False


def _made(cls, t: str, ctx: Context) -> ast.Call | None:  # type: ignore[no-untyped-def]
    """The construction of ``t`` in the class: ``self.p = nn.Parameter(...)``, or the layer
    of ``self.m.weight``."""
    parts = t.split(".")
    info = cls.attrs.get(parts[1]) if len(parts) in (2, 3) else None
    v = info.value if info is not None else None
    if not isinstance(v, ast.Call):
        return None
    q = ctx.call_name(v) or ""
    if len(parts) == 2:
        return v if q == "torch.nn.Parameter" else None
    return v if parts[2] == "weight" and q.startswith("torch.nn.") \
        and q != "torch.nn.Parameter" else None
