"""A value made once and used at every step whose graph holds only untrained parameters.

# NOTE [graph of untrained parameters reused]
A feature column materialised before the training loop by a module of its own (a text
embedder's ``Embedding``, a frozen-in-spirit encoder) keeps the graph of that module's
parameters when nothing turns grad mode off. The training slices it at every step; the first
backward() frees that graph and the second raises "Trying to backward through the graph a
second time". When no optimizer holds any tensor the reused value was computed from, the graph
was never needed: the line to change is where those parameters entered the value (the
embedder's call), computed there without a graph (``torch.no_grad()``, ``.detach()``), not the
last op that made the value (for a module's parameters, the call of the outermost module that
holds them, outside any ``forward``). Named only when an optimizer exists, every leaf under the value is
a tensor in no optimizer, and the op that used the first of them carries a user line.
"""
from __future__ import annotations

from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, listed, make, src
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.graph_walk import graph_nodes
from gradtrace.runtime.trace.records import created_site


def untrained_graph(roots: list[Any], made: Site | None, site: Site, pat: Any,
                    state: Any, limit: int = 5000) -> Finding | None:
    data = getattr(state, "hooks_data", None)
    if made is None or data is None:
        return None
    held = {id(p) for r in list(data.optimizers.values()) for o in [r.ref()] if o is not None
            for g in o.param_groups for p in g["params"]}
    if not held:
        return None
    start = next((n for n in graph_nodes(roots, limit) if created_site(n)[0] == made), None)
    if start is None:
        return None
    uses: list[tuple[int, Site, Any]] = []
    stack: list[tuple[Any, tuple[Site | None, int]]] = [(start, created_site(start))]
    seen: set[int] = set()
    keep: list[Any] = []  # the wrappers stay alive during the walk, so ids stay unique
    while stack and len(seen) < limit:
        node, tag = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        keep.append(node)
        here = created_site(node)
        tag = here if here[0] is not None else tag  # the nearest traced op above
        try:
            nexts = node.next_functions
        except (AttributeError, RuntimeError):
            continue
        for n, _ in nexts:
            if n is None:
                continue
            v = getattr(n, "variable", None)
            if v is None:
                stack.append((n, tag))
            elif id(v) in held:
                return None  # a trained tensor under it: not this case
            elif tag[0] is None:
                return None
            else:
                uses.append((tag[1], tag[0], v))
    if not uses:
        return None
    seq, where, first = min(uses, key=lambda u: u[0])
    if where.function == "forward":  # inside a model: the call of the outermost module
        where = next((r.site for r in list(data.modules.values()) for m in [r.ref()]
                      if m is not None and r.site is not None and r.site.function != "forward"
                      and any(p is first for p in m.parameters())), where)
    if where == made:
        return None  # the value's own line already is where the parameters enter
    from gradtrace.runtime.trace.hooks import param_name

    names: list[str] = []
    for _, _, v in uses:
        name = param_name(data, v)
        if name not in names:
            names.append(name)
    return make(code_for("graph-reused-across-steps", pat.code), where,
                f"{listed(names)} {'enter' if len(names) > 1 else 'enters'} a graph here, and no "
                f"optimizer holds {'them' if len(names) > 1 else 'it'}; the value "
                f"made from it ({src(made)}) is made once and used again at every step, so the "
                "first backward() freed that graph and this one needs it again",
                fix="compute this without a graph (under torch.no_grad(), or .detach() its "
                    "result); or pass those parameters to the optimizer if they should train",
                related=[(made, "the value made once"),
                         (site, "the backward() that needs the freed graph again")])
