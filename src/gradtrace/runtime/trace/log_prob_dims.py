"""Which line made the extra dimension of a loss target: a log-probability never summed.

# NOTE [per-dimension log-probability in the loss]
``Normal(mu, std).log_prob(a)`` of a K-dimensional action is one log-density per dimension,
shape (B, K): the distribution's batch shape, its event shape empty (``Independent(..., 1)``
or ``.sum(-1, keepdim=True)`` makes it the action's log-probability, (B, 1)). SAC's target
``r + gamma * (q - alpha * log_prob)`` then broadcasts the (B, 1) value against it, the target
is (B, K), and the critic's ``mse_loss`` of its (B, 1) prediction against that target warns
"Using a target size ... different to the input size" at the loss line; the line to change is
the ``log_prob`` call. When torch warns so (NOTE [revealing warnings]) and the two sides have
the same number of dimensions and differ in one, where one side has 1 and the other K, the wide
side's graph is walked (its own, or, for a ``.detach()``-ed target, the graph of the tensor in a
calling frame that shares its memory, shape and offset) through the nodes whose output has the
wide shape (``Node._input_metadata``: the shape of the gradient a node receives is its
output's); the first of them made by a statement that calls a distribution's ``log_prob`` (the
torch.distributions API, and a ``log_prob`` of torch.distributions ran in this process) is
named. A log-probability summed before it meets the loss has another shape and is not walked
into; a mismatch with no such call on the wide path keeps the loss line (a target with an extra
dimension from elsewhere); a target computed with grad off has no graph and keeps it too.
"""
from __future__ import annotations

import ast
import types
from typing import Any

import torch

from gradtrace.runtime.frames import INTERNAL_FILES, Site
from gradtrace.runtime.trace.records import created_site

Tensor = torch.Tensor
_API = "log_prob"  # torch.distributions.Distribution.log_prob
_LIMIT = 400  # nodes walked at most


def log_prob_site(frame: types.FrameType | None) -> Site | None:
    """NOTE [per-dimension log-probability in the loss]: the ``log_prob`` line, or None."""
    from gradtrace.runtime.trace.squeezed_side import _loss_frame

    loss = None if frame is None else _loss_frame(frame)
    if loss is None:
        return None
    a, b = loss.f_locals.get("input"), loss.f_locals.get("target")
    if not (isinstance(a, Tensor) and isinstance(b, Tensor)) or a.dim() != b.dim():
        return None
    diff = [d for d in range(a.dim()) if a.shape[d] != b.shape[d]]
    if len(diff) != 1 or 1 not in (a.shape[diff[0]], b.shape[diff[0]]) or not _ran():
        return None
    wide = a if a.shape[diff[0]] != 1 else b
    node = wide.grad_fn or _detached_from(wide, frame)
    return None if node is None else _walk(node, list(wide.shape))


def _ran() -> bool:
    """A ``log_prob`` of torch.distributions ran in this process (its code was seen)."""
    return any(c.co_name == _API and "distributions" in c.co_filename
               for c in list(INTERNAL_FILES))


def _detached_from(t: Tensor, frame: types.FrameType | None) -> Any:
    """The graph node of the tensor a ``.detach()`` of which ``t`` is: a local of ``frame`` or
    a caller's with a graph and the same memory, offset and shape."""
    try:
        ptr, off = t.data_ptr(), t.storage_offset()
    except RuntimeError:
        return None
    f, depth = frame, 0
    while f is not None and depth < 8:
        for v in list(f.f_locals.values()):
            if isinstance(v, Tensor) and v is not t and v.grad_fn is not None \
                    and v.shape == t.shape and v.data_ptr() == ptr \
                    and v.storage_offset() == off:
                return v.grad_fn
        f, depth = f.f_back, depth + 1
    return None


def _shape(node: Any) -> list[int] | None:
    try:
        return list(node._input_metadata[0].shape)
    except (AttributeError, IndexError, RuntimeError, TypeError):
        return None


def _walk(root: Any, shape: list[int]) -> Site | None:
    level, seen, calls = [root], {id(root)}, {}
    while level and len(seen) < _LIMIT:
        nxt = []
        for node in level:
            site = created_site(node)[0]
            if site is not None:
                hit = calls.get(site)
                if hit is None:
                    hit = calls[site] = _calls_api(site)
                if hit:
                    return site
            try:
                below = [n for n, _ in node.next_functions if n is not None]
            except (AttributeError, RuntimeError):
                continue
            for n in below:
                if id(n) not in seen and _shape(n) == shape:
                    seen.add(id(n))
                    nxt.append(n)
        level = nxt
    return None


def _calls_api(site: Site) -> bool:
    from gradtrace.runtime.trace.crash_general import statement_at

    stmt = statement_at(site)
    return stmt is not None and any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == _API
        for n in ast.walk(stmt))
