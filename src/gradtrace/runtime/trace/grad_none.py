"""Why a ``.grad`` read by the program is None (``'NoneType' object has no attribute 'data'``),
and which line to change: called by ``posthoc._grad_none``.

# NOTE [every parameter read, some never graded]
A loop over every parameter (``for p in model.parameters(): p.grad.data /= s``, or the same in
a comprehension, ``sum(p.grad.norm() ** 2 for p in ...)``) that meets one without a gradient
crashes at the read. When that parameter was never graded by design (frozen, its module never
called, or its output never used: BERT's pooler unpacked into ``_``, a task head of another task
family), the training is right and the loop is what to change (skip ``p.grad is None``). When the
forward used the parameter and a cut kept its gradient away (argmax, ``.detach()``), the cut is
the cause and leads, as before.
"""
from __future__ import annotations

import ast
from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make, src
from gradtrace.runtime.catalogue import ErrorPattern
from gradtrace.lint.nodes import scope_nodes
from gradtrace.runtime.frames import Site

Parameter = torch.nn.Parameter

def _handed_over(made: Site | None, site: Site, name: str) -> Site | None:
    """``adv = attack.perturb(x)`` then ``adv.grad``: the non-leaf was made inside a function
    the reader called (a helper computing a result, not a leaf it meant to train: the line
    making it creates no tensor that requires grad); the assignment in the reading function
    that received it is the line to change. None otherwise."""
    from gradtrace.runtime.trace.diagnose_args import assignment_before

    if made is None or (made.path, made.function) == (site.path, site.function) \
            or not name.isidentifier() or "requires_grad" in made.source():
        return None
    node = assignment_before(site, name)
    if not isinstance(node, ast.Assign) or not any(isinstance(n, ast.Call)
                                                   for n in ast.walk(node.value)):
        return None
    return Site(site.path, node.lineno, site.function, node.col_offset)


def why_grad_none(pat: ErrorPattern, t: Any, site: Site, state: Any, name: str) -> Finding:
    """The finding for ``name.grad`` read as None at ``site`` (``t`` is the tensor)."""
    from gradtrace.runtime.trace.records import created_site

    rel = [(site, ".grad was used here")]
    if not t.is_leaf:
        made, _ = created_site(t.grad_fn)
        handed = _handed_over(made, site, name)
        if handed is not None:  # a helper computed it: the call that handed it over
            return make(code_for("non-leaf-grad", pat.code), handed,
                        f"`{name}` is the result this call returns, a non-leaf tensor "
                        f"({type(t.grad_fn).__name__}, made at {src(made)}), so backward() "
                        "never fills its .grad", related=[*rel, (made, "it was computed here")],
                        fix=f"make it a leaf before the forward ({name} = {name}.detach()"
                            ".requires_grad_()), or call .retain_grad() on it")
        return make(code_for(_non_leaf_kind(t, made, name), pat.code), made or site,
                    f"`{name}` is not a leaf tensor ({type(t.grad_fn).__name__}), so backward() "
                    f"never fills its .grad; it became a non-leaf here ({src(made)})",
                    fix="update leaves in place under torch.no_grad() (w -= lr * w.grad), or "
                        "create the tensor with its final dtype/device", related=rel)
    if not t.requires_grad:
        frozen = state.frozen_at(t) if state is not None else None
        made = None if frozen is not None or isinstance(t, Parameter) else \
            _made_without_grad(site, name)
        if made is not None:  # NOTE [input read for its gradient, made without one]
            return make(pat.code, made, f"`{name}` was made here ({src(made)}) without "
                        "requires_grad=True, so backward() never fills its .grad",
                        related=rel, fix=f"call `{name}.requires_grad_()` before the forward "
                        "pass (or create it with requires_grad=True)")
        # a loop over every parameter that forgets the frozen ones: the loop's line; one
        # tensor named on purpose: its freeze
        lead = site if _loop_variable(site, name) or frozen is None else frozen
        return make(code_for("frozen-parameter", pat.code), lead,
                    f"`{name}` has requires_grad=False, so it never gets a .grad"
                    + (f"; it was frozen here ({src(frozen)})" if frozen else ""),
                    related=[(frozen, "it was frozen here")] if lead == site else rel,
                    fix="guard with `if p.grad is not None`, or skip frozen parameters")
    reset = state.grad_set_none_at(t) if state is not None else None
    if reset is not None:
        return make(pat.code, reset, f"`{name}.grad` was set to None here ({src(reset)}): "
                    "zero_grad() defaults to set_to_none=True", related=rel,
                    fix="drop the manual .grad.zero_() (zero_grad() already resets), or guard "
                        "with `if p.grad is not None`")
    if state is not None and state.backward_count == 0:
        return make(pat.code, site, f"`{name}.grad` is None because no backward() has run yet",
                    fix="call loss.backward() first, or guard with `if p.grad is not None`")
    data = getattr(state, "hooks_data", None)
    if data is not None and data.modules:
        from gradtrace.runtime.trace.silent import param_owners, unreached_reason

        owners = param_owners(data)
        _, where, why, fix, related = unreached_reason(state, data, t, owners)
        late = _made_trainable_late(state, t, owners, why)
        if late is not None:  # NOTE [flag set after the forward]
            return make(pat.code, late, f"`{name}` was made to require grad here "
                        f"({src(late)}), and no backward() since reached it: the graph of the "
                        "loss holds nothing from it (the forward used it before this line, or "
                        "not at all)", related=[(site, ".grad was read here: it is None")],
                        fix="set requires_grad before the forward pass that uses it")
        used = (site, ".grad was used here")
        if _loop_variable(site, name) and _never_graded(state, t, owners):
            return make(pat.code, site, f"`{name}.grad` is None for a parameter this loop "
                        f"reaches that no backward() grades: {why}", related=[
                            (where, "the parameter without a gradient"), *related],
                        fix="skip parameters whose .grad is None (`if p.grad is not None`)")
        return make(pat.code, where or site, f"`{name}.grad` is None because backward() never "
                    f"reached it: {why}", fix=fix, related=[*related, used])
    return make(pat.code, site, f"`{name}.grad` is None: backward() never reached this tensor "
                "(not used in the forward pass, or the graph was cut before it)",
                fix="guard with `if p.grad is not None`; use gradtrace.explain(loss) to see the "
                    "graph")


