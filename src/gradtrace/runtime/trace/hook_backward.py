"""# NOTE [backward inside a backward hook]
A backward hook (``register_full_backward_hook``, ``Tensor.register_hook``) that builds a small
graph and calls backward() on it runs while autograd's engine runs the outer backward(), with
grad mode off: the hook's own forward records nothing, and its backward() fails with "element 0
of tensors does not require grad". The error surfaces at the outer backward(); the line to change
is the hook's computation that ran with grad off (wrap it in ``torch.enable_grad()``).

Read from the traceback: its innermost user frame calls ``name.backward()`` on the line it
failed at, a frame of autograd's engine runs the outer backward() below it (the traceback
passes through the engine before it reaches that frame), ``name`` holds a tensor without a
graph, and the assignment that made it reads a name that requires grad (so grad mode was off
when it ran): that assignment is named.
"""
from __future__ import annotations

import ast
from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make, src
from gradtrace.runtime.frames import Site

_ENGINE = "_engine_run_backward"


def backward_in_hook(exc: BaseException, state: Any, site: Site | None) -> Finding | None:
    """NOTE [backward inside a backward hook]: the hook's line that ran with grad mode off."""
    import torch

    from gradtrace.runtime.fuse import is_user_file
    from gradtrace.runtime.trace.diagnose_args import assignment_before
    from gradtrace.runtime.trace.diagnose_freed import _receiver

    frames, tb = [], exc.__traceback__
    while tb is not None and len(frames) < 200:
        frames.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    users = [i for i, (f, _) in enumerate(frames) if is_user_file(f.f_code.co_filename)]
    if not users or not any(f.f_code.co_name == _ENGINE for f, _ in frames[:users[-1]]):
        return None
    frame, line = frames[users[-1]]
    inner = Site(frame.f_code.co_filename, line, frame.f_code.co_name)
    _, name = _receiver(inner)
    value = frame.f_locals.get(name) if name is not None else None
    made = assignment_before(inner, name) if isinstance(value, torch.Tensor) \
        and value.grad_fn is None and not value.requires_grad else None
    rhs = getattr(made, "value", None)
    # made from a name that requires grad, yet without a graph: grad mode was off there
    seen = {n.id: frame.f_locals.get(n.id, frame.f_globals.get(n.id))
            for n in (ast.walk(rhs) if rhs is not None else ()) if isinstance(n, ast.Name)}
    grads = [k for k, v in seen.items() if isinstance(v, torch.Tensor) and v.requires_grad]
    if not grads:
        return None
    at = Site(inner.path, made.lineno, inner.function)
    return make(code_for("grad-mode-left-off", "GT800"), at,
                f"this line runs inside a backward hook (`{inner.function}`), called while "
                "autograd runs the outer backward() with grad mode off: it is computed from "
                f"`{grads[0]}`, which requires grad, but nothing is recorded, so "
                f"`{name}.backward()` ({src(inner)}) has no graph",
                fix="wrap the hook's computation in `with torch.enable_grad():`",
                related=[(inner, "the hook's backward() failed here"),
                         (site, "the outer backward() that ran the hook")])
