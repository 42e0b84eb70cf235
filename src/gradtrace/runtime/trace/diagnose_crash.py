"""Root lines for errors torch raises from its own checks (the entries of
:mod:`gradtrace.runtime.catalogue_crashes`): the line the user changes, which is not always the
one that raised.

- a view autograd cannot rewrite, written in place: the write, with where the view was made;
- a hook on a tensor without grad: the registration, with why the tensor has none;
- ``autograd.grad`` over an input that does not require grad: where that input left the graph;
- anomaly mode's "returned nan values": the forward line that made the node (NOTE [NaN origin]:
  under anomaly mode every backward is hunted, the hunt's first non-finite node is it);
- GradScaler out of order: the ``update()`` that runs on one branch only (NOTE [scaler order]);
- an optimizer given a module or one tensor: the construction, or the call that handed the
  value to a helper building it (NOTE [handed through a helper]).

``TRACED`` analyzers take the failing torch call (:func:`diagnose.diagnose_failure`);
``POSTHOC`` ones the traceback frame (:func:`posthoc.diagnose_traceback`).
"""
from __future__ import annotations

import ast
import re
import types
from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make, src
from gradtrace.runtime.error_pattern import ErrorPattern
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.inplace_layer import inplace_layer_built
from gradtrace.runtime.trace.layer_sites import layer_here
from gradtrace.runtime.trace.records import created_site

_MULTI = ("Unbind", "Split", "SplitWithSizes", "Chunk", "UnsafeSplit")


def _tensor_arg(args: tuple, kwargs: dict) -> Any:
    import torch

    return next((a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)), None)


def _view_chain(t: Any) -> list[tuple[Site | None, str]]:
    """(where it was made, op name) of the view ``t`` and of the views it was taken from,
    innermost first, up to the function that returned several views."""
    out: list[tuple[Site | None, str]] = []
    node = getattr(t, "grad_fn", None)
    while node is not None and len(out) < 4:
        name = type(node).__name__.replace("Backward0", "").replace("Backward", "")
        out.append((created_site(node)[0], name))
        if name.startswith(_MULTI):
            break
        nxt = [n for n, _ in getattr(node, "next_functions", ()) if n is not None]
        node = nxt[0] if nxt else None
    return out


def view_inplace(pat: ErrorPattern, exc: BaseException, func: Any, args: tuple, kwargs: dict,
                 site: Site | None, state: Any) -> list[Finding]:
    """GT832 at the in-place write (the crash's own line), naming the kind of view."""
    text = str(exc)
    m = re.match(r"Output \d+ of (\w+) is a view", text)
    t = _tensor_arg(args, kwargs)
    op = getattr(func, "__name__", "") or "the in-place op"
    related: list[tuple[Site | None, str]] = []
    if pat.key == "view-multi-output":
        chain = _view_chain(t)
        multi = next((n for _, n in chain if n.startswith(_MULTI)), m[1] if m else "unbind")
        what = (f"`{op}` changes in place a view returned by `{multi.lower()}` (a function "
                "that returns several views: unbind, iterating a tensor, chunk, split)")
        if chain and not chain[0][1].startswith(_MULTI):
            what = what.replace("a view returned", f"a `{chain[0][1].lower()}` of a view "
                                "returned", 1)
        related += [(s, f"`{n.lower()}` made the view here") for s, n in chain]
    elif pat.key == "view-custom-function":
        name = m[1] if m else "a custom Function"
        what = (f"`{op}` changes in place the output of the custom autograd.Function `{name}`"
                if name != "BackwardHookFunction" else
                f"`{op}` changes in place the output of a module with a full backward hook")
        made = _view_made_in_forward(t)
        if made is not None:  # NOTE [view made inside a Function]
            return [make(pat.code, made, f"`{name}.forward` returns here a view of a tensor it "
                         f"made (its base has no graph: forward runs with grad off); `{op}` at "
                         f"{src(site)} changes that output in place and autograd refuses to "
                         "record it", fix="return a new tensor from forward (.clone() the view, "
                         "or .contiguous() a reshape)",
                         related=[(site, "the output is changed in place here")])]
    elif pat.key == "view-no-grad":
        cut = state.cut_of(t) if state is not None else None
        what = f"`{op}` changes in place, with grad mode on, a view made under no_grad"
        if cut is not None:
            related.append((cut.site, f"the view was made here: {cut.describe()}"))
    else:
        what = "`detach_()` cannot change a view in place"
    layer = layer_here(state) or inplace_layer_built(state, m) if state is not None else None
    if layer is not None and layer != site:  # NOTE [in-place layer called directly]
        what = f"this layer, called at {src(site)}, writes in place: {what}"
        related.append((site, "the layer wrote in place when called here"))
    return [make(pat.code, layer or site, f"{what}; autograd refuses to record it", fix=pat.fix,
                 related=related)]


