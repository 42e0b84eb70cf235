"""Analyzers for the in-place errors: a tensor saved for backward modified in place (which write,
or which optimizer step and which stale value), an in-place write on a leaf that requires grad.
Called through :data:`gradtrace.runtime.trace.diagnose._ANALYZERS`."""
from __future__ import annotations

import re
from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make, src
from gradtrace.runtime.catalogue import ErrorPattern
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.diagnose_alias import alias_site, saved_view_or_saver
from gradtrace.runtime.trace.first_break import first_breaking_step
from gradtrace.runtime.trace.first_write import earlier_breaking_write
from gradtrace.runtime.trace.graph_walk import leaves_below, reaches_marked, roots_of as _roots
from gradtrace.runtime.trace.root_sites import (caller_of_argument_write, init_built_attribute,
                                                layer_built_inplace, layer_switched_inplace)
from gradtrace.runtime.trace.records import META_RETAINED, created_site, decode_meta
from gradtrace.runtime.trace.stale_handed import caller_handing_stale
from gradtrace.runtime.trace.state import TraceState
from gradtrace.runtime.trace.step_caller import still_running
from gradtrace.runtime.trace.view_write import view_write_finding

Tensor = torch.Tensor


_INPLACE_RE = re.compile(r"\[(?P<type>[\w.]+) \[(?P<shape>[\d, ]*)\]\](?:, which is output "
                         r"\d+ of (?P<op>[\w:]+),)? is at version (?P<now>\d+); expected "
                         r"version (?P<expected>\d+)")


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


# NOTE [write into a detached copy]
# `.detach()` returns a tensor that shares the original's storage and version counter (a
# `.cpu()` of a CPU tensor returns it as it is): an in-place write into it (or into a view of
# it, `x.detach().cpu().view(-1)`) bumps the version of the tensor an op saved, and backward()
# fails naming the saved tensor's op and shape ("output 0 of SqueezeBackward1") while the write
# was on another shape (AllenNLP's Covariance metric, `predictions *= mask` on its
# `unwrap_to_tensors` copy, docs/triage/runtime36.md). When no write on a tensor with grad
# matches, the first write with grad on into a tensor a `.detach()` made (the record keeps the
# detach line: :meth:`TraceState.on_plain_inplace`) with as many elements and the
# expected version before it is the one. A write into a `.clone()` never bumps the saved
# tensor's version (a copy has its own counter), so it never raises: the look-alike is silent.


