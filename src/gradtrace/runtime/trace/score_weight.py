"""A reward that weighs log-probabilities (REINFORCE) is not detached: the policy-gradient loss
also trains the network that made the reward.

# NOTE [reward weight not detached]
A score-function (REINFORCE) loss is ``-(log_prob(action) * reward)``: the reward (an advantage,
a return, a distance to a target) is a number that weighs the log-probability of each sampled
action. When it is computed with a graph from another network (visdial-rl's ``reward =
prevFeatDist - featDist`` from the Q-bot's image regression; a critic's value not detached from
the advantage), backward() also sends the policy loss's gradient into that network: it is
pushed to change the reward, not the policy, and its own regression is disturbed. Nothing fails.

The walk of the first loss graphs (:func:`.graph_scan.scan_loss_graph`) looks at each ``Mul``
node whose one side is a log-probability: a ``log_softmax`` or the normalised logits of a
``Categorical`` (``logits - logits.logsumexp(-1)``), read through a gather, an index, views and
scalar factors, as ``dist.log_prob(a)`` builds them. The other side is the weight. It is a
candidate when it reaches leaves that require grad that the log-probability side does not
(another network: an entropy ``p * log p`` or a focal factor computed from the same logits
reaches the same leaves; a detached reward reaches none), and one of them is a Parameter. A
weight that is a softmax is a soft target (NOTE [soft target not detached]) and is left there.
The finding names the product's line. GT898.
"""
from __future__ import annotations

from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.build import make
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.paired_mean import paired_mean_findings
from gradtrace.runtime.trace.records import created_site, node_name
from gradtrace.runtime.trace.soft_target import _VIEWS, _kind, leaf_vars, product_inputs

_THROUGH = frozenset(_VIEWS) | {"Gather", "Index", "Select", "IndexSelect", "Neg", "Squeeze",
                                "Unsqueeze", "Slice", "Stack", "Cat"}
_DEPTH = 8
_KEPT = 4


def _log_prob(node: Any) -> bool:
    """``node`` is a log-probability read through gathers, views and scalar factors."""
    for _ in range(_DEPTH):
        if node is None:
            return False
        name = node_name(node)
        try:
            nxt = [n for n, _ in node.next_functions if n is not None]
        except (AttributeError, RuntimeError):
            return False
        if name == "LogSoftmax":
            return True
        if name == "Sub":  # Categorical(logits=...): logits - logits.logsumexp(-1)
            return any(node_name(n) == "Logsumexp" for n in nxt)
        if name == "Log":
            return bool(nxt) and _kind(nxt[0]) == "target"
        if name in _THROUGH or name == "Mul" and len(nxt) == 1:
            if not nxt:
                return False
            node = nxt[0]
            continue
        return False
    return False


def _leaves(node: Any) -> dict[int, bool]:
    """id -> is a Parameter, for the leaves that require grad under ``node``."""
    return {i: isinstance(v, torch.nn.Parameter) for i, v in leaf_vars(node).items()}


def check_weight(state: Any, node: Any) -> None:
    """From the loss-graph walk, on a ``Mul`` node (see the NOTE)."""
    if len(state.score_weights) >= _KEPT or (pair := product_inputs(node)) is None:
        return
    if _log_prob(pair[0]):
        log, weight = pair
    elif _log_prob(pair[1]):
        weight, log = pair
    else:
        return
    if _log_prob(weight) or _kind(weight) == "target":
        return
    site = created_site(node)[0]
    if site is None or site in state.score_weights:
        return
    mine = _leaves(weight)
    if not mine:
        return
    theirs = _leaves(log)
    only = [k for k, param in mine.items() if k not in theirs and param]
    if only:
        state.score_weights[site] = len(only)


def score_weight_findings(state: Any) -> list[Finding]:
    """GT898 (see the NOTE)."""
    out: list[Finding] = []
    for site, count in list(state.score_weights.items()):
        at: Site = site
        out.append(make("GT898", at,
                        "the log-probabilities here are weighted by a value that is not "
                        f"detached and comes from another network ({count} parameter "
                        f"tensor{'s' if count > 1 else ''} the log-probabilities do not depend "
                        "on): backward() sends this policy-gradient loss into that network "
                        "too, which learns to change the reward instead of the policy",
                        fix="detach the weight (`reward.detach()`, an advantage computed "
                            "under torch.no_grad())", severity="warning"))
    return out + paired_mean_findings(state)  # NOTE [reduced before it was paired]


__all__ = ["check_weight", "score_weight_findings"]
