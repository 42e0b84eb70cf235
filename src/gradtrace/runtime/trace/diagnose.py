"""Diagnose an autograd error at the moment torch raises it, while its inputs are still alive.

:meth:`ProvenanceMode._failed` calls :func:`diagnose_failure`; the result is attached to the
exception as ``exc.__gradtrace__``. Errors raised outside torch calls (``'float' object has no
attribute 'backward'``) are handled by :mod:`gradtrace.runtime.trace.posthoc` (traceback)."""
from __future__ import annotations

from typing import Any, Callable

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make, src
from gradtrace.runtime.catalogue import ErrorPattern, match_message
from gradtrace.runtime.catalogue_crashes import TRACEBACK_ONLY
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.cached_params import cached_block
from gradtrace.runtime.trace.graph_walk import roots_of as _roots
from gradtrace.runtime.trace.root_sites import inplace_update_of_inference, kept_dim_site
from gradtrace.runtime.trace.carried_attr import carried_lead
from gradtrace.runtime.trace.records import META_FREED, created_site, decode_meta
from gradtrace.runtime.trace.reset_in_place import reset_keeps_graph
from gradtrace.runtime.trace.detach_level import detach_outside_loop
from gradtrace.runtime.trace.state import TraceState
from gradtrace.runtime.trace.diagnose_api import (
    _function_count, _requires_grad_dtype, _requires_grad_non_leaf, _unused_input)

Tensor = torch.Tensor
Analyzer = Callable[[ErrorPattern, BaseException, Any, tuple, dict, "Site | None", TraceState],
                    list[Finding]]

CUT_KIND = {"detach": "detach", "data": "data", "item": "item-rewrap", "rewrap": "item-rewrap",
             "nondiff": "non-differentiable-op", "no_grad": "no-grad-forward",
             "inference": "inference-mode-forward"}


def diagnose_failure(exc: BaseException, func: Any, args: tuple[Any, ...],
                     kwargs: dict[str, Any], site: Site | None,
                     state: TraceState) -> list[Finding]:
    """Findings for an exception raised by a traced torch call (most likely cause first)."""
    for pat in match_message(str(exc)):
        if pat.key in TRACEBACK_ONLY:  # read once the traceback is whole (posthoc.py)
            continue
        analyzer = _ANALYZERS.get(pat.key)
        if analyzer is not None:
            found = analyzer(pat, exc, func, args, kwargs, site, state)
            if found:
                return found
        return [make(pat.finding_code, site, f"{pat.title}. {pat.explanation}", fix=pat.fix)]
    return []