def inplace_saved_finding(pat: ErrorPattern, exc: BaseException, func: Any, args: tuple, kwargs: dict,
                   site: Site | None, state: TraceState) -> list[Finding]:
    m = _INPLACE_RE.search(str(exc))
    if m is None:
        return []
    shape = tuple(int(s) for s in m["shape"].replace(" ", "").split(",") if s)
    # "output 0 of LeakyRelu1": an in-place activation's node (LeakyReluBackward1) is named
    # without "Backward" but keeps its overload digit; the recorded names have neither
    op = re.sub(r"(Backward)?\d*$", "", (m["op"] or "").split("::")[-1])
    expected = int(m["expected"])
    candidates = [r for r in reversed(state.inplace) if r[3] == shape]
    best = next((r for r in candidates if op in r[2] and r[4] == expected), None) \
        or next((r for r in candidates if op and op in r[2]), None) \
        or next((r for r in candidates if r[4] == expected and set(r[2]) == {"AsStrided"}),
                None)  # a write into a view: its node names no op, the version does
    if best is None and not m["op"]:  # NOTE [write into a tensor without grad]
        best = next((r for r in reversed(state.plain_inplace) if r[3] == shape
                     and r[4] == expected), None)
    copied = None
    if best is None and m["op"]:  # NOTE [write into a detached copy]
        copied = next((r for r in state.plain_inplace if r[5] is not None and r[4] == expected
                       and _numel(r[3]) == _numel(shape)), None)
        best = copied
    node, saver, consumer = _saver(_roots(args, kwargs), state.step_seq)
    later = None
    earlier = earlier_breaking_write(_roots(args, kwargs), state.inplace, best) \
        if best is not None else None  # NOTE [first write that broke a saved tensor]
    if earlier is not None:
        later, (best, saver) = best[0], earlier
        copied = None  # an earlier write on a tensor with grad broke it first
    if best is not None:
        where, inop, _, _, _, made, built = best
        related = [(made, "the tensor was created here")]
        if saver is not None and saver == made:
            related = [(made, "the tensor was created and saved for backward here")]
        elif saver is not None:
            related.append((saver, "this op saved it for backward"))
        alias = alias_site(where, made)
        if alias is not None:  # `out = x` then `out[...] = ...`: the copy belongs there
            return [make(code_for("inplace-on-saved-tensor", pat.code), alias[0],
                         f"`{alias[1]}` is another name for `{alias[2]}` (the same tensor, not a "
                         f"copy), so `{inop}` at {src(where)} changes `{alias[2]}` in place "
                         f"(shape {list(shape)}), which an earlier op saved for backward",
                         fix=f"make a copy here: {alias[1]} = {alias[2]}.clone()",
                         related=[(where, "the in-place write is here"), *related,
                                  (site, "backward() failed here")])]
        if copied is not None:  # NOTE [write into a detached copy]
            return [make(code_for("inplace-on-saved-tensor", pat.code), where,
                         f"`{inop}` writes into a detached copy (made at {src(made)}) that "
                         f"shares its storage and version counter with a tensor an earlier op "
                         f"saved for backward (shape {list(shape)}, the output of "
                         f"{m['op'].split('::')[-1]}); backward() then found a newer version",
                         fix="write into a copy: .detach().clone() (or the out-of-place form)",
                         related=[(made, "the copy was detached here: .detach() shares the "
                                         "tensor's memory"),
                                  *([(saver, "this op saved the tensor for backward")]
                                    if saver is not None else []),
                                  (site, "backward() failed here")])]
        layer = built or layer_built_inplace(where, inop)  # NOTE [layer built here]
        switched = layer_switched_inplace(where) if layer is None else None
        if switched is not None:  # NOTE [layer switched to in-place after construction]
            return [make(code_for("inplace-on-saved-tensor", pat.code), switched,
                         f"this line turns a layer's `inplace` on after it was built: called at "
                         f"{src(where)}, its `{inop}` changed a tensor in place (shape "
                         f"{list(shape)}) that an earlier op saved for backward; backward() "
                         "then found a newer version",
                         fix="leave inplace off for a layer whose input is saved for backward",
                         related=[(where, "the layer wrote in place when called here"),
                                  *related, (site, "backward() failed here")])]
        if layer is not None and _sibling_saved(where, saver, made):  # NOTE [in-place layer]
            return [make(code_for("inplace-on-saved-tensor", pat.code), where,
                         f"this call of a layer built with `inplace=True` (at {src(layer)}) "
                         f"overwrites its input (shape {list(shape)}), which an earlier op of "
                         f"the same function saved for backward ({src(saver)}); backward() then "
                         "found a newer version",
                         fix="apply the in-place layer before that op reads the tensor, or "
                             "call an out-of-place activation here",
                         related=[(saver, "this op saved the tensor for backward"),
                                  (layer, "the layer is built with inplace=True here"),
                                  (made, "the tensor was created here"),
                                  (site, "backward() failed here")])]
        if layer is not None:  # NOTE [in-place layer]
            return [make(code_for("inplace-on-saved-tensor", pat.code), layer,
                         f"this layer is built with `inplace=True`: called at {src(where)}, its "
                         f"`{inop}` changed a tensor in place (shape {list(shape)}) that an "
                         "earlier op saved for backward; backward() then found a newer version",
                         fix="build this layer with inplace=False",
                         related=[(where, "the layer wrote in place when called here"),
                                  *related, (site, "backward() failed here")])]
        if later is not None:
            related.append((later, "a later in-place write here broke another saved tensor "
                                   "(the one backward() met first): change it the same way"))
        return [make(code_for("inplace-on-saved-tensor", pat.code), where,
                     f"`{inop}` changed a tensor in place (shape {list(shape)}) that an earlier "
                     "op saved for backward; backward() then found a newer version",
                     fix="use the out-of-place form or .clone() before changing it",
                     related=[*related, (site, "backward() failed here")])]
    built = init_built_attribute(consumer) if state.after_step is not None else None
    if built is not None:  # a graph built once in __init__, reused by every step
        return [make(code_for("step-between-backwards", pat.code), built,
                     f"this value is computed once, when the object is built, and every step "
                     f"reuses its graph ({src(consumer)}); optimizer.step() changed the "
                     f"parameters (shape {list(shape)}) that graph saved, so backward() "
                     "through it fails", fix="compute it in forward(), on every pass",
                     related=[(consumer, "the value is used again here"), (saver, "the "
                              "graph saved the parameters here"), (site, "backward() failed here")])]
    handed = caller_handing_stale(consumer, site, state.step_seq) \
        if state.after_step is not None and consumer is not None else None
    if handed is not None:  # NOTE [stale value handed to a callee]
        return [make(code_for("step-between-backwards", pat.code), handed[0],
                     f"this call hands `{handed[1]}`, computed before optimizer.step() "
                     f"({src(saver)}), to a function that builds the loss from it "
                     f"({src(consumer)}); the step changed the parameters (shape "
                     f"{list(shape)}) that value's graph saved, so backward() through it fails",
                     fix=f"compute `{handed[1]}` again after the step and pass that",
                     related=[(consumer, "the callee uses the stale value here"),
                              (saver, "the value was computed here, before the step"),
                              (state.after_step, "optimizer.step() changed its parameters here"),
                              (site, "backward() failed here")])]
    if state.after_step is not None and consumer is not None:
        return [make(code_for("step-between-backwards", pat.code), consumer,
                     f"this line uses a value computed before optimizer.step() "
                     f"({src(saver)}); the step changed the parameters (shape {list(shape)}) "
                     "that value's graph saved, so backward() through it fails",
                     fix="compute the value again after the step (or detach it here)",
                     related=[(saver, "the value was computed here, before the step"),
                              (state.after_step, "optimizer.step() changed its parameters here"),
                              (site, "backward() failed here")])]
    retained = _through_retained(_roots(args, kwargs), site, pat, state) \
        if state.after_step is not None else None
    if retained is not None:
        return [retained]
    if state.after_step is not None and state.step_caller is not None \
            and not still_running(state.step_caller):
        return [make(code_for("step-between-backwards", pat.code), state.step_caller,
                     f"this call stepped an optimizer ({src(state.after_step)}), which updated "
                     f"the parameters in place (shape {list(shape)}) after the forward pass "
                     "saved them, and a later backward() still needed the old values",
                     fix="make this update after every backward() through those parameters",
                     related=[(state.after_step, "optimizer.step() ran here"),
                              (site, "backward() failed here")])]
    if state.after_step is not None:  # NOTE [first step that broke the graph]
        first = first_breaking_step(state, _roots(args, kwargs))
        return [make(code_for("step-between-backwards", pat.code), first or state.after_step,
                     f"optimizer.step() here updated the parameters in place (shape "
                     f"{list(shape)}) after the forward pass saved them, and a later backward() "
                     "still needed the old values",
                     fix="call optimizer.step() only after every backward() of this graph",
                     related=[(state.after_step if first else None, "a later step changed "
                               "more of the graph's parameters here"),
                              (site, "backward() failed here")])]
    return view_write_finding(_roots(args, kwargs), node, saver, shape, pat, site) \
        or saved_view_or_saver(node, saver, shape, state, pat, site)


