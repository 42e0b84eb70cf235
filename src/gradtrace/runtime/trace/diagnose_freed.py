"""A second backward() at the same line through a graph the first one freed: where the graph was
carried over, when the run can tell (called by ``diagnose._backward_twice``).

- ``for loss in losses: loss.backward()`` over losses of one forward pass: the ``for`` line
  (the losses share the graph; the first backward() frees it);
- an object built once (``pi = Bernoulli(p)`` before the loop, a cache on ``self``) that keeps a
  tensor of the freed graph, used again by the failing pass: the line that built the object
  (read from the frame still on the stack when the error is raised);
- a local of the backward()'s function still holding a tensor (or tuple) of the freed graph,
  rebound inside the loop: that rebinding, or the ``return arg`` of the helper it calls that
  hands the value back undetached (a detach helper that skips an LSTM's ``(h, c)`` tuple);
- the very loss already backpropagated, handed again to a helper that calls backward() on it
  (NOTE [same loss backpropagated again]): the call of the helper that runs the second time.
"""
from __future__ import annotations

import ast
import sys
from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make, src
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.graph_walk import caller_between, freed_user
from gradtrace.runtime.trace.detached_elsewhere import detached_elsewhere
from gradtrace.runtime.trace.guarded_cache import guarded_cache
from gradtrace.runtime.trace.untrained_graph import untrained_graph
from gradtrace.runtime.trace.records import META_FREED, META_FREED_VIA, created_site, decode_meta


def _receiver(site: Site) -> tuple[Any, str | None]:
    """(the tree, the name whose ``.backward()`` is called at ``site``)."""
    from gradtrace.runtime.trace.locate import tree_of

    tree = tree_of(site.path)
    for n in ast.walk(tree) if tree is not None else ():
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                n.func.attr == "backward" and n.lineno == site.line and \
                isinstance(n.func.value, ast.Name):
            return tree, n.func.value.id
    return tree, None


def _loop_over_losses(site: Site, made: Site | None, pat: Any) -> Finding | None:
    from gradtrace.runtime.trace.locate import enclosing_loop

    _, name = _receiver(site)
    loop = enclosing_loop(site)
    if name is None or not isinstance(loop, ast.For) or not any(
            isinstance(t, ast.Name) and t.id == name for t in ast.walk(loop.target)):
        return None
    at = Site(site.path, loop.lineno, site.function)
    return make(code_for("backward-through-freed-graph", pat.code), at,
                f"this loop calls backward() once per loss of `{ast.unparse(loop.iter)}`, and "
                f"the losses share one graph (computed at {src(made)}): the first backward() "
                "frees it, the next one needs it again",
                fix="sum the losses and call backward() once (or retain_graph=True on all but "
                    "the last)", related=[(made, "the shared graph was computed here"),
                                          (site, "the second backward() fails here")])


def _consumer(roots: list[Any], limit: int = 5000, freer: list | None = None) -> Site | None:
    """The traced line that used a freed node in the failing graph (the site of the backward()
    that freed it is appended to ``freer``)."""
    user, node = freed_user(roots, limit)
    if node is not None and freer is not None:
        freer.append(decode_meta(node.metadata[META_FREED])[0])
    return user[0] if user is not None else None


def _stale(obj: Any) -> str | None:
    """The attribute of ``obj`` holding a tensor whose graph a backward() freed."""
    import torch

    for key, value in list(getattr(obj, "__dict__", {}).items())[:64]:
        gf = value.grad_fn if isinstance(value, torch.Tensor) else None
        try:
            if gf is not None and META_FREED in gf.metadata:
                return key
        except (AttributeError, RuntimeError):
            continue
    return None


def _value(expr: ast.expr, frame: Any) -> Any:
    """``name`` or ``name.attr...`` read from the frame and instance dicts (no property runs)."""
    if isinstance(expr, ast.Name):
        return frame.f_locals.get(expr.id, frame.f_globals.get(expr.id))
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, (ast.Name, ast.Attribute)):
        base = _value(expr.value, frame)
        d = getattr(base, "__dict__", None) if base is not None else None
        if isinstance(d, dict):
            return d.get(expr.attr, d.get("_modules", {}).get(expr.attr))
    return None


