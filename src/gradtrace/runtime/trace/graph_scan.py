"""One walk of a loss's graph at the first backward() calls: what the graph itself shows.

# NOTE [copied leaf]
A torch call that, with grad mode on, takes a tensor that requires grad and returns a *leaf*
that requires grad (``out.new_tensor(out, requires_grad=True)``, ``torch.tensor(t,
requires_grad=True)``, whatever the op) copies the values into a new tensor with no graph:
backward() stops at that leaf and fills its ``.grad``, and nothing reaches the parameters it
was computed from. The tracer records such a call as a cut (reason ``copy``) when it happens;
the walk here finds the copies the loss reaches (an ``AccumulateGrad`` node of such a leaf), and
the finding is made at the end only when the copy is no Parameter an optimizer holds and a
leaf that requires grad lies upstream of it.

# NOTE [custom Function returning None]
A ``torch.autograd.Function`` whose ``backward`` returns None for an input that requires grad
(a gradient recomputed with grad mode off, so that ``autograd.grad(..., allow_unused=True)``
gives None; a ``return grad, None`` for a weight) leaves that input, and every leaf behind it,
without a gradient, silently. The walk puts a hook on the node of each Function whose backward
is user code (no torch or library code); the hook sees what backward returned, next to which
inputs need a gradient (``next_functions``). The tracer's own mode is off while backward()
runs, so a pre-hook on the same node watches that one backward with a small mode of its own
(:class:`_InBackward`, popped by the hook, or when the backward() ends if it raised). The
finding names the op inside backward that took a tensor requiring grad and made one without
grad, when an ``autograd.grad`` after it there returned None (a gradient recomputed with grad
mode off); else the backward's (last) return line; the Function's forward is related.

# NOTE [gradient replaced through another input]
A straight-through Function (``replace_grad(x_forward, x_backward)``: forward returns
``x_forward``, backward returns ``None, grad``) returns None for an input on purpose: the
gradient goes to the other input, and every leaf behind the first is behind the second as well
(``x_backward`` computed from ``x_forward``, or the other way round). An input whose leaves are
all reached through inputs that did get a gradient loses nothing, and is not reported.

# NOTE [zero-derivative ops]
The walk also collects the user lines of the ``round``/``sign``/``floor``/``ceil``/``trunc`` ops
in the graph of a loss: their gradient is zero everywhere, so when the loss reaches the
parameters only through one, every gradient is exactly 0 and the optimizer's steps change
nothing (GT828 then leads with the op, not the step; :func:`.fix_lines.zero_gradient_op`).

The walk runs at the first three backward() calls only, at most ``limit`` nodes each.
"""
from __future__ import annotations

import dis
import sys
import weakref
from typing import Any

import torch
from torch.overrides import TorchFunctionMode, _get_current_function_mode_stack

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make
from gradtrace.runtime.frames import Site, is_internal
from gradtrace.runtime.trace.classify import first_grad_tensor
from gradtrace.runtime.trace.constant_input import (apply_site, arg_positions,
                                                   constant_by_design, kept_inputs)
from gradtrace.runtime.trace.detached_feed import note_walk
from gradtrace.runtime.trace.drowned_log import check_logs
from gradtrace.runtime.trace.fix_lines import ZERO_DERIVATIVE
from gradtrace.runtime.trace.loose_leaves import note_leaf
from gradtrace.runtime.trace.reached_cuts import seen_in_walk
from gradtrace.runtime.trace.records import created_site, node_name
from gradtrace.runtime.trace.score_weight import check_weight
from gradtrace.runtime.trace.paired_mean import REDUCTIONS, check_pairing
from gradtrace.runtime.trace.soft_target import check_product

Tensor = torch.Tensor
_CFUNC = torch.autograd.function.BackwardCFunction


