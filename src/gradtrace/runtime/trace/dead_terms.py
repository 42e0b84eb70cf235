"""A loss term computed under ``no_grad`` from the model's own output, added to a live loss.

# NOTE [dead loss term]
``with torch.no_grad(): pred = ema(pred)`` followed by ``loss = huber(pred, target) + dsm``:
the first term has no graph, so it changes the loss *value* and never its gradient; the
student trains on the second term alone, and the logged loss looks as if both were at work.
Nothing fails. The tracer already records a cut where an op ran with grad mode off on a tensor
that requires grad (with the parameters upstream of it). The check here runs on scalar
additions and subtractions (``a + b``, ``sum(terms)``) only while such cuts exist: one operand
requires grad, the other is a one-element tensor without grad that carries a ``no_grad`` cut;
the sum is marked (``grad_fn.metadata``) and counted only when a backward() reaches it (a total
built for the logs from the live loss and a metric is never back-propagated). The finding names the statement inside the ``no_grad`` block that consumed the live tensor (the
frame that switched grad mode off, at the line it was running), and is made at the end only
when parameters upstream of that cut were trained by an optimizer.

A stop-gradient target inside one term (``mse(pred, target_from_no_grad)``) keeps the term
live and is never seen here; a sum made in a library's code (a solver's time plus its no-grad
step size) is not a term of the user's loss; a constant from a module no optimizer trains (a
frozen teacher) is not the model's own output and is left alone.

# NOTE [integer term is a count]
``score = scores.gather(1, tree[:, None]).sum() + (tree != gold).sum()`` (self-attentive-parser's
loss-augmented decoding: the Hamming distance of the predicted tree to the gold one added to its
score): the constant operand is an integer tensor, a count of comparisons or of indices. An
integer (or bool) tensor can never require grad, so such a term is a margin added on purpose
(a cost, a number of errors), not a copy of the model's output that lost its graph, which is
floating point (``pred.detach()``, a term under ``no_grad``, ``(pred != y).float().mean()``).
Only floating (or complex) one-element operands are dead-term candidates.
"""
from __future__ import annotations

import weakref
from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.locate import keyword_site
from gradtrace.runtime.trace.records import META_CREATED
# (block_statement is imported from here by provenance.py)
from gradtrace.runtime.trace.shared_block import (  # noqa: F401
    block_statement, lone_statement_switch, term_statement)

Tensor = torch.Tensor
# cuts whose scalar, added to a live loss, is a dead term (NOTE [rewrapped loss term])
DEAD = ("no_grad", "nondiff", "rewrap", "grad")  # (grad: root_leaf.py)
META_DEAD = "gradtrace.dead_term"  # grad_fn.metadata of a sum holding a dead term -> its cut
# nodes that combine loss terms without changing what a term is: a detached value inside a
# term, a baseline under a square, is not a term (NOTE [term computed from a detached tensor])
TERM_OPS = ("AddBackward", "SubBackward", "MulBackward", "DivBackward", "MeanBackward",
            "SumBackward", "NegBackward", "ViewBackward", "ReshapeAlias", "SqueezeBackward",
            "UnsqueezeBackward", "CloneBackward", "StackBackward", "CatBackward", "UnsafeView",
            "ExpandBackward", "SelectBackward")
AGED = "aged"  # in state.dead_pending: the pending sums outlived one backward() already


def check_combine(state: Any, args: tuple[Any, ...]) -> Any:
    """``a + b`` / ``a - b``: the ``no_grad`` cut of the dead scalar when one operand is a
    live scalar and the other a dead one, else None."""
    live = dead = None
    cuts = state.cuts
    for a in args[:2]:
        if isinstance(a, Tensor):
            if a.requires_grad:
                live = a
            elif a.is_floating_point() or a.is_complex():  # NOTE [integer term is a count]
                hit = cuts.get(id(a))
                if hit is not None and hit[0]() is a and (hit[1].reason in DEAD or (
                        hit[1].reason == "detach" and _computed_from_detached(state, a))):
                    dead = (a, hit[1])
    if live is not None and dead is None and state.numpy_cut is not None:
        return numpy_term(state, live, args)
    if live is None or dead is None or dead[0].numel() != 1 or live.numel() != 1:
        return None
    return dead[1]


