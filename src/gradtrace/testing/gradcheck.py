"""``gradcheck_module``: check a custom layer's backward against finite differences, properly.

``torch.autograd.gradcheck`` compares the analytical Jacobian (your backward) with a
finite-difference one. It needs float64: in float32 it fails on correct layers
(pytorch-facts.md#gradcheck-float64). It checks backward *formulas* -- a wrong
``Function.backward`` or an internal
``.detach()`` -- not semantics: a softmax over the wrong dim still passes.

Example::

    from gradtrace.testing import gradcheck_module

    def test_my_layer_backward():
        gradcheck_module(MyLayer(8, 4), torch.randn(3, 8))      # float32 in; checked in float64
        gradcheck_module(MySquare.apply, torch.randn(5), gradgrad=True)
"""
from __future__ import annotations

import copy
import inspect
import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch
from torch import nn

Tensor = torch.Tensor
_PAIR = re.compile(r"output (\d+) with respect to input (\d+)")
_MAX_LINES = 24


class GradcheckFailure(AssertionError):
    """The backward disagrees with finite differences; names what disagrees.

    ``input_name`` / ``output_name`` are None when torch's message names no pair.
    ``order`` is 1 for gradcheck and 2 for gradgradcheck.
    """

    def __init__(self, message: str, *, input_name: str | None = None,
                 output_name: str | None = None, order: int = 1) -> None:
        super().__init__(message)
        self.input_name = input_name
        self.output_name = output_name
        self.order = order


@dataclass(frozen=True)
class _Prepared:
    label: str
    call: Callable[..., Any]
    args: tuple[Any, ...]
    names: tuple[str, ...]


def gradcheck_module(module_or_fn: Any, *inputs: Any, gradgrad: bool = False,
                     params: bool = True, no_grad_inputs: Sequence[int] = (),
                     eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
                     fast_mode: bool = False, seed: int = 0,
                     kwargs: dict[str, Any] | None = None, **gradcheck_kwargs: Any) -> bool:
    """Gradcheck ``module_or_fn(*inputs)`` on float64 copies; True, or a GradcheckFailure.

    ``module_or_fn``: an ``nn.Module`` (deep-copied and cast to float64/complex128; with
    ``params`` its trainable parameters are checked too, through
    ``torch.func.functional_call``), an ``autograd.Function`` subclass (its ``apply``) or any
    callable. ``inputs``: floating-point tensors are copied to float64 with
    ``requires_grad=True`` (except positions in ``no_grad_inputs``); other values are passed
    as they are. ``kwargs`` are passed as keyword arguments on every call (tensors cast to
    float64, never differentiated: masks, flags). Nothing the caller holds is modified.

    Each evaluation runs with the torch RNG re-seeded with ``seed`` (the global RNG is
    restored after), so dropout-like randomness is the same in every evaluation.
    ``gradgrad=True`` also runs ``gradgradcheck``. Extra keyword arguments go to
    ``torch.autograd.gradcheck``. The :class:`GradcheckFailure` (an AssertionError) names the
    output and the input (or parameter) whose derivative is wrong; a backward that raises
    (e.g. returns a gradient of the wrong shape) is a failure too. Slow mode builds full
    Jacobians (two evaluations per input element); for layers with many parameters pass
    ``fast_mode=True`` or ``params=False``.
    """
    kw = {k: _to64(v) if isinstance(v, Tensor) else v for k, v in (kwargs or {}).items()}
    prep = _prepare(module_or_fn, inputs, params, set(no_grad_inputs), seed, kw)
    devices = sorted({a.device.index or 0 for a in prep.args
                      if isinstance(a, Tensor) and a.device.type == "cuda"})
    with torch.random.fork_rng(devices=devices):  # gradcheck itself draws random numbers
        for order in (1, 2) if gradgrad else (1,):
            _run_check(prep, order, eps=eps, atol=atol, rtol=rtol, fast_mode=fast_mode,
                       **gradcheck_kwargs)
    return True


# -- preparation ------------------------------------------------------------------------------
def _to64(t: Tensor) -> Tensor:
    if t.is_complex():
        return t.detach().to(torch.complex128)
    if t.is_floating_point():
        return t.detach().to(torch.float64)
    return t.detach()


def _prepare(target: Any, inputs: tuple[Any, ...], params: bool, skip: set[int],
             seed: int, kw: dict[str, Any]) -> _Prepared:
    args, names = _inputs(target, inputs, skip)
    if isinstance(target, nn.Module):
        module = copy.deepcopy(target)._apply(_to64)
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad] \
            if params else []
        pvals = tuple(p.detach().clone().requires_grad_(True) for _, p in named)
        pnames = tuple(n for n, _ in named)
        n_in = len(args)

        def fn(*flat: Any, **kws: Any) -> Any:
            return torch.func.functional_call(module, dict(zip(pnames, flat[n_in:])),
                                              flat[:n_in], kws)

        args += pvals
        names += tuple(f"parameter `{n}` (shape {tuple(p.shape)})" for n, p in named)
        label = f"{type(target).__name__} (float64 copy)"
    elif inspect.isclass(target) and issubclass(target, torch.autograd.Function):
        fn, label = target.apply, f"{target.__name__}.apply"
    elif callable(target):
        fn, label = target, getattr(target, "__qualname__", repr(target))
    else:
        raise TypeError(f"gradcheck_module() needs an nn.Module, an autograd.Function or a "
                        f"callable, got {type(target).__name__}")
    if not any(isinstance(a, Tensor) and a.requires_grad for a in args):
        raise ValueError(f"gradcheck_module({label}): nothing to check: no floating-point "
                         "input and no trainable parameter")
    return _Prepared(label, _seeded(fn, seed, args, kw), args, names)


