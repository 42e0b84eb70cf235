"""A model only ever evaluated, and never put in eval mode: its dropout drops at every call.

# NOTE [evaluated as loaded, in train mode]
A module starts in train mode. A program that only evaluates a model (zero-shot
classification, a benchmark, feature extraction: no optimizer, no backward()) and never calls
``model.eval()`` runs every ``nn.Dropout`` of it at random: two evaluations of the same inputs
differ and every figure is that of a randomly thinned network (CLIP_benchmark's loader
returned the model in train mode). Nothing fails. NOTE [dropout left on in evaluation] covers
a model that trained; this one never trains.

Run-time facts: the global forward pre-hook (the grad-off branch) sees a dropout layer
(``p > 0``) run in train mode with grad off, for the first time, while no optimizer exists and
no backward() ran. It then walks the user frames outwards and keeps the outermost one whose
local (or module-level) name holds a module containing that layer: the frame that owns the
model, its line and the name. When the trace ends the layer ran at least twice, never with grad
on, is still in train mode (when it is still alive), no optimizer was built and no backward() ran, and the file of that
frame calls neither ``.train(...)`` nor ``.eval()`` anywhere (a program that sets a mode on
purpose, Monte-Carlo dropout turning the layers back on, stays silent): the line named is the
last assignment of that name before the frame's line (``model = load_clip(...)``: the model is
used as it came, the fix is ``model.eval()`` after it), else the frame's line. GT874.
"""
from __future__ import annotations

import ast
import sys
from typing import Any

import torch

from gradtrace.lint.nodes import scope_nodes
from gradtrace.runtime.frames import Site, is_internal
from gradtrace.runtime.trace.frozen_served import frozen_served_findings, note_frozen_served

_LAYERS = 16  # dropout layers followed
_DEPTH = 24  # frames walked outwards
_SUBMODULES = 4096  # modules searched per candidate holder


def note_first_nograd(data: Any, state: Any, module: torch.nn.Module) -> None:
    """From the global pre-hook: ``module`` runs with grad off for the first time."""
    from torch.nn.modules.dropout import _DropoutNd

    if not isinstance(module, _DropoutNd) or not module.training or not module.p \
            or data.optimizers or state.backward_count:
        return
    note_frozen_served(data, state, module, sys._getframe(2))  # NOTE [frozen, then served in train mode]
    if len(data.loaded_drops) >= _LAYERS:
        return
    rec = data.modules.get(id(module))
    held = _holder(module, sys._getframe(2)) if rec is not None else None
    if held is not None:
        data.loaded_drops[id(module)] = (*held, rec)


def _contains(top: torch.nn.Module, layer: torch.nn.Module) -> bool:
    for i, m in enumerate(top.modules()):
        if m is layer:
            return True
        if i > _SUBMODULES:
            return False
    return False


def _holder(layer: torch.nn.Module, f: Any) -> tuple[Site, str] | None:
    """The outermost user frame with a name holding a module that contains ``layer``."""
    found = None
    depth = 0
    while f is not None and depth < _DEPTH:
        depth += 1
        code = f.f_code
        if not is_internal(code) and code.co_name not in ("forward", "_call_impl"):
            for name, v in list(f.f_locals.items()):
                if isinstance(v, torch.nn.Module) and name != "self" and _contains(v, layer):
                    found = (Site(code.co_filename, f.f_lineno, code.co_name), name)
                    break
        f = f.f_back
    return found


def _sets_a_mode(tree: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr in ("train", "eval") for n in ast.walk(tree))


def _scope(tree: ast.Module, site: Site) -> ast.AST:
    """The function of ``site`` (its innermost def holding the line), else the module."""
    best: ast.AST = tree
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == site.function \
                and n.lineno <= site.line <= (n.end_lineno or n.lineno):
            best = n
    return best


def _bound_at(tree: ast.Module, site: Site, name: str) -> Site:
    """The last assignment of ``name`` before ``site`` in its scope, else ``site``."""
    lines = [n.lineno for n in scope_nodes(_scope(tree, site))
             if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.lineno < site.line
             and any(isinstance(t, ast.Name) and t.id == name
                     for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))]
    return Site(site.path, max(lines), site.function) if lines else site


def loaded_in_train_findings(data: Any, state: Any) -> list[Any]:
    """GT874 where a model only evaluated was made and left in train mode (see the NOTE)."""
    frozen = frozen_served_findings(data, state)  # NOTE [frozen, then served in train mode]
    if not data.loaded_drops or data.optimizers or state.backward_count:
        return frozen
    from gradtrace.runtime.build import make
    from gradtrace.runtime.trace.locate import tree_of

    out: dict[Site, str] = {}
    for site, name, rec in list(data.loaded_drops.values()):
        layer = rec.ref()  # None: gone with the function that made it
        if layer is not None and not layer.training or rec.grad_runs or rec.nograd_runs < 2:
            continue
        tree = tree_of(site.path)
        if tree is None or _sets_a_mode(tree):
            continue
        out.setdefault(_bound_at(tree, site, name), name)
    return frozen + [make("GT874", at,
                          f"`{name}` is only evaluated (no optimizer, no backward()) and was "
                          "never put in eval mode: a module starts in train mode, so its dropout "
                          "drops at random at every call and two evaluations of the same inputs "
                          "differ", fix=f"call {name}.eval() after this line (before evaluating)",
                          severity="warning")
                     for at, name in out.items()]


__all__ = ["loaded_in_train_findings", "note_first_nograd"]
