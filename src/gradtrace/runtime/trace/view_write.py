"""An in-place write through a view of a tensor an op saved for backward.

``part = out[..., :k]`` (or ``out.reshape(...)[..., :k]``) then ``part /= c``: the write
changes ``out`` too, through shared memory, and bumps the version of the tensor an earlier op
saved (a ReLU saves its output; a multiply saves its inputs). Its recorded shape is the view's,
not the saved tensor's, so the write is not matched by shape. Autograd itself records the
link: the base's new node is a ``CopySlices`` whose first input is the base's old node. The
write's line is stamped on that ``CopySlices`` node (a key of ours in ``metadata``, which
pickle and deepcopy never see: graph nodes are not saved), and an in-place crash whose saved
tensor is that base names the first such write after the save.
"""
from __future__ import annotations

from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make, src
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.records import node_name

META_VIEW_WRITE = "gradtrace.view_write"  # -> (Site, op)


def _copy_slices(after: Any) -> Any:
    """The ``CopySlices`` node a written view's new node reads from, through view nodes only
    (``AsStrided``, or a replayed ``Slice``/``View`` chain)."""
    from gradtrace.runtime.trace.diagnose_alias import VIEW_NODES

    node = after
    for _ in range(8):
        if node is None:
            return None
        name = node_name(node)
        if name == "CopySlices":
            return node
        if name not in VIEW_NODES:
            return None
        try:
            node = next((n for n, _ in node.next_functions if n is not None), None)
        except (AttributeError, RuntimeError):
            return None
    return None


def stamp_view_write(before: Any, after: Any, where: Site, op: str) -> None:
    """After an in-place ``op`` at ``where`` turned a view's node ``before`` into ``after``:
    mark the base's new ``CopySlices`` node with the write."""
    from gradtrace.runtime.trace.diagnose_alias import VIEW_NODES

    if before is None or after is None or after is before or node_name(before) not in VIEW_NODES:
        return
    cs = _copy_slices(after)
    if cs is None:
        return
    try:
        cs.metadata.setdefault(META_VIEW_WRITE, (where, op))
    except (AttributeError, RuntimeError):
        return


def view_write_of(roots: list[Any], saver_node: Any, limit: int = 5000) -> tuple[Site, str] | None:
    """The write through a view that changed the tensor ``saver_node`` saved: a stamped
    ``CopySlices`` right over ``saver_node`` (it saved its own output, as ReLU does) or right
    over one of its input nodes (it saved an input). Right over: the first write after the
    save (a write before it made the node the op read)."""
    if saver_node is None:
        return None
    try:
        inputs = {id(n) for n, _ in saver_node.next_functions if n is not None}
    except (AttributeError, RuntimeError):
        inputs = set()
    inputs.add(id(saver_node))
    queue = [r.grad_fn for r in roots if getattr(r, "grad_fn", None) is not None]
    seen: set[int] = set()
    while queue and len(seen) < limit:
        node = queue.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        try:
            below = [n for n, _ in node.next_functions]
        except (AttributeError, RuntimeError):
            continue
        if node_name(node) == "CopySlices" and below and below[0] is not None \
                and id(below[0]) in inputs:
            stamp = node.metadata.get(META_VIEW_WRITE)
            if stamp is not None:
                return stamp
        queue.extend(n for n in below if n is not None)
    return None


def view_write_finding(roots: list[Any], node: Any, saver: Site | None, shape: tuple[int, ...],
                       pat: Any, site: Site | None) -> list[Finding]:
    """The in-place crash named on the write through a view (see the module doc)."""
    hit = view_write_of(roots, node)
    if hit is None or saver is None:
        return []
    where, op = hit
    saved = node_name(node)
    return [make(code_for("inplace-on-saved-tensor", pat.code), where,
                 f"`{op}` here writes in place into a view (a slice or reshape) of a tensor "
                 f"(shape {list(shape)}) that `{saved}` saved for backward at {src(saver)}: the "
                 "view shares its memory, so the saved tensor changed too and backward() "
                 "found a newer version",
                 fix="use the out-of-place form here (part = part / c), or .clone() the view "
                     "before writing into it",
                 related=[(saver, f"`{saved}` saved the tensor for backward here"),
                          (site, "backward() failed here")])]