def note_numpy(state: Any, a: Any, seq: int) -> None:
    """# NOTE [loss term computed in NumPy]
    ``contrastive_loss(tem, hidden.cpu().detach().numpy(), labels)`` and then
    ``loss = lam * contrastive_l + (1 - lam) * cross_loss`` (a supervised-contrastive fine-tune):
    the term is a NumPy float, so it changes the loss value and never the gradient, like a
    term computed from a detached tensor (NOTE [term computed from a detached tensor]). The
    run cannot follow a value through NumPy; it links the two by time instead. ``.numpy()`` of
    the result of a ``.detach()`` is remembered (the latest one); a NumPy scalar added to a
    live one-element tensor is that dead term only when no backward() ran since, and the live
    side's graph holds a node made *before* the ``.numpy()`` (the conversion ran in the middle
    of the forward that built this loss). Logging after the step (``acc = out.detach().cpu()
    .numpy()``) followed, in the next step, by a NumPy constant added to the loss (a Gaussian
    NLL's ``0.5 * np.log(2 * np.pi)``) is not linked: the next loss's graph is built after it.
    The rest (summed by the user, reached by a backward(), parameters upstream of the detach
    trained) is NOTE [dead loss term]'s; the finding names the ``.detach()``."""
    hit = state.cuts.get(id(a)) if isinstance(a, Tensor) else None
    if hit is None or hit[0]() is not a or hit[1].reason != "detach":
        return
    state.numpy_cut = (hit[1], seq, state.backward_count)
    if hit[1] not in state.block_stmt and len(state.block_stmt) < 1024:
        state.block_stmt[hit[1]] = None  # (turns the check of sums on)


def numpy_term(state: Any, live: Tensor, args: tuple[Any, ...]) -> Any:
    """The cut of the ``.numpy()`` whose NumPy scalar is added to ``live``, or None.
    NOTE [loss term computed in NumPy]"""
    cut, seq, count = state.numpy_cut
    if count != state.backward_count or live.numel() != 1:
        return None
    if not any(type(a).__module__ == "numpy" and getattr(a, "ndim", 1) == 0
               and getattr(getattr(a, "dtype", None), "kind", "") == "f" for a in args[:2]):
        return None
    stack, seen = [live.grad_fn], 0
    while stack and seen < 256:
        node = stack.pop()
        if node is None:
            continue
        seen += 1
        made = node.metadata.get(META_CREATED)
        if made is not None and made[2] < seq:
            return cut
        stack.extend(n for n, _ in node.next_functions)
    return None


def note_detached_scalar(state: Any, out: Tensor, cut: Any) -> None:
    """``out`` (no grad) was computed by ops from the result of a ``.detach()`` (``cut``),
    NOTE [term computed from a detached tensor]: a one-element one may be a dead loss term."""
    if out.numel() != 1:
        return
    terms = state.detached_terms
    terms[id(out)] = weakref.ref(out)
    while len(terms) > 64:
        terms.popitem(last=False)
    if cut not in state.block_stmt and len(state.block_stmt) < 1024:
        state.block_stmt[cut] = None  # (turns the check of sums on, NOTE [dead loss term])


def _computed_from_detached(state: Any, a: Tensor) -> bool:
    """# NOTE [term computed from a detached tensor]
    ``weights = weights.detach()`` and, later, ``reg = mvc_reg_loss(weights) * w`` summed into
    the loss (deep_cage's MVC regularizer): the term is computed by ops *from* a detached
    tensor, so it has no graph at all; it changes the loss value and never the gradient. A
    detached tensor used as such in a sum is deliberate and is not counted: ``x - x.detach()``
    (DiCE's magic box, a scalar straight-through estimator ``loss + (v - loss).detach()``),
    where the detached operand is the ``.detach()`` result itself. Only a one-element tensor
    made by further ops from a detached one (``note_detached_scalar``, called where the tracer
    passes a cut on to an op's output) counts, and only a sum that is itself a term of the
    loss: between it and the backward()'s root only terms are combined (sums, scalings,
    means: ``TERM_OPS``). ``(x.mean() - stats.detach().mean()) ** 2`` holds a detached baseline
    inside a live term and is not a dead term. The rest is NOTE [dead loss term]'s: summed
    in the user's code, reached by a backward(), parameters upstream of the detach trained."""
    ref = state.detached_terms.get(id(a))
    return ref is not None and ref() is a