def _attr_assigned(tree: ast.AST, expr: ast.expr) -> int | None:
    """The first line assigning ``self.attr`` (the last link of ``expr``) in the file."""
    if not isinstance(expr, ast.Attribute):
        return None
    lines = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Assign) and any(
        isinstance(t, ast.Attribute) and t.attr == expr.attr and
        ast.unparse(t.value) == ast.unparse(expr.value) for t in n.targets)]
    return min(lines) if lines else None


def _object_built_once(roots: list[Any], site: Site, pat: Any) -> Finding | None:
    from gradtrace.runtime.trace.diagnose_args import assigned_before
    from gradtrace.runtime.trace.locate import tree_of

    used = _consumer(roots)
    tree = tree_of(used.path) if used is not None else None
    if used is None or tree is None:
        return None
    frame = sys._getframe(1)
    while frame is not None and not (frame.f_code.co_filename == used.path
                                     and frame.f_code.co_name == used.function):
        frame = frame.f_back
    if frame is None:
        return None
    recvs = {ast.unparse(n.value): n.value for n in ast.walk(tree) if isinstance(n, ast.Attribute)
             and isinstance(n.value, (ast.Name, ast.Attribute)) and n.lineno == used.line}
    for name, expr in sorted(recvs.items()):
        value = _value(expr, frame)
        attr = _stale(value) if value is not None else None
        line = (assigned_before(used, name) if isinstance(expr, ast.Name) else
                _attr_assigned(tree, expr)) if attr is not None else None
        if line is None:
            continue
        at = Site(used.path, line, used.function if isinstance(expr, ast.Name) else "")
        return make(code_for("graph-reused-across-steps", pat.code), at,
                    f"`{name}` is built once here and keeps `{name}.{attr}`, a tensor computed "
                    "with its graph; the first backward() freed that graph, and a later pass "
                    f"uses it again ({src(used)})",
                    fix=f"build `{name}` again on every pass (inside the loop), or from detached "
                        "inputs if it needs no gradient",
                    related=[(used, "the kept tensor is used again here"),
                             (site, "this backward() needs the freed graph")])
    return None


def freed_root(roots: list[Any], made: Site | None, site: Site, pat: Any,
               state: Any) -> Finding | None:
    """A better lead than the value's line for a second backward() at the same line."""
    return _same_loss_again(roots, site, pat) or _loop_over_losses(site, made, pat) or \
        _object_built_once(roots, site, pat) or _built_in_init(roots, site, pat) or \
        _carried_local(site, pat, state.last_backward_seq) or \
        detached_elsewhere(roots, _consumer(roots), made, site, pat, state) or \
        guarded_cache(roots, made, site, pat, state) or \
        untrained_graph(roots, made, site, pat, state)  # NOTE [graph of untrained parameters reused]


def _same_loss_again(roots: list[Any], site: Site, pat: Any) -> Finding | None:
    """# NOTE [same loss backpropagated again]
    The failing backward() differentiates a loss whose own node an earlier backward() already
    went through (the same tensor, not a new loss sharing part of its graph), at the same line:
    a helper that runs ``loss.backward()`` (``optimizer.backward(loss)`` in fairseq) is called
    twice on one loss, by two callers (a criterion that backpropagates inside, then the task).
    The line to change is the call that hands the helper the loss the second time: the first
    user frame outside the helper, on the stack while the error is raised."""
    gf = roots[0].grad_fn if len(roots) == 1 else None
    try:
        if gf is None or META_FREED not in gf.metadata:
            return None
    except (AttributeError, RuntimeError):
        return None
    from gradtrace.runtime.fuse import is_user_file

    f, inner = sys._getframe(1), None
    while f is not None:
        code = f.f_code
        if inner is None and code.co_filename == site.path and f.f_lineno == site.line:
            if not _argument(f, roots[0]):
                return None  # a loss the function made itself (GT507's case)
            inner = code
        elif inner is not None and code is not inner and is_user_file(code.co_filename):
            caller = Site(code.co_filename, f.f_lineno, code.co_name)
            return make(code_for("backward-through-freed-graph", pat.code), caller,
                        f"this call runs backward() ({src(site)}) on a loss that was already "
                        "backpropagated, which freed its graph: the loss is handed to "
                        f"`{inner.co_name}` a second time",
                        fix="call backward() once per loss: drop this call, or the one the "
                            "callee made before",
                        related=[(site, "backward() runs here, twice on the same loss")])
        f = f.f_back
    return None


def _argument(frame: Any, value: Any) -> bool:
    """Whether ``value`` is one of the arguments ``frame``'s function was called with."""
    code = frame.f_code
    names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    return any(frame.f_locals.get(n) is value for n in names)