def _through_retained(roots: list[Tensor], site: Site | None, pat: ErrorPattern,
                      state: TraceState, limit: int = 5000) -> Finding | None:
    """# NOTE [retained graph]
    A saved tensor changed by ``optimizer.step()``, and the failing backward() runs into nodes
    an earlier ``backward(retain_graph=True)`` already went through: the two backward() calls
    share a graph the step changed under them. At the same backward() line, an earlier pass:
    a value rebound in the loop carries that pass's graph over (an RNN state not detached,
    kept alive by retain_graph=True): that rebinding. At another line (a generator step with
    retain_graph=True before the discriminator's loss on the same output): the line of the
    failing loss's graph that took in the shared value, where it needs ``.detach()``."""
    queue = [(r.grad_fn, None) for r in roots if r.grad_fn is not None]
    seen: dict[int, Any] = {}
    kept, own = None, []  # the first kept node (and its user); leaves reached around it
    while queue and len(seen) < limit:
        node, user = queue.pop(0)
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node
        try:
            if META_RETAINED in node.metadata:
                kept = kept or (node, user)
                continue
            var = getattr(node, "variable", None)
            if isinstance(var, Tensor):
                own.append(var)
            user = created_site(node)[0] or user
            queue.extend((n, user) for n, _ in node.next_functions if n is not None)
        except (AttributeError, RuntimeError):
            continue
    if kept is None or site is None:
        return None
    by, _ = decode_meta(kept[0].metadata[META_RETAINED])
    if by == site:
        return _fed_back(site, pat)
    stepped = {id(p) for r in list(getattr(state.hooks_data, "optimizers", {}).values())
               if r.site == state.after_step and r.ref() is not None
               for g in r.ref().param_groups for p in g["params"]}
    user = kept[1]
    # the failing loss trains parameters of its own, which the step that broke it does not
    # hold (a discriminator's): that loss took the other model's output without detaching it
    if by is None or user is None or not own or all(id(p) in stepped for p in own):
        return None
    step_at = state.site(state.step_raw) if state.step_raw is not None else state.after_step
    if _kept_holds_own(kept[0], stepped, limit):  # NOTE [shared value holds the loss's own]
        return make(code_for("step-between-backwards", pat.code), step_at,
                    f"optimizer.step() here changed parameters that the graph the backward() "
                    f"at {src(by)} kept (retain_graph=True) saved, and the backward() at "
                    f"{src(site)} goes through that graph again; the shared value also carries "
                    "this loss's own parameters, so detaching it would stop them training",
                    fix="call this optimizer.step() after the last backward() through the "
                        "shared graph",
                    related=[(by, "this backward() went through the shared graph first"),
                             (user, "the failing loss takes in the shared value here"),
                             (site, "backward() failed here")])
    return make(code_for("gan-fake-not-detached", pat.code), user,
                f"this line takes in a value whose graph the backward() at {src(by)} already "
                "went through and kept (retain_graph=True); optimizer.step() "
                f"({src(state.after_step)}) then changed the parameters that graph saved, so "
                "this backward() through it fails",
                fix="detach the shared value here if this loss needs no gradient through it "
                    "(D(fake.detach())), or compute this loss after the step",
                related=[(by, "this backward() went through the shared graph first"),
                         (state.after_step, "optimizer.step() changed its parameters here"),
                         (site, "backward() failed here")])


