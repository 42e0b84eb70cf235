"""``assert_gradients_flow``: one training step in a test, and a readable failure if any
trainable parameter gets no gradient, an all-zero one, or a non-finite one.

Example::

    from gradtrace.testing import assert_gradients_flow

    def test_every_layer_learns():
        model = Net()
        x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
        assert_gradients_flow(model, (x, lambda out: F.cross_entropy(out, y)))

The model's state is never changed: see NOTE [restore] in ``_snapshot``.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Iterable, Union

import torch
from torch import nn

from gradtrace.testing._explain import FlowResult, ParamProblem, analyze, match_name, \
    message, render_findings
from gradtrace.testing._snapshot import Snapshot
from gradtrace.testing._usage import Usage, UsageMode

LOG = logging.getLogger(__name__)
__all__ = ["FlowResult", "GradientFlowError", "ParamProblem", "assert_gradients_flow"]
Tensor = torch.Tensor
Step = Union[Callable[[], Any], tuple[Any, Callable[[Any], Any]]]


class GradientFlowError(AssertionError):
    """Raised by :func:`assert_gradients_flow`; ``.result`` holds the details."""

    def __init__(self, message: str, result: FlowResult) -> None:
        super().__init__(message)
        self.result = result


def assert_gradients_flow(model: nn.Module, step: Step, *, allow_none: Iterable[str] = (),
                          allow_zero: Iterable[str] = (), check_finite: bool = True,
                          optimizer: Any = None) -> FlowResult:
    """Run one forward+backward and fail unless every trainable parameter gets a gradient.

    ``step`` is a callable running forward and backward (if it only returns the loss -- a
    tensor, a ``(loss, ...)`` tuple, a dict with ``"loss"`` or an object with ``.loss`` --
    backward is called on it), or a pair ``(inputs, loss_fn)``: ``loss_fn(model(inputs))``
    with ``inputs`` a tensor, a tuple/list (``model(*inputs)``) or a dict
    (``model(**inputs)``). Inputs need not require grad. Fails with a
    :class:`GradientFlowError` (an AssertionError) that lists, by qualified name, every
    trainable parameter whose gradient is None (with why: not used in forward, only used with
    grad mode off, cut at file:line, frozen during the step), all zero, or NaN/Inf
    (``check_finite``), and -- when ``optimizer`` (one or a sequence) is given -- every
    parameter that gets a gradient but is in no optimizer. ``allow_none`` / ``allow_zero``
    are names, glob patterns (``"head.*"``) or module prefixes (``"head"``); a pattern that
    matches no parameter is a ``ValueError``. Frozen parameters (requires_grad=False) are not
    checked. Gradients from ``torch.autograd.grad`` count.

    Never changes the model: parameters, buffers (BatchNorm running stats), ``.grad`` (the
    previous objects are put back), train/eval flags, optimizer state, RNG and grad mode are
    restored, also when the step raises. Returns a :class:`FlowResult`.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"assert_gradients_flow() needs an nn.Module, got {type(model).__name__}")
    named = dict(model.named_parameters())
    trainable = {n: p for n, p in named.items() if p.requires_grad}
    if not trainable:
        raise ValueError(f"{type(model).__name__} has no trainable parameter (all "
                         f"{len(named)} have requires_grad=False): nothing can get a gradient")
    none_pats = _patterns("allow_none", allow_none, named)
    zero_pats = _patterns("allow_zero", allow_zero, named)
    opts = _optimizers(optimizer)
    run = _as_callable(model, step)
    snap = Snapshot(model).take()
    try:
        usage, tracer = _run(run, trainable)
        frozen = tuple(n for n in named if n not in trainable)
        result = analyze(model, trainable, frozen, usage, tracer, none_pats, zero_pats,
                         check_finite, opts)
    finally:
        snap.restore()
    if result.problems:
        raise GradientFlowError(message(model, trainable, result), result)
    return result


