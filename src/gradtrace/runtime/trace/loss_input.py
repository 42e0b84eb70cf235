"""What a loss was fed, read from the autograd node that made its input.

# NOTE [loss input]
Each loss function wants one kind of value: ``kl_div`` and ``nll_loss`` log-probabilities,
``cross_entropy`` and ``binary_cross_entropy_with_logits`` raw scores (they apply the
(log-)softmax / sigmoid themselves), ``binary_cross_entropy`` probabilities in [0, 1]. What the
input *is* is decided by the node that made it (``input.grad_fn``, seen through views and
copies), whatever the spelling: ``F.softmax(x)``, ``x.softmax(-1)``, an ``nn.Softmax`` as a
model's last layer and a helper that returns a softmax all make a ``SoftmaxBackward0``. The
tracer stamps that node with the user line that made it (``META_CREATED``), which the finding
names, with the loss call as related (a layer an ``nn.Sequential`` ran: the line that built it,
NOTE [layer built here]). Without a telling node, ``kl_div``'s input is read by
value: log-probabilities are never above 0, so an input above 0 everywhere is something else.
``binary_cross_entropy`` on values outside [0, 1] raises in torch; the finding then names the
line (the layer) that made them. The checks run on the loss calls only (a handful per step),
at most ``_CHECKS`` times per loss line. ``log_softmax`` into ``cross_entropy`` is not
reported: ``log_softmax`` of log-probabilities returns them unchanged, so the loss and its
gradient are the ones of the logits.

# NOTE [sigmoid kept as probabilities]
A sigmoid whose output feeds ``binary_cross_entropy_with_logits`` is named, unless the code
also uses that output as probabilities (a focal loss takes ``p_t`` from it): then the sigmoid
is wanted and the loss call is the line to change. The walk of the first loss graphs
(:func:`.graph_scan.scan_loss_graph`) counts the ops that take each sigmoid's output; two or
more name the loss call, the sigmoid related.
"""
from __future__ import annotations

from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make, src
from gradtrace.runtime.frames import Site, raw_site
from gradtrace.runtime.trace.layer_sites import layer_called_at
from gradtrace.runtime.trace.records import created_site, node_name

Tensor = torch.Tensor
_CHECKS = 4  # checks per loss line
_CE_CALLS = ("cross_entropy", "by value")  # key counting the session's value reads of its input
# nodes that keep the values of their (first) input: a view, a copy, a dtype/device move
_SAME_VALUES = ("View", "UnsafeView", "Unsqueeze", "Squeeze", "Permute", "Transpose",
                "ReshapeAlias", "Clone", "ToCopy", "Expand", "Alias", "T", "Contiguous")


def producer(t: Tensor, limit: int = 8) -> Any:
    """The node that made the values of ``t``, seen through views and copies (or None)."""
    node = t.grad_fn
    while node is not None and limit > 0 and node_name(node) in _SAME_VALUES:
        nxt = node.next_functions
        if not nxt or nxt[0][0] is None:
            break
        node, limit = nxt[0][0], limit - 1
    return node


