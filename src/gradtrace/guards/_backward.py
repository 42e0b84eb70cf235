"""``safe_backward``: a backward (+ optimizer step) that skips non-finite steps and counts them."""
from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from typing import Any

from gradtrace.errors import GradtraceError
from gradtrace.guards._locate import active_trace_state, describe_number, find_grad_switch

LOG = logging.getLogger(__name__)


class LossTypeError(GradtraceError, TypeError):
    """The loss is not a tensor (a Python/numpy number, None, ...)."""


class LossShapeError(GradtraceError, ValueError):
    """The loss tensor has more (or fewer) than one element, or a complex/integer dtype."""


class NoGraphError(GradtraceError, RuntimeError):
    """The loss tensor has no autograd graph while grad mode is on."""


class GradModeError(GradtraceError, RuntimeError):
    """A function that needs grad mode was called with grad mode off (or in inference mode)."""


# ---------------------------------------------------------------------------------------------
# loss checks shared by safe_backward and loss_guard
# ---------------------------------------------------------------------------------------------
def _not_a_tensor(loss: Any, who: str, where: str, frame: Any = None) -> LossTypeError:
    """The error for a loss that is not a tensor, saying how it probably became one."""
    state = active_trace_state()
    origin = ""
    if state is not None and isinstance(loss, (float, int, complex)):
        try:
            cut = state.item_origin(loss)
        except Exception:  # the tracer's record is a bonus, never a requirement
            cut = None
        if cut is not None:
            origin = f" It came from `{cut.op}` at {cut.site.path}:{cut.site.line}."
    if not origin and isinstance(loss, (float, int, complex)):  # untraced: the assignment
        from gradtrace.guards._locate import argument_assignment

        hit = argument_assignment(frame)
        if hit is not None:
            from gradtrace.runtime.build import display_path

            origin = f" It was assigned at {display_path(hit[0])}:{hit[1]} (`{hit[2]}`)."
    return LossTypeError(f"{who} {where}{describe_number(loss)}.{origin} Pass the loss tensor "
                         "itself; call .item() only for logging.")


def check_loss(loss: Any, who: str, where: str = "got ", *, graph: str = "always",
               frame: Any = None) -> Any:
    """Raise the precise error if ``loss`` cannot be backpropagated; return it otherwise.

    ``graph``: ``"always"`` (backward needs a graph), ``"grad-mode"`` (only while grad mode is
    on, so validation losses computed under ``torch.no_grad()`` pass) or ``"never"``.
    ``frame`` is where to start looking for the statement that turned grad mode off.
    """
    import torch

    if not isinstance(loss, torch.Tensor):
        raise _not_a_tensor(loss, who, where, frame)
    shape = tuple(loss.shape)
    if loss.is_complex():
        raise LossShapeError(f"{who} {where}a complex loss ({loss.dtype}); backward() needs a "
                             "real scalar: take .abs() or .real first.")
    if loss.numel() != 1:
        how = ("an empty tensor (did the batch or the mask select nothing?)" if loss.numel() == 0
               else f"{loss.numel()} elements")
        raise LossShapeError(f"{who} {where}a loss of shape {shape} ({how}); backward() needs a "
                             "single number: reduce it with .mean() or .sum() (a loss built "
                             "with reduction='none' must be reduced).")
    grad_on = torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
    if loss.requires_grad or graph == "never" or (graph == "grad-mode" and not grad_on):
        return loss
    raise NoGraphError(f"{who} {where}a loss tensor with no autograd graph (requires_grad=False, "
                       "grad_fn=None), so backward() would fail with 'element 0 of tensors "
                       f"does not require grad'. {_why_no_graph(loss, grad_on, frame)}")


def _why_no_graph(loss: Any, grad_on: bool, frame: Any) -> str:
    """The cause of a graph-less loss, as precisely as is known."""
    import torch

    if torch.is_inference_mode_enabled() or (hasattr(loss, "is_inference") and loss.is_inference()):
        return ("It was computed under torch.inference_mode(); compute the training loss "
                "outside it.")
    if not grad_on:
        sw = find_grad_switch(frame)
        where = f" by {sw.describe()}" if sw else " by the caller (torch.no_grad(), " \
            "inference_mode() or set_grad_enabled(False) further up the call stack)"
        return f"Grad mode is off here: it was turned off{where}."
    state = active_trace_state()
    cut = None
    if state is not None:
        try:
            cut = state.cut_of(loss)
        except Exception:  # the tracer's record is a bonus
            cut = None
    if cut is not None:
        return f"It left the graph at {cut.site.path}:{cut.site.line}: {cut.describe()}."
    return ("It was computed from values that left the graph (.detach(), .item(), "
            "torch.tensor(...) of a result, numpy), under torch.no_grad()/inference_mode, or "
            "every parameter it depends on is frozen (requires_grad=False).")


# ---------------------------------------------------------------------------------------------
# safe_backward
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BackwardOutcome:
    """What one :data:`safe_backward` call did. Truthy unless the step was skipped.

    ``ran_backward``: backward() ran. ``stepped``: optimizer.step() ran. ``skipped``: the
    update was skipped because of ``reason`` (non-finite loss or gradients).
    ``skipped_total`` / ``calls_total``: the guard's counters after this call.
    """

    ran_backward: bool
    stepped: bool
    skipped: bool
    reason: str
    skipped_total: int
    calls_total: int

    def __bool__(self) -> bool:
        return not self.skipped


