"""An optimizer keeps the gradient tensor itself in its state: the next backward overwrites it.

# NOTE [optimizer state holding the gradient]
torch-optimizer's ``DiffGrad.step`` stores ``state['previous_grad'] = grad`` with ``grad =
p.grad.data``: the state holds the gradient's own memory, not a copy. When the loop clears the
gradients in place (``zero_grad(set_to_none=False)``, what ``zero_grad()`` did before torch 2.0,
or gradient accumulation) the next backward() writes the new gradient into that memory, so at
every later step the "previous" gradient is the current one and ``previous_grad - grad`` is 0:
the optimizer silently becomes another one. Nothing fails.

Run-time facts, from the global optimizer step pre-hook, at the second to fifth step of an
optimizer whose class is not torch's own: a tensor in ``optimizer.state[p]`` shares its memory
(same storage, same number of elements) with ``p.grad`` as the step starts. With gradients set
to None between steps the gradient is a new tensor and nothing is shared: a state that only
keeps the previous step's tensor (a reference, never written in place) is not reported. The
line named is, in the source of the optimizer's ``step``, the last assignment of that state key
whose value is a plain name or attribute (no copy: ``state['previous_grad'] = grad``), else
the step's ``def``. GT860.
"""
from __future__ import annotations

import ast
import inspect
from typing import Any

import torch

from gradtrace.runtime.frames import Site

KIND = "optimizer-state-aliases-gradient"
_PARAMS = 64  # parameters looked at per step
_STEPS = (2, 5)  # steps checked (1-based, at their start)


def check_state_alias(state: Any, opt: Any, step: int) -> None:
    """From the step pre-hook of ``opt``'s ``step``-th step (see the NOTE)."""
    if not _STEPS[0] <= step <= _STEPS[1] or type(opt).__module__.startswith("torch."):
        return
    seen = 0
    for g in opt.param_groups:
        for p in g["params"]:
            seen += 1
            if seen > _PARAMS:
                return
            grad, st = p.grad, opt.state.get(p)
            if grad is None or not st or grad.is_sparse:
                continue
            ptr = grad.untyped_storage().data_ptr()
            for key, v in st.items():
                if isinstance(v, torch.Tensor) and v is not p and v.numel() == grad.numel() \
                        and v.numel() > 1 and v.untyped_storage().data_ptr() == ptr:
                    site = _stored_at(type(opt), key)
                    if site is not None:
                        state.note(KIND, site, str(key))
                    return


def _stored_at(cls: type, key: Any) -> Site | None:
    """The assignment ``state[key] = name`` in ``cls.step``'s source, else its ``def``."""
    fn = inspect.unwrap(cls.step)
    try:
        path = inspect.getsourcefile(fn)
        _, start = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return None
    if path is None:
        return None
    from gradtrace.runtime.trace.locate import tree_of

    tree = tree_of(path)
    func = None if tree is None else next(
        (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
         and n.name == fn.__name__ and n.lineno <= start + 4 and n.lineno >= start), None)
    if func is None:
        return None
    lines = [n.lineno for n in ast.walk(func)
             if isinstance(n, ast.Assign) and isinstance(n.value, (ast.Name, ast.Attribute))
             and any(isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant)
                     and t.slice.value == key for t in n.targets)]
    return Site(path, max(lines) if lines else func.lineno, fn.__name__)


__all__ = ["KIND", "check_state_alias"]