def _view_made_in_forward(t: Any) -> Site | None:
    """# NOTE [view made inside a Function]
    The output of a custom Function that is a view whose base has no graph was made inside
    ``forward`` (which runs with grad off: a slice, a ``view``, ``F.linear`` of a 3-D input):
    the line to change is ``forward``'s return (``.clone()`` there), named when ``forward`` has
    one ``return``. An input returned as-is is a view of a tensor that has a graph (the input):
    the caller's write stays the line."""
    base = getattr(t, "_base", None)
    if base is None or base.requires_grad or not t._is_view():
        return None
    cls = getattr(getattr(t, "grad_fn", None), "_forward_cls", None)
    code = getattr(getattr(cls, "forward", None), "__code__", None)
    if code is None:
        return None
    from gradtrace.runtime.trace.locate import own_returns, tree_of

    tree = tree_of(code.co_filename)
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
               and n.name == code.co_name and code.co_firstlineno in
               (n.lineno, *(d.lineno for d in n.decorator_list))), None) if tree else None
    if fn is None:
        return None
    returns = own_returns(fn)
    if len(returns) != 1:
        return None
    return Site(code.co_filename, returns[0].lineno, code.co_name)


def _why_no_grad(state: Any, t: Any) -> tuple[Site | None, list[tuple[Site | None, str]]]:
    """The line that made ``t`` leave the graph (the ``with`` of a no_grad block when that is
    the reason), and the related lines to show."""
    from gradtrace.runtime.trace.locate import decorated_off, enclosing_with

    cut = state.cut_of(t) if state is not None else None
    if cut is None:
        return None, []
    lead = None  # as diagnose.grad_off_line: the `with` (or decorator) that turned grad off
    if cut.reason == "inference":
        lead = cut.grad_off or enclosing_with(cut.site, ("inference_mode",))
    elif cut.reason == "no_grad" and cut.grad_off is not None:
        lead = cut.grad_off if cut.grad_off.source().startswith(("with ", "async with ")) \
            else decorated_off(cut.grad_off, cut.site)
    related: list[tuple[Site | None, str]] = [(cut.site, f"it left the graph here: "
                                                         f"{cut.describe()}")]
    return lead or cut.site, related


def hook_without_grad(pat: ErrorPattern, exc: BaseException, func: Any, args: tuple,
                      kwargs: dict, site: Site | None, state: Any) -> list[Finding]:
    """GT833 at the registration; the reason (a no_grad block, a detach) as related; at the
    no_grad block when no backward() ran yet (NOTE [hook before any gradient])."""
    t = _tensor_arg(args, kwargs)
    call = "retain_grad()" if "retain_grad" in str(exc) else "register_hook()"
    import torch

    why, related = _why_no_grad(state, t)
    if why is None and not torch.is_grad_enabled() and state is not None:
        why = state.grad_off  # made in this no_grad block (the cut was not kept)
    if why is not None and why not in {s for s, _ in related}:
        related.insert(0, (why, "grad mode was off here"))
    if why is not None and why != site and not torch.is_grad_enabled() and state is not None \
            and state.backward_count == 0 and _program_computes_gradients(why):
        # NOTE [hook before any gradient]: registered with grad mode off before any backward()
        # of the run: the hook's code never ran with gradients; the block turning grad off
        # around the pass meant to compute them is the line to change, not the registration
        # (shared code that ran in training first keeps the registration: guard it there;
        # so does a program with no backward()/autograd.grad at all: the hook is the stray part)
        return [make(pat.code, why, f"grad mode is off here around a pass that registers a "
                     f"gradient hook (`{call}` at {src(site)}) before any backward() of the "
                     "run: the tensor does not require grad, so the gradient it waits for "
                     "cannot be computed", fix="run the pass that needs gradients with grad "
                     "enabled (outside torch.no_grad()/inference_mode, or in "
                     "torch.enable_grad())",
                     related=[(site, f"`{call}` failed here"),
                              *[r for r in related if r[0] != why]])]
    reason = f" (made without grad: {src(why)})" if why is not None else \
        " (grad mode is on: nothing it was computed from requires grad, e.g. frozen weights " \
        "and plain inputs)" if torch.is_grad_enabled() else " (grad mode is off)"
    return [make(pat.code, site, f"`{call}` on a tensor that does not require grad{reason}"
                 "; a gradient hook needs a tensor autograd tracks", fix=pat.fix,
                 related=related)]


