"""Analyzers for values kept with their graph where a plain number was meant: a tensor that
requires grad converted to numpy (kept in a history list, or returned from an evaluation
helper, or reduced with numpy inside a forward: NOTE [numpy inside forward]). Called through
:data:`gradtrace.runtime.trace.diagnose._ANALYZERS`."""
from __future__ import annotations

from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make, src
from gradtrace.runtime.catalogue import ErrorPattern
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.records import created_site
from gradtrace.runtime.trace.state import TraceState
from gradtrace.runtime.trace.written_graph import plain_tensor_written

Tensor = torch.Tensor


def kept_numpy_finding(pat: ErrorPattern, exc: BaseException, func: Any, args: tuple, kwargs: dict,
           site: Site | None, state: TraceState) -> list[Finding]:
    from gradtrace.runtime.trace.locate import stored_at

    t = args[0] if args and isinstance(args[0], Tensor) else None
    made = created_site(t.grad_fn)[0] if t is not None else None
    code = code_for("numpy-on-grad-tensor", pat.code)
    dropped = _dropped_detach(code, t, site) if t is not None else None
    if dropped is not None:  # NOTE [detach result dropped]
        return [dropped]
    stored = stored_at(site) if t is not None else None
    frame = _live_frame(site)
    if stored is not None and frame is not None and not _holds_grad(frame, site):
        stored = None  # the list the call reads first holds no tensor that requires grad
    if stored is not None and site is not None and site.function == "forward":
        # NOTE [numpy inside forward]: a list of this pass's tensors (layer outputs) reduced
        # with numpy inside a module's forward: the conversion is the model's own computation
        # cut out of the graph (torch.stack(...).sum(0) was meant), not a history kept for
        # plotting; the conversion leads, the list is context
        return [make(code, site, "numpy conversion of tensors that require grad inside "
                     "forward: the list of intermediate results is reduced with numpy, which "
                     "leaves the autograd graph (and fails while they require grad)",
                     fix="reduce the tensors with torch (torch.stack(values).sum(0))",
                     related=[(stored, "the tensors are collected in the list here"),
                              (made, "the tensor was computed here")])]
    total = _total_finding(code, state, t, site, stored) if t is not None else None
    if total is not None:  # NOTE [numpy of a running total]
        return [total]
    kept = _kept_finding(code, t, site) if t is not None else None
    if kept is not None:  # NOTE [numpy of a kept training value]
        return [kept]
    if stored is not None:  # np.array(history): the tensors were kept in that list
        return [make(code, stored, "numpy conversion of a tensor that requires grad: this line "
                     "keeps the tensor in a list with its autograd graph, and "
                     f"{src(site)} converts that list to numpy", fix="keep a number in the "
                     "list (loss.item()) or a detached tensor (loss.detach())",
                     related=[(made, "the tensor was computed here"),
                              (site, "the list is converted to numpy here")])]
    handed = _library_called(frame) if t is not None and stored is None else None
    if handed is not None:  # NOTE [handed to a library]
        return [make(code, site, "numpy conversion of a tensor that requires grad: this line "
                     f"hands the tensor, still on its autograd graph, to `{handed}, which "
                     "converts it to numpy", fix="pass `.detach()` of the tensor (a plotting "
                     "or drawing call needs the values only)",
                     related=[(made, "the tensor was computed here")])]
    written = plain_tensor_written(t, site)
    if written is not None:  # NOTE [graph written into a plain tensor]
        return [_written_finding(code, written, site, made)]
    left = _left_function(t, site) if t is not None else None
    if left is not None:  # computed in another function and returned with its graph
        return [make(code, left, "numpy conversion of a tensor that requires grad: it is "
                     f"computed here in `{left.function}()` with its autograd graph and leaves "
                     f"the function still attached; line {site.line} converts it to numpy",
                     fix="return loss.item() (or loss.detach()) from there, or compute it "
                         "under torch.no_grad() when it is only evaluated",
                     related=[(site, "it is converted to numpy here")])]
    return [make(code_for("numpy-on-grad-tensor", pat.code), site,
                 "numpy conversion of a tensor that requires grad", fix="use .detach().cpu()"
                 ".numpy()", related=[(made, "the tensor was computed here")])]