def summed_by_user(frame: Any) -> bool:
    """The sum is made by the user's own code (NOTE [dead loss term]). A library that adds a
    step size it computed under ``no_grad`` to its own running time (torchdiffeq's adaptive
    solvers: ``t1 = t0 + dt`` with ``dt`` from ``@torch.no_grad() _optimal_step_size``) builds
    no loss term: the user's loss never adds that scalar, and the library chose not to
    differentiate its step control."""
    from gradtrace.runtime.ran import is_user_file

    return frame is not None and is_user_file(frame.f_code.co_filename)


def mark(state: Any, out: Any, cut: Any) -> None:
    """The sum ``out`` holds the dead term of ``cut``: checked at the next backward()."""
    gf = getattr(out, "grad_fn", None)
    if gf is not None and len(state.dead_pending) < 16:
        gf.metadata[META_DEAD] = cut
        state.dead_pending.append(cut)


def seen_in_backward(state: Any, roots: Any, limit: int = 512) -> None:
    """A backward() starts while sums holding a dead term exist: the ones its graph reaches
    (near the root: a walk of ``limit`` nodes) were back-propagated with the dead term.

    # NOTE [dead sum reached by a later backward]
    ``torch.autograd.grad(losses[0], w, retain_graph=True)`` then ``autograd.grad(total, w)``
    (ESPnet's check of one loss wrapper's share): the first call's graph does not reach the
    sum, the second's does. Sums not reached stay pending for one more backward()."""
    stack = [(r.grad_fn, True) for r in roots if isinstance(r, Tensor) and r.grad_fn is not None]
    seen: set[tuple[int, bool]] = set()
    found = False
    while stack and len(seen) < limit:
        node, linear = stack.pop()
        if node is None or (id(node), linear) in seen:
            continue
        seen.add((id(node), linear))
        try:
            cut = node.metadata.get(META_DEAD)
            if cut is not None and (linear or cut.reason != "detach"):
                found = True
                site = state.block_stmt.get(cut) or cut.site
                c = state.note("dead-loss-term", site, "add")
                c.extra.setdefault("cut", cut)
                if not c.extra.get("trained"):  # read now: the model may die before the end
                    c.extra["trained"] = _trained_now(state, cut)
            linear = linear and type(node).__name__.startswith(TERM_OPS)
            stack.extend((n, linear) for n, _ in node.next_functions if n is not None)
        except (AttributeError, RuntimeError):
            continue
    if found or AGED in state.dead_pending:
        state.dead_pending.clear()
    else:  # NOTE [dead sum reached by a later backward]
        state.dead_pending.append(AGED)


