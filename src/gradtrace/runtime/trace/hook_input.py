"""A module backward hook reads the gradient of an input that needed none.

# NOTE [hook input needs no grad]
A backward hook on a module (``register_backward_hook``, ``register_full_backward_hook``)
receives ``grad_input``: the gradients with respect to what the module was given. An input
that does not require grad (an image made by ``torch.rand``, a batch from a loader) gets no
gradient, so its entry is None and the hook's ``grad_in[0].shape`` fails (flashtorch's
Backprop saliency without ``requires_grad_()`` on the image). The line to change is where the
program made that input, not the backward() the error surfaces from.

Recorded: the global forward pre-hook keeps, for a module that has backward hooks (one dict
check per module call on armed steps), weak references to the tensors it was last given.
At the crash (``'NoneType' object has no attribute ...``), the innermost user frame runs under
autograd's engine, the failing statement reads ``name[i].<attr>`` on a local tuple whose
entry ``i`` is None, a parameter of the frame's function is a module with recorded inputs and
``name`` is the parameter after it (``grad_input``, not ``grad_output``): the ``i``-th
tensor input (the first when the hook's tuple is longer than the inputs) must need no grad.
Then the user frames are read outward from the hook: the outermost one that binds that very
tensor to a name of its own (not a parameter its caller handed in) names the statement that
assigned it there; else the innermost frame's line that handed it on.
"""
from __future__ import annotations

import ast
import types
import weakref
from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.build import make, src
from gradtrace.runtime.frames import Site, is_internal

_ENGINE = "_engine_run_backward"


def note_hooked_input(data: Any, module: torch.nn.Module, args: tuple) -> None:
    """From the forward pre-hook: the tensors a module with backward hooks is given."""
    table = data.hooked_inputs
    if id(module) not in table and len(table) >= 256:
        return
    try:
        refs = tuple(weakref.ref(a) for a in args if isinstance(a, torch.Tensor))
    except TypeError:
        return
    table[id(module)] = (weakref.ref(module), refs)


def _tb_frames(exc: BaseException) -> list[types.FrameType]:
    out, tb = [], exc.__traceback__
    while tb is not None and len(out) < 400:
        out.append(tb.tb_frame)
        tb = tb.tb_next
    return out


def _none_entry(frame: types.FrameType, line: int, attr: str) -> tuple[str, int] | None:
    """``name[i].<attr>`` on the failing line with ``name`` a local tuple whose entry is None."""
    from gradtrace.runtime.trace.locate import tree_of

    tree = tree_of(frame.f_code.co_filename)
    for n in ast.walk(tree) if tree is not None else ():
        if isinstance(n, ast.Attribute) and n.attr == attr and getattr(n, "lineno", 0) == line \
                and isinstance(n.value, ast.Subscript) and isinstance(n.value.value, ast.Name) \
                and isinstance(n.value.slice, ast.Constant) \
                and isinstance(n.value.slice.value, int):
            name, i = n.value.value.id, n.value.slice.value
            seq = frame.f_locals.get(name)
            if isinstance(seq, (tuple, list)) and -len(seq) <= i < len(seq) and seq[i] is None:
                return name, i
    return None


def _made_at(t: torch.Tensor, frames: list[types.FrameType]) -> Site | None:
    """Where the program bound ``t`` to a name of its own, read from the outermost frame."""
    from gradtrace.runtime.trace.diagnose_args import assignment_before

    handed: Site | None = None
    for f in frames:  # innermost first
        code = f.f_code
        if is_internal(code):
            continue
        params = set(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
        names = [k for k, v in list(f.f_locals.items()) if v is t]
        site = Site(code.co_filename, f.f_lineno, code.co_name)
        own = [k for k in names if k not in params]
        if own:
            stmt = assignment_before(site, own[0]) or _loop_binding(site, own[0])
            return Site(site.path, stmt.lineno, code.co_name, stmt.col_offset) \
                if stmt is not None else site
        if names and handed is None:
            handed = site
    return handed


def _loop_binding(site: Site, name: str) -> ast.stmt | None:
    """The innermost ``for`` around ``site`` whose target binds ``name`` (a loader's batch)."""
    from gradtrace.runtime.trace.locate import tree_of

    tree = tree_of(site.path)
    loops = [n for n in ast.walk(tree) if isinstance(n, ast.For)
             and n.lineno <= site.line <= (n.end_lineno or n.lineno)
             and any(isinstance(e, ast.Name) and e.id == name for e in ast.walk(n.target))] \
        if tree is not None else []
    return max(loops, key=lambda n: n.lineno, default=None)


def hook_input_none(pat: Any, exc: BaseException, state: Any) -> Finding | None:
    """NOTE [hook input needs no grad]: the line that made the hooked module's input."""
    data = getattr(state, "hooks_data", None)
    table = getattr(data, "hooked_inputs", None)
    attr = getattr(exc, "name", None)
    if not table or not isinstance(attr, str):
        return None
    tb = _tb_frames(exc)
    users = [i for i, f in enumerate(tb) if not is_internal(f.f_code)]
    if not users or not any(f.f_code.co_name == _ENGINE for f in tb[:users[-1]]):
        return None
    hook = tb[users[-1]]
    line = _last_line(exc, hook)
    hit = _none_entry(hook, line, attr) if line else None
    if hit is None:
        return None
    params = hook.f_code.co_varnames[:hook.f_code.co_argcount]
    at = next((j for j, p in enumerate(params) if isinstance(hook.f_locals.get(p), torch.nn.Module)
               and id(hook.f_locals[p]) in table), None)
    if at is None or at + 1 >= len(params) or params[at + 1] != hit[0]:
        return None  # the tuple read is not the hook's grad_input (the argument after the module)
    entry = table[id(hook.f_locals[params[at]])]
    if entry[0]() is None:
        return None
    inputs = [r() for r in entry[1]]
    i = hit[1] if hit[1] < len(inputs) else 0
    t = inputs[i] if inputs else None
    if t is None or t.requires_grad:
        return None
    outer: list[types.FrameType] = []
    f: types.FrameType | None = hook
    while f is not None and len(outer) < 200:
        outer.append(f)
        f = f.f_back
    made = _made_at(t, outer[1:])
    if made is None:
        return None
    module = type(entry[0]()).__name__
    return make(pat.finding_code, made,
                f"`{hit[0]}[{hit[1]}]` is None in the backward hook of `{module}`: a module's "
                "backward hook gets no gradient for an input that does not require grad, and "
                f"the input given to it, made here ({src(made)}), does not require grad",
                fix="make the input require grad before the forward (`x.requires_grad_()`), "
                    "or skip the None entries in the hook",
                related=[(Site(hook.f_code.co_filename, line, hook.f_code.co_name),
                          "the hook reads that gradient here")])


def _last_line(exc: BaseException, frame: types.FrameType) -> int | None:
    tb = exc.__traceback__
    line = None
    while tb is not None:
        if tb.tb_frame is frame:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def grad_none_in_hook(pat: Any, exc: BaseException, func: Any, args: tuple, kwargs: dict,
                      site: Any, state: Any) -> list[Finding]:
    """The analyzer of ``grad-none-attr`` raised through a backward() (diagnose._ANALYZERS)."""
    found = hook_input_none(pat, exc, state)
    return [found] if found is not None else []


__all__ = ["grad_none_in_hook", "hook_input_none", "note_hooked_input"]