def _running_total(state: Any, t: Tensor, limit: int = 256) -> Site | None:
    """# NOTE [numpy of a running total]
    The tensor converted to numpy is made from a running total the run saw collect a loss
    with its graph after a backward() (``train_loss += loss``, GT826): a node of its graph was
    created on that line. The total is where a number was meant (``loss.item()``); whatever
    keeps or returns it later (a history list, ``total / len(loader)``) only carries that graph
    on. The walk goes up the converted tensor's graph only: a loss appended next to a running
    total is not made from it."""
    from gradtrace.runtime.trace.graph_walk import graph_nodes

    sites = {key[1] for key in list(getattr(state, "events", ())) if key[0] == "graph-kept"}
    if not sites:
        return None
    for node in graph_nodes([t], limit):
        made = created_site(node)[0]
        if made is not None and made in sites:
            return made
    return None


def _total_finding(code: str, state: Any, t: Tensor, site: Site | None,
                   stored: Site | None = None) -> Finding | None:
    """NOTE [numpy of a running total]: the total's line, the list and the conversion as
    context."""
    total = _running_total(state, t) if state is not None else None
    if total is None:
        return None
    return make(code, total, "numpy conversion of a tensor that requires grad: it is made from "
                "this running total, which collects every step's loss with its autograd graph; "
                f"{src(site)} converts it to numpy",
                fix="accumulate a number here (`total += loss.item()`)",
                related=[(stored, "the value is kept in a list here"),
                         (site, "it is converted to numpy here")] if stored is not None
                else [(site, "it is converted to numpy here")])


def _dropped_detach(code: str, t: Tensor, site: Site | None) -> Finding | None:
    """The tensor converted had ``detach()`` called on it by a statement of its own (its
    result dropped): that line meant it to leave the graph (NOTE [detach result dropped])."""
    from gradtrace.runtime.trace.carried_attr import detach_dropped_on

    at = detach_dropped_on(t)
    if at is None:
        return None
    return make(code, at, "numpy conversion of a tensor that requires grad: this statement "
                "calls `detach()` on that very tensor and drops the result; `detach()` returns "
                f"a new tensor and leaves this one on its autograd graph, so {src(site)} "
                "converts the attached tensor", fix="assign the result (`t = t.detach()`) or "
                "detach in place (`t.detach_()`)",
                related=[(site, "it is converted to numpy here")])


def _kept_finding(code: str, t: Tensor, site: Site | None,
                  frames: list[Any] | None = None) -> Finding | None:
    from gradtrace.runtime.trace.kept_store import kept_store

    kept = kept_store(t, frames)
    if kept is None:
        return None
    at, bwd = kept
    return make(code, at, "numpy conversion of a tensor that requires grad: this line keeps a "
                "value of a training step with its autograd graph (backward() already ran "
                f"through it at {src(bwd)}), and {src(site)} converts it to numpy",
                fix="keep a number (loss.item()) or a detached tensor (loss.detach())",
                related=[(bwd, "its step's backward() ran here"),
                         (site, "it is converted to numpy here")])


def kept_numpy_after(pat: ErrorPattern, exc: BaseException, frame: Any, site: Site,
                     state: Any) -> list[Finding]:
    """The same reading from the traceback, when numpy converted the tensor from C (its
    ``__array__``) where the tracer does not see the call."""
    frames, tb = [], exc.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    t = next((s for f in reversed(frames) for s in [f.f_locals.get("self")]
              if isinstance(s, Tensor) and s.requires_grad), None)
    code = code_for("numpy-on-grad-tensor", pat.code)
    written = plain_tensor_written(t, site)
    found = (_dropped_detach(code, t, site) or _total_finding(code, state, t, site)
             or _kept_finding(code, t, site, frames)
             or (_written_finding(code, written, site, None) if written else None)) \
        if t is not None else None
    return [found] if found is not None else []


POSTHOC = {"numpy-grad": kept_numpy_after}