def dead_term_findings(state: Any, data: Any, seen: list[Finding] = ()) -> list[Finding]:
    """NOTE [dead loss term]: one finding per statement, when its parameters were trained
    (a copy already named by ``seen``, a parameter's finding about the same cut, is not)."""
    out: list[Finding] = []
    if not state.backward_count:
        return out
    trained = {id(p) for rec in list(data.optimizers.values()) if rec.steps and rec.ref()
               for g in rec.ref().param_groups for p in g["params"] if data.graded(p)}
    if not any(rec.steps for rec in list(data.optimizers.values())):
        trained = _graded_leaves(state)  # NOTE [dead term without an optimizer]
        if not trained:
            trained = _params_behind_cuts(state)
    named: set[Site] = set()
    for (kind, site, _), counter in list(state.events.items()):
        cut = counter.extra.get("cut") if kind == "dead-loss-term" else None
        if cut is None or not (counter.extra.get("trained")
                               or state.cut_upstream.get(cut, frozenset()) & trained):
            continue
        site = term_statement(state, cut, trained, site)  # NOTE [one no_grad site, two models]
        if site in named:
            continue
        named.add(site)
        if cut.reason == "grad":  # NOTE [gradients taken without a graph]
            out.append(make(code_for("grad-without-create-graph", "GT206"),
                            keyword_site(cut.site, "create_graph"),
                            "the gradients this `torch.autograd.grad` call returns have no graph "
                            "(create_graph is off); the loss term made from them is added to a "
                            "loss that has one, so it changes the loss value and never the "
                            "gradient (the penalty trains nothing)",
                            fix="pass create_graph=True to torch.autograd.grad",
                            severity="warning"))
            continue
        if cut.reason in ("nondiff", "rewrap"):
            f = _nondiff_term(_first_copy(state, cut))
            if cut.reason == "nondiff" or not any((s.path, s.line) == (f.path, f.line)
                                                   for s in seen):
                out.append(f)
            continue
        if cut.reason == "detach":  # NOTE [term computed from a detached tensor]
            out.append(make("GT844", cut.site, "the loss term computed from this detached "
                            "tensor has no graph (it is made from the `.detach()` result, "
                            "whose input was computed from trained parameters) and is added to "
                            "a loss that has one, so it changes the loss value and never the "
                            "gradient (those parameters train on the other terms alone)",
                            fix="compute the term from the tensor before `.detach()` (keep the "
                                "detached copy for the uses that must not train), or leave the "
                                "term out of the loss", severity="warning"))
            continue
        shared = site == cut.grad_off  # NOTE [one no_grad site, two models]
        lone = None if shared else lone_statement_switch(cut.grad_off, site)
        if lone is not None:  # NOTE [block of one statement]
            out.append(make("GT844", lone, "this no_grad block holds one statement, which runs "
                            "on a tensor computed from trained parameters; the loss term made "
                            "from it has no graph and is added to a loss that has one, so it "
                            "changes the loss value and never the gradient (those parameters "
                            "train on the other terms alone)", fix="remove the no_grad block "
                            "(compute the term with grad mode on), or leave the term out of "
                            "the loss", related=[(site, "the block's statement"), (
                                cut.site, f"`{cut.op}` runs on the live tensor without grad")],
                            severity="warning"))
            continue
        out.append(make("GT844", site, ("this block runs the same statements under "
                        "torch.no_grad() for a frozen copy and for the trained model: on the "
                        "trained one's tensors" if shared else "this statement runs under "
                        "torch.no_grad() on a tensor computed from trained parameters") +
                        "; the loss term made from it has no "
                        "graph and is added to a loss that has one, so it changes the loss "
                        "value and never the gradient (those parameters train on the other "
                        "terms alone)", fix="compute the term with grad mode on (keep no_grad "
                        "for the target network's own inputs only), or leave it out of the loss",
                        related=[(None if shared else cut.grad_off,
                                  "grad mode is switched off here"),
                                 (cut.site, f"`{cut.op}` runs on the live tensor without grad")],
                        severity="warning"))
    return out


def _trained_now(state: Any, cut: Any) -> bool:
    """A parameter upstream of ``cut`` had a gradient at an optimizer step already."""
    data = state.hooks_data
    had = data.had_grad if data is not None else {}
    return any((r := had.get(i)) is not None and r() is not None
               for i in state.cut_upstream.get(cut, ()))


def _graded_leaves(state: Any) -> set[int]:
    """# NOTE [dead term without an optimizer]
    A script that backpropagates without ever stepping an optimizer (a gradient check, a
    cut-down training step, a sampler's one update) trains nothing by the rule above; there the
    parameters that count are the leaves the tracer follows (upstream of the cuts) that are
    Parameters and hold a gradient at the end: the backward() did reach them. A frozen network's
    weights (no gradient) still excuse the term, unless no Parameter holds one at all
    (``_params_behind_cuts``)."""
    out: set[int] = set()
    for key, ref in list(state._leaf_refs.items()):
        t = ref()
        if isinstance(t, torch.nn.Parameter) and t.requires_grad and t.grad is not None:
            out.add(key)
    return out


