"""Where a torch layer was built, for the findings whose op ran inside that layer.

# NOTE [layer built here]
The ops of a torch layer (the ``softmax`` of an ``nn.Softmax``, the ``relu_`` of an
``nn.ReLU(inplace=True)``, the ``dropout_`` of an ``nn.Dropout(inplace=True)``) are charged to
the user line that called the layer, or the container holding it: ``self.main(x)`` for every
layer of an ``nn.Sequential``. When the layer itself is the cause (built with
``inplace=True``; a softmax before a loss that applies its own), the line to name is where it
was built. The global module-registration hook sees each torch layer registered in its parent
(``self.act = nn.ReLU(inplace=True)``, ``seq.add_module("softmax", nn.Softmax(1))``, or the
``nn.Sequential(...)`` / ``nn.ModuleList([...])`` call that registers its arguments) and keeps
the user line then running, with the parent and the name. For a container's call the file's
syntax tree maps the name (the index) to the argument's line: the call on that line whose
positional arguments (or list literal) are as many as the container's layers, none starred.
Only a layer an ``nn.Sequential`` called is named so: a layer the user's line calls itself
(``return self.softmax(x)``) is named by that line. Which layer ran an op is read from the
stack at the op (the innermost torch layer's ``forward`` frame, under a Sequential's: in-place
writes and the failing call of a crash only) or, for a graph node found later, from the layers
of a Sequential first called on the node's line, when one only is of the node's kind
(``Softmax`` for a ``SoftmaxBackward0``). A container call whose arguments cannot be counted
(``nn.Sequential(*layers)``) names nothing. Only torch's own layer classes are recorded: a
user module's ops are charged to its own ``forward`` lines already.
"""
from __future__ import annotations

import ast
import sys
import weakref
from typing import Any, Callable, Iterator

import torch

from gradtrace.runtime.frames import Site, is_internal
from gradtrace.runtime.trace.locate import tree_of

_LIMIT = 8192  # layers remembered
_CONTAINERS = (torch.nn.Sequential, torch.nn.ModuleList)
_DDP = torch.nn.parallel.DistributedDataParallel


def _torch_layer(m: Any) -> bool:
    return isinstance(m, torch.nn.Module) and type(m).__module__.startswith("torch.nn.") \
        and not isinstance(m, (*_CONTAINERS, torch.nn.ModuleDict))


def note_built(built: dict[int, Any], parent: torch.nn.Module, name: str, value: Any,
               site: Callable[[], Site | None]) -> None:
    """Registration hook: remember where the torch layer ``value`` was registered, and where a
    ``DistributedDataParallel`` was built (it registers the module it wraps as ``module`` in its
    ``__init__``: the user line then running is the ``DDP(...)`` call, also inside a helper
    that returns the wrapper; NOTE [wrapper built here])."""
    if name == "module" and isinstance(parent, _DDP) and len(built) < _LIMIT:
        value = parent
    elif not _torch_layer(value) or len(built) >= _LIMIT:
        return
    at = site()
    if at is not None:
        default = _default(sys._getframe(1)) if value is parent else None  # a DDP wrapper
        built[id(value)] = (weakref.ref(value), weakref.ref(parent), name, at, default)


def _default(frame: Any) -> Site | None:
    from gradtrace.runtime.trace.flag_default import flag_default

    return flag_default(frame)  # NOTE [flag left at its default]


def built_site(built: dict[int, Any] | None, layer: Any) -> Site | None:
    """The line that built ``layer`` (NOTE [layer built here]), or None."""
    rec = built.get(id(layer)) if built else None
    if rec is None or rec[0]() is not layer:
        return None
    parent, name, at = rec[1](), rec[2], rec[3]
    if isinstance(parent, _CONTAINERS) and name.isdigit():  # a container's call: its argument
        line = _argument_line(at, len(parent), int(name), isinstance(parent, torch.nn.ModuleList))
        return None if line is None else Site(at.path, line, at.function)
    return at


def _argument_line(at: Site, size: int, index: int, listed: bool) -> int | None:
    """The line of argument ``index`` of the container call running at ``at`` (a call with
    ``size`` positional arguments, or one list/tuple literal of ``size`` items): the call
    that starts at ``at``'s column, else the only one around its line."""
    tree = tree_of(at.path)
    found: list[tuple[bool, int]] = []  # (starts at the column, the argument's line)
    for node in ast.walk(tree) if tree is not None else ():
        if not isinstance(node, ast.Call) or not node.lineno <= at.line <= (node.end_lineno
                                                                            or node.lineno):
            continue
        items = node.args
        if listed:
            items = node.args[0].elts if len(node.args) == 1 and isinstance(
                node.args[0], (ast.List, ast.Tuple)) else []
        if len(items) != size or any(isinstance(a, ast.Starred) for a in items):
            continue
        found.append(((node.lineno, node.col_offset) == (at.line, at.column),
                      items[index].lineno))
    exact = [line for hit, line in found if hit]
    if len(exact) == 1 or len(found) == 1:
        return (exact or [found[0][1]])[0]
    return None


def forward_selves(f: Any, limit: int = 32) -> Iterator[Any]:
    """The ``self`` of each ``forward`` on the stack from frame ``f`` outwards, innermost first,
    up to the first frame of the user's code (at most ``limit`` frames)."""
    while f is not None and limit > 0:
        code = f.f_code
        if not is_internal(code):
            return
        if code.co_name == "forward" and code.co_varnames[:1] == ("self",):
            yield f.f_locals.get("self")
        f, limit = f.f_back, limit - 1


def running_layer(limit: int = 32) -> Any:
    """The innermost torch layer whose ``forward`` is on the stack, called by an
    ``nn.Sequential`` below the user's frame (the layer running the caller's op), or None: a
    layer the user's own line calls is named by that line."""
    layer = None
    for me in forward_selves(sys._getframe(1), limit):
        if layer is None and _torch_layer(me):
            layer = me
        elif layer is not None and isinstance(me, torch.nn.Module):
            return layer if isinstance(me, torch.nn.Sequential) else None
    return None


def layer_here(state: Any) -> Site | None:
    """Where the torch layer running the current op was built (None outside one)."""
    built = getattr(state.hooks_data, "built", None)
    if not built:
        return None
    layer = running_layer()
    return None if layer is None else built_site(built, layer)


def layer_called_at(state: Any, site: Site | None, kind: str) -> Site | None:
    """Where the one torch layer of class ``kind`` first called on ``site`` was built (a node
    of that kind made on a line that calls a container: NOTE [layer built here])."""
    data = state.hooks_data
    if site is None or data is None or not getattr(data, "built", None):
        return None
    found = [m for r in list(data.modules.values()) if r.site == site
             for m in (r.ref(),) if m is not None and type(m).__name__ == kind
             and isinstance(_parent(data.built, m), torch.nn.Sequential)]
    return built_site(data.built, found[0]) if len(found) == 1 else None


def _parent(built: dict[int, Any], layer: Any) -> Any:
    rec = built.get(id(layer))
    return rec[1]() if rec is not None and rec[0]() is layer else None