def added_to_old_loss(roots: list[Any], site: Site, pat: Any) -> Finding | None:
    """``loss += loss_t`` (or ``loss = loss + ...``) where ``loss`` still holds the loss an
    earlier ``loss.backward()`` at another line already went through (a second pass written
    out after the first, SAM's): the new pass is added onto the freed
    graph; that accumulation is the line to change (start from ``loss = 0``)."""
    freer: list[Any] = []
    used = _consumer(roots, freer=freer)
    if used is None or not freer or freer[0] is None:
        return None
    tree, name = _receiver(freer[0])
    stmt = next((n for n in ast.walk(tree) if isinstance(n, (ast.AugAssign, ast.Assign))
                 and n.lineno <= used.line <= (n.end_lineno or n.lineno)), None) \
        if tree is not None and used.path == freer[0].path and name else None
    target = (stmt.target if isinstance(stmt, ast.AugAssign) else stmt.targets[0]) \
        if stmt is not None else None
    if not isinstance(target, ast.Name) or not (isinstance(stmt, ast.AugAssign) or any(
            isinstance(n, ast.Name) and n.id == target.id for n in ast.walk(stmt.value))):
        return None
    if target.id != name:  # NOTE [total of backpropagated losses]
        return _total_of_losses(stmt, target.id, name, used, freer[0], site, pat)
    return make(code_for("graph-kept", pat.code), used,
                f"`{name}` still holds the loss that backward() already went through "
                f"({src(freer[0])}), and this line adds the new pass onto it: the next "
                "backward() runs into the freed graph of the old one",
                fix=f"start the new pass from a fresh `{name}` (`{name} = 0`) before "
                    "accumulating into it", related=[(freer[0], "the old loss was "
                                                      "backpropagated (and freed) here"),
                                                     (site, "this backward() fails")])


def _total_of_losses(stmt: ast.AST, total: str, loss: str, used: Site, freer: Site,
                     site: Site, pat: Any) -> Finding | None:
    """# NOTE [total of backpropagated losses]
    ``running_loss += loss`` after ``loss.backward()``, then ``running_loss.backward()``: the
    running total (the receiver of the failing backward()) adds up losses whose graphs their own
    backward() already freed. The accumulation is the line to change (add ``loss.item()`` or
    ``loss.detach()``, or sum first and call backward() once). Only when the failing backward()
    is called on the total itself and the added term names the loss backpropagated before."""
    _, failing = _receiver(site)
    value = stmt.value  # type: ignore[attr-defined]
    if failing != total or not any(isinstance(n, ast.Name) and n.id == loss
                                   for n in ast.walk(value)):
        return None
    return make(code_for("graph-kept", pat.code), used,
                f"`{total}` adds up `{loss}` after its backward() ({src(freer)}) already went "
                f"through it and freed its graph: `{total}.backward()` then runs into those freed "
                "graphs",
                fix=f"add `{loss}.item()` (or `{loss}.detach()`) to the running total, or sum the "
                    "losses first and call backward() once",
                related=[(freer, "each loss was backpropagated (and freed) here"),
                         (site, "this backward() fails")])


def _built_in_init(roots: list[Any], site: Site, pat: Any) -> Finding | None:
    """``self.<attr>`` computed once in ``__init__`` (through the object's own layers) and used
    by every pass: the first backward() frees its graph (root_sites.init_built_attribute)."""
    from gradtrace.runtime.trace.root_sites import init_built_attribute

    used = _consumer(roots)
    built = init_built_attribute(used)
    if built is None:
        return None
    return make(code_for("graph-reused-across-steps", pat.code), built,
                "this value is computed once, when the object is built, with its graph; the "
                f"first backward() freed that graph, and every later pass uses it again "
                f"({src(used)})", fix="compute it in forward(), on every pass",
                related=[(used, "the value is used again here"),
                         (site, "this backward() needs the freed graph")])


def _stale_value(value: Any, since: int) -> bool:
    """A tensor (or a tuple/list of them) computed before the backward() numbered ``since``
    whose graph reaches a node a backward() freed: a value carried over from a past pass."""
    import torch

    from gradtrace.runtime.trace.graph_walk import reaches_marked

    items = value if isinstance(value, (tuple, list)) else (value,)
    for t in list(items)[:16]:
        gf = t.grad_fn if isinstance(t, torch.Tensor) else None
        made, seq = created_site(gf)
        if gf is not None and made is not None and 0 <= seq < since \
                and reaches_marked(gf, META_FREED):
            return True
    return False


