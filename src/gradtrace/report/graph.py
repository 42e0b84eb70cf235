"""The autograd graph that :func:`gradtrace.graph` captured (:mod:`gradtrace.runtime.graph`),
drawn: DOT text collapsed by module or with every autograd node, rendered by Graphviz."""
from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from gradtrace.errors import GradtraceError

_MISSING_DOT = ("the Graphviz `dot` program was not found on PATH, so {path!s} cannot be "
                "rendered. Install Graphviz (Debian/Ubuntu: `apt-get install graphviz`, macOS: "
                "`brew install graphviz`, conda: `conda install graphviz`) or use the `.dot` "
                "text with any Graphviz viewer.")


@dataclass
class Graph:
    """An autograd graph as Graphviz DOT text, with a renderer."""

    dot: str
    nodes: int
    edges: int
    collapsed: bool
    unreached: list[str] = field(default_factory=list)

    def save(self, path: str | Path, timeout: float = 120.0) -> Path:
        """Render to ``.svg``, ``.png`` or ``.pdf`` with Graphviz ``dot``; ``.dot``/``.gv``
        writes the text. Raises :class:`~gradtrace.errors.GradtraceError` with a clear
        message when ``dot`` is missing or fails."""
        path = Path(path)
        fmt = path.suffix.lstrip(".").lower()
        if fmt in ("dot", "gv"):
            path.write_text(self.dot, encoding="utf-8")
            return path
        if fmt not in ("svg", "png", "pdf"):
            raise GradtraceError(f"cannot render {str(path)!r}: use a .svg, .png, .pdf or .dot "
                                 "file name")
        exe = shutil.which("dot")
        if exe is None:
            raise GradtraceError(_MISSING_DOT.format(path=path))
        proc = subprocess.run([exe, f"-T{fmt}", "-o", str(path)], input=self.dot.encode(),
                              capture_output=True, timeout=timeout)
        if proc.returncode != 0:
            err = proc.stderr.decode(errors="replace").strip()
            raise GradtraceError(f"Graphviz `dot` failed to render {path}: {err}")
        return path

    def _repr_svg_(self) -> str | None:
        exe = shutil.which("dot")
        if exe is None:
            return None
        proc = subprocess.run([exe, "-Tsvg"], input=self.dot.encode(), capture_output=True,
                              timeout=120)
        return proc.stdout.decode() if proc.returncode == 0 else None


def node_kind(n: Any) -> str:
    """The autograd node's class name (``MulBackward0``, ``AccumulateGrad``...)."""
    return type(n).__name__


def node_seq(n: Any) -> int:
    """The node's autograd sequence number (forward order), -1 when it has none."""
    try:
        return int(n._sequence_nr())
    except (AttributeError, RuntimeError):
        return -1


def cut_name(name: str, depth: int) -> str:
    """A module name cut to its first ``depth`` components (the group it is drawn in)."""
    return ".".join(name.split(".")[:depth]) if name else ""


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


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
    name = node_kind(n)
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
        if node_kind(n) == "AccumulateGrad":
            var = getattr(n, "variable", None)
            if var is not None and id(var) in param_name:
                params.setdefault(g, []).append(var)
            continue
        ops[g] = ops.get(g, 0) + 1
        s = node_seq(n)
        first[g] = min(first.get(g, s), s)
    return ops, first, params


def collapsed_dot(nodes: dict[int, Any], producers: dict[int, list[int]],
                  label: dict[int, str], depth: int, model: Any, types: dict[str, str],
                  reached: set[int], cut_notes: Callable[[Any, set[int]], dict[int, str]],
                  param_name: dict[int, str]) -> Graph:
    """One box per module group; edges where data crosses between groups."""
    group: dict[int, str] = {nid: (cut_name(label[nid], depth) or _OUTSIDE) for nid in nodes}
    ops, first, params = _group_stats(nodes, group, param_name)
    edges: set[tuple[str, str]] = set()
    for nid, ps in producers.items():
        for p in ps:
            if node_kind(nodes[p]) == "AccumulateGrad":
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
        groups.setdefault(cut_name(qn.rpartition(".")[0], depth) or "<model>", []).append((qn, p))
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
        if node_kind(n) == "AccumulateGrad":
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
