"""Entries of a layer container that ``forward`` picks by its input: one per call (GT451).

# NOTE [selected entries]
``self.heads[task](h)``, ``self.lin1[f"fmri{subj}"](x)``: a ``forward`` that runs one entry of
an ``nn.ModuleList``/``nn.ModuleDict`` of layers, chosen by an argument of ``forward`` (or a
local made from one), leaves every other entry without a gradient in that call. Under
``DistributedDataParallel`` without ``find_unused_parameters`` that is the branch of GT451
spelled as an index. Not counted: an index that is a constant, a loop variable over the whole
container or ``self.<x>`` (configuration), and a container that ``forward`` also runs whole
(``for h in self.heads``, ``self.heads(...)`` as a ``Sequential``), nor a wrapper the file calls
once per value of a loop before one backward (``[model(x, v) for v in range(2)]``): every entry
may run in that iteration.
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.lint.analysis import ClassInfo
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

CONTAINERS = frozenset({"torch.nn.ModuleList", "torch.nn.ModuleDict"})


def _container_attr(e: ast.AST, cls: ClassInfo, ctx: Context) -> str | None:
    """``heads`` for ``self.heads`` built as ``nn.ModuleList(...)``/``nn.ModuleDict(...)`` with
    layers in it (not an empty one filled elsewhere in a way the file hides)."""
    name = dotted(e) if isinstance(e, ast.Attribute) else None
    if name is None or not name.startswith("self.") or name.count(".") != 1:
        return None
    info = cls.attrs.get(name[5:])
    v = info.value if info is not None else None
    if not isinstance(v, ast.Call) or (ctx.call_name(v) or "") not in CONTAINERS or not v.args:
        return None
    return name[5:]


def _input_names(fwd: ast.FunctionDef | ast.AsyncFunctionDef, ctx: Context, e: ast.AST,
                 line: int) -> bool:
    """Whether ``e`` reads an argument of ``forward`` (or a local made from one), and no
    ``self`` attribute."""
    params = {x.arg for x in (*fwd.args.posonlyargs, *fwd.args.args, *fwd.args.kwonlyargs)}
    params.discard("self")
    names = {n.id for n in walk(e) if isinstance(n, ast.Name)}
    if "self" in names:
        return False
    scope = ctx.scope(fwd)
    for n in list(names):
        b = scope.binding_before(n, line)
        if b is not None and b.value is not None and not isinstance(
                b.stmt, (ast.For, ast.AsyncFor, ast.comprehension)):
            names |= {x.id for x in walk(b.value) if isinstance(x, ast.Name)}
    return bool(names & params)


def _whole_use(e: ast.AST, cls: ClassInfo, ctx: Context) -> str | None:
    """The container ``e`` runs through whole: ``self.heads``, ``self.heads.values()``."""
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr in ("values", "items", "keys"):
        e = e.func.value
    return _container_attr(e, cls, ctx)


def selected_entries(cls: ClassInfo, ctx: Context) -> Iterator[tuple[str, ast.Call]]:
    """``(attribute, call)`` for each container ``forward`` runs one entry of, chosen by its
    input (NOTE [selected entries])."""
    fwd = cls.methods.get("forward")
    if fwd is None:
        return
    whole: set[str] = set()
    picked: dict[str, ast.Call] = {}
    for n in walk(fwd):
        if isinstance(n, (ast.For, ast.comprehension)):
            whole.update(a for a in [_whole_use(n.iter, cls, ctx)] if a)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript):
            attr = _container_attr(n.func.value, cls, ctx)
            if attr is not None and _input_names(fwd, ctx, n.func.slice, n.lineno) and (
                    attr not in picked or (n.lineno, n.col_offset) < (
                        picked[attr].lineno, picked[attr].col_offset)):
                picked[attr] = n
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) \
                and n.func.id in ("zip", "enumerate", "list", "iter", "reversed", "len"):
            whole.update(a for x in n.args if (a := _whole_use(x, cls, ctx)))
    for attr, call in sorted(picked.items(), key=lambda p: (p[1].lineno, p[1].col_offset)):
        if attr not in whole:
            yield attr, call


def called_per_entry(target: str | None, ctx: Context) -> bool:
    """Whether the file calls the wrapper ``target`` once per value of a loop before one
    backward (``[model(x, v) for v in range(2)]``, a ``for`` without ``backward()`` in it):
    every entry may run in one iteration."""
    if target is None:
        return False
    for n in walk(ctx.tree):
        if isinstance(n, (ast.For, ast.AsyncFor)):
            if any(isinstance(c, ast.Attribute) and c.attr == "backward" for c in walk(n)):
                continue  # the training loop itself: one entry per backward
            loops, body = [n.target], n.body
        elif isinstance(n, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            loops, body = [g.target for g in n.generators], [n]
        else:
            continue
        names = {x.id for t in loops for x in walk(t) if isinstance(x, ast.Name)}
        for stmt in body:
            for c in walk(stmt):
                if isinstance(c, ast.Call) and dotted(c.func) == target and any(
                        isinstance(x, ast.Name) and x.id in names
                        for a in (*c.args, *(k.value for k in c.keywords)) for x in walk(a)):
                    return True
    return False
