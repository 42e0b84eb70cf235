"""DOT text for :func:`gradtrace.graph` (collapsed by module, or every autograd node)."""
from __future__ import annotations

from typing import Any, Callable

from gradtrace.report.graph import Graph, _cut, _kind, _q, _seq

_HEAD = ('digraph gradtrace {\n  graph [rankdir=TB, fontname="Helvetica", nodesep=0.25, '
         'ranksep=0.35];\n  node [shape=box, style="rounded,filled", fontname="Helvetica", '
         'fontsize=10, fillcolor="#e8f1fb", color="#5b8fc7"];\n  edge [color="#777777", '
         'arrowsize=0.6];\n')
_OUTSIDE = "(outside modules)"


def _size(n: int) -> str:
    for unit, k in (("M", 1_000_000), ("k", 1_000)):
        if n >= k:
            return f"{n / k:.1f}{unit}"
    return str(n)


def _unreached(model: Any, reached: set[int]) -> list[tuple[str, Any]]:
    return [(qn, p) for qn, p in model.named_parameters()
            if p.requires_grad and id(p) not in reached] if model is not None else []


def _op_name(n: Any) -> str:
    name = _kind(n)
    for suffix in ("Backward0", "Backward1", "Backward"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _group_stats(nodes: dict[int, Any], group: dict[int, str], param_name: dict[int, str]
                 ) -> tuple[dict[str, int], dict[str, int], dict[str, list[Any]]]:
    """Per group: op count, first autograd sequence number, parameters."""
    ops: dict[str, int] = {}
    first: dict[str, int] = {}
    params: dict[str, list[Any]] = {}
    for nid, n in nodes.items():
        g = group[nid]
        if _kind(n) == "AccumulateGrad":
            var = getattr(n, "variable", None)
            if var is not None and id(var) in param_name:
                params.setdefault(g, []).append(var)
            continue
        ops[g] = ops.get(g, 0) + 1
        s = _seq(n)
        first[g] = min(first.get(g, s), s)
    return ops, first, params


def collapsed_dot(nodes: dict[int, Any], producers: dict[int, list[int]],
                  label: dict[int, str], depth: int, model: Any, types: dict[str, str],
                  reached: set[int], cut_notes: Callable[[Any, set[int]], dict[int, str]],
                  param_name: dict[int, str]) -> Graph:
    """One box per module group; edges where data crosses between groups."""
    group: dict[int, str] = {nid: (_cut(label[nid], depth) or _OUTSIDE) for nid in nodes}
    ops, first, params = _group_stats(nodes, group, param_name)
    edges: set[tuple[str, str]] = set()
    for nid, ps in producers.items():
        for p in ps:
            if _kind(nodes[p]) == "AccumulateGrad":
                continue
            if group[p] != group[nid]:
                edges.add((group[p], group[nid]))
    lines = [_HEAD]
    order = sorted(ops, key=lambda g: first.get(g, 0))
    ids = {g: f"g{i}" for i, g in enumerate(order)}
    for g in order:
        ps = params.get(g, [])
        t = types.get(g, "")
        text = f"{g}{f' ({t})' if t and g != _OUTSIDE else ''}\n{ops[g]} ops"
        if ps:
            text += f" · {len(ps)} params ({_size(sum(p.numel() for p in ps))})"
            if len(ps) <= 4:  # small groups name their parameters
                names = [param_name[id(p)][len(g) + 1:] if g != _OUTSIDE else
                         param_name[id(p)] for p in ps]
                text += "\n" + ", ".join(sorted(names))
        lines.append(f"  {ids[g]} [label={_q(text)}];\n")
    root = next(iter(nodes))
    lines.append(f'  out [label={_q("output: " + _op_name(nodes[root]))}, shape=oval, '
                 'fillcolor="#fde8c8", color="#d08a2c"];\n')
    lines.append(f"  {ids[group[root]]} -> out;\n")
    for a, b in sorted(edges):
        lines.append(f"  {ids[a]} -> {ids[b]};\n")
    unreached = _unreached(model, reached)
    lines += _unreached_boxes(unreached, depth, model, cut_notes)
    lines.append("}\n")
    return Graph("".join(lines), nodes=len(order) + 1, edges=len(edges) + 1, collapsed=True,
                 unreached=[qn for qn, _ in unreached])


def _unreached_boxes(unreached: list[tuple[str, Any]], depth: int, model: Any,
                     cut_notes: Callable[[Any, set[int]], dict[int, str]]) -> list[str]:
    if not unreached:
        return []
    notes = cut_notes(model, {id(p) for _, p in unreached})
    groups: dict[str, list[tuple[str, Any]]] = {}
    for qn, p in unreached:
        groups.setdefault(_cut(qn.rpartition(".")[0], depth) or "<model>", []).append((qn, p))
    out = []
    for i, (g, items) in enumerate(groups.items()):
        text = f"{g}: no gradient reaches {len(items)} param(s)"
        note = next((notes[id(p)] for _, p in items if id(p) in notes), None)
        if note:
            text += "\n" + note
        color = "#d62728" if note else "#999999"
        out.append(f"  u{i} [label={_q(text)}, style=dashed, color={_q(color)}, "
                   f"fontcolor={_q(color)}];\n")
    return out


def expanded_dot(nodes: dict[int, Any], producers: dict[int, list[int]],
                 label: dict[int, str], param_name: dict[int, str], model: Any,
                 reached: set[int], cut_notes: Callable[[Any, set[int]], dict[int, str]],
                 trace_site: Callable[[Any], str]) -> Graph:
    """Every autograd node; parameters as blue boxes named by qualified name."""
    lines = [_HEAD]
    ids = {nid: f"n{i}" for i, nid in enumerate(nodes)}
    for nid, n in nodes.items():
        if _kind(n) == "AccumulateGrad":
            var = getattr(n, "variable", None)
            name = param_name.get(id(var), "leaf") if var is not None else "leaf"
            shape = tuple(var.shape) if var is not None else ()
            text = f"{name}\n{shape}"
            lines.append(f'  {ids[nid]} [label={_q(text)}, fillcolor="#cfe3ff"];\n')
            continue
        text = _op_name(n) + (f"\n{label[nid]}" if label.get(nid) else "") + trace_site(n)
        lines.append(f'  {ids[nid]} [label={_q(text)}, fillcolor="#f4f4f4", '
                     'color="#aaaaaa"];\n')
    n_edges = 0
    for nid, ps in producers.items():
        for p in ps:
            lines.append(f"  {ids[p]} -> {ids[nid]};\n")
            n_edges += 1
    unreached = _unreached(model, reached)
    lines += _unreached_boxes(unreached, 99, model, cut_notes)
    lines.append("}\n")
    return Graph("".join(lines), nodes=len(nodes), edges=n_edges, collapsed=False,
                 unreached=[qn for qn, _ in unreached])