def cut_finding(cut: Any, what: str, backward: Site | None) -> Finding:
    """The finding for "``what`` left the graph at cut.site"."""
    kind = CUT_KIND.get(cut.reason, "graph-cut")
    related: list[tuple[Site | None, str]] = []
    if cut.origin is not None:
        related.append((cut.origin.site, f"the number came from `{cut.origin.op}()` here"))
    lead = grad_off_line(cut, backward)
    if lead is not None:  # the `with torch.no_grad():` is what the user must change
        related.append((cut.site, f"`{cut.op}` ran here with grad mode off"))
    elif cut.grad_off is not None:
        related.append((cut.grad_off, "grad mode was turned off here"))
    if getattr(cut, "inner", None) is not None:  # NOTE [grad-free wrapper]
        related.append((cut.inner, f"`{cut.inner.function}` " + (
            "detaches its input here" if cut.reason == "detach" else  # NOTE [conversion shim]
            "builds a new tensor from the values it is handed here")))
    stored = stored_list(cut) if lead is None else None
    if stored is not None:  # the numbers were put into the list there
        related.append((cut.site, f"`{cut.op}` built the tensor from the list here"))
        lead = stored
    related.append((backward, "backward() failed here"))
    fixes = {"detach": "remove .detach() on the path to the loss (keep it for logging/targets)",
             "data": "use the tensor itself instead of .data on the path to the loss",
             "item-rewrap": "keep the loss a tensor; do not rebuild it from .item()/float values",
             "non-differentiable-op": "compute the loss from a differentiable quantity "
                                      "(logits/probabilities, not argmax or comparisons)",
             "no-grad-forward": "compute the training forward pass outside torch.no_grad()",
             "inference-mode-forward": "compute the training forward pass outside "
                                       "torch.inference_mode()"}
    if stored is not None:
        return make(code_for(kind, "GT800"), stored,
                    f"{what} has no grad_fn: this line stores plain numbers (from "
                    f"`{cut.origin.op}()` at line {cut.origin.site.line}) in the list that "
                    f"line {cut.site.line} turns into a tensor without a graph",
                    fix=STORED_FIX, related=related)
    fix = fixes.get(kind, "") if getattr(cut, "inner", None) is None else \
        f"do not pass the tensors the loss needs through `{cut.inner.function}`, which " \
        "detaches what it is handed: call the computation it wraps, or pass them on as they " \
        "are, and keep it for what is logged or stored" if cut.reason == "detach" else \
        f"combine the tensors here with torch.stack/torch.cat instead of handing them to " \
        f"`{cut.inner.function}`, which copies their values into a new tensor without a graph"
    return make(code_for(kind, "GT800"), lead or cut.site,
                f"{what} has no grad_fn because the value left the autograd graph here: "
                f"{cut.describe()}", fix=fix, related=related)


STORED_FIX = "store the tensor itself (not .item()) and build the loss with torch.stack(list)"


def stored_list(cut: Any) -> Site | None:
    """For ``torch.tensor(some_list)`` of numbers that came from ``.item()`` of a tensor in the
    graph: the line that appends them to that list (where the tensor should be kept instead)."""
    from gradtrace.runtime.trace.locate import stored_at

    if cut.reason != "rewrap" or cut.origin is None:
        return None
    return stored_at(cut.site)


def grad_off_line(cut: Any, backward: Site | None = None) -> Site | None:
    """The switch that turned grad mode off for a cut (NOTE [grad off on the stack]), else
    the ``with``/``inference_mode()`` line or :func:`locate.decorated_off` (else ``None``)."""
    from gradtrace.runtime.trace.locate import decorated_off, enclosing_with
    if cut.reason == "inference":
        return cut.grad_off or enclosing_with(cut.site, ("inference_mode",))
    if cut.reason == "no_grad" and cut.switch is not None:
        return cut.switch
    if cut.reason == "no_grad" and cut.grad_off is not None:
        text = cut.grad_off.source()
        if text.startswith(("with ", "async with ")):
            return cut.grad_off
        return decorated_off(cut.grad_off, cut.site, backward)
    return None