def _written_finding(code: str, written: Site, site: Site | None, made: Site | None) -> Finding:
    """NOTE [graph written into a plain tensor]: the write leads."""
    return make(code, written, "numpy conversion of a tensor that requires grad: this line "
                "writes a value that requires grad in place into a tensor that had no graph, "
                f"so it and everything computed from it carry the graph; {src(site)} converts "
                "one of them to numpy", fix="write `.detach()` of the value (or write under "
                "torch.no_grad())", related=[(made, "the converted tensor was computed here"),
                                             (site, "it is converted to numpy here")])


def _live_frame(site: Site | None) -> Any:
    """The live frame of ``site`` (the conversion is diagnosed while the op runs), or None."""
    import sys

    if site is None:
        return None
    frame = sys._getframe(1)
    while frame is not None and not (frame.f_code.co_filename == site.path
                                     and frame.f_lineno == site.line):
        frame = frame.f_back
    return frame


def _holds_grad(frame: Any, site: Site) -> bool:
    """Whether a list the call at ``site`` reads (a local name of the line, or ``self.<name>``)
    holds a tensor that requires grad (``ax.plot(xs, ys)``: ``xs`` a list of floats is not where
    the tensor was kept). Unreadable: True (the reading stands)."""
    import ast

    from gradtrace.runtime.trace.locate import tree_of

    tree = tree_of(site.path)
    if tree is None:
        return True
    seen = False
    for n in ast.walk(tree):
        if not (isinstance(n, ast.Call) and n.lineno == site.line and n.args):
            continue
        a = n.args[0]
        value = frame.f_locals.get(a.id) if isinstance(a, ast.Name) else \
            getattr(frame.f_locals.get("self"), a.attr, None) if isinstance(a, ast.Attribute) \
            and isinstance(a.value, ast.Name) and a.value.id == "self" else None
        if isinstance(value, (list, tuple)):
            seen = True
            if any(isinstance(v, Tensor) and v.requires_grad for v in value):
                return True
    return not seen


def _library_called(frame: Any) -> str | None:
    """# NOTE [handed to a library]
    The conversion ran inside a library the user's line called (matplotlib's ``ax.plot``,
    ``plt.Rectangle``): the line is where the tensor left the program still on its graph, the
    one to change (``.detach()`` there). The library is the module of the frame the user's line
    called (read from the live frames, below the user's frame). numpy's own functions
    (``np.sum(losses)``, ``np.log(var)``) are left to the other readings: there the tensor is
    computed with as an array, and where it kept its graph (an evaluation helper's return, a
    history list) is the line to change. ``None`` when the user's line converted it itself."""
    import sys

    from gradtrace.runtime.ran import is_user_file

    if frame is None:
        return None
    child = None
    cur = sys._getframe(1)
    while cur is not None and cur is not frame:
        child, cur = cur, cur.f_back
    if cur is None or child is None:
        return None
    module = str(child.f_globals.get("__name__", ""))
    if is_user_file(child.f_code.co_filename) or \
            module.split(".")[0] in ("torch", "numpy", "gradtrace"):
        return None
    return f"{module.split('.')[0]}` (`{child.f_code.co_name}`)"


def _left_function(t: Tensor, site: Site | None, limit: int = 256) -> Site | None:
    """The line of another user function (not a module's ``forward``) where the graph of ``t``
    was last extended before ``t`` reached ``site``: where it left that function attached."""
    if site is None:
        return None
    queue = [t.grad_fn]
    seen: set[int] = set()
    while queue and len(seen) < limit:
        node = queue.pop(0)
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        made, _ = created_site(node)
        if made is not None and made.path == site.path and made.line != site.line \
                and made.function != site.function \
                and made.function not in ("<listcomp>", "<genexpr>", "<dictcomp>", "<setcomp>"):
            # (a comprehension is part of the function that holds it, not one it left)
            return None if made.function in ("forward", "<module>") else made
        try:
            queue.extend(n for n, _ in node.next_functions if n is not None)
        except (AttributeError, RuntimeError):
            continue
    return None
