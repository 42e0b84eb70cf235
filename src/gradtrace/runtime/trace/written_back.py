"""The statement that sliced a tensor, handed the slice on and wrote the result back into it.

# NOTE [slice written back on its own line]
``q[:, :, 1:] = rotate(q[:, :, 1:], freqs)`` (RoPE-ViT's rotary embedding of every token but
the class token; a partial rotary ``x[..., :r] = rope(x[..., :r])``): the callee takes views of
its argument (``reshape``, ``view_as_complex``: the same memory) and an op saves one of them for
backward (the complex product); the statement's ``__setitem__`` then writes into the tensor the
slice views, the saved view changes with it, and backward() fails. The saved tensor has another
shape than the write (a complex view of the slice), so no recorded write matches it
(NOTE [write into a detached copy] and the shape match in ``diagnose_inplace`` look at the
write's own tensor); NOTE [whole write of a viewed tensor] would name the line that made the
saved view, inside the helper. What the run sees: the saved tensor's chain of view nodes (each
stamped with its user line, NOTE [hot path]) passes through a view made by the very statement
that then wrote in place (a recorded in-place write with that site): that statement read the
region and wrote it back, and is where the new tensor must be built out of place
(``torch.cat`` of the untouched part and the result). A view made on one line and written back
on another (``t = x[:, 0].reshape(...)``, later ``x[:, 0] = f(t)``) has no view of the
writing line in its chain: the view's line stays named.
"""
from __future__ import annotations

from typing import Any, Iterable

from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.records import created_site, node_name


def written_back(view: Any, writes: Iterable[Any], views: frozenset[str]
                 ) -> tuple[Site, str] | None:
    """(site, op) of the last recorded in-place write made by a statement that also made one
    of the nodes from ``view`` down to the first node whose name is not in ``views`` (the
    view ops), or None."""
    sites: set[Site] = set()
    node = view
    for _ in range(64):
        if node is None or node_name(node) not in views:
            break
        made = created_site(node)[0]
        if made is not None:
            sites.add(made)
        try:
            node = next((m for m, _ in node.next_functions if m is not None), None)
        except (AttributeError, RuntimeError):
            break
    if not sites:
        return None
    for r in reversed(list(writes)):
        if r[0] in sites and r[0] != created_site(view)[0]:
            return r[0], r[1]
    return None
