"""A frozen feature extractor whose normalisation statistics still move under a trained head.

# NOTE [probe statistics]
Linear evaluation and "ConvNet as fixed feature extractor" fine-tuning freeze every parameter of
a backbone with ``requires_grad=False`` and train a linear classifier on its features. The
backbone stays in train mode (``model.train()`` at the top of the loop switches every
submodule), so each forward writes the batch statistics into its BatchNorm ``running_mean`` and
``running_var``: the features the head learns from drift, and the eval-mode model is not the
one that was probed. NOTE [moving statistics] reports freezes aimed at the normalisation layers;
a backbone frozen as a whole is reported here when the run shows a probe:

- an optimizer stepped gradients, and either every parameter that had one belongs to an
  ``nn.Linear`` (a linear probe), or other layers train after the frozen stage (YOLO's
  ``freeze``) and the frozen layer's running statistics were not at their initial values (mean
  0, variance 1) at its first forward in train mode: statistics that were loaded or pretrained
  are what the freeze keeps, while fresh ones under trained convolutions are commonly left to
  adapt (session 21: ultralytics' BaseTrainer switched its frozen, pretrained layers back on
  with ``self.model.train()`` every epoch, fixed upstream by putting them back in eval);
- a norm layer with all its parameters frozen (the freeze seen) ran in train mode with grad on
  while that training went on.

- a ``.train()`` call switched the frozen layer on as part of a model that trains: at the
  layer's first such forward, the user frames on the stack are searched, innermost first, for a
  ``<expr>.train()`` (or ``.train(True)``) statement of their own scope whose receiver, read from
  the frame (names and attributes only, nothing is called), is a module holding the layer *and*
  a parameter that requires grad; the last one before the frame's running line, else the last
  one in it. That call is the line named. ``backbone.train()`` on the frozen part itself asks
  for its statistics to adapt (left alone), and so does a model never switched explicitly.
"""
from __future__ import annotations

import ast
from types import FrameType
from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.frame_values import read_chain, stored_attr
from gradtrace.runtime.frames import Site, is_internal

_NormBase = torch.nn.modules.batchnorm._NormBase


def train_call(frame: FrameType | None, layer: torch.nn.Module,
               stop: FrameType | None = None) -> Site | None:
    """The ``.train()`` statement that switched ``layer`` on (see the NOTE), or None. With
    ``stop``, only in the frames below it, and only a call before the frame's running line."""
    from gradtrace.runtime.trace.offstack import _node, _own

    depth = 0
    while frame is not None and frame is not stop and depth < 12:
        if not is_internal(frame.f_code):
            depth += 1
            node = _node(frame.f_code)
            if node is not None:
                calls = [n for n in _own(node) if _is_train(n)]
                held = [n for n in calls if _switches(_read(n.func.value, frame), layer)]
                if held:
                    line = frame.f_lineno
                    before = [n for n in held if n.lineno <= line]
                    if stop is not None and not before:
                        frame = frame.f_back
                        continue
                    n = max(before or held, key=lambda c: c.lineno)
                    return Site(frame.f_code.co_filename, n.lineno, frame.f_code.co_name,
                                n.col_offset)
        frame = frame.f_back
    return None


def _is_train(n: ast.AST) -> bool:
    return isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
        and n.func.attr == "train" and not n.keywords and (
            not n.args or len(n.args) == 1 and isinstance(n.args[0], ast.Constant)
            and n.args[0].value is True)


def _read(expr: ast.AST, frame: FrameType) -> Any:
    """The value of a name or attribute chain in ``frame``, without calling anything user-made
    (instance ``__dict__`` and module ``_modules`` only); MISSING when it cannot be read."""
    return read_chain(expr, frame, stored_attr)


def _switches(value: Any, layer: torch.nn.Module) -> bool:
    """``value`` is a module holding ``layer`` and something that trains (a parameter that
    requires grad): the switch aims at the model, the frozen part is switched on with it."""
    return isinstance(value, torch.nn.Module) and any(m is layer for m in value.modules()) \
        and any(p.requires_grad for p in value.parameters())


def probe_findings(state: Any, data: Any, param_name: Any) -> list[Finding]:
    """GT841 for a frozen, normalised feature extractor under a trained linear head
    (``param_name``: hooks.param_name, passed in: hooks imports this module)."""
    from gradtrace.runtime.build import make

    owners: list[torch.nn.Module] = []
    frozen: list[Any] = []
    for rec in list(data.modules.values()):
        m = rec.ref()
        if m is None:
            continue
        ps = [p for p in m._parameters.values() if p is not None]
        if any(data.graded(p) for p in ps):
            owners.append(m)
        elif rec.stats_frozen and ps and all(state.frozen_at(p) for p in ps) \
                and not any(p.requires_grad for p in ps):
            frozen.append(rec)
    if not owners or not frozen:
        return []
    probe = all(isinstance(m, torch.nn.Linear) for m in owners)
    if not probe:  # a frozen stage under trained layers: only statistics that were loaded
        frozen = [r for r in frozen if r.stats_frozen == 2]
    groups: dict[Site, tuple[list[str], Site | None]] = {}
    for rec in frozen:
        m = rec.ref()
        p = next(q for q in m._parameters.values() if q is not None)
        freeze = state.frozen_at(p)
        site = rec.train_site
        if site is None:
            continue
        groups.setdefault(site, ([], freeze))[0].append(
            param_name(data, p).rpartition(".")[0] or type(m).__name__)
    out = []
    for site, (names, freeze) in groups.items():
        shown = f"{', '.join(names[:3])}{' and more' if len(names) > 3 else ''}"
        out.append(make(
            "GT841", site,
            f"{shown} {'is' if len(names) == 1 else 'are'} frozen by requires_grad=False "
            f"while {'only a linear head' if probe else 'the rest of the model'} trains, but "
            "ran in train mode"
            f"{' (switched on here)' if site != freeze else ''}: the running mean and variance "
            "still change at every forward, so the frozen layers keep moving under "
            f"{'the head' if probe else 'the layers that train'}",
            fix="put the frozen backbone in eval() after every model.train() (or call train() "
                "on the head only)",
            related=[(freeze, "its parameters are frozen here")] if site != freeze else [],
            severity="warning"))
    return out


__all__ = ["probe_findings", "train_call"]