def _returned_unchanged(fn: Any) -> int | None:
    """The line of ``return <one of its parameters>`` in a user function (a helper meant to
    detach that hands some values back as they are)."""
    from gradtrace.runtime.trace.locate import tree_of

    code = getattr(fn, "__code__", None)
    tree = tree_of(code.co_filename) if code is not None else None
    if tree is None:
        return None
    params = set(code.co_varnames[:code.co_argcount])
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                node.name == code.co_name and node.lineno <= code.co_firstlineno + 2 and \
                node.end_lineno is not None and node.end_lineno >= code.co_firstlineno:
            for r in ast.walk(node):
                if isinstance(r, ast.Return) and isinstance(r.value, ast.Name) and \
                        r.value.id in params:
                    return r.lineno
    return None


def _carried_local(site: Site, pat: Any, since: int) -> Finding | None:
    """A local of the failing backward()'s function that still holds a tensor (or a tuple of
    them) of the freed graph, rebound inside the loop around the backward(): that rebinding
    carries the graph into the next pass (or, when it calls a helper that returns its argument
    as it is, that ``return``)."""
    from gradtrace.runtime.trace.locate import loop_and_frame

    got = loop_and_frame(site)
    if got is None:
        return None
    loop, frame = got
    for name, value in list(frame.f_locals.items()):
        if name == "self" or not _stale_value(value, since):
            continue
        binds = [n for n in ast.walk(loop) if isinstance(n, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for tg in n.targets for t in ast.walk(tg))]
        if not binds:
            continue
        bind = max(binds, key=lambda n: n.lineno)
        lead = Site(site.path, bind.lineno, site.function)
        msg = (f"`{name}` is carried into the next pass here still attached to the graph that "
               "pass's backward() frees")
        call = bind.value if isinstance(bind.value, ast.Call) else None
        fn = frame.f_globals.get(call.func.id) if call is not None and \
            isinstance(call.func, ast.Name) else None
        back = _returned_unchanged(fn) if fn is not None else None
        if back is not None:
            code = fn.__code__
            lead = Site(code.co_filename, back, code.co_name)
            msg = (f"`{code.co_name}` returns its argument as it is here, so `{name}` (a "
                   f"{type(value).__name__}) is carried into the next pass "
                   f"({src(Site(site.path, bind.lineno))}) still attached to the graph the "
                   "previous backward() freed")
        return make(code_for("state-carried-across-steps", pat.code), lead, msg,
                    fix=f"detach every tensor carried across passes (for a tuple: "
                        f"tuple(t.detach() for t in {name}))",
                    related=[(Site(site.path, bind.lineno, site.function),
                              f"`{name}` is rebound here for the next pass"),
                             (site, "this backward() needs the freed graph")])
    return None


def freed_earlier(pat: Any, made: Site | None, freed_by: Site | None, node: Any,
                   site: Site | None, stepped: bool) -> Finding:
    """A graph freed by another backward() line. With an optimizer step in between (a GAN's
    discriminator step), the line where that step's graph consumed the value leads (where it
    needed ``.detach()``); otherwise the first backward(), which freed what the second needs."""
    via, _ = decode_meta(node.metadata.get(META_FREED_VIA))
    made_rel = (made, f"the shared value was computed here ({src(made)})")
    if stepped:
        lead = (caller_between(node, via, freed_by) if freed_by else None) or via or made or site
        msg = (f"the value computed at {src(made)} is used here without .detach(), so the "
               f"backward() at {src(freed_by)} went through its graph and freed it; a later "
               "backward() needs that graph again")
        related = [made_rel, (freed_by, "this backward() freed it"),
                   (site, "this backward() needs it again")]
        return make(code_for("gan-fake-not-detached", pat.code), lead, msg, related=related,
                    fix="detach it where this step needs no gradient through it "
                        "(D(fake.detach()))")
    msg = (f"this backward() frees the graph of the value computed at {src(made)}, and a "
           f"later backward() ({src(site)}) needs it again")
    return make(code_for("backward-through-freed-graph", pat.code), freed_by or made or site,
                msg, related=[made_rel, (site, "this backward() needs it again")],
                fix="sum the losses and call backward() once, pass retain_graph=True here, or "
                    "detach the shared value where the second loss needs no gradient through it")