def _kept_holds_own(kept: Any, stepped: set[int], limit: int) -> bool:
    """# NOTE [shared value holds the loss's own]
    Whether the kept graph below the failing loss's first shared node reaches a leaf that the
    step which broke it does not hold: the shared value is the failing model's own output
    (``fake_pred = D(G(z))`` used by both the generator's and the discriminator's loss), not
    only the other model's, so ``.detach()`` where the loss takes it in would stop the loss's
    own parameters from training. The step between the two backward() calls is what to
    move (MonoLayout)."""
    return any(id(v) not in stepped for v in leaves_below([kept], limit))


def _fed_back(site: Site, pat: ErrorPattern) -> Finding | None:
    """``h = f(x, h)`` in the loop around the failing backward(): a name both read and rebound
    by one statement (state fed back into the next pass) whose value's graph reaches the graph
    an earlier pass's backward() kept: that statement."""
    import ast

    from gradtrace.runtime.trace.locate import loop_and_frame

    got = loop_and_frame(site)
    if got is None:
        return None
    loop, frame = got
    for stmt in sorted((n for n in ast.walk(loop) if isinstance(n, ast.Assign)),
                       key=lambda n: n.lineno):
        bound = {t.id for tg in stmt.targets for t in ast.walk(tg) if isinstance(t, ast.Name)}
        read = {n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name)}
        for name in sorted(bound & read):
            value = frame.f_locals.get(name)
            items = value if isinstance(value, (tuple, list)) else (value,)
            if not any(isinstance(t, Tensor) and t.grad_fn is not None and
                       reaches_marked(t.grad_fn, META_RETAINED) for t in list(items)[:16]):
                continue
            at = Site(site.path, stmt.lineno, site.function)
            return make(code_for("state-carried-across-steps", pat.code), at,
                        f"`{name}` is fed back into the next pass here still attached to the "
                        "graph of the pass before, which backward(retain_graph=True) kept; "
                        "optimizer.step() has changed the parameters that graph saved, so "
                        "this backward() through it fails",
                        fix=f"detach `{name}` before it is fed back (h = h.detach(); for a "
                            f"tuple: tuple(t.detach() for t in {name})), and drop "
                            "retain_graph=True", related=[(site, "backward() failed here")])
    return None


