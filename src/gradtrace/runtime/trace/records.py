"""Frozen records of what the tracer saw. Plain values only: never a tensor or a graph node."""
from __future__ import annotations

from dataclasses import dataclass, field
from types import CodeType
from typing import Any

from gradtrace.runtime.frames import Site, site_of

RawSite = tuple[CodeType, int, int]  # code, line, lasti (the column comes from lasti)

# Key under which the creating user line is stored in grad_fn.metadata (dies with the graph).
META_CREATED = "gradtrace.created"   # -> (code, lineno, seq)
META_FREED = "gradtrace.freed_by"    # -> (code, lineno, seq) of the backward that freed it
META_FREED_VIA = "gradtrace.freed_via"  # -> META_CREATED of the node that consumed it there
META_RETAINED = "gradtrace.retained_by"  # -> (code, lineno, seq) of a backward(retain_graph=True)
META_DETACHED = "gradtrace.detached_at"  # -> (code, lineno, 0): a detach() called on it
META_CALLED = "gradtrace.called_with"  # -> (code, lineno, 0): the first module call given it
# -> [(code, lineno, 0)]: later module calls given it from other functions (at most 4)
META_CALLED_LATER = "gradtrace.called_later"


@dataclass(frozen=True)
class Cut:
    """A place where a value left the autograd graph.

    ``reason`` is one of: ``detach``, ``data``, ``item`` (also float/int/tolist), ``rewrap``
    (torch.tensor(x) of a tensor or of an .item() value), ``copy`` (a new leaf that requires
    grad made from a tensor in the graph), ``nondiff`` (argmax, comparison, integer cast...), ``no_grad`` (op run with grad mode off), ``inference`` (made under
    inference_mode), ``grad`` (gradients autograd.grad returned without a graph).
    """

    site: Site
    op: str
    reason: str
    grad_off: Site | None = None
    origin: Cut | None = None  # for rewrap: the .item() that produced the number
    library: bool = False  # made by library code the user called (a distribution's check)
    switch: Site | None = None  # the grad-off switch read from the stack (offstack.py)
    inner: Site | None = None  # the detach inside a grad-free wrapper (site: its caller)
    caller: Site | None = None  # inference: the call of the function an @inference_mode() wraps

    def describe(self) -> str:
        """One phrase: how the value left the graph."""
        if self.reason == "no_grad":
            off = self.switch or self.grad_off
            where = f" (grad mode turned off at line {off.line})" if off else ""
            if off is self.switch and self.grad_off is not None and off is not None \
                    and self.grad_off.function != off.function:  # the switch's caller
                where = f" (grad mode turned off at line {self.grad_off.line}, inside the " \
                        f"call at line {off.line})"
                if off.source().startswith("@"):  # the decorator of the function called there
                    where = f" (grad mode turned off by the decorator at line {off.line}, " \
                            f"of the function called at line {self.grad_off.line})"
            return f"`{self.op}` ran with grad mode off{where}"
        if self.reason == "inference":
            return f"`{self.op}` ran inside torch.inference_mode()"
        if self.reason == "nondiff":
            return f"`{self.op}` is not differentiable (its result never requires grad)"
        if self.reason == "copy":
            return f"`{self.op}` copied the values into a new leaf, without the graph"
        if self.reason == "grad":
            return f"`{self.op}` returned gradients without a graph (create_graph is off)"
        if self.reason == "rewrap":
            return f"`{self.op}` built a new tensor from plain values, without a graph"
        if self.inner is not None:  # NOTE [grad-free wrapper]
            return (f"`{self.inner.function}` (called here) detaches every tensor it is "
                    f"handed (`{self.op}` at line {self.inner.line}), so its result has no "
                    f"grad_fn")
        if self.op == "detach_":  # NOTE [detached in place]
            return ("`detach_()` removed the tensor's grad_fn in place: every later use of the "
                    "same tensor has no history")
        return f"`{self.op}` returned a value without a grad_fn"


@dataclass(frozen=True)
class Event:
    """A noteworthy thing seen once or more at one site (grad-mode switch, non-leaf .grad...)."""

    kind: str
    site: Site
    op: str = ""
    detail: str = ""
    related: tuple[tuple[Site, str], ...] = ()


@dataclass
class Counter:
    """Mutable count of an :class:`Event` (kept beside it, not in it)."""

    event: Event
    count: int = 1
    extra: dict[str, Any] = field(default_factory=dict)


def decode_meta(value: Any) -> tuple[Site | None, int]:
    """Decode a ``grad_fn.metadata`` entry written by the tracer into ``(site, seq)``."""
    if isinstance(value, tuple) and len(value) == 3:
        return site_of((value[0], value[1])), int(value[2])
    return None, -1


def created_site(grad_fn: Any) -> tuple[Site | None, int]:
    """The user line (and op sequence number) that created ``grad_fn``, if it was traced."""
    if grad_fn is None:
        return None, -1
    try:
        return decode_meta(grad_fn.metadata.get(META_CREATED))
    except (AttributeError, RuntimeError):
        return None, -1


def node_name(grad_fn: Any) -> str:
    """``MulBackward0`` -> ``Mul`` (the forward op as torch names it in messages)."""
    name = type(grad_fn).__name__
    for suffix in ("Backward0", "Backward1", "Backward"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name
