"""Torch warnings that reveal a training bug, noted as events at the user's line (issue #13).

# NOTE [revealing warnings]
While a tracer is active, :func:`gradtrace.runtime.trace.tracer._relocate_warnings` sees every
warning Python shows (``warnings.showwarning``; the filters decide, as always, and the warning
prints exactly as it would without gradtrace). :data:`TABLE` lists the ones that reveal a real
bug of the program, each with the event kind its finding takes (the text and code live in
:mod:`gradtrace.runtime.trace.events`) and, where the message alone is not enough, a check that
looks at the program: the hook's module, its registration line. The event
sits at the innermost user frame of the warning's stack (for the backward hook: the line that
registered it). Deprecations and performance hints are not in the table: they reveal no bug.
A warning the filters hide, or that torch shows once per process, is seen when it is shown.
"""
from __future__ import annotations

import ast
import linecache
import re
import sys
import types
from typing import Any, Callable

from gradtrace.runtime.frames import Site

# a check returns (kind, site of the event, op, related), or None: nothing revealed here
Check = Callable[[re.Match[str], Site, types.FrameType | None, Any], Any]


def _plain(kind: str) -> Check:
    def check(m: re.Match[str], site: Site, frame: types.FrameType | None, tracer: Any) -> Any:
        return kind, site, "", ()
    return check


def _scheduler(m: re.Match[str], site: Site, frame: types.FrameType | None, tracer: Any) -> Any:
    if tracer.state.grad_scaler or _explicit_epoch():  # a step GradScaler skipped warns too
        return None
    return "scheduler-before-step", site, "", ()


def _explicit_epoch() -> bool:
    """The warning comes from ``scheduler.step(epoch)``: the scheduler is set to that epoch
    (``last_epoch = epoch``, the closed form where there is one), so no value of the schedule
    is skipped; torch warns on the order all the same."""
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name == "step" and f.f_code.co_filename.endswith("lr_scheduler.py"):
            return f.f_locals.get("epoch") is not None
        f = f.f_back
    return False


def _target_size(m: re.Match[str], site: Site, frame: types.FrameType | None,
                 tracer: Any) -> Any:
    target, given = m.group(1), m.group(2)
    op = f"size {given} with a target of size {target}"
    from gradtrace.runtime.trace.squeezed_side import squeezed_site

    where = squeezed_site(frame)  # NOTE [squeezed loss input]
    if where is None:
        from gradtrace.runtime.trace.log_prob_dims import log_prob_site

        made = log_prob_site(frame)  # NOTE [per-dimension log-probability in the loss]
        if made is not None and made != site:
            return "log-prob-per-dimension", made, op, (
                (site, "the loss compares the two shapes here"),)
    if where is None or where == site:
        return "loss-target-broadcast", site, op, ()
    return "loss-target-broadcast", where, op, (
        (site, "the loss compares the squeezed tensor with the target here"),)


def _non_leaf_grad(m: re.Match[str], site: Site, frame: types.FrameType | None,
                   tracer: Any) -> Any:
    # an armed tracer's mode sees the read itself and names where the tensor was made
    if tracer.arming.armed and not tracer.arming.popped:
        return None
    return "non-leaf-grad", site, "", ()


def _hook_registration(m: re.Match[str], site: Site, frame: types.FrameType | None,
                       tracer: Any) -> Any:
    """The non-full backward hook: lead at the line that registered it when the program's code
    shows it, with the module call where torch warned as related."""
    module, one_node = _warning_module()
    if one_node:
        return None
    where = _registration_site(module, frame) if module is not None else None
    if where is None:
        return "non-full-backward-hook", site, "", ()
    return "non-full-backward-hook", where, "", (
        (site, "torch warned here, when the module ran: its forward makes more than one "
               "autograd node"),)


def _warning_module() -> tuple[Any, bool]:
    """The module torch warned about, and whether its forward made a single autograd node.

    Torch warns when the output node's inputs are not the module inputs' own nodes, also for a
    single op whose input is a leaf (a conv over an image that requires grad): its next nodes
    are then AccumulateGrad. Such a hook's grad_input starts with the input's gradient; a node
    inside the module (a ReLU before the sum, the weight's transpose of a Linear) means
    grad_input is not the module's (docs/pytorch-facts.md#non-full-backward-hook-grads)."""
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name == "_maybe_warn_non_full_backward_hook":
            loc = f.f_locals
            return loc.get("self"), _single_node(loc.get("grad_fn"), loc.get("inputs") or ())
        f = f.f_back
    return None, False


def _single_node(grad_fn: Any, inputs: Any) -> bool:
    if grad_fn is None:
        return False
    own = {i.grad_fn for i in inputs if getattr(i, "grad_fn", None) is not None}
    for node, _ in getattr(grad_fn, "next_functions", ()):
        if node is None or node in own or type(node).__name__ == "AccumulateGrad":
            continue
        return False
    return True


def _registration_site(module: Any, frame: types.FrameType | None) -> Site | None:
    """The ``register_backward_hook(hook)`` call for one of ``module``'s hooks, in the files of
    the user's frames on the stack and of the hook itself."""
    hooks = [h for h in getattr(module, "_backward_hooks", {}).values()]
    names = {getattr(getattr(h, "func", h), "__name__", None) for h in hooks} - {None, "<lambda>"}
    files: list[str] = []
    for h in hooks:
        code = getattr(getattr(h, "func", h), "__code__", None)
        if code is not None:
            files.append(code.co_filename)
    f = frame
    while f is not None:
        files.append(f.f_code.co_filename)
        f = f.f_back
    from gradtrace.runtime.fuse import is_user_file

    for path in dict.fromkeys(files):
        if not is_user_file(path):
            continue
        lines = linecache.getlines(path)
        try:
            tree = ast.parse("".join(lines))
        except (SyntaxError, ValueError, RecursionError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr == "register_backward_hook" and node.args:
                arg = node.args[0]
                name = arg.attr if isinstance(arg, ast.Attribute) else getattr(arg, "id", None)
                if name in names or (not names and isinstance(arg, ast.Lambda)):
                    return Site(path, node.lineno, "", node.col_offset)
    return None


# message -> check (each returns the event to note, or None)
TABLE: tuple[tuple[re.Pattern[str], Check], ...] = tuple((re.compile(a), b) for a, b in (
    (r"^Detected call of `lr_scheduler\.step\(\)` before `optimizer\.step\(\)`", _scheduler),
    (r"^Using a target size \((.*?\))\) that is different to the input size \((.*?\))\)",
     _target_size),
    (r"^Using a non-full backward hook when .*This hook will be missing some grad_",
     _hook_registration),
    (r"^The \.grad attribute of a Tensor that is not a leaf Tensor is being accessed",
     _non_leaf_grad),
    (r"^None of the inputs have requires_grad=True\. Gradients will be None",
     _plain("checkpoint-no-grad")),
    (r"^optimizer contains a parameter group with duplicate parameters",
     _plain("parameters-listed-twice")),
    (r"^`parameters` is an empty generator, no gradient clipping will occur",
     _plain("clip-of-consumed-generator")),
))


def note_warning(text: str, site: Site, frame: types.FrameType | None, tracer: Any) -> None:
    """Note the event a revealing warning stands for (NOTE [revealing warnings])."""
    for rx, check in TABLE:
        m = rx.search(text)
        if m is None:
            continue
        got = check(m, site, frame, tracer)
        if got is not None:
            kind, where, op, related = got
            tracer.state.note(kind, where, op, "", related)
        return