def _program_computes_gradients(site: Site) -> bool:
    """The file of ``site`` calls backward() or autograd.grad somewhere: the pass under no_grad
    was meant to reach it (NOTE [hook before any gradient])."""
    from gradtrace.runtime.trace.locate import tree_of
    from gradtrace.runtime.trace.offstack import _computes_gradients

    tree = tree_of(site.path)
    return tree is not None and _computes_gradients(list(ast.walk(tree)))


def grad_input_no_grad(pat: ErrorPattern, exc: BaseException, func: Any, args: tuple,
                       kwargs: dict, site: Site | None, state: Any) -> list[Finding]:
    """GT702/GT812 at the line where the input autograd.grad was asked about left the graph."""
    import torch

    inputs = args[1] if len(args) > 1 else kwargs.get("inputs")
    inputs = [inputs] if isinstance(inputs, torch.Tensor) else list(inputs or ())
    for i, t in enumerate(inputs):
        if isinstance(t, torch.Tensor) and not t.requires_grad:
            lead, related = _why_no_grad(state, t)
            if lead is None:
                born = _registered_frozen(state, t)
                if born is None:
                    continue
                return [make(code_for(pat.twin, pat.code), born,
                             f"input {i} of torch.autograd.grad ({src(site)}) is a Parameter "
                             "registered here with requires_grad=False: autograd does not "
                             "track it, so no gradient can be taken with respect to it",
                             fix="leave the frozen parameter out of the inputs (filter on "
                                 "p.requires_grad), or make it trainable here",
                             related=[(site, "autograd.grad was asked for it here")])]
            return [make(code_for(pat.twin, pat.code), lead,
                         f"input {i} of torch.autograd.grad ({src(site)}) does not require "
                         f"grad: it left the graph here ({src(lead)})",
                         fix="take the gradient with respect to the tensor before the cut "
                             "(remove the .detach()/no_grad here), or do not ask for it",
                         related=[*related, (site, "autograd.grad was asked for it here")])]
    return []


def _registered_frozen(state: Any, t: Any) -> Site | None:
    """# NOTE [registered frozen]
    Where ``t`` was registered on a module as a Parameter that did not require grad
    (``nn.Parameter(x, requires_grad=False)``), seen by the parameter registration hook, if it
    still does not and was not frozen later by a recorded freeze."""
    data = getattr(state, "hooks_data", None)
    hit = data.born_frozen.get(id(t)) if data is not None else None
    if hit is None or hit[0]() is not t or state.frozen_at(t) is not None:
        return None
    return hit[1]


def anomaly_nan(pat: ErrorPattern, exc: BaseException, func: Any, args: tuple, kwargs: dict,
                site: Site | None, state: Any) -> list[Finding]:
    """GT825 at the forward line of the node anomaly mode stopped at."""
    from gradtrace.runtime.trace.graph_walk import roots_of

    m = re.search(r"Function '(\w+)' returned nan", str(exc))
    name = m[1] if m else ""
    hunt = getattr(state, "hunt", None)
    entered = getattr(hunt, "entered", None)
    made = created_site(entered)[0] if type(entered).__name__ == name else None
    if made is None:
        sites = _nodes_named(roots_of(args, kwargs), name)
        made = sites[0] if len(set(sites)) == 1 else None
    if made is None:
        return []
    op = name.replace("Backward0", "").replace("Backward", "").lower()
    if (inf := _inf_before(hunt, made)) is not None:
        return [make("GT825", inf[0], f"the backward of `{inf[1]}` here turned finite gradients "
                     "into Inf (its derivative is infinite at this input); anomaly mode checks "
                     f"for NaN only and let it pass, and the Inf became NaN in the backward of "
                     f"`{op}` ({src(made)}), where anomaly mode stopped", fix=pat.fix,
                     related=[(made, "the Inf became NaN here (0 * inf)"),
                              (site, "backward() raised here")])]
    return [make("GT825", made, f"the backward of `{op}` made here ({src(made)}) returned NaN "
                 "(anomaly mode stopped there): its input sits where the derivative is "
                 "undefined or infinite (0 for sqrt/pow below 1, 0/0, log of 0)",
                 fix=pat.fix, related=[(site, "backward() raised here")])]


