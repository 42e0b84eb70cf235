"""Find where non-finite values start, after watch saw a NaN/Inf gradient (rare path).

# NOTE [NaN replay]
Checking every activation for NaN on every step would cost 25-40 % of a training step, so
watch only detects the first step with a non-finite gradient (from the norms it computes
anyway). Then it replays that step's forward once on a deep copy of the model, with the
weights as they were before the optimizer step (watch measures in the step pre-hook),
under ``no_grad`` and a forked RNG, with a ``TorchFunctionMode`` that checks each op's
output. The first op that turns finite inputs
into a non-finite output names the module and the user's source line. The user's model,
its buffers, its RNG stream and its parameters are never touched.
"""
from __future__ import annotations

import contextlib
import copy
import logging
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch
from torch.overrides import TorchFunctionMode

from gradtrace.report.model import NanSource

LOG = logging.getLogger(__name__)


def _tensors(obj: Any, depth: int = 0) -> Iterator[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        yield obj
    elif depth < 3 and isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _tensors(x, depth + 1)
    elif depth < 3 and isinstance(obj, dict):
        for x in obj.values():
            yield from _tensors(x, depth + 1)


def _finite(obj: Any) -> bool:
    for t in _tensors(obj):
        if (t.is_floating_point() or t.is_complex()) and t.numel() and \
                not bool(torch.isfinite(t).all()):
            return False
    return True


def _user_site() -> tuple[str | None, int | None]:
    try:
        from gradtrace.runtime.frames import user_frame
    except ImportError:  # pragma: no cover - frames is optional
        return None, None
    f = user_frame(2)
    return (f.f_code.co_filename, f.f_lineno) if f is not None else (None, None)


@dataclass
class _Probe:
    stack: list[tuple[str, torch.nn.Module]] = field(default_factory=list)
    hit: tuple[str, str, str | None, int | None] | None = None  # op, module, path, line
    module_hit: tuple[str, torch.nn.Module] | None = None


class _OpCheck(TorchFunctionMode):
    """Records the first op whose inputs are finite and whose output is not."""

    def __init__(self, probe: _Probe) -> None:
        super().__init__()
        self.probe = probe

    def __torch_function__(self, func: Callable[..., Any], types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        probe = self.probe
        if probe.hit is None and not _finite(out) and _finite(args) and _finite(kwargs or {}):
            name = getattr(func, "__name__", str(func))
            mod = probe.stack[-1][0] if probe.stack else ""
            path, line = _user_site()
            probe.hit = (name, mod, path, line)
        return out


Inputs = tuple[list[tuple[bool, Any]], dict[str, tuple[bool, Any]]]


def remember(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Inputs:
    """Arguments of a model call with every tensor held by weak reference only."""
    def one(v: Any) -> tuple[bool, Any]:
        return (True, weakref.ref(v)) if isinstance(v, torch.Tensor) else (False, v)
    return [one(a) for a in args], {k: one(v) for k, v in kwargs.items()}


def _recall(inputs: Inputs) -> tuple[list[Any], dict[str, Any]] | None:
    """The remembered arguments, or None if a tensor among them was freed."""
    def one(item: tuple[bool, Any]) -> Any:
        weak, v = item
        return v() if weak else v
    items = [*inputs[0], *inputs[1].values()]
    if any(weak and v() is None for weak, v in items):
        return None
    return [one(a) for a in inputs[0]], {k: one(v) for k, v in inputs[1].items()}


@contextlib.contextmanager
def _outer_modes_hidden() -> Iterator[None]:
    """Hide enclosing TorchFunctionModes (e.g. an active ``gradtrace.trace()``) from the
    replay, so they do not record the replay's ops as the user's."""
    length = getattr(torch._C, "_len_torch_function_stack", None)
    pop = getattr(torch._C, "_pop_torch_function_stack", None)
    push = getattr(torch._C, "_push_on_torch_function_stack", None)
    popped: list[Any] = []
    try:
        if length is not None and pop is not None and push is not None:
            while length() > 0:
                popped.append(pop())
        yield
    finally:
        for mode in reversed(popped):
            push(mode)  # type: ignore[misc]


def _install(clone: torch.nn.Module, probe: _Probe) -> list[Any]:
    handles = []
    for name, mod in clone.named_modules():
        def pre(m: torch.nn.Module, a: Any, n: str = name) -> None:
            probe.stack.append((n, m))

        def post(m: torch.nn.Module, a: Any, out: Any, n: str = name) -> None:
            if probe.stack:
                probe.stack.pop()
            if probe.module_hit is None and not _finite(out) and _finite(a):
                probe.module_hit = (n, m)
        handles.append(mod.register_forward_pre_hook(pre))
        handles.append(mod.register_forward_hook(post))
    return handles


def _describe(step: int, probe: _Probe, clone: torch.nn.Module) -> NanSource:
    mods = dict(clone.named_modules())
    if probe.hit is not None:
        op, mod_name, path, line = probe.hit
    elif probe.module_hit is not None:
        op, mod_name, path, line = "", probe.module_hit[0], None, None
    else:
        return NanSource(step, None, None, "backward",
                         "the forward pass of this step was finite; the first non-finite "
                         "values arise in backward (e.g. sqrt/pow/norm of 0, or a division "
                         "by a tiny value in a backward formula)")
    mod = mods.get(mod_name)
    mtype = type(mod).__name__ if mod is not None else None
    own = list(mod.parameters(recurse=False)) if mod is not None else []
    where = f"module `{mod_name or '<model>'}` ({mtype})"
    what = f"`{op}`" if op else "its forward"
    if any(not _finite(p) for p in own):
        return NanSource(step, mod_name, mtype, "parameters",
                         f"{where} has non-finite parameters: they were already NaN/Inf "
                         f"before this step", path, line)
    return NanSource(step, mod_name, mtype, "forward",
                     f"{what} in {where} turned finite inputs into NaN/Inf", path, line)


def replay(model: torch.nn.Module, inputs: Inputs | None, step: int) -> NanSource | None:
    """Re-run the forward of ``step`` on a copy of ``model`` and locate the first NaN/Inf
    (NOTE [NaN replay]).

    Called before the optimizer applies the non-finite gradients, so the model's weights are
    those its forward used. ``inputs`` are the arguments of the model's last call, from
    :func:`remember` (tensors held weakly). Returns None when the replay is
    impossible (inputs gone, model not copyable).
    """
    got = _recall(inputs) if inputs is not None else None
    if got is None:
        return None
    args, kwargs = got
    if not _finite(args) or not _finite(kwargs):
        return NanSource(step, "", type(model).__name__, "input",
                         "the batch passed to the model already contains NaN/Inf")
    try:
        clone = copy.deepcopy(model)
    except Exception as exc:  # deepcopy can fail on exotic modules; say so, never crash
        LOG.info("gradtrace.watch: cannot copy the model to replay the NaN step: %s", exc)
        return None
    probe = _Probe()
    handles = _install(clone, probe)
    devices = sorted({t.device.index or 0 for t in clone.parameters() if t.is_cuda})
    try:
        with _outer_modes_hidden(), torch.random.fork_rng(devices=devices), torch.no_grad(), \
                _OpCheck(probe):
            clone(*args, **kwargs)
    except Exception as exc:
        LOG.info("gradtrace.watch: replay of step %d failed: %s", step, exc)
        return None
    finally:
        for h in handles:
            h.remove()
    return _describe(step, probe, clone)
