"""Guards for training code: a backward that cannot crash on a bad loss, a loss checker, and
an assertion that grad mode is on.

* :data:`safe_backward` -- ``safe_backward(loss, optimizer=None, *, skip_nonfinite=True)``
  runs ``backward()`` (and ``optimizer.step()``) unless the loss or the gradients are
  non-finite, in which case the step is skipped and counted. A loss that is not a tensor
  raises a :class:`LossTypeError` (a ``TypeError``) that names its type and how it most
  likely lost its graph.
* :func:`loss_guard` -- decorator: the function must return a scalar loss tensor with a graph
  (the graph is only required while grad mode is on, so validation under ``no_grad`` passes).
* :func:`requires_grad_mode` -- decorator: the function must be called with grad mode on;
  otherwise a :class:`GradModeError` names the ``with torch.no_grad():`` (or
  ``inference_mode``, ``set_grad_enabled(False)``, ``@torch.no_grad()``) that turned it off.

Inputs never need ``requires_grad=True`` for parameters to get gradients
(pytorch-facts.md#inputs-need-no-grad),
so nothing here asserts it.

Example::

    from gradtrace.guards import safe_backward, loss_guard

    @loss_guard
    def compute_loss(model, x, y):
        return F.cross_entropy(model(x), y)

    for x, y in loader:
        optimizer.zero_grad()
        if not safe_backward(compute_loss(model, x, y), optimizer):
            continue                      # non-finite loss or gradients: step skipped
    print(safe_backward.skipped, "steps skipped")
"""
from __future__ import annotations

from gradtrace.guards._backward import (BackwardOutcome, GradModeError, LossShapeError,
                                        LossTypeError, NoGraphError, SafeBackward, check_loss,
                                        safe_backward)
from gradtrace.guards._decorators import loss_guard, requires_grad_mode
from gradtrace.guards._locate import GradSwitch, find_grad_switch

__all__ = ["BackwardOutcome", "GradModeError", "GradSwitch", "LossShapeError", "LossTypeError",
           "NoGraphError", "SafeBackward", "check_loss", "find_grad_switch", "loss_guard",
           "requires_grad_mode", "safe_backward"]
