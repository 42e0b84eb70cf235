"""Where a layer or a parameter was replaced, seen by torch's global registration hooks.

# NOTE [replaced after the optimizer]
``module.<name> = value`` with a submodule or a Parameter goes through torch's global module
and parameter registration hooks, also from ``setattr``, ``load_state_dict(assign=True)`` and
library helpers. When the new object takes the place of another one, the chain of user frames
is noted (frame ids and lines only, no frame or tensor is kept alive past the call). When the
optimizer later holds the stale parameters while the new ones get the gradients
(:func:`gradtrace.runtime.trace.silent` reports "re-created after the optimizer"), the line
named is:

- the assignment itself when it runs in a method of the module it changes (the module re-creates
  its own parameter, e.g. ``self.scale = nn.Parameter(...)`` in an init helper): that method
  should have written into the existing parameter;
- otherwise the line, in the frame that also runs the training steps, that called the code doing
  the replacement (``speedup(model)``, ``model = fix(model)``): the helper did what it is for,
  the call came after the optimizer was built.

A Parameter registered where none was, once an optimizer exists, is noted the same way: a
module that builds ``self.rel_h = nn.Parameter(torch.randn(...))`` in ``forward`` registers a new
leaf at every call, which no optimizer holds (the line named is that assignment). When an
optimizer that steps was built after the registration (from a parameter list kept from an earlier
model), the message says so instead of "added after the optimizer was built".

# NOTE [built lazily in forward]
A layer a module builds in its own ``forward`` the first time it runs (``if self.out is None:
self.out = nn.Sequential(...)``) is registered before any optimizer has stepped, so the rule
above (an optimizer exists) cannot see it: torch tells us of an optimizer only at its first
step. A registration of a new object (none was there) from a ``forward`` is noted too. If an
optimizer then steps without those parameters while they get gradients, the optimizer was
built before that first forward, from a model that did not hold them yet: the line named is
the one in ``forward`` that built them (MONAI's ``DiffusionModelEncoder``), unless the optimizer
was built in an ``__init__`` (a class that builds its own optimizer before its first forward,
stable-baselines3's policies: that line is the one to move). Built before the optimizer (a
dummy forward first), they are in it and nothing is said.

# NOTE [rewrapped parameter]
``self.conv.weight = nn.Parameter(W.squeeze(0))`` with ``W`` computed by another layer (a
weight evolved by a GRU, a hypernetwork's output) makes a new leaf: ``Parameter`` aliases the
data without its history (``_make_subclass`` does not pass through ``__torch_function__``), so
the layers that computed ``W`` never get a gradient. When a Parameter is registered after an
optimizer exists, the assignment's ``Parameter(...)`` argument is read from the source and the
local names it uses are looked up in the frame: one that is a tensor with a ``grad_fn`` is the
source, and a cut is recorded from it to the new parameter, at that line.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.modes import Stack, common_line, user_stack
from gradtrace.runtime.trace.setter import caller_site, handed_in


@dataclass
class Replaced:
    """One replacement: the new object (weakly), the user frames, whether a method of the
    changed module made it."""

    ref: weakref.ref[Any]
    stack: Stack
    own: bool
    before: frozenset[int] = frozenset()  # the optimizers (ids) that existed then
    lazy: bool = False  # registered inside a forward before any optimizer stepped
    handed: bool = False  # the method stored an object its caller handed it (a setter)


def note_replaced(data: Any, module: Any, value: Any, lazy: bool = False) -> None:
    """Remember that ``value`` replaced another object on ``module`` (from a hook)."""
    import sys

    stack = user_stack()
    own = False
    if stack:
        f = sys._getframe(1)
        while f is not None and id(f) != stack[0][0]:
            f = f.f_back  # type: ignore[assignment]
        own = f is not None and f.f_code.co_argcount > 0 and \
            f.f_locals.get(f.f_code.co_varnames[0]) is module
        handed = own and handed_in(f, value)  # NOTE [setter stores what it is handed]
        del f
    data.replaced[id(value)] = Replaced(weakref.ref(value), stack, own,
                                        frozenset(data.optimizers), lazy, handed)


def prune_replaced(data: Any) -> bool:
    """Forget the replacements whose new object died; True if there is room again."""
    data.replaced = {k: r for k, r in data.replaced.items() if r.ref() is not None}
    return len(data.replaced) < 4096


_ARGS: dict[tuple[int, int], tuple[Any, tuple[str, ...]]] = {}


def _wrapped_names(code: Any, line: int) -> tuple[str, ...]:
    """The names read by the argument of the ``Parameter(...)`` call(s) on ``line``."""
    import ast

    from gradtrace.runtime.trace.locate import tree_of

    key = (id(code), line)
    hit = _ARGS.get(key)
    if hit is not None and hit[0] is code:
        return hit[1]
    tree = tree_of(code.co_filename)
    names: list[str] = []
    for n in ast.walk(tree) if tree is not None else ():
        if isinstance(n, ast.Call) and n.args and n.lineno <= line <= (n.end_lineno or n.lineno) \
                and (getattr(n.func, "attr", None) or getattr(n.func, "id", None)) == "Parameter":
            names.extend(m.id for m in ast.walk(n.args[0]) if isinstance(m, ast.Name))
    if len(_ARGS) > 4096:
        _ARGS.clear()
    _ARGS[key] = (code, tuple(dict.fromkeys(names)))
    return _ARGS[key][1]


def note_rewrap(state: Any, value: Any) -> None:
    """Record a cut when the Parameter ``value`` wraps a tensor with history (see NOTE)."""
    import torch

    from gradtrace.runtime.frames import user_frame

    f = user_frame(2)
    if f is None:
        return
    names = _wrapped_names(f.f_code, f.f_lineno)
    local = f.f_locals if names else {}
    src = next((t for t in (local.get(n) for n in names)
                if isinstance(t, torch.Tensor) and t.grad_fn is not None), None)
    if src is not None:
        cut = state.make_cut((f.f_code, f.f_lineno, f.f_lasti), "nn.Parameter", "detach")
        state.add_cut(value, cut, src)
    del f, local


def _lookup(data: Any, obj: Any) -> Replaced | None:
    hit = data.replaced.get(id(obj))
    return hit if hit is not None and hit.ref() is obj else None


def replacement_site(data: Any, module: Any) -> Site | None:
    """Where ``module`` (or one of its own parameters) replaced an earlier one (see NOTE)."""
    hit = _lookup(data, module) or next(
        (h for h in (_lookup(data, p) for p in module._parameters.values() if p is not None)
         if h is not None), None)
    if hit is None or not hit.stack:
        return None
    _, code, line = hit.stack[0]
    inner = Site(code.co_filename, line, code.co_name)
    if hit.own:
        return caller_site(hit.stack) if hit.handed else inner
    return common_line(hit.stack, data.step_stack or ()) or inner


def registered_after(data: Any, params: list[Any]) -> tuple[Site, str, str] | None:
    """Where one of ``params`` (in no optimizer) was registered after an optimizer existed,
    why that leaves it out and the fix (see NOTE), or None."""
    hit = next((h for h in (_lookup(data, p) for p in params) if h is not None and h.stack),
               None)
    if hit is None:
        return None
    _, code, line = hit.stack[0]
    if hit.lazy:  # NOTE [built lazily in forward]
        from gradtrace.runtime.trace.wiring import single_optimizer_built_at

        built = single_optimizer_built_at(data)
        if built is not None and built.function == "__init__":
            return None  # the class builds its own optimizer too early: that line leads
        return (Site(code.co_filename, line, code.co_name), "forward builds them here on its "
                "first call, after the optimizer was built from the model's parameters, so no "
                "optimizer holds them", "build the layer in __init__ (or build the optimizer "
                "after a first forward)")
    if hit.own:
        return (Site(code.co_filename, line, code.co_name), "the module creates them anew "
                "here each time this method runs, after the optimizer was built, so no "
                "optimizer ever holds them", "create the parameters once, in __init__, and only "
                "use them here")
    site = common_line(hit.stack, data.step_stack or ()) or Site(code.co_filename, line,
                                                                   code.co_name)
    if _stepper_built_later(data, hit):
        return (site, "they were made here, and the optimizer that steps was built after "
                "them, but from other parameters (not these), so no optimizer holds them",
                "build that optimizer from the parameters of the model that runs (its "
                "parameters() when the optimizer is built), not from a list kept from another "
                "model")
    return (site, "they were added to the model here, after the optimizer was built",
            "build the optimizer after the model is complete (or add a param group)")


def _stepper_built_later(data: Any, hit: Replaced) -> bool:
    """An optimizer that stepped was built after the registration ``hit``: then "added after
    the optimizer was built" is not what happened (NOTE [replaced after the optimizer])."""
    return any(key not in hit.before and rec.steps and rec.ref() is not None
               for key, rec in list(data.optimizers.items()))
