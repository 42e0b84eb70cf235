"""Walks of the autograd graph a traced ``backward()`` runs: its roots, the nodes it frees
(stamped so a second backward through them is named), the leaves under a tensor."""
from __future__ import annotations

import sys
from types import CodeType, FrameType
from typing import Any, Iterator

import torch

from gradtrace.runtime import frames
from gradtrace.runtime.frames import Site, is_internal
from gradtrace.runtime.trace.records import (META_CALLED, META_CALLED_LATER, META_CREATED, META_FREED,
                                             META_FREED_VIA, META_RETAINED, created_site,
                                             decode_meta)

Tensor = torch.Tensor


def roots_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Tensor]:
    """The tensors a backward()/autograd.grad call starts from (its first argument)."""
    first = args[0] if args else kwargs.get("tensors", kwargs.get("outputs"))
    if isinstance(first, Tensor):
        return [first]
    return [t for t in (first or ()) if isinstance(t, Tensor)]


def backward_roots(func: Any, args: tuple[Any, ...],
                    kwargs: dict[str, Any]) -> tuple[list[Tensor], bool]:
    roots = roots_of(args, kwargs)
    if func is torch.Tensor.backward:
        retain = kwargs.get("retain_graph", args[2] if len(args) > 2 else None)
        create = kwargs.get("create_graph", args[3] if len(args) > 3 else False)
    elif func is torch.autograd.grad:
        retain = kwargs.get("retain_graph", args[3] if len(args) > 3 else None)
        create = kwargs.get("create_graph", args[4] if len(args) > 4 else False)
    else:
        retain = kwargs.get("retain_graph", args[2] if len(args) > 2 else None)
        create = kwargs.get("create_graph", args[3] if len(args) > 3 else False)
    return roots, bool(create if retain is None else retain)


def stamp_freed(roots: list[Tensor], stamp: tuple[Any, int, int], limit: int = 5000,
                retained: bool = False) -> None:
    """Mark every node of the graph a backward just freed (walk bounded by ``limit``), with
    the creating line of the traced node that consumed it in that graph (META_FREED_VIA);
    ``retained``: the backward kept the graph (retain_graph=True), META_RETAINED on the nodes
    no backward went through before."""
    acc = _ACCUMULATE  # AccumulateGrad saves nothing, and is shared across graphs
    stack: list[tuple[Any, Any]] = [(r.grad_fn, None) for r in roots
                                     if isinstance(r, Tensor) and r.grad_fn is not None]
    seen: dict[int, Any] = {}  # keeps the wrappers alive during the walk so ids stay unique
    pop, push = stack.pop, stack.append
    while stack and len(seen) < limit:
        node, via = pop()
        key = id(node)
        if key in seen:
            continue
        seen[key] = node
        try:
            meta = node.metadata
            if retained:
                if META_FREED not in meta and META_RETAINED not in meta:
                    meta[META_RETAINED] = stamp
            elif META_FREED not in meta:
                meta[META_FREED] = stamp
                if via is not None:
                    meta[META_FREED_VIA] = via
            via = meta.get(META_CREATED, via)
            nexts = node.next_functions
        except (AttributeError, RuntimeError):
            continue
        for n, _ in nexts:
            if n is not None and type(n) not in acc:
                push((n, via))


def note_called_with(args: tuple) -> None:
    """Stamp each tensor argument's ``grad_fn`` (a value carrying a graph) with the user line of
    the first module call given it (META_CALLED), from the global forward pre-hook.

    # NOTE [module input stamp]
    A graph freed through a model's ``forward`` is consumed at a line inside it
    (``self.main(input)``), while the line to change is the call that handed the value in
    (``netD(fake)`` without ``.detach()``): the freed node keeps that call. The outer call
    comes first, so the first stamp is the caller's; the inner layers' calls find it there.

    Only a call written in user code stamps (the frame under torch's ``Module.__call__``
    machinery is the user's): a library container's calls of its layers (``Sequential``,
    ``DistributedDataParallel.forward``) hand in values the container made itself, and the
    user line above them lies in the function that consumed the value, which
    :func:`caller_between` rejects anyway. So a layer inside a library container costs a
    short walk of the call machinery (about six cached frames), not a walk to the user's
    frame, and writes nothing. The hook runs on armed (recorded) steps only
    (NOTE [trace arming]); a node is stamped once, with a ``(code, line, 0)`` tuple (no frame
    is held).
    Left: a module whose first call is made by a library helper (a ``checkpoint(netD,
    fake)``) gets no stamp, and the freed-graph finding leads at the consumer as before the
    stamp existed.

    A value made inside one model and given to its own layers there first (VITS2's text
    encoder output `hidden_x`, read by the duration predictor inside the generator's
    ``forward``), then returned and handed to another model by the training step
    (``net_dur_disc(hidden_x, ...)``), has its first stamp in the generator's ``forward``: the
    later calls from other functions are kept too (META_CALLED_LATER, at most four, one per
    function), so :func:`caller_between` finds the step's call. That costs a walk to the
    user's frame for a value given to a second module call (most layers' inputs are fresh
    outputs of the layer before, stamped once)."""
    raw = None
    for a in args:
        gf = a.grad_fn if isinstance(a, Tensor) else None
        if gf is None:
            continue
        try:
            meta = gf.metadata
            if raw is None:
                raw = _user_call(sys._getframe(1))
                if raw is None:
                    return
            first = meta.get(META_CALLED)
            if first is None:
                meta[META_CALLED] = raw
            elif first[0] is not raw[0]:
                later = meta.setdefault(META_CALLED_LATER, [])
                if len(later) < 4 and all(c[0] is not raw[0] for c in later):
                    later.append(raw)
        except (AttributeError, RuntimeError):
            continue