def _input(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return args[0] if args else kwargs.get("input")


def _counted(state: Any) -> tuple[Site, int] | None:
    """The loss line and how often it was checked (None past the limit or without a site)."""
    raw = raw_site()
    if raw is None:
        return None
    key = (id(raw[0]), raw[1])
    n = state.loss_checks.get(key, 0)
    if n >= _CHECKS or len(state.loss_checks) > 256:
        return None
    state.loss_checks[key] = n + 1
    return state.site(raw), n


_WANT = {"kl_div": "log-probabilities", "nll_loss": "log-probabilities",
         "cross_entropy": "raw scores (logits)", "bce_logits": "raw scores (logits)"}
_WRONG = {"kl_div": "Softmax", "nll_loss": "Softmax", "cross_entropy": "Softmax",
          "bce_logits": "Sigmoid"}
_FIX = {"kl_div": "give kl_div `log_softmax(...)` (the target stays probabilities unless "
                  "log_target=True)",
        "nll_loss": "give nll_loss `log_softmax(...)`, or give the raw scores to cross_entropy",
        "cross_entropy": "give cross_entropy the raw scores; keep softmax for predictions",
        "bce_logits": "give binary_cross_entropy_with_logits the raw scores (it applies the "
                      "sigmoid itself)"}
_WHY = {"kl_div": "fed probabilities, the loss is not the KL divergence (it can go negative) "
                  "and its gradient is not the KL's",
        "nll_loss": "fed probabilities, the loss is minus the target's probability, not its "
                    "log, and the gradient vanishes as the softmax saturates",
        "cross_entropy": "it applies log_softmax itself, so a softmax before it squashes the "
                         "scores into [0, 1] and the gradient shrinks as the softmax saturates",
        "bce_logits": "it applies the sigmoid itself, so a sigmoid before it squashes the "
                      "scores twice (into [0.5, 0.73]) and the loss never gets near 0"}
_CODE = {"kl_div": ("kl-div-input-not-log-probabilities", "GT836"),
         "nll_loss": ("probabilities-into-cross-entropy", "GT758"),
         "cross_entropy": ("probabilities-into-cross-entropy", "GT758"),
         "bce_logits": ("sigmoid-into-bce-with-logits", "GT837")}


def check_loss(state: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """NOTE [loss input]: a finding when the loss ``name`` was fed the wrong kind of value."""
    inp = _input(args, kwargs)
    if not isinstance(inp, Tensor) or name not in _WANT:
        return
    node = producer(inp)
    made = node_name(node) if node is not None else ""
    wrong = made == _WRONG[name]
    by_value = not wrong and made != "LogSoftmax" and inp.numel() > 0 \
        and inp.is_floating_point() and (name == "kl_div" or (
            name == "cross_entropy" and inp.dim() >= 2 and inp.shape[1] >= 2))
    if not wrong and not by_value:
        return
    if by_value and name == "cross_entropy":  # read by value on the first calls only: every
        n = state.loss_checks.get(_CE_CALLS, 0)  # training step calls it
        if n >= _CHECKS * 4:
            return
        state.loss_checks[_CE_CALLS] = n + 1
    counted = _counted(state)  # (a value check costs a reduction: a few per line)
    if counted is None:
        return
    if by_value:
        if not (_rows_of_probabilities(inp) if name == "cross_entropy" else bool((inp > 0).all())):
            return
        made = ""
    elif counted[1]:
        return
    loss_site = counted[0]
    site = created_site(node)[0] if made else None
    if made:  # a torch layer's op is charged to its caller (NOTE [layer built here])
        site = layer_called_at(state, site, made) or site
    op = name.replace("bce_logits", "binary_cross_entropy_with_logits")
    if site is not None:
        what = f"`{made.lower()}` here makes the input of `{op}` (line {loss_site.line})"
        related = [(loss_site, f"`{op}` is fed the {made.lower()} output here")]
    else:
        what = (f"the input of `{op}` was made by `{made.lower()}`" if made else
                f"every row of the input of `{op}` is in [0, 1] and sums to 1: probabilities"
                if name == "cross_entropy" else
                f"the input of `{op}` is above 0 everywhere (log-probabilities never are)")
        site, related = loss_site, []
    kind, fallback = _CODE[name]
    if name == "bce_logits" and made and site is not loss_site:
        state.bce_on_sigmoid.setdefault((site, op), loss_site)
    state.loss_findings.setdefault((site, op), make(
        code_for(kind, fallback), site, f"{what}; `{op}` wants {_WANT[name]}: {_WHY[name]}",
        fix=_FIX[name] if made or name != "cross_entropy" else "give nll_loss the log of "
        "the probabilities (torch.log(p.clamp_min(1e-8))), or cross_entropy the raw scores",
        related=related, severity="warning"))


def _rows_of_probabilities(inp: Tensor) -> bool:
    """Whether every row of a ``cross_entropy`` input (classes on dim 1) is a probability
    vector: each entry in [0, 1], each row summing to 1. A softmax taken earlier and mixed by a
    product (MatchingNetworks' attention times one-hot labels) makes no ``Softmax`` node at the
    loss, but its values say what it is; raw scores are never all of that."""
    x = inp.detach()
    return bool(((x >= 0) & (x <= 1)).all()) and bool(((x.sum(1) - 1).abs() < 1e-4).all())


def bce_failed(state: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
               exc: BaseException) -> None:
    """``binary_cross_entropy`` raised: when its input has values outside [0, 1], the finding
    names the line that made them (NOTE [loss input]), attached to the exception."""
    inp = _input(args, kwargs)
    if not isinstance(inp, Tensor) or not inp.numel() or not inp.is_floating_point():
        return
    lo, hi = float(inp.detach().min()), float(inp.detach().max())
    if not (lo < 0.0 or hi > 1.0):  # in range, or NaN: another cause
        return
    raw = raw_site()
    loss_site = None if raw is None else state.site(raw)
    node = producer(inp)
    site = created_site(node)[0] if node is not None else None
    made = f"`{node_name(node).lower()}` here makes" if site is not None else "this is"
    related = [(loss_site, "`binary_cross_entropy` raises here")] if site is not None else []
    finding = make("GT838", site or loss_site,
                   f"{made} the input of `binary_cross_entropy`"
                   f"{f' (line {loss_site.line}: {src(loss_site)})' if loss_site else ''}, "
                   f"and its values run from {lo:.3g} to {hi:.3g}: binary_cross_entropy takes "
                   "probabilities in [0, 1], and these are raw scores",
                   fix="use binary_cross_entropy_with_logits (nn.BCEWithLogitsLoss) on the raw "
                       "scores, or end the model with a sigmoid",
                   related=related)
    exc.__gradtrace__ = [finding]  # type: ignore[attr-defined]
    state.crash_findings.append(finding)


def loss_input_findings(state: Any, data: Any) -> list[Finding]:
    """What the session saw a loss fed (NOTE [loss input]), copies the loss reached
    (NOTE [copied leaf]) and custom Functions that returned None
    (NOTE [custom Function returning None]), both in :mod:`.graph_scan`."""
    from gradtrace.runtime.trace.graph_scan import copied_leaf_findings, function_findings

    out = [_kept_sigmoid(state, key, f) for key, f in list(state.loss_findings.items())]
    return out + copied_leaf_findings(state, data) + function_findings(state)


def _kept_sigmoid(state: Any, key: tuple[Site, str], finding: Finding) -> Finding:
    """NOTE [sigmoid kept as probabilities]: the loss call, when the sigmoid's output is also
    used otherwise in the loss graph."""
    loss_site = state.bce_on_sigmoid.get(key)
    if loss_site is None or state.sigmoid_uses.get(key[0], 0) < 2:
        return finding
    op = key[1]
    return make(finding.code, loss_site,
                f"`{op}` is fed the output of `sigmoid` (line {key[0].line}), which the code "
                f"also uses as probabilities; `{op}` wants raw scores (logits): "
                f"{_WHY['bce_logits']}",
                fix=f"give `{op}` the sigmoid's input (the logits), or use binary_cross_entropy "
                    "on the probabilities", related=[(key[0], "the sigmoid is taken here")],
                severity="warning")