def _element0(pat: ErrorPattern, exc: BaseException, func: Any, args: tuple, kwargs: dict,
              site: Site | None, state: TraceState) -> list[Finding]:
    roots = _roots(args, kwargs)
    twice = grads_without_graph(roots, args[1] if len(args) > 1 else kwargs.get("inputs"),
                                state, site)
    if twice is not None:  # NOTE [gradient of a .grad without graph]
        return [twice]
    from gradtrace.runtime.trace.hook_backward import backward_in_hook

    if (hooked := backward_in_hook(exc, state, site)) is not None:
        return [hooked]  # NOTE [backward inside a backward hook]
    root = next((r for r in roots if not r.requires_grad), roots[0] if roots else None)
    cut = state.cut_of(root)
    left_off = not torch.is_grad_enabled() and state.grad_off is not None
    if cut is not None and not (left_off and cut.reason == "no_grad"):
        return [cut_finding(cut, "the tensor passed to backward()", site)]
    if left_off and _evaluation_block(site, state):
        return [make(code_for("backward-under-no-grad", "GT800"), site,
                     "backward() runs inside the evaluation block "
                     f"({src(state.grad_off)}, every module that ran in it is in eval mode), "
                     "where nothing is recorded for autograd",
                     fix="take backward() and the optimizer step out of the evaluation pass "
                         "(validation computes the loss only)",
                     related=[(state.grad_off, "grad mode was turned off here")])]
    call = call_below_off(state.grad_off) if left_off else None
    if call is not None:  # NOTE [grad off in a caller]
        return [make(code_for("grad-mode-left-off", "GT800"), call,
                     f"this call runs code that computes gradients (backward() at {src(site)}) "
                     f"inside a caller's no_grad block ({src(state.grad_off)}), where nothing "
                     "is recorded for autograd", fix="re-enable grad around this call (with "
                     "torch.enable_grad():), or skip the gradient step when grad is off",
                     related=[(state.grad_off, "grad mode was turned off here"),
                              (site, "backward() failed here")])]
    if left_off:
        return [make(code_for("grad-mode-left-off", "GT800"), state.grad_off,
                     f"grad mode was turned off here ({src(state.grad_off)}) and is still off "
                     "when backward() runs, so nothing after it was recorded for autograd",
                     fix="use `with torch.no_grad():` blocks, or call "
                         "torch.set_grad_enabled(True) before training",
                     related=[(site, "backward() failed here")])]
    frozen = state.frozen_sites()
    cut_off = state.trainable_cuts() if frozen else []  # the loss kept only frozen ones:
    if cut_off:  # the trainable branch was cut off there
        return [cut_finding(cut_off[0], "the tensor passed to backward()", site)]
    if frozen:
        return [make(code_for("all-parameters-frozen", "GT800"), frozen[0],
                     "every parameter the loss depends on has requires_grad=False; they were "
                     f"frozen here ({src(frozen[0])})",
                     fix="unfreeze the parameters you want to train (requires_grad_(True))",
                     related=[(s, "also frozen here") for s in frozen[1:4]]
                     + [(site, "backward() failed here")])]
    from gradtrace.runtime.trace.items import item_finding  # a number left the graph

    items = state.recent_items()
    if items:
        return [item_finding(items[0], "the tensor passed to backward() has no grad_fn",
                             "GT800", site)]
    from gradtrace.runtime.trace.plain_loss import plain_input

    if (plain := plain_input(state, site, root)) is not None:  # NOTE [loss of plain tensors]
        return [make("GT800", plain[0], f"`{plain[1]}` is made here without requires_grad and "
                     "is the only floating-point input the loss was computed from; nothing in "
                     "the program requires grad (no parameter that trains, no optimizer), so "
                     f"backward() ({src(site)}) has no graph to differentiate",
                     fix="make it with requires_grad=True (or call .requires_grad_() on it) "
                         "before computing the loss",
                     related=[(site, "backward() failed here")])]
    return []


def _evaluation_block(site: Site | None, state: TraceState) -> bool:
    """Whether ``site`` (a failing backward) sits inside the ``with`` block that turned grad
    mode off, and every module that ran in that block is in eval mode: an evaluation pass
    that calls backward(), rather than a training forward wrapped in no_grad by mistake."""
    from gradtrace.runtime.trace.locate import enclosing_with

    off = state.grad_off
    if site is None or off is None or enclosing_with(site, ("no_grad", "inference_mode",
                                                            "set_grad_enabled")) != off:
        return False
    data = state.hooks_data
    mods = [r.ref() for r in list(getattr(data, "modules", {}).values())
            if r.nograd_runs and r.nograd_site == off]
    mods = [m for m in mods if m is not None]
    return bool(mods) and not any(m.training for m in mods)