def scan_loss_graph(state: Any, root: Tensor, limit: int = 4000) -> None:
    """Zero-derivative ops, copied leaves and user Functions in the graph of ``root``."""
    todo = [getattr(root, "grad_fn", None)]
    seen: set[int] = set()
    found, cuts, met = state.zero_ops, state.cuts, state.met_nodes
    state.walks += 1
    uses: dict[int, list[Any]] = {}  # NOTE [sigmoid kept as probabilities] (loss_input.py)
    # marked nodes met, and every leaf: NOTE [term detached from the model it should train]
    hits: list[Any] = []
    leaves: set[int] = set()
    check_logs(state, root)  # NOTE [epsilon that drowns a log's gradient]
    while todo and len(seen) < limit:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if met and id(node) in met:  # NOTE [cut that reaches the loss]
            seen_in_walk(state, node)
            hits.append(node)
        name = type(node).__name__
        if name == "AccumulateGrad":
            var = node.variable
            leaves.add(id(var))
            if cuts:
                _copied_leaf(state, var)
            note_leaf(state, var)  # NOTE [hand-made leaf left out of the optimizer]
            continue
        if name in ZERO_DERIVATIVE and len(found) < 4:
            site = created_site(node)[0]
            if site is not None and all(site != s for s, _ in found):
                found.append((site, node_name(node).lower()))
        elif isinstance(node, _CFUNC):
            _watch_function(state, node)
        elif name == "MulBackward0":
            check_product(state, node)  # NOTE [soft target not detached]
            check_weight(state, node)  # NOTE [reward weight not detached]
        elif name in REDUCTIONS:
            check_pairing(state, node)  # NOTE [reduced before it was paired]
        try:
            nxt = [n for n, _ in node.next_functions]
        except (AttributeError, RuntimeError):
            continue
        todo.extend(nxt)
        for n in nxt:
            if n is not None and type(n).__name__ == "SigmoidBackward0":
                uses.setdefault(id(n), [n, 0])[1] += 1
    if hits:
        note_walk(state, hits, leaves)
    for n, count in uses.values():
        site = created_site(n)[0]
        if site is not None:
            state.sigmoid_uses[site] = max(count, state.sigmoid_uses.get(site, 0))


def _copied_leaf(state: Any, var: Tensor) -> None:
    hit = state.cuts.get(id(var))
    if hit is None or hit[0]() is not var or hit[1].reason != "copy" \
            or isinstance(var, torch.nn.Parameter):
        return
    counter = state.note("copied-leaf-reached", hit[1].site, hit[1].op)
    counter.extra["cut"] = hit[1]
    counter.extra["leaf"] = hit[0]


def _watch_function(state: Any, node: Any) -> None:
    cls = getattr(node, "_forward_cls", None)
    code = getattr(getattr(cls, "backward", None), "__code__", None)
    if code is None or is_internal(code) or len(state.fn_watch) >= 64:
        return
    edges = tuple(n for n, _ in node.next_functions)
    needs = tuple(n is not None for n in edges)
    if not any(needs) or id(node) in state.fn_watch:
        return
    state.fn_watch[id(node)] = None
    me = weakref.ref(state)
    kept = kept_inputs(node, edges)  # NOTE [input the Function treats as a constant]
    at = arg_positions(node, edges)
    inside = _InBackward(code)

    def starts(_grad_outputs: tuple[Any, ...]) -> None:
        st = me()
        if st is not None and not st.fn_active:
            inside.__enter__()
            st.fn_active.append(inside)

    def returned(grad_inputs: tuple[Any, ...], _grad_outputs: tuple[Any, ...]) -> None:
        st = me()
        if st is None:
            return
        if st.fn_active and st.fn_active[-1] is inside:  # (a nested one was never pushed)
            leave_backwards(st)
        missing = [i for i, g in enumerate(grad_inputs) if g is None and i < len(needs)
                   and needs[i]]
        if missing:
            missing = _uncovered(edges, grad_inputs, missing)
        if missing:
            rec = st.fn_none.setdefault((cls, code), [set(), None, None, False, set()])
            rec[0].update(missing)
            rec[3] = rec[3] or any(i in kept or i not in at for i in missing)
            rec[4].update(at[i] for i in missing if i in at)
            if rec[2] is None and inside.none is not None:
                rec[1], rec[2] = inside.off, inside.none

    try:
        node.register_prehook(starts)
        node.register_hook(returned)
    except RuntimeError:  # pragma: no cover - a node that takes no hooks
        pass