def _inf_before(hunt: Any, made: Site) -> tuple[Site, str] | None:
    """The op whose backward made the Inf that the node anomaly mode stopped at received.

    # NOTE [Inf before anomaly's NaN]
    Anomaly mode raises when a backward returns NaN, never on Inf: ``sqrt`` at 0 passes on
    ``g / 0 = inf`` and the NaN shows one node later (``mul``'s ``0 * inf``). The hunt's
    post-hooks recorded the first node that turned finite gradients into Inf, and its pre-hooks
    whether the node that raised received non-finite gradients (NOTE [NaN origin]); only then is
    the Inf's op the line to change (a NaN made from finite gradients is the raising node's)."""
    origin = getattr(hunt, "origin", None)
    if origin is None or not getattr(hunt, "entered_inf", False) or origin[0] == made:
        return None
    return origin[0], origin[1].removeprefix("received:").replace("Backward0", "").replace(
        "Backward", "").lower()


def _nodes_named(roots: list[Any], name: str, limit: int = 20000) -> list[Site]:
    """The creation sites of the graph's nodes of type ``name``."""
    stack = [getattr(r, "grad_fn", None) for r in roots]
    seen: dict[int, Any] = {}
    out: list[Site] = []
    while stack and len(seen) < limit:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node
        if type(node).__name__ == name:
            made, _ = created_site(node)
            if made is not None:
                out.append(made)
        try:
            stack.extend(n for n, _ in node.next_functions if n is not None)
        except (AttributeError, RuntimeError):
            continue
    return out


# NOTE [scaler order]
# GradScaler keeps, per optimizer, a stage (ready, unscaled, stepped) that only update() resets.
# The raising call (unscale_/step) is the symptom; the cause is the update() that did not run:
# read from the function holding the raising call, an update() of the same scaler nested in an
# `if` of the loop (the branch that skips it, often with the step, on non-finite gradients) is
# named; with no update() there at all, the step() it should follow; otherwise (a second
# unscale_, an unscale_ after step) the raising call itself.
def scaler_order(pat: ErrorPattern, exc: BaseException, frame: types.FrameType, site: Site,
                 state: Any) -> list[Finding]:
    from gradtrace.runtime.trace.locate import tree_of

    tree = tree_of(site.path)
    scope = _scope_at(tree, site.line) if tree is not None else None
    call = _call_at(scope, site.line, ("unscale_", "step")) if scope is not None else None
    if call is None:
        return []
    scaler = ast.unparse(call.func.value)  # type: ignore[attr-defined]
    loop = _loop_at(scope, site.line)
    body = loop if loop is not None else scope
    updates = [(c, ifs) for c, ifs in _calls_with_ifs(body, "update")
               if ast.unparse(c.func.value) == scaler]  # type: ignore[attr-defined]
    related = [(site, f"`{scaler}.{call.func.attr}()` raised here")]  # type: ignore[attr-defined]
    branch = [(c, ifs) for c, ifs in updates if ifs]
    if branch and len(branch) == len(updates):
        c, ifs = branch[0]
        where = Site(site.path, c.lineno, site.function)
        return [make(pat.code, where, f"`{scaler}.update()` runs only when the `if` at line "
                     f"{ifs[0].lineno} ({src(Site(site.path, ifs[0].lineno))}) takes this "
                     "branch; an iteration that skips it leaves the optimizer's scaler stage "
                     f"set, so the next `{scaler}.{call.func.attr}()` raises",  # type: ignore
                     fix="call scaler.update() once every iteration, after the if (scaler.step "
                         "already skips the optimizer step on inf/NaN gradients)",
                     related=related)]
    skip = _skip_before(body, updates[0][0].lineno) if updates and loop is not None else None
    if skip is not None:
        where = Site(site.path, skip.lineno, site.function)
        return [make(pat.code, where, f"this `{type(skip).__name__.lower()}` skips "
                     f"`{scaler}.update()` (line {updates[0][0].lineno}) on some iterations, "
                     "which leaves the optimizer's scaler stage set, so the next "
                     f"`{scaler}.{call.func.attr}()` raises",  # type: ignore[attr-defined]
                     fix="call scaler.update() on that path too (scaler.step already skips "
                         "the optimizer step on inf/NaN gradients)", related=related)]
    if not updates and "update()" in str(exc):
        steps = [c for c, _ in _calls_with_ifs(body, "step")
                 if ast.unparse(c.func.value) == scaler]  # type: ignore[attr-defined]
        where = Site(site.path, steps[0].lineno, site.function) if steps else site
        return [make(pat.code, where, f"`{scaler}.update()` is never called in this loop, so "
                     "the scaler's per-optimizer stage is never reset and the next iteration's "
                     "call raises", fix="call scaler.update() after scaler.step(optimizer), "
                     "once per iteration", related=related)]
    return [make(pat.code, site, f"{pat.title}: {exc}", fix=pat.fix)]


