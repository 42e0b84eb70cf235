"""A soft target that is not detached: the loss trains the network that made the target.

# NOTE [soft target not detached]
A distillation or soft-label loss compares a student's log-probabilities with a teacher's
probabilities, ``-(softmax(t) * log_softmax(s)).sum(-1)``, ``F.kl_div(log_softmax(s),
softmax(t))`` or ``F.cross_entropy(s, softmax(t))``: all three build a ``Mul`` node whose two
inputs are a ``Softmax`` and a ``LogSoftmax`` (or a ``Log`` of a softmax). The probabilities are
a target: when they are not detached, backward() also sends the loss's gradient into the
network that made them, which then learns to match the student (the teacher of a dual decoder
trained on its own loss drifts, a target network moves). Nothing fails. The walk of the first
loss graphs (:func:`.graph_scan.scan_loss_graph`) looks at each such ``Mul`` and collects, on
each side, the leaves that require grad (``AccumulateGrad`` nodes) its subgraph reaches. The
target side is reported when it reaches trained leaves the log-probability side does not (the
two sides come from different networks): an entropy term ``-(p * log p)`` over one set of
logits reaches the same leaves on both sides and is left alone; a detached target reaches none.
The finding is made at the end only when an optimizer that stepped holds one of those leaves
(a teacher no optimizer steps only wastes a backward), and names the line that made the
softmax, with the product's line as related. Not reported either when that loss's gradient
never reaches those steps: the walk notes the line of the backward() that ran the loss, and
NOTE [another optimizer's gradient applied again]'s windows record, per optimizer, the
backward() lines whose gradients each of its steps applied (none cleared between them and the
step; only while every backward() is seen, before the tracer's first unarmed step); when every optimizer holding the target's leaves has such windows and none holds that
line, the program clears the target network's gradients after the soft-label loss's backward()
and before its own step (meta pseudo labels' ``teacher.zero_grad()`` after the student's step).
Without windows (one step only, gradients zeroed unseen) the finding stays.
"""
from __future__ import annotations

from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.build import make, src
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.records import created_site, node_name

_VIEWS = ("View", "UnsafeView", "Unsqueeze", "Squeeze", "Permute", "Transpose", "Reshape",
          "ReshapeAlias", "Clone", "ToCopy", "Expand", "Alias", "T", "Contiguous", "Select",
          "Slice")
_LIMIT = 4000  # nodes walked per side


def _through_views(node: Any, limit: int = 8) -> Any:
    while node is not None and limit > 0 and node_name(node) in _VIEWS:
        nxt = node.next_functions
        if not nxt or nxt[0][0] is None:
            return node
        node, limit = nxt[0][0], limit - 1
    return node


def _kind(node: Any) -> str:
    """``target`` for a softmax, ``log`` for a log_softmax or a log of a softmax, else ''."""
    node = _through_views(node)
    name = node_name(node) if node is not None else ""
    if name == "Softmax":
        return "target"
    if name == "LogSoftmax":
        return "log"
    if name == "Log":
        inner = node.next_functions
        if inner and inner[0][0] is not None and node_name(_through_views(inner[0][0])) == \
                "Softmax":
            return "log"
    return ""


def leaf_vars(node: Any) -> dict[int, Any]:
    """id -> tensor, for the leaves that require grad under ``node`` (at most ``_LIMIT`` nodes
    walked); shared with :mod:`.score_weight`."""
    todo, seen, out = [node], set(), {}
    while todo and len(seen) < _LIMIT:
        n = todo.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        var = getattr(n, "variable", None) if type(n).__name__ == "AccumulateGrad" else None
        if var is not None:
            out[id(var)] = var
            continue
        try:
            todo.extend(m for m, _ in n.next_functions)
        except (AttributeError, RuntimeError):
            continue
    return out


def product_inputs(node: Any) -> list[Any] | None:
    """The two input nodes of a binary graph node (a ``Mul``), both present; else None."""
    try:
        pair = [n for n, _ in node.next_functions]
    except (AttributeError, RuntimeError):
        return None
    return pair if len(pair) == 2 and pair[0] is not None and pair[1] is not None else None


def check_product(state: Any, node: Any) -> None:
    """From the loss-graph walk, on a ``Mul`` node (NOTE [soft target not detached])."""
    if len(state.soft_targets) >= 4 or (pair := product_inputs(node)) is None:
        return
    kinds = (_kind(pair[0]), _kind(pair[1]))
    if sorted(kinds) != ["log", "target"]:
        return
    target, log = (pair[0], pair[1]) if kinds[0] == "target" else (pair[1], pair[0])
    soft = _through_views(target)
    site = created_site(soft)[0]
    if site is None or site in state.soft_targets:
        return
    only = leaf_vars(soft).keys() - leaf_vars(log).keys()
    if only:
        at = state.backward_sites[-1] if state.backward_sites else None
        state.soft_targets[site] = (only, created_site(node)[0], at)


def _cleared(state: Any, data: Any, only: set[int], at: Site | None) -> bool:
    """Every optimizer that steps one of ``only`` has recorded the backward() lines its steps
    applied, and none of them is ``at`` (NOTE [soft target not detached])."""
    order = getattr(state, "order", None)
    if order is None or at is None:
        return False
    recs = [rec for rec in list(data.optimizers.values()) if rec.steps and rec.ref() and any(
        id(p) in only for g in rec.ref().param_groups for p in g["params"])]
    return bool(recs) and all(order.applied.get(id(rec)) and at not in order.applied[id(rec)]
                              for rec in recs)


def soft_target_findings(state: Any, data: Any) -> list[Finding]:
    """NOTE [soft target not detached]: the targets whose own leaves an optimizer steps."""
    stepped = {id(p) for rec in list(data.optimizers.values()) if rec.steps and rec.ref()
               for g in rec.ref().param_groups for p in g["params"]}
    out: list[Finding] = []
    for site, (only, product, at) in list(state.soft_targets.items()):
        trained = len(only & stepped)
        if not trained or _cleared(state, data, only, at):
            continue
        related: list[tuple[Site | None, str]] = [
            (product, "the target probabilities are multiplied by log-probabilities here")]
        out.append(make("GT878", site,
                        f"this softmax is the target of a soft-label loss (line "
                        f"{product.line if product else '?'}: "
                        f"{src(product) if product else 'the product'}), but it is not "
                        f"detached: backward() sends that loss's gradient into the network "
                        f"that made it ({trained} trained tensor{'s' if trained > 1 else ''} "
                        "the log-probabilities do not depend on), and the optimizer steps "
                        "them, so the target moves towards the prediction",
                        fix="detach the target (`softmax(teacher_logits, -1).detach()`, or "
                            "compute it under torch.no_grad())",
                        related=related, severity="warning"))
    return out