def _user_call(f: FrameType | None) -> tuple[CodeType, int, int] | None:
    """``(code, line, 0)`` of the frame that called the module whose pre-hook is running
    (``f`` is a frame of the hook), past torch's ``Module.__call__`` frames and gradtrace's;
    None when that frame is not user code (a library container's call of its layers)."""
    glue = _GLUE
    while f is not None:
        code = f.f_code
        hit = glue.get(id(code))
        if hit is None:
            fn = code.co_filename
            hit = fn == _MODULE_FILE or fn.startswith(frames.INTERNAL_PREFIXES[0])
            glue[id(code)] = hit
            _GLUE_KEEP.append(code)  # keeps the id from being reused while cached
        if not hit:
            return None if is_internal(code) else (code, f.f_lineno, 0)
        f = f.f_back
    return None


_MODULE_FILE = torch.nn.modules.module.__file__
_GLUE: dict[int, bool] = {}  # id(code) -> a frame of Module.__call__ or of gradtrace
_GLUE_KEEP: list[CodeType] = []


def caller_between(node: Any, used: Site | None, site: Site) -> Site | None:
    """The module call of ``site``'s function that handed ``node``'s value in (META_CALLED),
    when the value was used inside a function that call ran (``used``), and the call stands
    before ``site`` in that function. NOTE [module input stamp]."""
    try:
        stamps = [node.metadata.get(META_CALLED), *node.metadata.get(META_CALLED_LATER, ())]
    except (AttributeError, RuntimeError):
        return None
    if used is None or used.function == site.function:
        return None
    for raw in stamps:
        called, _ = decode_meta(raw)
        if called is not None and (called.path, called.function) == (site.path, site.function) \
                and called.line <= site.line:
            return called
    return None


def graph_nodes(roots: list[Tensor], limit: int = 5000) -> Iterator[Any]:
    """Each node of the graph behind ``roots`` once, depth first (at most ``limit``)."""
    stack = [r.grad_fn for r in roots if r.grad_fn is not None]
    seen: dict[int, Any] = {}  # keeps the wrappers alive during the walk so ids stay unique
    while stack and len(seen) < limit:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node
        yield node
        try:
            stack.extend(n for n, _ in node.next_functions if n is not None)
        except (AttributeError, RuntimeError):
            continue


def leaf_tensors(roots: list[Tensor], limit: int) -> list[Tensor]:
    """The leaf tensors (parameters) the ``roots`` were computed from (at most ``limit``)."""
    out: list[Tensor] = [r for r in roots if r.grad_fn is None and r.requires_grad]
    return out + leaves_below([r.grad_fn for r in roots if r.grad_fn is not None],
                              limit - len(out))


def leaves_below(nodes: list[Any], limit: int) -> list[Tensor]:
    """The leaf tensors the graph nodes ``nodes`` reach (at most ``limit``, 5000 nodes)."""
    out: list[Tensor] = []
    stack = list(nodes)
    seen: dict[int, Any] = {}  # keeps the wrappers alive during the walk so ids stay unique
    while stack and len(out) < limit and len(seen) < 5000:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node
        var = getattr(node, "variable", None)
        if isinstance(var, Tensor):
            out.append(var)
            continue
        try:
            stack.extend(n for n, _ in node.next_functions if n is not None)
        except (AttributeError, RuntimeError):
            continue
    return out


def _accumulate_types() -> frozenset[type]:
    leaf = torch.zeros(1, requires_grad=True)
    return frozenset({type((leaf * 1).grad_fn.next_functions[0][0])})


_ACCUMULATE = _accumulate_types()


def reaches_marked(node: Any, key: str, limit: int = 256) -> bool:
    """Whether the graph from ``node`` reaches, within ``limit`` nodes, a node whose metadata
    holds ``key`` (NOTE [retained graph], a freed graph's stamp)."""
    stack, seen = [node], set()
    while stack and len(seen) < limit:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        try:
            if key in n.metadata:
                return True
            stack.extend(m for m, _ in n.next_functions if m is not None)
        except (AttributeError, RuntimeError):
            continue
    return False


def freed_user(roots: list[Any], limit: int = 5000) -> tuple[tuple[Any, int] | None, Any]:
    """Breadth-first from the roots of a failing backward(): the first node a backward()
    freed, and the traced line (with its creation sequence) of the node that consumes it
    (None when no traced node does)."""
    queue = [(r.grad_fn, None) for r in roots if r.grad_fn is not None]
    seen: set[int] = set()
    while queue and len(seen) < limit:
        node, user = queue.pop(0)
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        try:
            if META_FREED in node.metadata:
                return user, node
            where, seq = created_site(node)
            mine = (where, seq) if where is not None else user
            queue.extend((n, mine) for n, _ in node.next_functions if n is not None)
        except (AttributeError, RuntimeError):
            continue
    return None, None