def _leaves(start: Any, limit: int = 4000) -> set[int] | None:
    """The ids of the leaves (``AccumulateGrad`` nodes) upstream of ``start``; None past
    ``limit`` nodes."""
    seen: set[int] = set()
    leaves: set[int] = set()
    todo = [start]
    while todo:
        n = todo.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        if len(seen) > limit:
            return None
        if type(n).__name__ == "AccumulateGrad":
            leaves.add(id(n))
            continue
        try:
            todo.extend(m for m, _ in n.next_functions)
        except (AttributeError, RuntimeError):
            return None
    return leaves


def _uncovered(edges: tuple[Any, ...], grads: tuple[Any, ...], missing: list[int]) -> list[int]:
    """NOTE [gradient replaced through another input]: the inputs of ``missing`` that have a
    leaf no input given a gradient also reaches."""
    given = [edges[j] for j, g in enumerate(grads) if g is not None and j < len(edges)
             and edges[j] is not None]
    if not given:
        return missing
    covered: set[int] = set()
    for e in given:
        got = _leaves(e)
        if got is None:
            return missing
        covered |= got
    out = []
    for i in missing:
        got = _leaves(edges[i])
        if got is None or not got <= covered:
            out.append(i)
    return out


def leave_backwards(state: Any) -> None:
    """Pop the watch of a custom backward (also when that backward raised: called when the
    backward() that ran it ends)."""
    while state.fn_active:
        mode = state.fn_active.pop()
        try:
            stack = _get_current_function_mode_stack()
            if stack and stack[-1] is mode:  # (never another mode: a backward that raised
                mode.__exit__(None, None, None)  # on another thread left it there)
        except Exception:  # pragma: no cover - a mode stack changed under us
            pass


class _InBackward(TorchFunctionMode):
    """Watches one run of a user Function's backward, where grad mode is off and the tracer's
    own mode is not active: the first op there that took a tensor requiring grad and made one
    without grad, and the first ``autograd.grad`` there that returned None (lines of
    ``code``)."""

    def __init__(self, code: Any) -> None:
        super().__init__()
        self.code = code
        self.off: int | None = None
        self.none: int | None = None

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        try:
            if func is torch.autograd.grad:
                if self.none is None and isinstance(out, tuple) and None in out:
                    self.none = self._line()
            elif self.off is None and isinstance(out, Tensor) and not out.requires_grad \
                    and not torch.is_grad_enabled() and first_grad_tensor(args) is not None:
                self.off = self._line()
        except Exception:  # pragma: no cover - never break the user's backward
            pass
        return out

    def _line(self) -> int | None:
        f: Any = sys._getframe(2)
        while f is not None and f.f_code is not self.code:
            f = f.f_back
        return None if f is None else f.f_lineno


def _return_line(code: Any) -> Site:
    """The last ``return`` of ``code`` (its first line when none is found)."""
    lines = [i.positions.lineno for i in dis.get_instructions(code)
             if i.opname in ("RETURN_VALUE", "RETURN_CONST") and i.positions
             and i.positions.lineno]
    return Site(code.co_filename, max(lines) if lines else code.co_firstlineno, code.co_name)