def _non_scalar(pat: ErrorPattern, exc: BaseException, func: Any, args: tuple, kwargs: dict,
                site: Site | None, state: TraceState) -> list[Finding]:
    roots = _roots(args, kwargs)
    root = next((r for r in roots if r.numel() != 1), None)
    if root is None:
        return []
    made, _ = created_site(root.grad_fn)
    shape = list(root.shape)
    msg = (f"backward() needs a scalar, but this tensor has shape {shape} ({root.numel()} "
           "elements)")
    if func is torch.autograd.grad and site is not None:
        return [make(code_for("non-scalar", pat.code), site,
                     f"torch.autograd.grad of a tensor with shape {shape} needs grad_outputs "
                     "(one weight per element), or an output reduced to a scalar",
                     fix="pass grad_outputs=torch.ones_like(output), or reduce the output",
                     related=[(made, "the output got this shape here")])]
    built = _unreduced_loss_site(made, state)
    if built is not None:
        return [make(code_for("non-scalar", pat.code), built,
                     f"{msg}: the loss module built here has reduction='none', so the loss it "
                     f"returns ({src(made)}) keeps one value per element",
                     fix="use the default reduction ('mean'), or reduce before backward()",
                     related=[(made, "the per-element loss is computed here"),
                              (site, "backward() was called here")])]
    if (made := kept_dim_site(root) or made) is not None:  # the reduction that kept a dim
        return [make(code_for("non-scalar", pat.code), made,
                     f"{msg}; it got this shape here ({src(made)})",
                     fix="reduce the loss with .mean() or .sum() (or pass gradient=...)",
                     related=[(site, "backward() was called here")])]
    return [make(code_for("non-scalar", pat.code), site, msg,
                 fix="reduce the loss with .mean() or .sum()")]


def _unreduced_loss_site(made: Site | None, state: TraceState) -> Site | None:
    """Where a loss module with ``reduction='none'`` that ran at ``made`` was assigned to its
    parent module (``self.criterion = nn.CrossEntropyLoss(reduction="none")``)."""
    from gradtrace.runtime.trace.hooks import attribute_site

    data = state.hooks_data
    if made is None or data is None:
        return None
    records = list(data.modules.values())
    losses = [m for m in (r.ref() for r in records if r.site == made)
              if isinstance(m, torch.nn.modules.loss._Loss)
              and getattr(m, "reduction", None) == "none"]
    for loss in losses:
        for rec in records:
            parent = rec.ref()
            for name, child in (parent._modules.items() if parent is not None else ()):
                if child is loss:
                    return attribute_site(type(parent), name)
    return None


def _freed_node(roots: list[Tensor], limit: int = 5000) -> Any:
    """The freed node closest to the roots, or its nearest ancestor the tracer tagged."""
    queue = [(r.grad_fn, None) for r in roots if r.grad_fn is not None]
    seen: dict[int, Any] = {}
    while queue and len(seen) < limit:
        node, tagged = queue.pop(0)
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node
        try:
            if created_site(node)[0] is not None:
                tagged = node
            if META_FREED in node.metadata:
                return node if tagged is None else _with_freed(tagged, node)
            queue.extend((n, tagged) for n, _ in node.next_functions if n is not None)
        except (AttributeError, RuntimeError):
            continue
    return None


class _Freed:
    """A tagged node standing in for the untagged freed node below it."""

    def __init__(self, tagged: Any, freed: Any) -> None:
        self.metadata = {**freed.metadata, **{k: v for k, v in tagged.metadata.items()
                                              if k != META_FREED}}


def _with_freed(tagged: Any, freed: Any) -> Any:
    return tagged if META_FREED in tagged.metadata else _Freed(tagged, freed)


