"""Where a non-finite gradient is born: the op whose backward turns finite gradients into
NaN/Inf (``acos`` at 1, ``sqrt`` at 0, ``logsumexp`` of an all ``-inf`` row, ``0 / 0``...).

# NOTE [NaN origin]
Checking every gradient of every backward for NaN would cost as much as the backward itself, so
the hunt runs on few backward passes only: the first ``backward()`` of the session (short
scripts often have no other; ``torch.autograd.grad`` calls before it, an attack's input
gradient or a penalty's, are not hunted and do not use it up: MAIR's MART runs a PGD attack
before its loss's backward) and the one after an optimizer step saw a non-finite gradient
(NOTE [NaN replay] in watch/nan_replay.py does the same for ``watch``). For that pass, every node of the graph gets
a post-hook (``Node.register_hook``, one handle each, all removed when the backward returns)
that compares the gradients flowing in and out: the first node whose incoming gradients are
finite and whose outgoing ones are not is the origin, and its creation site
(``grad_fn.metadata``, written by the provenance mode) is the user's line. The hooks return
None, so the gradients are untouched; they keep only the first origin found, as plain values.
Under anomaly mode every backward is hunted (its own cost dwarfs the hooks'), and pre-hooks note
the node the engine entered last: anomaly mode's NaN check raises before post-hooks run, so
that node is the one its "returned nan values" names (diagnose_crash.anomaly_nan).
Anomaly mode checks for NaN only: a backward that passes on Inf (``sqrt`` at 0: ``g / 0``) goes
through, and the post-hooks record it as the origin; when the node anomaly mode stops at received
that Inf (``0 * inf`` in ``mul``'s backward), the Inf's origin is the line to change
(NOTE [Inf before anomaly's NaN]).
"""
from __future__ import annotations

import logging
import weakref
from typing import Any

import torch

from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.custom_backward import custom_backward_site
from gradtrace.runtime.trace.records import created_site, node_name
from gradtrace.runtime.trace.saturated import SATURATED, saturated_sigmoid

_LIMIT = 20_000  # nodes hooked at most (a larger graph is hunted in its first part only)
# NOTE [gradient blown up]
# The hunted pass also notes the first node whose backward, from finite gradients, passes on
# ones at least _BLOWUP times larger (max abs) and at least _HUGE in size: `F.normalize` of an
# all-zero vector divides by its eps (1e-12), a finite gradient of 1e12 that no NaN check sees.
# Reported (GT893) only when a leaf's gradient of that pass ended up at least _HUGE in size, and
# no NaN was born in it (the NaN's origin is the finding then). A loss scale (GradScaler's
# 65536, 2**24) stays far below the factor; so do ordinary divisions by a batch statistic. A
# product with one number (a loss weighted by 1e9: `Mul` whose other operand has one element)
# is the program's own weight, whatever the input: not an op at a bad input, never named (read
# when the hooks are placed: the engine frees the saved operands before a post-hook runs).
_BLOWUP = 1e8
_HUGE = 1e6


def _weighted(node: Any) -> bool:
    """``node`` multiplies by a single number (``loss * 1e9``): NOTE [gradient blown up]."""
    if type(node).__name__ != "MulBackward0":
        return False
    for attr in ("_saved_other", "_saved_self"):
        try:
            t = getattr(node, attr, None)
        except RuntimeError:
            continue
        if isinstance(t, torch.Tensor) and t.numel() == 1:
            return True
    return False


def _size(grads: Any) -> float:
    """The largest absolute value among ``grads`` (0.0 when none is a float tensor)."""
    out = 0.0
    for g in grads:
        if isinstance(g, torch.Tensor) and g.is_floating_point() and g.numel():
            out = max(out, float(g.detach().abs().max()))
    return out


def _finite(grads: Any) -> bool:
    for g in grads:
        if isinstance(g, torch.Tensor) and g.is_floating_point() and g.numel() \
                and not bool(torch.isfinite(g).all()):
            return False
    return True


def _receiver_site(node: Any, grad_inputs: Any) -> tuple[Site, str] | None:
    """# NOTE [NaN born in a library op]
    The node that turned finite gradients into NaN/Inf has no line of the user's: the op ran
    inside a library's module (``nn.KLDivLoss()(log_p, target)``: with a softmax ``target``
    that underflowed to 0, the gradient it sends to the target is ``log 0 = -inf``). The
    user's line is then the one that made the input receiving the non-finite gradient (the
    softmax target: MAIR's MART): the next node along the first non-finite output, when it
    has a creation site."""
    try:
        for g, (nxt, _) in zip(grad_inputs, node.next_functions):
            if nxt is not None and isinstance(g, torch.Tensor) and not _finite((g,)):
                site, _ = created_site(nxt)
                return None if site is None else (site, "received:" + node_name(node))
    except (RuntimeError, AttributeError, TypeError):
        pass
    return None


