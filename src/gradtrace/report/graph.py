"""``gradtrace.graph(tensor, model=None)``: the autograd graph of a tensor, readable.

By default the graph is collapsed by module: each op node of the autograd graph is given to
the module whose parameters it uses (through views/transposes), and a parameter-free op
(ReLU, residual add...) to the module that produced its most recent input (autograd sequence
numbers give the forward order). Groups are module names cut at a depth chosen so that a
real model (ResNet-50: ~20 boxes) stays readable. Parameters of ``model`` that the tensor
does not depend on are drawn as dashed grey boxes; under ``gradtrace.trace()`` the place
where the graph was cut is written on them.

``.dot`` is Graphviz text; ``.save("g.svg")`` / ``.save("g.png")`` runs the ``dot`` program.
"""
from __future__ import annotations

import functools
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gradtrace.errors import GradtraceError

_PASS = ("TBackward", "ViewBackward", "UnsafeViewBackward", "ExpandBackward",
         "PermuteBackward", "ToCopyBackward", "ReshapeAliasBackward", "UnsqueezeBackward",
         "SqueezeBackward", "TransposeBackward", "AliasBackward", "CloneBackward")
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


# --------------------------------------------------------------------------- walking
def _walk(root: Any) -> tuple[dict[int, Any], dict[int, list[int]]]:
    """All nodes reachable from ``root`` and, for each, its producers (next_functions)."""
    nodes: dict[int, Any] = {}
    producers: dict[int, list[int]] = {}
    stack = [root]
    while stack:
        n = stack.pop()
        if id(n) in nodes:
            continue
        nodes[id(n)] = n
        kids = [c for c, _ in getattr(n, "next_functions", ()) if c is not None]
        producers[id(n)] = [id(c) for c in kids]
        stack.extend(kids)
    return nodes, producers


def _kind(n: Any) -> str:
    return type(n).__name__


def _seq(n: Any) -> int:
    try:
        return int(n._sequence_nr())
    except (AttributeError, RuntimeError):
        return -1


def _label_nodes(nodes: dict[int, Any], producers: dict[int, list[int]],
                 param_module: dict[int, str]) -> dict[int, str]:
    """Module name of every op node (see the module docstring)."""
    consumers: dict[int, list[int]] = {}
    for n, ps in producers.items():
        for p in ps:
            consumers.setdefault(p, []).append(n)
    label: dict[int, str] = {}
    for nid, n in nodes.items():
        var = getattr(n, "variable", None) if _kind(n) == "AccumulateGrad" else None
        mod = param_module.get(id(var)) if var is not None else None
        if mod is None:
            continue
        label[nid] = mod
        frontier, hops = consumers.get(nid, []), 0
        while frontier and hops < 4:
            nxt = []
            for c in frontier:
                label.setdefault(c, mod)
                if _kind(nodes[c]).startswith(_PASS):
                    nxt.extend(consumers.get(c, []))
            frontier, hops = nxt, hops + 1
    order = sorted((nid for nid in nodes if nid not in label), key=lambda i: _seq(nodes[i]))
    for nid in order:
        best, best_seq = "", -2
        for p in producers[nid]:
            if p in label and _kind(nodes[p]) != "AccumulateGrad" and _seq(nodes[p]) > best_seq:
                best, best_seq = label[p], _seq(nodes[p])
        label[nid] = best
    return label


def _cut(name: str, depth: int) -> str:
    return ".".join(name.split(".")[:depth]) if name else ""


def _choose_depth(labels: set[str]) -> int:
    full = max((len(x.split(".")) for x in labels if x), default=1)
    target = min(8, len({x for x in labels}))
    for d in range(1, full + 1):
        if len({_cut(x, d) for x in labels}) >= target:
            return d
    return full


# --------------------------------------------------------------------------- DOT
def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _trace_site(n: Any) -> str:
    mod = sys.modules.get("gradtrace.runtime.trace.records")
    fn = getattr(mod, "created_site", None) if mod is not None else None
    if fn is None:
        return ""
    try:
        site, _ = fn(n)
    except Exception:
        return ""
    return f"\n{Path(site.path).name}:{site.line}" if site is not None else ""


def _cut_notes(model: Any, unreached_ids: set[int], after: bool = False) -> dict[int, str]:
    """Param id -> "graph cut at file:line (...)" when the active tracer (or, ``after`` its
    block for a graph it traced, the last one) recorded the cut."""
    mod = sys.modules.get("gradtrace.runtime.trace.tracer")
    tracer = None
    if mod is not None:
        tracer = mod.last_tracer() if after else mod.active_tracer()
    upstream = getattr(getattr(tracer, "state", None), "cut_upstream", None)
    out: dict[int, str] = {}
    if not isinstance(upstream, dict):
        return out
    for cut, leaves in upstream.items():
        for pid in unreached_ids & set(leaves):
            desc = cut.describe() if hasattr(cut, "describe") else str(cut)
            out.setdefault(pid, f"graph cut at {Path(cut.site.path).name}:{cut.site.line}: "
                                f"{desc}")
    return out


def _module_info(model: Any) -> tuple[dict[int, str], dict[int, str], dict[str, str]]:
    if model is None:
        return {}, {}, {}
    param_module = {}
    param_name = {}
    for qn, p in model.named_parameters():
        param_module[id(p)] = qn.rpartition(".")[0]
        param_name[id(p)] = qn
    types = {name: type(m).__name__ for name, m in model.named_modules()}
    return param_module, param_name, types


def _find_model(nodes: dict[int, Any]) -> Any:
    """The one top-level module owning the graph's parameters, found by a scan (or None)."""
    ids = {id(getattr(n, "variable", None)) for n in nodes.values()
           if _kind(n) == "AccumulateGrad"}
    if not ids:
        return None
    from gradtrace.runtime.watch.watcher import _owners

    roots = _owners(ids)
    return roots[0][1] if len(roots) == 1 else None


def graph(tensor: Any, model: Any = None, *, collapse: bool = True,
          depth: int | None = None) -> Graph:
    """The autograd graph of ``tensor`` (collapsed by module of ``model`` by default).

    ``model`` names the parameters and groups ops by module; when omitted, the single
    top-level module owning the graph's parameters is looked up. ``depth`` fixes how many
    components of module names make a group (default: chosen for readability);
    ``collapse=False`` draws every autograd node.
    """
    import torch

    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"gradtrace.graph expects a tensor, got {type(tensor).__name__}")
    if tensor.grad_fn is None:
        why = ("it is a leaf that requires grad" if tensor.requires_grad else
               "it does not require grad: it was made under no_grad/inference_mode, detached, "
               "or from tensors that do not require grad")
        raise GradtraceError(f"the tensor has no autograd graph (grad_fn is None): {why}")
    nodes, producers = _walk(tensor.grad_fn)
    if model is None:
        model = _find_model(nodes)
    param_module, param_name, types = _module_info(model)
    label = _label_nodes(nodes, producers, param_module)
    reached = {id(getattr(n, "variable", None)) for n in nodes.values()
               if _kind(n) == "AccumulateGrad"}
    from gradtrace.report.graph_dot import collapsed_dot, expanded_dot

    # a graph built under a trace keeps that trace's notes after the block
    notes = functools.partial(_cut_notes, after=bool(_trace_site(tensor.grad_fn)))
    if collapse and model is not None:
        d = depth or _choose_depth(set(label.values()))
        return collapsed_dot(nodes, producers, label, d, model, types, reached,
                             notes, param_name)
    return expanded_dot(nodes, producers, label, param_name, model, reached, notes,
                        _trace_site)