def _params_behind_cuts(state: Any) -> set[int]:
    """No optimizer, and no Parameter holds a gradient at the end: the gradients were taken
    with ``torch.autograd.grad`` (ESPnet's check of one loss wrapper's share), or every term
    that reached the parameters was dead (compressive-transformer's ``aux_loss``, summed onto
    a leaf from tensors all detached). The Parameters that require grad upstream of the cuts
    (the leaves the tracer follows) count as the ones meant to train."""
    out: set[int] = set()
    for key, ref in list(state._leaf_refs.items()):
        t = ref()
        if isinstance(t, torch.nn.Parameter) and t.requires_grad:
            out.add(key)
    return out


def _first_copy(state: Any, cut: Any) -> Any:
    """For a rewrap: the first copy of the statement that made ``cut`` (a term's value carries
    the cut of its first input only; ``make(amplitudes=torch.tensor([0, a]),
    times=torch.tensor([0, t]))`` copies twice, and the statement's first copy leads)."""
    if cut.reason != "rewrap":
        return cut
    import ast

    from gradtrace.runtime.trace.locate import tree_of

    line, tree = cut.site.line, tree_of(cut.site.path)
    stmt = min((n for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.Expr, ast.Return))
                and n.lineno <= line <= (n.end_lineno or 0)),
               key=lambda n: (n.end_lineno or 0) - n.lineno, default=None) if tree else None
    if stmt is None or stmt.lineno == stmt.end_lineno:
        return cut
    same = [c for c in list(state.cut_upstream) if c.reason == "rewrap" and c.site.path ==
            cut.site.path and stmt.lineno <= c.site.line <= (stmt.end_lineno or 0)]
    return min(same, key=lambda c: (c.site.line, c.site.column), default=cut)


def rewrapped_list(mode: Any, name: str, data: Any, out: Tensor) -> None:
    """``torch.tensor([t.mean(), ...])`` of tensors without grad that carry a cut: ``out``
    carries it too; when those values were themselves copied out of a graph by
    ``torch.tensor`` (ESPnet's ``torch.tensor([torch.tensor([...]).mean() for ...])``), this
    copy is one more of the statement (NOTE [rewrapped loss term]: the statement's first
    copy is named), cutting what the inner one cut."""
    state = mode.state
    cut = next((c for c in map(state.cut_of, data[:64]) if c is not None), None)
    if cut is None:
        return
    if cut.reason != "rewrap":
        state.cuts[id(out)] = (weakref.ref(out), cut)
        return
    new = mode._cut(out, None, f"torch.{name}([tensor, ...])", "rewrap")
    if new is not None and new not in state.cut_upstream:
        state.cut_upstream[new] = state.cut_upstream.get(cut, frozenset())


def _nondiff_term(cut: Any) -> Finding:
    """A term made through an op whose result has no graph although its input has one.

    # NOTE [rewrapped loss term]
    ``torch.tensor([0, grad.amplitude])`` (pulseq-zero's ``split_gradient``) copies the values
    of tensors that require grad into a new tensor without a graph; a loss term computed from
    it and added to a live loss (``(gx.area - 3) ** 2 + (ramp_up.area - 0.6) ** 2``) changes the
    value and never the gradient. When no parameter is left without a gradient (the other
    term reaches them) GT820 has nothing to report; the dead term is the fact. The cut of
    ``reason == "rewrap"`` is followed like a ``nondiff`` one (its taint goes to the values
    computed from the copy, NOTE [hot path]) and named at the copy."""
    if cut.reason == "rewrap":
        return make("GT844", cut.site, f"`{cut.op}` here copies the values of tensors computed "
                    "from trained parameters into a new tensor without a graph; the loss term "
                    "made from it is added to a loss that has one, so it changes the loss value "
                    "and never the gradient (those parameters train on the other terms alone)",
                    fix="build the tensor with torch.stack/torch.cat of the tensors (they keep "
                        "the graph), or leave the term out of the loss", severity="warning")
    return make("GT844", cut.site, f"`{cut.op}` here takes a tensor computed from trained "
                "parameters and returns one without a graph (grad mode is on: the op has no "
                "derivative); the loss term made from it is added to a loss that has one, so "
                "it changes the loss value and never the gradient (those parameters train on "
                "the other terms alone)", fix="build the term from a differentiable op (a soft "
                "histogram, a sigmoid instead of a threshold), or leave it out of the loss",
                severity="warning")
