"""Hand-made leaves an optimizer was meant to hold: the one left out of its list.

# NOTE [hand-made leaf left out of the optimizer]
Code that builds its weights as plain tensors (``w1 = torch.empty(..., requires_grad=True)``:
tutorials, spiking and physics models, Gaussian processes) hands an optimizer a list of them
(``params = [w1, w2]``). A weight added later (``v1``, a recurrent matrix) and left out of the
list gets its ``.grad`` at every backward() and never changes: nothing fails. The walk of the
first loss graphs (:func:`.graph_scan.scan_loss_graph`) notes each plain leaf (no Parameter) that
requires grad, with a checksum of its values, and how many of those graphs reach the *same*
tensor. At the end a leaf is reported when it was reached by two graphs or more (a weight kept
across steps, not an input rebuilt for each batch), holds a gradient, is in no optimizer, still
has its first values (nothing updates it by hand), and an optimizer that stepped holds plain
leaves of its own (the weights are made this way in this program): the line named is the one
that listed the optimizer's tensors. A leaf updated by hand (``v -= lr * v.grad``), an
adversarial input made per batch, and a program whose optimizers hold only Parameters are
silent.
"""
from __future__ import annotations

import ast
import sys
import weakref
from typing import Any

import torch

from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.locate import function_at

LIMIT = 256  # leaves noted per run


def _sum(t: torch.Tensor) -> float | None:
    """A checksum of ``t``'s values: two reductions in float64, no copy of the tensor."""
    try:
        with torch.no_grad(), torch._C.DisableTorchFunction():  # not the program's ops
            d = t.detach()
            return float(d.sum(dtype=torch.float64)) + float(
                torch.linalg.vector_norm(d, 1, dtype=torch.float64))
    except Exception:  # pragma: no cover - a tensor we cannot read (meta, complex...)
        return None


def note_leaf(state: Any, var: Any) -> None:
    """From the loss-graph walk: a leaf the loss reaches."""
    if isinstance(var, torch.nn.Parameter) or not isinstance(var, torch.Tensor) \
            or not var.requires_grad or var.is_sparse:
        return
    rec = state.loose.get(id(var))
    if rec is not None and rec[0]() is var:
        if rec[3] != state.backward_count:
            rec[2] += 1
            rec[3] = state.backward_count
        return
    if len(state.loose) < LIMIT:
        state.loose[id(var)] = [weakref.ref(var), _sum(var), 1, state.backward_count]


def _names(value: ast.expr) -> list[str] | None:
    """The names a list literal of tensors spells (``[w1, w2]``), or None."""
    if isinstance(value, (ast.List, ast.Tuple)) and value.elts and all(
            isinstance(e, ast.Name) for e in value.elts):
        return [e.id for e in value.elts]  # type: ignore[attr-defined]
    return None


def _listed_at(site: Site | None) -> Site | None:
    """For ``Adam(params, ...)`` at ``site``, the one assignment of ``params`` to a list of
    names before it in the same function (or the constructor itself, given the list inline)."""
    got = function_at(site)
    if got is None or site is None:
        return None
    _, scope = got
    call = next((n for n in ast.walk(scope) if isinstance(n, ast.Call) and n.lineno == site.line
                 and n.args), None)
    if call is None:
        return None
    arg = call.args[0]
    if _names(arg) is not None:
        return site
    if not isinstance(arg, ast.Name):
        return None
    found = [n for n in ast.walk(scope) if isinstance(n, ast.Assign) and n.lineno < site.line
             and any(isinstance(t, ast.Name) and t.id == arg.id for t in n.targets)]
    if len(found) != 1 or _names(found[0].value) is None:
        return None
    return Site(site.path, found[0].lineno, site.function)


def _named(v: torch.Tensor, path: str) -> str:
    """The global name bound to ``v`` in the module of ``path`` (the script), else its shape."""
    for mod in list(sys.modules.values()):
        if getattr(mod, "__file__", None) == path:
            for k, val in list(vars(mod).items()):
                if val is v:
                    return f"`{k}`"
    return f"tensor of shape {list(v.shape)}"


def loose_leaf_findings(state: Any, data: Any, in_opt: set[int], groups: dict) -> None:
    """NOTE [hand-made leaf left out of the optimizer]: adds to ``groups`` (silent.py)."""
    if not state.loose:
        return
    steppers = [r for r in list(data.optimizers.values()) if r.steps and r.ref() is not None]
    plain = [p for r in steppers for g in r.ref().param_groups for p in g["params"]
             if not isinstance(p, torch.nn.Parameter)]
    if len(steppers) != 1 or not plain:
        return
    left = []
    for ref, first, seen, _ in list(state.loose.values()):
        v = ref()
        if v is None or seen < 2 or id(v) in in_opt or v.grad is None or first is None:
            continue
        if _sum(v) == first:
            left.append(v)
    if not left:
        return
    from gradtrace.runtime.trace.wiring import _constructed_at, built_at

    opt = steppers[0].ref()
    built = _constructed_at(data, opt) or built_at(steppers[0].site)
    site = _listed_at(built) or built or steppers[0].site
    key = ("parameter-in-no-optimizer", site,
           "they are tensors made by hand like the ones the optimizer holds, but the list "
           "given to the optimizer here leaves them out, so step() never changes them",
           "add them to the list the optimizer is built from")
    groups.setdefault(key, []).extend(_named(v, site.path) for v in left)