def _sibling_saved(where: Site, saver: Site | None, made: Site | None) -> bool:
    """Whether the tensor an in-place layer called at ``where`` overwrote was saved by another
    op that read it earlier in the same function (``identity = self.skip(x)`` then
    ``x = self.act(x)``), not by the op that made it (``sigmoid``, ``tanh``, which save their
    output): the conflict is the order of the two calls, so the call is the line to change."""
    return saver is not None and saver != made and saver.path == where.path \
        and saver.function == where.function and bool(where.function) \
        and saver.line < where.line


def _saver(roots: list[Tensor], step_seq: int = -1,
           limit: int = 5000) -> tuple[Any, Site | None, Site | None]:
    """The node whose saved tensor was modified (its saved value fails to unpack with the same
    version error), its forward line, and, when that op ran before the optimizer step at
    ``step_seq``, the line of the first traced op after the step that consumed its result.
    When several nodes fail so, the one the engine runs first: the newest (highest sequence
    number), whose error backward() raised (two tensors of one shape both written in place)."""
    queue = [(r.grad_fn, None) for r in roots if r.grad_fn is not None]
    seen: dict[int, Any] = {}
    parent: dict[int, Any] = {}
    failed: list[Any] = []
    while queue and len(seen) < limit:
        node, up = queue.pop(0)
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node
        parent[id(node)] = up
        for attr in dir(node):
            if not attr.startswith("_saved_"):
                continue
            try:
                getattr(node, attr)
            except RuntimeError as e:
                if "modified by an inplace operation" in str(e):
                    failed.append(node)
                    break
            except Exception:  # noqa: BLE001 - any other failure: not this attribute
                continue
        try:
            queue.extend((n, node) for n, _ in node.next_functions if n is not None)
        except (AttributeError, RuntimeError):
            continue
    if not failed:
        return None, None, None
    node = max(failed, key=_sequence)
    return node, created_site(node)[0], _after(node, parent, step_seq)


def _sequence(node: Any) -> int:
    try:
        return int(node._sequence_nr())
    except Exception:  # noqa: BLE001 - a node without one: the walk's order
        return -1


def _after(node: Any, parent: dict[int, Any], step_seq: int) -> Site | None:
    """Walking from ``node`` towards the roots, the first traced node made after ``step_seq``
    (``None`` if ``node`` itself was made after it, or none was)."""
    made, seq = created_site(node)
    if step_seq < 0 or made is None or seq > step_seq:
        return None
    up = parent.get(id(node))
    while up is not None:
        where, seq = created_site(up)
        if where is not None and seq > step_seq:
            return where
        up = parent.get(id(up))
    return None