class Hunt:
    """The hooks of one hunted backward pass; :meth:`remove` takes them out."""

    def __init__(self, roots: Any) -> None:
        self.origin: tuple[Site, str] | None = None
        self.blowup: tuple[Site, str, float, float] | None = None  # NOTE [gradient blown up]
        self.weighted: set[int] = set()  # ids of `Mul` nodes by a single number
        self.entered: Any = None  # under anomaly mode, the node the engine entered last
        self.entered_inf = False  # its incoming gradients held the Inf of ``origin``
        self.handles: list[Any] = []
        anomaly = torch.is_anomaly_enabled()
        self.leaves: list[weakref.ref[torch.Tensor]] = []
        seen: dict[int, Any] = {}  # keeps the node wrappers alive during the walk: ids unique
        stack = [getattr(r, "grad_fn", None) for r in roots]
        while stack and len(seen) < _LIMIT:
            node = stack.pop()
            if node is None or id(node) in seen:
                continue
            seen[id(node)] = node
            var = getattr(node, "variable", None)
            if var is not None:  # AccumulateGrad: a leaf's sink, no op of the user's
                if len(self.leaves) < 256:
                    self.leaves.append(weakref.ref(var))
                continue
            try:
                if _weighted(node):
                    self.weighted.add(id(node))
                self.handles.append(node.register_hook(self._hook_for(node)))
                if anomaly:  # its NaN check raises before post-hooks run: see who ran last
                    self.handles.append(node.register_prehook(self._enter_for(node)))
            except (RuntimeError, AttributeError, TypeError):
                continue
            stack.extend(n for n, _ in node.next_functions if n is not None)

    def _hook_for(self, node: Any) -> Any:
        def hook(grad_inputs: Any, grad_outputs: Any) -> None:
            if self.origin is not None:
                return None
            try:
                with torch._C.DisableTorchFunction():
                    if not _finite(grad_outputs):
                        return None
                    if not _finite(grad_inputs):
                        site, _ = created_site(node)
                        if site is not None and (sat := saturated_sigmoid(node)) is not None:
                            self.origin = (sat, SATURATED + node_name(node))  # NOTE [log of a saturated sigmoid]
                        elif site is not None:
                            self.origin = (site, node_name(node))
                        elif hasattr(node, "_forward_cls"):  # NOTE [NaN born in a custom backward]
                            self.origin = custom_backward_site(node, next(
                                i for i, g in enumerate(grad_inputs) if not _finite((g,))))
                        else:
                            self.origin = _receiver_site(node, grad_inputs)
                    elif self.blowup is None and id(node) not in self.weighted:
                        size = _size(grad_inputs)  # NOTE [gradient blown up]
                        if size >= _HUGE:
                            before = _size(grad_outputs)
                            site, _ = created_site(node)
                            if site is not None and 0 < before * _BLOWUP <= size:
                                self.blowup = (site, node_name(node), before, size)
            except Exception:  # a hook of ours must never disturb the user's backward
                pass
            return None

        return hook

    def _enter_for(self, node: Any) -> Any:
        def prehook(grad_outputs: Any) -> None:
            self.entered = node
            if self.origin is not None:  # an Inf was born (anomaly lets it pass): does it come in?
                try:
                    with torch._C.DisableTorchFunction():
                        self.entered_inf = not _finite(grad_outputs)
                except Exception:  # a hook of ours must never disturb the user's backward
                    pass
            return None

        return prehook

    def bad_leaf(self) -> torch.Tensor | None:
        """A leaf of the hunted graph whose ``.grad`` holds NaN/Inf (the NaN reached it)."""
        for ref in self.leaves:
            t = ref()
            g = None if t is None else t.grad
            if g is not None and not _finite((g,)):
                return t
        return None

    def huge_leaf(self) -> torch.Tensor | None:
        """A leaf of the hunted graph whose finite ``.grad`` is at least _HUGE in size."""
        for ref in self.leaves:
            t = ref()
            g = None if t is None else t.grad
            if g is not None and g.is_floating_point() and _finite((g,)) and _size((g,)) >= _HUGE:
                return t
        return None

    def remove(self) -> None:
        while self.handles:
            self.handles.pop().remove()


def start_hunt(state: Any, func: Any, roots: list[torch.Tensor]) -> Hunt | None:
    """Hooks for the backward about to run if NOTE [NaN origin] hunts it, else None."""
    if func is torch.autograd.grad or state.nan_origin is not None or not roots or not (
            not state.backward_hunted or state.nan_hunt_next or torch.is_anomaly_enabled()):
        return None
    state.nan_hunt_next = False
    state.backward_hunted = True
    try:
        return Hunt(roots)
    except Exception as exc:
        _oops(exc)
        return None


def end_hunt(state: Any, hunt: Hunt) -> None:
    """Remove the hunt's hooks; record the origin if the NaN reached a leaf's ``.grad``."""
    hunt.remove()
    try:
        leaf = hunt.bad_leaf() if hunt.origin is not None else None
        if leaf is not None:
            from gradtrace.runtime.trace.hooks import param_name

            data = state.hooks_data
            name = param_name(data, leaf) if data is not None else \
                f"tensor of shape {list(leaf.shape)}"
            state.nan_origin = (*hunt.origin, name)
        leaf = hunt.huge_leaf() if hunt.origin is None and hunt.blowup is not None \
            and state.blowup is None else None
        if leaf is not None:  # NOTE [gradient blown up]
            from gradtrace.runtime.trace.hooks import param_name

            data = state.hooks_data
            name = param_name(data, leaf) if data is not None else \
                f"tensor of shape {list(leaf.shape)}"
            site, op, before, size = hunt.blowup
            state.blowup = (site, op, name, before, size)
    except Exception as exc:
        _oops(exc)


def _oops(exc: BaseException) -> None:
    """A bug of ours: logged (raised under GRADTRACE_STRICT=1), never the user's problem."""
    from gradtrace.env import strict

    if strict():
        raise exc
    logging.getLogger(__name__).debug("gradtrace: NaN hunt failed", exc_info=exc)
