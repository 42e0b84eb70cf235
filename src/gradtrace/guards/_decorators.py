"""``@loss_guard`` and ``@requires_grad_mode``: decorators that fail early with a precise error."""
from __future__ import annotations

import functools
import sys
from typing import Any, Callable, TypeVar, overload

from gradtrace.guards._backward import (GradModeError, LossShapeError, LossTypeError,
                                        NoGraphError, check_loss)
from gradtrace.guards._locate import active_trace_state, find_grad_switch, return_sites

F = TypeVar("F", bound=Callable[..., Any])


def _name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def where_returned(fn: Callable[..., Any], value: Any) -> str:
    """Where ``fn`` returned ``value``: its one ``return`` line, or the candidates."""
    sites = return_sites(fn)
    if not sites:
        return ""
    returns = [s for s in sites if s[2]]
    falls_off = [s for s in sites if not s[2]]
    if value is None and falls_off and not returns:
        path, line, _ = falls_off[0]
        return f"The function has no `return` statement (its body ends at {path}:{line})."
    if len(returns) == 1 and not (value is None and falls_off):
        path, line, text = returns[0]
        return f"The value was returned at {path}:{line}: `{text}`."
    listed = "; ".join(f"{p}:{n}: `{t}`" if t else f"{p}:{n} (end of the function)"
                       for p, n, t in sites)
    return f"The value was returned by one of: {listed}."


def _guard_error(fn: Callable[..., Any], out: Any, exc: Exception) -> Exception:
    where = where_returned(fn, out)
    msg = f"{exc}" + (f" {where}" if where else "")
    return type(exc)(msg)


def loss_of(out: Any) -> tuple[Any, str]:
    """The loss inside a returned value: the value itself, the first item of a tuple/list,
    ``out["loss"]`` of a mapping or ``out.loss`` (e.g. a Hugging Face ModelOutput)."""
    if isinstance(out, (tuple, list)) and out:
        return out[0], f"{_a(type(out).__name__)} whose first item (the loss) is "
    if isinstance(out, dict) and "loss" in out:
        return out["loss"], "a mapping whose 'loss' is "
    if not isinstance(out, (int, float, complex, str, bytes)) and out is not None \
            and type(out).__module__ != "numpy" and hasattr(out, "loss") \
            and not hasattr(out, "backward"):
        return out.loss, f"{_a(type(out).__name__)} whose .loss is "
    return out, ""


def _a(noun: str) -> str:
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun


@overload
def loss_guard(fn: F) -> F: ...


@overload
def loss_guard(fn: None = None, *, require_graph: bool = True) -> Callable[[F], F]: ...


def loss_guard(fn: Any = None, *, require_graph: bool = True) -> Any:
    """Decorator: the function must return a loss that ``backward()`` accepts.

    Checks the returned loss -- the value itself, or the first item of a returned tuple/list
    (``return loss, logs``), ``["loss"]`` of a returned dict, ``.loss`` of a returned object
    (a Hugging Face ModelOutput) -- and raises, naming the problem and the line that returned it:
    :class:`LossTypeError` (a TypeError) if it is not a tensor (a float from ``.item()``,
    None, a numpy number...); :class:`LossShapeError` (a ValueError) if it has more than one
    element (e.g. ``reduction='none'``) or is complex; :class:`NoGraphError` (a RuntimeError)
    if it has no graph while grad mode is on. Under ``torch.no_grad()`` the graph is not
    required, so the same loss function works for validation. ``require_graph=False`` turns
    the graph check off. Use as ``@loss_guard`` or ``@loss_guard(require_graph=False)``.

    Example::

        @loss_guard
        def compute_loss(out, target):
            return F.cross_entropy(out, target)
    """
    def decorate(f: F) -> F:
        if not callable(f):
            raise TypeError(f"loss_guard decorates a function, got {type(f).__name__}")
        mode = "grad-mode" if require_graph else "never"
        who = f"`{_name(f)}`"

        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            out = f(*args, **kwargs)
            loss, what = loss_of(out)
            try:
                check_loss(loss, who, f"returned {what}", graph=mode)
            except (LossTypeError, LossShapeError, NoGraphError) as exc:
                raise _guard_error(f, loss, exc) from None
            return out

        return wrapper  # type: ignore[return-value]

    return decorate(fn) if fn is not None else decorate


def grad_mode_problem(who: str, frame: Any) -> str:
    """'' if grad mode is on (and not in inference mode), else the error message."""
    import torch

    if torch.is_inference_mode_enabled():
        sw = find_grad_switch(frame, inference=True)
        where = f" by {sw.describe()}" if sw else " by the caller"
        return (f"{who} must run with grad mode on, but torch.inference_mode() is active "
                f"(turned on{where}); tensors made in inference mode never record a graph, "
                "even inside torch.enable_grad(). Call it outside inference_mode (or use "
                "inference_mode(False)).")
    if torch.is_grad_enabled():
        return ""
    sw = find_grad_switch(frame)
    if sw is not None:
        where = f"by {sw.describe()}"
    else:
        where = _traced_switch() or ("by the caller: a torch.no_grad() / inference_mode() block, "
                                     "a @torch.no_grad() decorator or torch.set_grad_enabled("
                                     "False) further up the call stack")
    return (f"{who} must run with grad mode on, but it was called with grad mode off; grad mode "
            f"was turned off {where}. Call it with grad mode on (outside that block, or inside "
            "torch.enable_grad()).")


def _traced_switch() -> str:
    """Where the active gradtrace tracer saw grad mode being switched off, if it did."""
    state = active_trace_state()
    site = getattr(state, "grad_off", None) if state is not None else None
    if site is None:
        return ""
    how = getattr(state, "grad_off_how", "") or "a grad-mode switch"
    return f"by {how} at {site.path}:{site.line} (seen by gradtrace.trace)"


@overload
def requires_grad_mode(fn: F) -> F: ...


@overload
def requires_grad_mode(fn: None = None) -> Callable[[F], F]: ...


def requires_grad_mode(fn: Any = None) -> Any:
    """Decorator: the function must be called with grad mode on (and not in inference mode).

    Otherwise raises :class:`GradModeError` (a RuntimeError) naming where grad mode was
    turned off: the enclosing ``with torch.no_grad():`` / ``inference_mode()`` /
    ``set_grad_enabled(False)`` block, a ``set_grad_enabled(False)`` call or a
    ``@torch.no_grad()`` decorator found up the call stack, else the switch a running
    ``gradtrace.trace()`` recorded, else "the caller". Inputs are not required to have
    ``requires_grad=True``: parameters get gradients without it.

    Example::

        @requires_grad_mode
        def train_step(model, batch): ...
    """
    def decorate(f: F) -> F:
        if not callable(f):
            raise TypeError(f"requires_grad_mode decorates a function, got {type(f).__name__}")
        who = f"`{_name(f)}`"

        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            problem = grad_mode_problem(who, sys._getframe(1))
            if problem:
                raise GradModeError(problem)
            return f(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate(fn) if fn is not None else decorate