# -- arguments ------------------------------------------------------------------------------
def _patterns(arg: str, pats: Iterable[str], named: dict[str, Tensor]) -> tuple[str, ...]:
    if isinstance(pats, str):
        pats = (pats,)
    out = tuple(pats)
    for pat in out:
        if not isinstance(pat, str):
            raise TypeError(f"{arg} takes parameter names or patterns, got {pat!r}")
        if not any(match_name(n, (pat,)) for n in named):
            shown = ", ".join(list(named)[:12]) + (", ..." if len(named) > 12 else "")
            raise ValueError(f"{arg} pattern {pat!r} matches no parameter of the model; its "
                             f"parameters are: {shown}")
    return out


def _optimizers(optimizer: Any) -> list[Any]:
    if optimizer is None:
        return []
    opts = list(optimizer) if isinstance(optimizer, (list, tuple)) else [optimizer]
    for o in opts:
        if not hasattr(o, "param_groups"):
            raise TypeError("optimizer must be a torch.optim.Optimizer (or a sequence of them), "
                            f"got {type(o).__name__}")
    return opts


def _as_callable(model: nn.Module, step: Step) -> Callable[[], Any]:
    if callable(step):
        return step
    if isinstance(step, tuple) and len(step) == 2 and callable(step[1]):
        inputs, loss_fn = step

        def run() -> Any:
            if isinstance(inputs, dict):
                out = model(**inputs)
            elif isinstance(inputs, (tuple, list)):
                out = model(*inputs)
            else:
                out = model(inputs)
            return loss_fn(out)

        return run
    raise TypeError("step must be a callable that runs forward and backward, or a pair "
                    f"(inputs, loss_fn); got {type(step).__name__}")


# -- running --------------------------------------------------------------------------------
def _start_tracer() -> Any:
    """A running ``gradtrace.trace()`` session for the 'cut at file:line' reasons, or None."""
    try:
        from gradtrace.runtime.trace.tracer import trace

        tracer = trace()
        tracer.__enter__()
        return tracer
    except Exception:  # the runtime tracer is optional here
        LOG.debug("gradtrace: tracer unavailable for assert_gradients_flow", exc_info=True)
        return None


def _stop_tracer(tracer: Any, exc: BaseException | None) -> None:
    if tracer is None:
        return
    try:
        tracer.__exit__(type(exc) if exc else None, exc, exc.__traceback__ if exc else None)
    except Exception:
        LOG.debug("gradtrace: tracer failed to stop cleanly", exc_info=True)


def _run(run: Callable[[], Any], trainable: dict[str, Tensor]) -> tuple[Usage, Any]:
    mode = UsageMode({id(p): p for p in trainable.values()})
    tracer = _start_tracer()
    try:
        with mode:
            out = run()
            if mode.usage.backward_calls == 0:
                _backward_on(out)
    except BaseException as exc:
        _stop_tracer(tracer, exc)
        _add_diagnosis(exc, tracer)
        raise
    _stop_tracer(tracer, None)
    return mode.usage, tracer


def _backward_on(out: Any) -> None:
    """The step ran no backward: call it on the returned loss, or explain why we cannot."""
    if out is None:
        raise ValueError("step ran no backward pass (no .backward() or torch.autograd.grad "
                         "call) and returned None: call loss.backward() in step, or return "
                         "the loss tensor from it")
    from gradtrace.guards._backward import check_loss
    from gradtrace.guards._decorators import loss_of

    loss, what = loss_of(out)
    check_loss(loss, "step", f"ran no backward pass and returned {what}")
    loss.backward()


def _add_diagnosis(exc: BaseException, tracer: Any) -> None:
    """Attach gradtrace's diagnosis of an error raised by the step as an exception note."""
    try:
        from gradtrace.runtime.trace.tracer import diagnose

        found = diagnose(exc, tracer)
    except Exception:
        return
    if found and hasattr(exc, "add_note"):
        exc.add_note("gradtrace diagnosis:\n" + render_findings(found))
