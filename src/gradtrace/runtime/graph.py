"""``gradtrace.graph(tensor, model=None)``: the autograd graph of a tensor, readable.

By default the graph is collapsed by module: each op node of the autograd graph is given to
the module whose parameters it uses (through views/transposes), and a parameter-free op
(ReLU, residual add...) to the module that produced its most recent input (autograd sequence
numbers give the forward order). Groups are module names cut at a depth chosen so that a
real model (ResNet-50: ~20 boxes) stays readable. Parameters of ``model`` that the tensor
does not depend on are drawn as dashed grey boxes; under ``gradtrace.trace()`` the place
where the graph was cut is written on them.

This module captures (walks ``grad_fn``, groups nodes by module, reads the tracer's cuts);
:mod:`gradtrace.report.graph` draws: ``.dot`` is Graphviz text, ``.save("g.svg")`` /
``.save("g.png")`` runs the ``dot`` program.
"""
from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

from gradtrace.errors import GradtraceError
from gradtrace.report.graph import (Graph, collapsed_dot, cut_name, expanded_dot, node_kind,
                                    node_seq)

_PASS = ("TBackward", "ViewBackward", "UnsafeViewBackward", "ExpandBackward",
         "PermuteBackward", "ToCopyBackward", "ReshapeAliasBackward", "UnsqueezeBackward",
         "SqueezeBackward", "TransposeBackward", "AliasBackward", "CloneBackward")


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


def _label_nodes(nodes: dict[int, Any], producers: dict[int, list[int]],
                 param_module: dict[int, str]) -> dict[int, str]:
    """Module name of every op node (see the module docstring)."""
    consumers: dict[int, list[int]] = {}
    for n, ps in producers.items():
        for p in ps:
            consumers.setdefault(p, []).append(n)
    label: dict[int, str] = {}
    for nid, n in nodes.items():
        var = getattr(n, "variable", None) if node_kind(n) == "AccumulateGrad" else None
        mod = param_module.get(id(var)) if var is not None else None
        if mod is None:
            continue
        label[nid] = mod
        frontier, hops = consumers.get(nid, []), 0
        while frontier and hops < 4:
            nxt = []
            for c in frontier:
                label.setdefault(c, mod)
                if node_kind(nodes[c]).startswith(_PASS):
                    nxt.extend(consumers.get(c, []))
            frontier, hops = nxt, hops + 1
    order = sorted((nid for nid in nodes if nid not in label), key=lambda i: node_seq(nodes[i]))
    for nid in order:
        best, best_seq = "", -2
        for p in producers[nid]:
            if p in label and node_kind(nodes[p]) != "AccumulateGrad" and node_seq(nodes[p]) > best_seq:
                best, best_seq = label[p], node_seq(nodes[p])
        label[nid] = best
    return label


def _choose_depth(labels: set[str]) -> int:
    full = max((len(x.split(".")) for x in labels if x), default=1)
    target = min(8, len({x for x in labels}))
    for d in range(1, full + 1):
        if len({cut_name(x, d) for x in labels}) >= target:
            return d
    return full


# --------------------------------------------------------------------------- trace notes
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
           if node_kind(n) == "AccumulateGrad"}
    if not ids:
        return None
    from gradtrace.runtime.watch.params import owner_modules

    roots = owner_modules(ids)
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
               if node_kind(n) == "AccumulateGrad"}
    # a graph built under a trace keeps that trace's notes after the block
    notes = functools.partial(_cut_notes, after=bool(_trace_site(tensor.grad_fn)))
    if collapse and model is not None:
        d = depth or _choose_depth(set(label.values()))
        return collapsed_dot(nodes, producers, label, d, model, types, reached,
                             notes, param_name)
    return expanded_dot(nodes, producers, label, param_name, model, reached, notes,
                        _trace_site)