def _made_trainable_late(state: Any, t: Any, owners: dict[int, Any], why: str) -> Site | None:
    """# NOTE [flag set after the forward]
    FGSM's ``out = model(x)`` then ``x.requires_grad = True``, then ``loss.backward()`` and
    ``x.grad.sign()``: a plain leaf (no module's parameter, no cut seen upstream of it) that
    the program made trainable (``requires_grad_()``/``.requires_grad = True``, recorded with
    its line) and that no backward() reached. The line that set the flag is named: the graph
    was built before it, or without the tensor. A Parameter, a tensor a cut kept away, or one
    made trainable by a factory (``torch.zeros(..., requires_grad=True)``) keep their reasons."""
    from gradtrace.runtime.build import NEVER_RAN

    if isinstance(t, Parameter) or id(t) in owners or not why.startswith(NEVER_RAN):
        return None
    hit = state.made_leaves.get(id(t))
    return hit[1] if hit is not None and hit[0]() is t else None


def _loop_variable(site: Site, name: str) -> bool:
    """Whether ``name`` is the target of a ``for`` loop around ``site``, or of a comprehension
    in the statement at ``site``."""
    from gradtrace.runtime.trace.locate import enclosing_loop, tree_of

    loop = enclosing_loop(site)
    targets = [loop.target] if isinstance(loop, ast.For) else []
    tree = tree_of(site.path)
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)) and \
                node.lineno <= site.line <= (node.end_lineno or node.lineno):
            targets.extend(g.target for g in node.generators)
    return any(isinstance(n, ast.Name) and n.id == name for t in targets for n in ast.walk(t))


def _never_graded(state: Any, t: Any, owners: dict[int, Any]) -> bool:
    """Whether ``t`` (requiring grad) had no forward that used it toward a loss: its module never
    ran, or ran with grad on and no cut was seen with it upstream (its output was left unused).
    NOTE [every parameter read, some never graded]."""
    from gradtrace.runtime.trace.silent import cuts_upstream_of

    rec = owners.get(id(t))
    if rec is not None and (rec.in_checkpoint or rec.nograd_runs and not rec.grad_runs):
        return False
    return not cuts_upstream_of(state, t, rec)


def _non_leaf_kind(t: Any, made: Site | None, name: str) -> str:
    """leaf-rebound-by-update (w = w - lr * w.grad), weight-made-non-leaf (.to/.double after
    requires_grad=True) or the general grad-of-non-leaf."""
    node = type(t.grad_fn).__name__
    if node.startswith("ToCopy"):
        return "weight-made-non-leaf"
    text = made.source() if made is not None else ""
    if "=" in text and ".grad" in text and text.split("=", 1)[0].strip() == name:
        return "leaf-rebound-by-update"
    return "non-leaf-grad"





def _made_without_grad(site: Site, name: str) -> Site | None:
    """# NOTE [input read for its gradient, made without one]
    ``images = torch.from_numpy(image[None])``, ``model(images)``, ``loss.backward()``, then
    ``grad = images.grad`` (foolbox's input gradient, a saliency map): the tensor is a plain
    leaf that never required grad and was never frozen (no ``requires_grad_(False)`` seen, not a
    Parameter), so its ``.grad`` stays None. The line to change is the statement of the reading
    function that bound the name, not the read: the last assignment of ``name`` before the read
    in the same function. An assignment that itself asks for a gradient (a ``requires_grad=True``
    keyword, a ``.requires_grad_()`` call: an old-API branch not taken, ``Variable(x,
    requires_grad=True)``) did not make this tensor, which does not require grad, and is passed
    over. A name that is the function's parameter (bound by the caller) or a loop's target, an
    attribute or a subscript keeps the read's line."""
    from gradtrace.runtime.trace.diagnose_args import _scope
    from gradtrace.runtime.trace.locate import tree_of

    tree = tree_of(site.path)
    if tree is None or not name.isidentifier():
        return None
    scope = _scope(tree, site.line)
    found: list[ast.Assign] = []
    for node in scope_nodes(scope):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)) and any(
                isinstance(n, ast.Name) and n.id == name for n in ast.walk(node.target)):
            return None  # bound by a loop: not one statement's tensor
        if isinstance(node, ast.Assign) and node.lineno < site.line and any(
                isinstance(t, ast.Name) and t.id == name for t in node.targets):
            found.append(node)
    for node in sorted(found, key=lambda n: -n.lineno):
        if not _asks_for_grad(node.value):
            if not any(isinstance(n, ast.Call) for n in ast.walk(node.value)):
                return None  # an alias of another name: not where the tensor was made
            return Site(site.path, node.lineno, site.function, node.col_offset)
    return None


def _asks_for_grad(value: ast.AST) -> bool:
    return any(isinstance(n, ast.keyword) and n.arg == "requires_grad"
               and not (isinstance(n.value, ast.Constant) and not n.value.value)
               or isinstance(n, ast.Attribute) and n.attr == "requires_grad_"
               for n in ast.walk(value))