def _inputs(target: Any, inputs: tuple[Any, ...], skip: set[int]
            ) -> tuple[tuple[Any, ...], tuple[str, ...]]:
    argnames = _argnames(target)
    args: list[Any] = []
    names: list[str] = []
    for i, x in enumerate(inputs):
        label = f"input {i}" + (f" `{argnames[i]}`" if i < len(argnames) else "")
        if isinstance(x, Tensor):
            y = _to64(x)
            if (y.is_floating_point() or y.is_complex()) and i not in skip:
                y = y.clone().requires_grad_(True)
            args.append(y)
            names.append(f"{label} (shape {tuple(x.shape)})")
        else:
            args.append(x)
            names.append(label)
    return tuple(args), tuple(names)


def _argnames(target: Any) -> list[str]:
    fn = target.forward if isinstance(target, nn.Module) else \
        target.forward if inspect.isclass(target) else target
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    names = [p.name for p in sig.parameters.values()
             if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if inspect.isclass(target) and names and names[0] == "ctx":
        names = names[1:]
    return names


def _seeded(fn: Callable[..., Any], seed: int, args: tuple[Any, ...],
            kw: dict[str, Any]) -> Callable[..., Any]:
    devices = sorted({a.device.index or 0 for a in args
                      if isinstance(a, Tensor) and a.device.type == "cuda"})

    def call(*flat: Any) -> Any:
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(seed)
            return fn(*flat, **kw)

    return call


# -- running and explaining --------------------------------------------------------------------
def _outputs(prep: _Prepared) -> list[str]:
    """Names of the differentiable outputs, in the order gradcheck numbers them."""
    out = prep.call(*prep.args)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    single = len(outs) == 1
    names = [("the output" if single else f"output {i}") + f" (shape {tuple(o.shape)})"
             for i, o in enumerate(outs) if isinstance(o, Tensor) and o.requires_grad]
    if not names:
        raise GradcheckFailure(f"gradcheck failed for {prep.label}: no output requires grad, "
                               "so no gradient can reach any input: the function detaches its "
                               "result, computes it under torch.no_grad(), or returns "
                               "non-differentiable values")
    return names


def _run_check(prep: _Prepared, order: int, **kwargs: Any) -> None:
    from torch.autograd.gradcheck import GradcheckError

    outs = _outputs(prep)
    check = torch.autograd.gradcheck if order == 1 else torch.autograd.gradgradcheck
    try:
        check(prep.call, prep.args, raise_exception=True, **kwargs)
    except GradcheckError as exc:
        raise _failure(prep, outs, order, str(exc)) from exc
    except RuntimeError as exc:  # e.g. a backward returning a gradient of the wrong shape
        what = "backward" if order == 1 else "double backward"
        raise GradcheckFailure(f"gradcheck failed for {prep.label}: the {what} raised "
                               f"{type(exc).__name__}: {exc}", order=order) from exc


def _pair_names(prep: _Prepared, outs: list[str], order: int, o: int, i: int
                ) -> tuple[str, str]:
    diff_inputs = [n for a, n in zip(prep.args, prep.names)
                   if isinstance(a, Tensor) and a.requires_grad]
    if order == 1:
        return (outs[o] if o < len(outs) else f"output {o}",
                prep.names[i] if i < len(prep.names) else f"input {i}")
    out_name = (f"the gradient with respect to {diff_inputs[o]}" if o < len(diff_inputs)
                else f"output {o}")
    if i < len(prep.names):
        return out_name, prep.names[i]
    k = i - len(prep.names)
    return out_name, (f"the incoming gradient of {outs[k]}" if k < len(outs) else f"input {i}")


def _failure(prep: _Prepared, outs: list[str], order: int, text: str) -> GradcheckFailure:
    what = "backward" if order == 1 else "double backward (gradgradcheck)"
    m = _PAIR.search(text)
    lines = text.strip().splitlines()
    shown = "\n".join("    " + ln for ln in lines[:_MAX_LINES])
    if len(lines) > _MAX_LINES:
        shown += f"\n    ... ({len(lines) - _MAX_LINES} more lines)"
    if m is None:
        return GradcheckFailure(f"gradcheck failed for {prep.label}: the {what} is wrong:\n"
                                f"{shown}", order=order)
    out_name, in_name = _pair_names(prep, outs, order, int(m.group(1)), int(m.group(2)))
    return GradcheckFailure(
        f"gradcheck failed for {prep.label}: the {what} disagrees with finite differences "
        f"for {out_name} with respect to {in_name}.\ntorch.autograd "
        f"{'gradcheck' if order == 1 else 'gradgradcheck'} said:\n{shown}",
        input_name=in_name, output_name=out_name, order=order)