def _skip_before(loop: ast.AST, line: int) -> ast.stmt | None:
    """A ``continue``/``break`` of ``loop`` (not of a nested loop) under an ``if``, before
    ``line``."""
    todo: list[tuple[ast.AST, bool]] = [(loop, False)]  # depth first, in source order
    while todo:
        node, in_if = todo.pop()
        if isinstance(node, (ast.Continue, ast.Break)) and in_if and node.lineno < line:
            return node
        todo.extend(reversed([(c, in_if or isinstance(c, ast.If))
                              for c in ast.iter_child_nodes(node)
                              if not isinstance(c, (ast.For, ast.While, ast.AsyncFor,
                                                    ast.FunctionDef, ast.AsyncFunctionDef,
                                                    ast.ClassDef, ast.Lambda))]))
    return None


def _scope_at(tree: ast.AST, line: int) -> ast.AST:
    """The innermost function holding ``line`` (the module when none does)."""
    best: ast.AST = tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and node.lineno <= line <= (node.end_lineno or node.lineno):
            if best is tree or node.lineno > best.lineno:  # type: ignore[attr-defined]
                best = node
    return best


def _call_at(scope: ast.AST, line: int, attrs: tuple[str, ...]) -> ast.Call | None:
    for node in ast.walk(scope):
        if isinstance(node, ast.Call) and node.lineno == line \
                and isinstance(node.func, ast.Attribute) and node.func.attr in attrs:
            return node
    return None


def _loop_at(scope: ast.AST, line: int) -> ast.AST | None:
    best = None
    for node in ast.walk(scope):
        if isinstance(node, (ast.For, ast.While, ast.AsyncFor)) \
                and node.lineno <= line <= (node.end_lineno or node.lineno):
            if best is None or node.lineno < best.lineno:  # the outermost: the training loop
                best = node
    return best


def _calls_with_ifs(body: ast.AST, attr: str) -> list[tuple[ast.Call, list[ast.If]]]:
    """Every ``x.<attr>()`` call in ``body`` with the ``if`` statements around it (outermost
    first); nested functions are not entered."""
    out: list[tuple[ast.Call, list[ast.If]]] = []
    todo: list[tuple[ast.AST, list[ast.If]]] = [(body, [])]  # depth first, in source order
    while todo:
        node, ifs = todo.pop()
        if node is not body and isinstance(node, ast.Call) \
                and isinstance(node.func, ast.Attribute) and node.func.attr == attr \
                and not node.args and not node.keywords:
            out.append((node, ifs))
        todo.extend(reversed([(c, ifs + [c] if isinstance(c, ast.If) else ifs)
                              for c in ast.iter_child_nodes(node)
                              if not isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                    ast.Lambda, ast.ClassDef))]))
    return out


def optimizer_non_tensor(pat: ErrorPattern, exc: BaseException, frame: types.FrameType,
                         site: Site, state: Any) -> list[Finding]:
    """GT835 at the optimizer's construction, naming what it was given."""
    m = re.search(r"params is ([\w.]+)|but got ([\w.]+)", str(exc))
    got = (m[1] or m[2]).rsplit(".", 1)[-1] if m else "object"
    if m is not None and m[1]:
        msg = (f"the optimizer built here is given a `{got}` module in its parameter list; "
               "optimizers take tensors (pass the module's .parameters())")
        fix = "pass module.parameters() (or chain several modules' parameters)"
    else:
        msg = (f"the optimizer built here is given a single `{got}` tensor; it takes an "
               "iterable of tensors")
        fix = "wrap the tensor in a list: [w]"
    from gradtrace.runtime.trace.handed_through import caller_of_parameter

    caller = caller_of_parameter(frame, site)
    if caller is not None:  # NOTE [handed through a helper]
        return [make(pat.code, caller, msg.replace("the optimizer built here is",
                                                   "the optimizer this call builds is", 1),
                     fix=fix, related=[(site, "the helper builds the optimizer from it here")])]
    return [make(pat.code, site, msg, fix=fix)]


TRACED = {"view-multi-output": view_inplace, "view-custom-function": view_inplace,
          "view-no-grad": view_inplace, "detach-view": view_inplace,
          "hook-no-grad": hook_without_grad, "grad-input-no-grad": grad_input_no_grad,
          "anomaly-nan": anomaly_nan}
POSTHOC = {"scaler-order": scaler_order, "optimizer-non-tensor": optimizer_non_tensor}