def inplace_leaf_finding(pat: ErrorPattern, exc: BaseException, func: Any, args: tuple, kwargs: dict,
                  site: Site | None, state: TraceState) -> list[Finding]:
    name = getattr(func, "__name__", "in-place op")
    early = _made_trainable_early(args, kwargs, state)
    if early is not None:  # NOTE [leaf made trainable too early]
        made, why = early
        return [make(code_for("inplace-on-leaf", pat.code), made,
                     f"this line makes the tensor a leaf that requires grad, {why}; `{name}` "
                     f"at {src(site)} then writes into it and autograd refuses",
                     fix="make it require grad only once it is filled (or leave it a plain "
                         "tensor the graph flows through)",
                     related=[(site, "the in-place write is here")])]
    caller = caller_of_argument_write(exc, site)
    if caller is not None:  # NOTE [in-place layer]: a helper writing into its argument
        return [make(code_for("inplace-on-leaf", pat.code), caller,
                     f"this call hands a leaf tensor that requires grad (a Parameter) to "
                     f"`{site.function}`, whose `{name}` ({src(site)}) modifies it in place "
                     "while grad mode is on",
                     fix="run the call (or the write in the helper) under `with torch.no_grad():`",
                     related=[(site, "the in-place write is here")])]
    return [make(code_for("inplace-on-leaf", pat.code), site,
                 f"`{name}` modifies a leaf tensor that requires grad while grad mode is on "
                 f"({src(site)})",
                 fix="wrap manual updates/initialisation in `with torch.no_grad():`")]


def _made_trainable_early(args: tuple, kwargs: dict,
                          state: TraceState) -> tuple[Site, str] | None:
    """# NOTE [leaf made trainable too early]
    The leaf an in-place write fails on was made to require grad by the program (a
    ``requires_grad_()`` on a plain tensor, a constant factory called with
    ``requires_grad=True``: ``TraceState.leaf_births``), and either
    - it had been written in place before that line (its version counter had moved): the
      program was filling it, and made it trainable before the filling ended; or
    - it came from a constant factory (zeros, empty...) and the value written carries a graph:
      a result buffer, whose rows autograd should flow through, made a leaf.
    That line is named. A write of values without a graph (a manual update ``w -= lr * g``,
    a constant) into a trainable tensor keeps the write."""
    t = args[0] if args and isinstance(args[0], Tensor) else None
    leaf = t if t is None or t._base is None else t._base
    hit = state.leaf_births.get(id(leaf)) if leaf is not None else None
    if hit is None or hit[0]() is not leaf:
        return None
    _, made, version, factory = hit
    if not factory and version > 0:
        return made, f"after {version} in-place write(s) filled it as a plain tensor"
    graph = any(isinstance(a, Tensor) and a.grad_fn is not None
                for a in (*args[1:], *kwargs.values()))
    if factory and graph:
        return made, ("a constant buffer that the program fills with values computed from "
                      "tensors with a graph")
    return None


def detached_saved_finding(pat: ErrorPattern, exc: BaseException, func: Any, args: tuple,
                           kwargs: dict, site: Site | None, state: TraceState) -> list[Finding]:
    """``x.detach_()`` on a tensor that was on the graph (it had a ``grad_fn``) and that an op
    had saved for backward: the error names no line; the traced ``detach_`` calls do (the
    earliest one on a graph tensor: the first that broke a saved value)."""
    hit = next((r for r in state.inplace if r[1] == "detach_" and r[2]), None)
    if hit is None:
        return []
    where, _, names, shape, _, made, _ = hit
    return [make(code_for("inplace-on-saved-tensor", pat.code), where,
                 f"`detach_()` detached in place a tensor on the graph (shape {list(shape)}, "
                 f"made by {names[0]}) that an earlier op saved for backward; backward() then "
                 "cannot use the saved value",
                 fix="use the out-of-place `x = x.detach()` (a new tensor), or detach only "
                     "after backward()",
                 related=[(made, "the tensor was created here"),
                          (site, "backward() failed here")])]