def _backward_twice(pat: ErrorPattern, exc: BaseException, func: Any, args: tuple,
                    kwargs: dict, site: Site | None, state: TraceState) -> list[Finding]:
    roots = _roots(args, kwargs)
    node = _freed_node(roots)
    if node is None:
        return []
    made, _ = created_site(node)
    freed_by, freed_seq = decode_meta(node.metadata.get(META_FREED))
    related = [(freed_by, "an earlier backward() freed that part of the graph here"),
               (site, "this backward() needs it again")]
    if (cached := cached_block(node, site, made, pat)) is not None:
        return [cached]  # NOTE [parametrization cached across backwards]
    reset = reset_keeps_graph(roots, state.last_backward_seq, pat, site, freed_by)
    if reset is not None:  # NOTE [state reset in place keeps its graph]
        return [reset]
    if freed_by is not None and site is not None and freed_by == site:
        if (better := freed_root(roots, made, site, pat, state)) is not None:
            return [better]
        if made is not None and _made_again(roots, made, state.last_backward_seq):
            # NOTE [detach result dropped], NOTE [state kept on an attribute]
            if (moved := detach_outside_loop(made, site, pat, related)) is not None:
                return [moved]  # NOTE [detach called outside the backward's loop]
            made, how = carried_lead(roots, made)
            kind, msg = "state-carried-across-steps", (
                f"the value {how} ({src(made)}) in the previous iteration is carried into"
                " this one still attached to its graph, which the previous backward() freed")
            fix = "detach what is carried across iterations (e.g. h = h.detach())"
        else:
            kind, msg = "graph-reused-across-steps", (
                f"the value computed here ({src(made)}) is computed once and used again after a "
                "backward() at this line freed its graph (built before the loop and reused?)")
            fix = "compute it inside the loop, or detach it if it needs no gradient"
    else:
        stepped = state.after_step is not None or state.step_seq > freed_seq
        return [added_to_old_loss(roots, site, pat) or (stepped and stale_after_step(
            roots, node, freed_seq, state, pat, made, freed_by, site)) or freed_earlier(
                pat, made, freed_by, node, site, stepped)]
    return [make(code_for(kind, pat.code), made or site, msg, fix=fix, related=related)]


def _made_again(roots: list[Tensor], made: Site, since: int, limit: int = 5000) -> bool:
    """Does the failing graph hold a node created at ``made`` after the last backward?"""
    from gradtrace.runtime.trace.graph_walk import graph_nodes
    for node in graph_nodes(roots, limit):
        where, seq = created_site(node)
        if where == made and seq > since:
            return True
    return False


# NOTE [inference ids kept by the caller]
# An integer tensor (the token ids a generate loop returns) made inside a function decorated
# with ``@torch.inference_mode()`` is right to be made there: integers never carry a graph.
# What fails is a caller keeping it as a training input that autograd saves (an embedding's or
# gather's index); the fix goes where the caller keeps it (``.clone()``), so that call line
# leads. A floating tensor keeps the decorator as the cause (its features may have been meant
# to carry a graph).
def _kept_ids(t: Tensor, cut: Any, lead: Site | None) -> Site | None:
    """The caller's line of the decorated function that made integer ``t``, else ``None``."""
    if t.is_floating_point() or t.is_complex() or lead is None \
            or not lead.source().startswith("@"):
        return None
    return cut.caller