class SafeBackward:
    """A guarded ``backward()`` (+ ``optimizer.step()``) that counts the steps it skips.

    The module-level :data:`safe_backward` is one shared instance; make your own
    ``SafeBackward()`` for separate counters. Attributes: ``calls``, ``skipped``, ``stepped``
    and ``last`` (the last :class:`BackwardOutcome`).
    """

    def __init__(self) -> None:
        self.calls = 0
        self.skipped = 0
        self.stepped = 0
        self.last: BackwardOutcome | None = None

    def reset(self) -> None:
        """Set every counter back to zero."""
        self.calls = self.skipped = self.stepped = 0
        self.last = None

    def __call__(self, loss: Any, optimizer: Any = None, *, skip_nonfinite: bool = True,
                 check_grads: bool = True, zero_grad: bool = True,
                 retain_graph: bool = False) -> BackwardOutcome:
        """Backpropagate ``loss``; with an ``optimizer``, also step it (and zero its grads).

        Raises :class:`LossTypeError` (a TypeError) for a loss that is not a tensor (e.g. the
        float of ``loss.item()``), :class:`LossShapeError` for a non-scalar loss and
        :class:`NoGraphError` for a loss without a graph. With ``skip_nonfinite`` a NaN/Inf
        loss skips backward, and (with an optimizer) NaN/Inf gradients skip the step; in both
        cases the optimizer's gradients are cleared so they cannot leak into the next step.
        Checking the gradients reads each one once (one fused max-abs per tensor, one host
        sync; measured 1.04x a plain step on a small CNN, 1.25x on a memory-bound MLP);
        ``check_grads=False`` checks the loss only. Without an optimizer the gradients are not
        checked. ``zero_grad`` clears the gradients after a successful step. Note: under
        DistributedDataParallel, skipping backward on one rank only makes the others wait.
        """
        import torch

        if optimizer is not None and not hasattr(optimizer, "step"):
            raise TypeError(f"safe_backward(): optimizer must be a torch.optim.Optimizer or None, "
                            f"got {type(optimizer).__name__}")
        check_loss(loss, "safe_backward()", "got ", frame=sys._getframe(1))
        self.calls += 1
        if skip_nonfinite and not bool(torch.isfinite(loss.detach()).all()):
            return self._skip(optimizer, f"the loss is {loss.detach().reshape(()).item()}", False)
        loss.backward(retain_graph=retain_graph)
        if optimizer is None:
            return self._done(True, False, False, "")
        if skip_nonfinite and check_grads:
            bad = _nonfinite_grads(_optimizer_grads(optimizer))
            if bad:
                return self._skip(optimizer, f"non-finite gradients in {bad}", True)
        optimizer.step()
        self.stepped += 1
        if zero_grad:
            optimizer.zero_grad()
        return self._done(True, True, False, "")

    def _skip(self, optimizer: Any, reason: str, ran: bool) -> BackwardOutcome:
        self.skipped += 1
        if optimizer is not None:
            optimizer.zero_grad(set_to_none=True)
        LOG.warning("gradtrace.safe_backward: skipped step %d of %d: %s", self.skipped,
                    self.calls, reason)
        return self._done(ran, False, True, reason)

    def _done(self, ran: bool, stepped: bool, skipped: bool, reason: str) -> BackwardOutcome:
        self.last = BackwardOutcome(ran, stepped, skipped, reason, self.skipped, self.calls)
        return self.last

    def __repr__(self) -> str:
        return f"<SafeBackward calls={self.calls} stepped={self.stepped} skipped={self.skipped}>"


def _optimizer_grads(optimizer: Any) -> list[tuple[str, Any]]:
    out = []
    for gi, group in enumerate(optimizer.param_groups):
        for pi, p in enumerate(group["params"]):
            if getattr(p, "grad", None) is not None:
                out.append((f"param_groups[{gi}]['params'][{pi}] (shape {tuple(p.shape)})",
                            p.grad))
    return out


def _nonfinite_grads(named: list[tuple[str, Any]]) -> str:
    """'' if every gradient is finite, else a short description of the bad ones.

    One 2-norm per gradient (``torch._foreach_norm``: NaN and Inf propagate) and one host
    sync. The 2-norm, not the inf-norm: on CPU the inf-norm takes a path about 10x slower.
    A non-finite 2-norm can also come from finite values whose squares overflow (fp16), so
    those few gradients are then checked entry by entry. Per-tensor fallback for sparse
    gradients, mixed devices or an old torch.
    """
    if not named:
        return ""
    import torch

    grads = [g._values() if g.is_sparse else g for _, g in named]
    try:
        norms = torch._foreach_norm(grads, 2.0)
        try:
            peaks = torch.stack(norms)
        except RuntimeError:  # several devices
            peaks = torch.stack([n.to(grads[0].device) for n in norms])
    except (RuntimeError, TypeError, AttributeError):
        peaks = torch.stack([torch.linalg.vector_norm(g).cpu() for g in grads])
    finite = torch.isfinite(peaks)
    if bool(finite.all()):
        return ""
    bad = [n for (n, _), g, ok in zip(named, grads, finite.tolist())
           if not ok and not bool(torch.isfinite(g).all())]
    if not bad:
        return ""
    more = f" and {len(bad) - 1} more" if len(bad) > 1 else ""
    return f"{bad[0]}{more}"


safe_backward = SafeBackward()
"""The shared :class:`SafeBackward` instance: ``safe_backward(loss, optimizer)``;
``safe_backward.skipped`` counts the skipped steps."""