def function_findings(state: Any) -> list[Finding]:
    """NOTE [custom Function returning None]: one finding per Function class."""
    from gradtrace.runtime.trace.needs_guard import guard_line

    out: list[Finding] = []
    for (cls, code), (missing, off, none, known, args) in list(state.fn_none.items()):
        ret = _return_line(code)
        fwd = getattr(getattr(cls, "forward", None), "__code__", None)
        which = ", ".join(f"#{i + 1}" for i in sorted(missing))
        site, related = ret, []
        fix = ("return the gradient for every input that requires grad (compute it inside "
               "`with torch.enable_grad():` when backward needs a graph, or write the "
               "derivative out)")
        why = (f"`{cls.__name__}.backward` returns None here for tensor input {which}, which "
               "requires grad")
        if none is not None and off is not None and off <= none:
            site = Site(code.co_filename, off, code.co_name)
            related = [(Site(code.co_filename, none, code.co_name), "autograd.grad returns "
                        "None here: the graph it differentiates was never built"),
                       (ret, f"backward returns None for tensor input {which} here")]
            why = (f"this recomputation inside `{cls.__name__}.backward` runs with grad mode "
                   "off (backward() turns it off), so it builds no graph, autograd.grad over "
                   f"it returns None, and backward returns None for tensor input {which}, "
                   "which requires grad")
        guard = guard_line(code, missing) if site is ret else None
        if guard is not None:  # NOTE [gradient guarded by another input's flag]
            site, related = Site(code.co_filename, guard, code.co_name), [
                (ret, f"backward returns None for tensor input {which} here")]
            why = (f"`{cls.__name__}.backward` computes the gradient of tensor input {which} "
                   "only when this test of another input's `needs_input_grad` holds, so it "
                   f"returns None for {which}, which requires grad")
        applied = apply_site(cls, code) if site is ret and not known else None
        if applied is not None and constant_by_design(code, args):  # NOTE [input the Function treats as a constant]
            site, related = applied, [(ret, f"backward returns None for tensor input {which} "
                                            "here, by design: forward keeps nothing of it")]
            fix = ("hand this input a tensor that needs no gradient, or compute the result "
                   "with differentiable ops (a straight-through estimator around the "
                   "non-differentiable part only)")
            why = (f"`{cls.__name__}.apply` is handed a tensor that requires grad as tensor "
                   f"input {which}, which its backward treats as a constant (forward keeps "
                   "nothing of it for backward, and backward returns None for it)")
        if fwd is not None:
            related.append((Site(fwd.co_filename, fwd.co_firstlineno, fwd.co_name),
                            f"`{cls.__name__}.forward`"))
        out.append(make("GT845", site, f"{why}; that input, and every leaf behind it, gets no "
                        "gradient from this Function, and nothing fails", fix=fix,
                        related=related))
    return out


def copied_leaf_findings(state: Any, data: Any) -> list[Finding]:
    """NOTE [copied leaf]: a copy the loss reached, cut off from parameters an optimizer steps
    (a copy cut off from other leaves only, an adversarial input rebuilt each round, is
    deliberate)."""
    out: list[Finding] = []
    live = [rec.ref() for rec in list(data.optimizers.values()) if rec.ref() is not None]
    held = {id(p) for opt in live for g in opt.param_groups for p in g["params"]}
    stepped = {id(p) for rec in list(data.optimizers.values()) if rec.steps and rec.ref()
               for g in rec.ref().param_groups for p in g["params"]}
    for (kind, site, _), counter in list(state.events.items()):
        if kind != "copied-leaf-reached":
            continue
        cut, leaf = counter.extra["cut"], counter.extra["leaf"]()
        if (leaf is not None and id(leaf) in held) or \
                not state.cut_upstream.get(cut, frozenset()) & stepped:
            continue
        out.append(make(code_for("graph-copied-into-new-leaf", "GT104"), site,
                        f"`{cut.op}` copies a tensor computed from trained parameters into a "
                        "new leaf that requires grad; the loss reaches the copy, so backward() "
                        "stops there (it fills the copy's .grad) and those parameters get no "
                        "gradient through this term",
                        fix="combine the tensors with `torch.stack(...)` or `torch.cat(...)`, "
                            "which keep the graph" if "[" in cut.op else
                            "use the tensor itself (or `.clone()`, which keeps the graph)",
                        severity="warning"))
    return out
