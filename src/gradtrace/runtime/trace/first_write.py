"""# NOTE [first write that broke a saved tensor]
backward() raises on the first node it runs whose saved tensor was changed in place: the newest
one. When the forward wrote in place more than once (``x += attn(ln_1(x))`` then
``x += mlp(ln_2(x))``, or two vectors each normalised with ``/=`` after a norm saved them), every
write broke a saved tensor and the error names the last; the line to change first is the
earliest. The failing graph is walked (the nodes backward() did not reach still hold their saved
tensors), each saved tensor that fails to unpack with the version error is matched to the traced
write that made it stale (same shape, the write saw the saved version, the written tensor was
made by the saving node or one of its inputs, the op the error names), and the earliest such
write, in the order the writes ran, is returned when it precedes the one the error named.
Only a write that broke a tensor of the error's shape counts: when the message's shape already
tells its tensor apart (EfficientDet's two fusion weights, [2, 4] and [3, 4], each divided in
place), the tensor the error names is the one reported, and its own write is the line.
"""
from __future__ import annotations

import re
from typing import Any, Sequence

from gradtrace.runtime.trace.records import created_site

_VERSION_RE = re.compile(r"\[(?P<type>[\w.]+) \[(?P<shape>[\d, ]*)\]\](?:, which is output "
                         r"\d+ of (?P<op>[\w:]+),)? is at version (?P<now>\d+); expected "
                         r"version (?P<expected>\d+)")


def _broken(node: Any) -> list[tuple[tuple[int, ...], str, int]]:
    """(shape, op, expected version) of each saved tensor of ``node`` changed in place."""
    out = []
    for attr in dir(node):
        if not attr.startswith("_saved_"):
            continue
        try:
            getattr(node, attr)
        except RuntimeError as e:
            m = _VERSION_RE.search(str(e))
            if m is not None:
                shape = tuple(int(s) for s in m["shape"].replace(" ", "").split(",") if s)
                op = re.sub(r"(Backward)?\d*$", "", (m["op"] or "").split("::")[-1])
                out.append((shape, op, int(m["expected"])))
        except Exception:  # noqa: BLE001 - any other failure: not this attribute
            continue
    return out


def _makers(node: Any) -> set[Any]:
    """The lines that made ``node`` and its inputs (where a saved tensor of it came from)."""
    sites = {created_site(node)[0]}
    try:
        sites.update(created_site(n)[0] for n, _ in node.next_functions if n is not None)
    except (AttributeError, RuntimeError):
        pass
    sites.discard(None)
    return sites


def earlier_breaking_write(roots: Sequence[Any], records: Sequence[tuple], named: tuple,
                           limit: int = 5000) -> tuple[tuple, Any] | None:
    """The earliest traced write (an in-place record) that broke a saved tensor of the graph
    from ``roots``, when it ran before ``named`` (the write the error's tensor matched) and on
    another line, with the line of the op that saved that tensor; else None."""
    order = list(records)
    at = next((i for i, r in enumerate(order) if r is named), None)
    if at is None:
        return None
    queue = [r.grad_fn for r in roots if getattr(r, "grad_fn", None) is not None]
    seen: set[int] = set()
    first, saver = at, None
    while queue and len(seen) < limit:
        node = queue.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        for shape, op, expected in _broken(node):
            if shape != named[3]:  # another tensor the message tells apart: its own bug
                continue
            makers = _makers(node)
            for i in range(first):
                r = order[i]
                if r[3] == shape and r[4] == expected and r[5] in makers \
                        and (not op or op in r[2]):
                    first, saver = i, created_site(node)[0]
                    break
        try:
            queue.extend(n for n, _ in node.next_functions if n is not None)
        except (AttributeError, RuntimeError):
            continue
    if first == at or order[first][0] == named[0]:
        return None
    return order[first], saver
