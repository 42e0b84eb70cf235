"""A model trained in eval mode from the start, next to one the program puts in train mode.

# NOTE [left in eval beside a trained model]
NOTE [eval-mode training] reports a model that trained in train mode and later trains in eval
mode. A model that never ran in train mode is another case: a pretrained text encoder loaded in
eval mode (``from_pretrained`` calls ``eval()``) and fine-tuned together with a UNet, while the
training loop calls ``unet.train()`` only (diffusers' DreamBooth script). Its dropout is off
for the whole training, and nothing fails.

The global forward pre-hook notes such a module (never in train mode, running with grad on in
eval mode) like a pending one; the next ``optimizer.step()`` decides it once. It is reported
when its outermost module is a root (no module in train mode holds it: a BatchNorm frozen on
purpose inside a training model is not), it has a dropout layer with p > 0 (dropout off while
training; a model kept in eval for its batch-norm statistics is a common choice), the stepping
optimizer holds one of its parameters with a gradient, and the same optimizer holds, with a
gradient, a parameter of another root model that ran in train mode: the program trains both
and switches only one. The line named is that other model's ``.train()`` call in the training
loop (the loop around the eval model's call, in the frame both the call and the step share,
read in the file's syntax tree; the innermost loop holding one ``<x>.train()``), else the eval
model's call. Reported as GT516's family (the static twin), with the other model as context.
"""
from __future__ import annotations

import ast
import linecache
from typing import Any

import torch

from gradtrace.runtime.frames import Site


def fresh_roots(data: Any, opt: torch.optim.Optimizer, fresh: list[Any],
                parents: dict[int, torch.nn.Module]) -> list[tuple[Any, ...]]:
    """(root model, its record, its dropout layers, the other model) for each model never seen
    in train mode that ran in eval mode with grad on and is reported."""
    graded = {id(p) for g in opt.param_groups for p in g["params"] if p.grad is not None}
    roots: dict[int, torch.nn.Module] = {}
    for rec in fresh:
        m = rec.ref()
        if m is None or m.training:
            continue
        top, up = m, parents.get(id(m))
        while up is not None and not up.training:
            top, up = up, parents.get(id(up))
        if up is None:
            roots.setdefault(id(top), top)
    out = []
    for top in roots.values():
        layers = _dropouts(top)
        if not layers or not any(id(p) in graded for p in top.parameters()):
            continue
        other = _trained_root(data, parents, graded, top)
        if other is None:
            continue
        rec = next((r for r in fresh if r.ref() is top), None) or \
            next(r for r in fresh if r.ref() is not None and _inside(r.ref(), top))
        out.append((top, rec, layers, other))
    return out


def _inside(m: torch.nn.Module, top: torch.nn.Module) -> bool:
    return any(x is m for x in top.modules())


def _dropouts(top: torch.nn.Module) -> tuple[str, ...]:
    from torch.nn.modules.dropout import _DropoutNd

    out: dict[str, None] = {}
    for m in top.modules():
        if isinstance(m, _DropoutNd) and m.p > 0 or \
                isinstance(m, torch.nn.RNNBase) and m.dropout > 0:
            out.setdefault(type(m).__name__)
    return tuple(out)


def _trained_root(data: Any, parents: dict[int, torch.nn.Module], graded: set[int],
                  top: torch.nn.Module) -> torch.nn.Module | None:
    """Another root model, in train mode, that ran in train mode and has a graded parameter."""
    for r in list(data.modules.values()):
        m = r.ref()
        if m is None or not r.trained or not m.training or m is top:
            continue
        root = m
        while parents.get(id(root)) is not None:
            root = parents[id(root)]
        if root is not top and root.training and any(id(p) in graded for p in root.parameters()):
            return root
    return None


def train_call(off: Any, now: Any, call: Site | None) -> Site | None:
    """The one ``<x>.train()`` call of the innermost loop around ``call`` that holds one."""
    if call is None:
        return None
    frames = {(fid, id(code)) for fid, code, _ in off}
    code = next((c for fid, c, _ in now if (fid, id(c)) in frames), None)
    if code is None:
        return None
    try:
        tree = ast.parse("".join(linecache.getlines(code.co_filename)))
    except (SyntaxError, ValueError):
        return None
    loops = [n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.While))
             and n.lineno <= call.line <= (n.end_lineno or n.lineno)]
    for loop in sorted(loops, key=lambda n: -n.lineno):
        calls = [n for n in ast.walk(loop) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Attribute) and n.func.attr == "train"
                 and not n.keywords and (not n.args or isinstance(n.args[0], ast.Constant)
                                         and n.args[0].value is True)]
        if len(calls) == 1:
            return Site(code.co_filename, calls[0].lineno, code.co_name)
        if calls:
            return None
    return None
