"""backward() on a loss computed from plain tensors only: the input that should require grad.

# NOTE [loss of plain tensors]
``logits = torch.rand(10, 5)``, ``loss = Poly1CrossEntropyLoss(...)(logits, labels)``,
``loss.backward()``: "element 0 of tensors does not require grad and does not have a grad_fn".
Nothing was cut (no detach, grad mode on, nothing frozen): the program holds no parameter that
requires grad at all (no module that ran has one, no optimizer was built, no name the loss was
computed from holds a tensor that requires grad), so the only thing
it can differentiate is an input, and none was made with ``requires_grad=True`` (a loss
demonstrated or tested on random logits, a saliency input). Read from the live frame of the
failing backward() and its source: the names the loss was computed from, followed back through
the assignments of that function (loops included); among them the floating-point leaf tensors
that do not require grad, held by local names the function binds. When exactly one is left, its
last binding before the backward() is named (where ``requires_grad=True`` goes); with several
(a prediction and a target both plain) the backward() line is kept.
"""
from __future__ import annotations

import ast
from typing import Any

import torch

from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.ignored_arg import flow


def _trainable_anywhere(state: Any) -> bool:
    data = getattr(state, "hooks_data", None)
    if data is None or data.optimizers or data.opt_built:
        return True
    for rec in list(data.modules.values()):
        m = rec.ref() if rec.ref is not None else None
        if m is not None and any(p.requires_grad for p in m.parameters()):
            return True
    return False


def _names_behind(fn: ast.AST, start: set[str], before: int) -> set[str]:
    """Names the values of ``start`` were computed from, through the function's assignments
    up to line ``before`` (a fixed point: a loop's later lines feed its earlier ones)."""
    from gradtrace.lint.nodes import scope_nodes

    binds = []
    for n in scope_nodes(fn):
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and n.value is not None \
                and n.lineno <= before:
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            stored = {t.id for x in targets for t in ast.walk(x) if isinstance(t, ast.Name)}
            reads = {t.id for t in ast.walk(n.value) if isinstance(t, ast.Name)}
            binds.append((reads, stored))  # followed backwards: from what is stored to what it read
    return flow(binds, start)


def plain_input(state: Any, site: Site | None, root: Any) -> tuple[Site, str] | None:
    """(the binding line, the name) of the one plain input ``root`` was computed from;
    None otherwise. NOTE [loss of plain tensors]"""
    from gradtrace.runtime.trace.locate import function_at, live_frame
    from gradtrace.runtime.trace.squeezed_side import _bound_at

    if site is None or root is None or _trainable_anywhere(state):
        return None
    frame, found = live_frame(site), function_at(site)
    if frame is None or found is None:
        return None
    local = dict(frame.f_locals)
    start = {k for k, v in local.items() if v is root}
    if not start:
        return None
    code = frame.f_code
    params = set(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
    behind = _names_behind(found[1], start, site.line) - start
    if any(isinstance(local.get(k), torch.Tensor) and local[k].requires_grad for k in behind):
        return None  # something behind it requires grad: a cut, not a program of plain tensors
    behind -= params
    plain = sorted(k for k in behind if type(local.get(k)) is torch.Tensor
                   and local[k].is_floating_point() and local[k].grad_fn is None
                   and not local[k].requires_grad)
    if len(plain) != 1:
        return None
    first = getattr(found[1], "lineno", 1)
    line = _bound_at(site.path, first, site.line, plain[0])
    return None if line is None else (Site(site.path, line, site.function), plain[0])


__all__ = ["plain_input"]