def _inference(pat: ErrorPattern, exc: BaseException, func: Any, args: tuple, kwargs: dict,
               site: Site | None, state: TraceState) -> list[Finding]:
    from gradtrace.runtime.trace.locate import cache_guard

    flat = [a for a in args if isinstance(a, Tensor)] + \
        [b for a in args if isinstance(a, (list, tuple)) for b in a if isinstance(b, Tensor)]
    for t in flat:
        if t.is_inference():
            cut = state.cut_of(t)
            if cut is not None:
                lead = grad_off_line(cut)
                guard = cache_guard(cut.site) if lead is not None \
                    and lead.function != cut.site.function else None
                what = f"this tensor was created inside torch.inference_mode() " \
                       f"({src(cut.site)}) and is now used in a computation autograd tracks"
                if guard is not None:  # a cache built under inference_mode, then reused
                    what = f"this check keeps a tensor cached while torch.inference_mode() " \
                           f"was on ({src(cut.site)}), and training reuses it; an inference " \
                           "tensor can never be saved for backward"
                    lead, made = guard, [(cut.site, "the cached tensor was made here"),
                                         (lead, "inference_mode was on (the first call)")]
                elif (caller := _kept_ids(t, cut, lead)) is not None and lead is not None:
                    return [make(code_for("inference-tensor", pat.code), caller,
                                 f"`{lead.function}` runs under @torch.inference_mode() (line "
                                 f"{lead.line}), so the integer tensor it returns here is an "
                                 f"inference tensor; it is then used where autograd must save "
                                 f"it (an embedding or gather index)",
                                 fix=f"`.clone()` the result here, outside inference_mode (ids "
                                     f"need no graph), or use torch.no_grad() on "
                                     f"`{lead.function}`",
                                 related=[(lead, "inference_mode is turned on here"),
                                          (cut.site, "the tensor was made here"),
                                          (site, "autograd needed it here")])]
                else:
                    made = [(cut.site, "the tensor was made here")] if lead is not None else []
                return [make(code_for("inference-tensor", pat.code), lead or cut.site, what,
                             fix="use torch.no_grad() there, or .clone() the tensor "
                                 "outside inference_mode (rebuild the cache for training)",
                             related=[*made, (site, "autograd needed it here")])]
    blocks = list(state.inference_blocks)
    if blocks and any(t.is_inference() for t in flat):
        # no record of this very tensor (a Parameter or a copy wrapped around an inference
        # tensor): the inference_mode blocks that ran are where it can have come from
        return [make(code_for("inference-tensor", pat.code), blocks[-1],
                     "tensors made while this torch.inference_mode() was on are inference "
                     "tensors for good; one of them is used later in a computation autograd "
                     "tracks", fix="use torch.no_grad() there, or .clone() the tensors made "
                                   "there outside inference_mode",
                     related=[*((b, "inference_mode was also on here") for b in blocks[-4:-1]),
                              (site, "autograd needed it here")])]
    return []


from gradtrace.runtime.trace.diagnose_inplace import (  # noqa: E402
    detached_saved_finding, inplace_leaf_finding, inplace_saved_finding)
from gradtrace.runtime.trace.diagnose_kept import kept_numpy_finding  # noqa: E402
from gradtrace.runtime.trace.caller_off import call_below_off  # noqa: E402
from gradtrace.runtime.trace.grad_of_grad import grads_without_graph  # noqa: E402
from gradtrace.runtime.trace.diagnose_args import gradient_shape_now  # noqa: E402
from gradtrace.runtime.trace.stepped_reuse import stale_after_step  # noqa: E402
from gradtrace.runtime.trace.diagnose_freed import (added_to_old_loss, freed_earlier,  # noqa: E402
                                                    freed_root)
from gradtrace.runtime.trace.diagnose_crash import TRACED  # noqa: E402
from gradtrace.runtime.trace.grad_arguments import function_grad_arguments  # noqa: E402
from gradtrace.runtime.trace.hook_input import grad_none_in_hook  # noqa: E402

_ANALYZERS: dict[str, Analyzer] = {
    "element0": _element0,
    "non-scalar": _non_scalar,
    "backward-twice": _backward_twice,
    "inplace-saved": inplace_saved_finding, "detached-saved": detached_saved_finding,
    "inplace-leaf": inplace_leaf_finding, "numpy-grad": kept_numpy_finding,
    "inference-saved": lambda *a: inplace_update_of_inference(*a) or _inference(*a),
    "function-grad-count": _function_count, "grad-unused-input": _unused_input,
    "requires-grad-dtype": _requires_grad_dtype, "requires-grad-non-leaf": _requires_grad_non_leaf,
    "grad-shape": gradient_shape_now,
    "function-grad-arguments": function_grad_arguments,
    "grad-none-attr": grad_none_in_hook, **TRACED}  # NOTE [hook input needs no grad]
