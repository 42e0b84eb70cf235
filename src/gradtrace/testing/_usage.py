"""A TorchFunctionMode that watches the model's parameters during one test step.

It records, per parameter: whether any torch operation read it (and with grad mode on or
off, and where), where it was frozen, where a value computed from it left the graph
(``.detach()``, ``.data``, ``.item()``...), and the gradients ``torch.autograd.grad`` returned
for it (those never land in ``.grad``). It also counts backward calls. It never changes what
an operation returns, and holds parameters only through the caller's id map.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from types import CodeType
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from gradtrace.guards._locate import GradSwitch, display_path, find_grad_switch, is_internal

Tensor = torch.Tensor
_META = {"size", "dim", "numel", "__len__", "__repr__", "__format__", "__str__", "__hash__",
         "is_floating_point", "is_complex", "stride", "data_ptr", "element_size", "type",
         "__reduce_ex__", "__deepcopy__", "__setstate__", "get_device", "is_contiguous",
         "storage_offset", "untyped_storage", "_typed_storage", "is_inference", "__bool__",
         "requires_grad_", "retain_grad", "register_hook", "register_post_accumulate_grad_hook",
         "_is_view", "has_names", "_has_symbolic_sizes_strides"}
_LEAVE = {"detach": "`.detach()`", "detach_": "`.detach_()`", "item": "`.item()`",
          "tolist": "`.tolist()`", "__float__": "`float()`", "__int__": "`int()`",
          "__index__": "an index conversion", "numpy": "`.numpy()`", "__array__": "numpy"}
_VIEW_ATTRS = {"T", "mT", "H", "mH", "real", "imag"}  # properties that return a view
_INTERNAL: dict[CodeType, bool] = {}


@dataclass(frozen=True)
class Where:
    """A line of user code."""

    path: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}" + (f" (`{self.text}`)" if self.text else "")


def user_frame(depth: int = 2) -> Any:
    """The first frame outside torch and gradtrace (cached per code object)."""
    f = sys._getframe(depth)
    while f is not None:
        code = f.f_code
        hit = _INTERNAL.get(code)
        if hit is None:
            hit = _INTERNAL[code] = is_internal(code.co_filename)
        if not hit:
            return f
        f = f.f_back  # type: ignore[assignment]
    return None


def user_where(depth: int = 2) -> Where | None:
    """The first frame outside torch and gradtrace, as a :class:`Where`."""
    f = user_frame(depth + 1)
    if f is None:
        return None
    import linecache

    path = f.f_code.co_filename
    return Where(display_path(path), f.f_lineno, linecache.getline(path, f.f_lineno).strip())


@dataclass
class Use:
    """How one parameter was read during the step."""

    first: Where | None = None
    grad_on: int = 0
    grad_off: int = 0
    off_at: Where | None = None
    off_switch: GradSwitch | None = None
    off_inside: str = ""
    off_inference: bool = False
    in_function: str = ""


@dataclass
class Usage:
    """Everything the mode saw (mutable while the step runs)."""

    uses: dict[int, Use] = field(default_factory=dict)
    cuts: dict[int, list[tuple[Where | None, str]]] = field(default_factory=dict)
    frozen: dict[int, Where | None] = field(default_factory=dict)
    data_reads: dict[int, Where | None] = field(default_factory=dict)
    agrad: dict[int, Tensor] = field(default_factory=dict)
    backward_calls: int = 0


def _descriptor(func: Any) -> str:
    owner = getattr(func, "__self__", None)
    return getattr(owner, "__name__", "") if owner is not None else ""


def upstream_leaves(t: Tensor, limit: int = 20000) -> set[int]:
    """ids of the leaf tensors ``t`` was computed from (walking ``grad_fn.next_functions``)."""
    gf = t.grad_fn
    if gf is None:
        return {id(t)} if t.requires_grad else set()
    out: set[int] = set()
    seen: set[int] = set()
    stack = [gf]
    while stack and len(seen) < limit:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        var = getattr(node, "variable", None)
        if var is not None:
            out.add(id(var))
        stack.extend(n for n, _ in node.next_functions)
    return out


def _custom_function(frame: Any) -> str:
    """``Name.forward`` if ``frame`` is the forward of a custom autograd.Function."""
    back = getattr(frame, "f_back", None)
    if back is None or not back.f_code.co_filename.replace("\\", "/").endswith(
            "torch/autograd/function.py"):
        return ""
    code = frame.f_code
    return getattr(code, "co_qualname", code.co_name)


def _torch_context() -> str:
    """'torch.utils.checkpoint' if the current op runs inside it (below the user's frame)."""
    f = sys._getframe(1)
    while f is not None and is_internal(f.f_code.co_filename):
        if f.f_code.co_filename.replace("\\", "/").endswith("torch/utils/checkpoint.py"):
            return "torch.utils.checkpoint"
        f = f.f_back  # type: ignore[assignment]
    return ""


class UsageMode(TorchFunctionMode):
    """Records how the parameters in ``params`` (id -> tensor) are used; see module doc."""

    def __init__(self, params: dict[int, Tensor]) -> None:
        super().__init__()
        self.params = params
        self.usage = Usage()

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in ("__get__", "__set__"):
            return self._attribute(func, name, args, kwargs)
        if func is Tensor.backward or func is torch.autograd.backward:
            self.usage.backward_calls += 1
        elif func is torch.autograd.grad:
            return self._autograd_grad(func, args, kwargs)
        if name in _META:
            if name == "requires_grad_" and args and id(args[0]) in self.params:
                flag = args[1] if len(args) > 1 else kwargs.get("requires_grad", True)
                self._freeze(args[0], flag)
            return func(*args, **kwargs)
        self._scan(args, kwargs)
        if name in _LEAVE and args and isinstance(args[0], Tensor) and args[0].requires_grad:
            self._cut(args[0], _LEAVE[name])
        return func(*args, **kwargs)

    # -- recording ---------------------------------------------------------------------------
    def _scan(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        params = self.params
        for a in (*args, *kwargs.values()):
            if isinstance(a, (list, tuple)):
                for b in a:
                    if id(b) in params and params[id(b)] is b:
                        self._use(b)
            elif id(a) in params and params[id(a)] is a:
                self._use(a)

    def _use(self, p: Tensor) -> None:
        use = self.usage.uses.get(id(p))
        if use is None:
            use = self.usage.uses[id(p)] = Use(first=user_where(1))
        if torch.is_grad_enabled() and not torch.is_inference_mode_enabled():
            use.grad_on += 1
            return
        frame = user_frame(1)
        fn = _custom_function(frame)
        if fn:  # a custom autograd.Function's forward always runs with grad mode off
            use.in_function = use.in_function or fn
            if use.off_at is None:
                use.off_at = user_where(1)
            return
        use.grad_off += 1
        if use.off_at is None:
            use.off_at = user_where(1)
            use.off_inside = _torch_context()
            use.off_inference = torch.is_inference_mode_enabled()
            use.off_switch = find_grad_switch(frame, inference=torch.is_inference_mode_enabled())

    def _cut(self, t: Tensor, op: str) -> None:
        where = user_where(1)
        for pid in upstream_leaves(t):
            if pid in self.params:
                self.usage.cuts.setdefault(pid, []).append((where, op))

    def _freeze(self, p: Tensor, flag: Any) -> None:
        if not flag and id(p) not in self.usage.frozen:
            self.usage.frozen[id(p)] = user_where(1)

    def _attribute(self, func: Any, name: str, args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> Any:
        attr = _descriptor(func)
        if args and id(args[0]) in self.params and self.params[id(args[0])] is args[0]:
            if name == "__set__" and attr == "requires_grad":
                self._freeze(args[0], args[1] if len(args) > 1 else True)
            elif name == "__get__" and attr in _VIEW_ATTRS:
                self._use(args[0])
            elif name == "__get__" and attr == "data" and id(args[0]) not in self.usage.data_reads:
                self.usage.data_reads[id(args[0])] = user_where(1)
        elif name == "__get__" and attr == "data" and args and isinstance(args[0], Tensor) \
                and args[0].requires_grad:
            self._cut(args[0], "`.data`")
        return func(*args, **kwargs)

    def _autograd_grad(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        self.usage.backward_calls += 1
        out = func(*args, **kwargs)
        inputs = args[1] if len(args) > 1 else kwargs.get("inputs", ())
        inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
        for t, g in zip(inputs, out):
            if g is not None and id(t) in self.params and self.params[id(t)] is t:
                prev = self.usage.agrad.get(id(t))
                g = g.detach()
                self.usage.agrad[id(t)] = g if prev is None else prev + g
        return out
