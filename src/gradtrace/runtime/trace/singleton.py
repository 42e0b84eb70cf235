"""A softmax over a dimension of size one, seen at run time (GT877; its static twin is GT762).

# NOTE [softmax over a singleton dim]
``softmax``/``log_softmax``/``softmin`` (the functional, the method, an ``nn.Softmax`` module,
which calls the functional) reach the function mode as their own kind (``SOFTMAX`` in
:mod:`.classify`); before the call runs, only the input's shape and ``dim`` are read. For an
input that requires grad with grad on, the user's line is looked up (the frame walk the mode
makes anyway for an output that requires grad) and counted: calls over a size-one ``dim`` and
whether any call was over more (256 lines at most). Every weight of a softmax over a size-one
dim is exactly 1.0 (log_softmax: 0.0) and the gradient into its input exactly 0, whatever the
scores: the scorer that made them never trains. A line is reported only when every call of it
seen was over a size-one dim: a sequence that happens to have one element (a short last batch,
one token at a decoding step) is data, not the bug, and the same line then also runs over more
entries. When an ``nn.Softmax``-like module made the call, the line that built it (where its
``dim`` was chosen) is named, the call as related.
"""
from __future__ import annotations

import ast
import inspect
import sys
import textwrap
import weakref
from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.frames import Site, is_internal, raw_site

Tensor = torch.Tensor
_grad_enabled = torch.is_grad_enabled
MAX_LINES = 256  # softmax lines followed (a model has a few)
_F = torch.nn.functional
_LAYERS = (torch.nn.Softmax, torch.nn.LogSoftmax, torch.nn.Softmin)
SOFTMAX_FUNCS = frozenset({_F.softmax, _F.log_softmax, _F.softmin, torch.softmax,
                           torch.log_softmax, Tensor.softmax, Tensor.log_softmax,
                           torch.special.softmax, torch.special.log_softmax})


def _dim(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    d = kwargs.get("dim")
    if d is None and len(args) > 1:
        d = args[1]
    return d


def check_softmax(state: Any, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """NOTE [softmax over a singleton dim]; DisableTorchFunction need not be on: only the
    shape is read."""
    x = args[0] if args else kwargs.get("input")
    if not isinstance(x, Tensor) or not x.requires_grad or not _grad_enabled():
        return
    d = _dim(args, kwargs)
    nd = x.dim()
    if not isinstance(d, int) or isinstance(d, bool) or nd == 0 or not -nd <= d < nd:
        return
    seen = state.softmax_ones
    raw = raw_site()
    if raw is None:
        return
    key = (raw[0], raw[1])
    rec = seen.get(key)
    one = x.shape[d] == 1
    if rec is None:
        if len(seen) >= MAX_LINES:
            return
        rec = seen[key] = [0, False, raw, tuple(x.shape), d,
                           getattr(func, "__name__", "softmax"), None]
    if one:
        if not rec[0]:
            rec[2], rec[3], rec[6] = raw, tuple(x.shape), _module_caller()
        rec[0] += 1
    else:
        rec[1] = True


def singleton_findings(state: Any) -> list[Finding]:
    """GT877 (GT762's code when the static twin names the line: the fuse module) for the
    lines whose every softmax call seen was over a size-one dim."""
    from gradtrace.runtime.build import make

    out = []
    for count, many, raw, shape, d, op, mod in state.softmax_ones.values():
        if many or not count:
            continue
        call = state.site(raw)
        layer, owner = (mod[0](), mod[1]()) if mod else (None, None)
        built = _built_at(owner, layer) if owner is not None and layer is not None else None
        calls = "the one call seen" if count == 1 else f"all {count} calls seen"
        out.append(make(
            "GT877", built or call,
            f"`{op}` normalises over dim {d} of a tensor of shape {list(shape)}, which has "
            f"size 1 ({calls}{', made by the module built here' if built else ''}): every "
            f"weight is exactly {'0.0 (log of 1)' if 'log' in op else '1.0'} whatever the "
            "scores, and the gradient into the scores is exactly zero, so the layer that made "
            "them never trains", related=[(call if built else None, "the softmax runs here")],
            fix="normalise over the dimension of the positions (e.g. dim=1 of a [B, T, 1] "
                "score), or use a sigmoid when each entry is one independent score",
            severity="warning"))
    return out


def _module_caller() -> tuple[Any, Any] | None:
    """(weak refs to) the ``nn.Softmax``-like module whose forward made this call and the
    user's module that called it, when it came through one (a rare path: a finding)."""
    f = sys._getframe(2)
    layer = None
    for _ in range(16):
        if f is None:
            return None
        me = f.f_locals.get("self") if f.f_code.co_name == "forward" else None
        if layer is None:
            if isinstance(me, _LAYERS):
                layer = me
        elif isinstance(me, torch.nn.Module) and not is_internal(f.f_code):
            return weakref.ref(layer), weakref.ref(me)
        f = f.f_back
    return None


def _built_at(owner: torch.nn.Module, layer: torch.nn.Module) -> Site | None:
    """The line in ``type(owner).__init__`` that builds ``layer``: ``self.<attr> =
    nn.Softmax(...)``, or an argument of the ``nn.Sequential(...)`` assigned there (best
    effort: None when the source cannot be read)."""
    path = next((n for n, m in owner.named_modules() if m is layer), None)
    if not path:
        return None
    attr, _, rest = path.partition(".")
    if rest and not rest.isdigit():
        return None
    try:
        init = type(owner).__init__
        lines, start = inspect.getsourcelines(init)
        file = inspect.getsourcefile(init) or ""
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and any(
                isinstance(t, ast.Attribute) and t.attr == attr for t in node.targets):
            if not rest:
                return Site(file, start + node.value.lineno - 1, "__init__")
            args = node.value.args
            idx = int(rest)
            if idx < len(args) and not any(isinstance(a, ast.Starred) for a in args[:idx + 1]):
                return Site(file, start + args[idx].lineno - 1, "__init__")
    return None
