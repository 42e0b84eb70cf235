"""backward() handed a leaf: the cut that made the tensor backward() starts from.

# NOTE [backward of a leaf]
``loss = torch.tensor(loss.item(), requires_grad=True)``, ``loss.detach().requires_grad_()``,
``torch.tensor(loss, requires_grad=True)``, ``Variable(loss.data, requires_grad=True)``: the
tensor handed to ``backward()`` is a new leaf (no ``grad_fn``) that requires grad, so the
error "element 0 of tensors does not require grad" goes away, backward() fills that leaf's own
``.grad`` only, and no parameter upstream of the value gets a gradient. Every parameter it was
computed from is then reported as "never received a gradient" with a cut upstream of it; when
the same parameters also reach other cuts (an ``argmax`` in a prediction function, a
``.detach()`` of the layer's outputs handed to the next layer), the cut that made the
backward's own root is the cause: nothing at all flows from that backward().

Two facts, both recorded when they happen:

- a tensor constructor (``torch.tensor``, ``as_tensor``...) called with ``requires_grad=True``
  on a Python number that came from ``.item()``/``float()`` of a tensor that requires grad is a
  ``rewrap`` cut (its origin is the ``.item()``, GT102 as before) with that tensor's leaves
  upstream, taken again at each call (at most 64 walks): the layers a forward-forward net
  trains one by one at the same line are all cut there. The copy of a tensor itself was
  already a ``copy`` cut (NOTE [copied leaf] in :mod:`.graph_scan`);
- at each backward() (the first 256), a root with no ``grad_fn`` that requires grad, is no
  Parameter, and is the output of a recorded cut, marks that cut (``state.root_cuts``).
  :func:`gradtrace.runtime.trace.silent.cuts_upstream_of` puts such a cut first.

# NOTE [gradients taken without a graph]
``torch.autograd.grad(loss, params)`` without ``create_graph=True`` returns gradients with no
graph. A penalty built from them alone (DomainBed's IGA ``sum((g - mean_g) ** 2)``, a gradient
penalty, an input-gradient norm) is a number: added to the loss, it changes the loss value and
never the gradient. The gradients returned with grad mode on, while the loss requires grad and
``create_graph`` is off, are recorded as one cut (reason ``grad``, the call's line, the loss's
leaves upstream); the values computed from them alone inherit it (NOTE [hot path]), and the
dead-term check (NOTE [dead loss term] in :mod:`.dead_terms`) finds the scalar made from them
added to a live loss that a backward() reaches: GT206 at the call. A first-order update
(``p - lr * g``), a perturbed input (``x + eps * g.sign()``) or a weight computed from gradient
norms and multiplied into a live term keeps a live operand and is never a dead scalar; among
the cuts upstream of a parameter without a gradient this one comes last (it cuts nothing the
loss needs).

A leaf the program trains on purpose (an adversarial input, a learnt temperature held by an
optimizer) is no root of backward(): a loss computed from it has a ``grad_fn``. A parameter
that already gets a gradient is never reported, whatever its cuts.
"""
from __future__ import annotations

from typing import Any

import torch

from gradtrace.runtime.trace.grad_of_itself import rewritten_inputs
from gradtrace.runtime.trace.input_cut import cut_paths
from gradtrace.runtime.trace.leaves import upstream_leaves
from gradtrace.runtime.trace.records import Cut

Tensor = torch.Tensor


def forced_number_leaf(mode: Any, out: Any, data: Any, name: str) -> None:
    """``torch.tensor(x.item(), requires_grad=True)``: a rewrap cut whose origin is the item."""
    if not (isinstance(out, Tensor) and out.requires_grad and out.grad_fn is None):
        return
    state = mode.state
    origin = state.item_origin(data) if isinstance(data, (int, float, list, tuple)) else None
    if origin is None:
        return
    number = f"{origin.op.strip('_')}(x)" if origin.op.startswith("__") else f"x.{origin.op}()"
    cut = mode._cut(out, None, f"torch.{name}({number}, requires_grad=True)", "rewrap", origin)
    if cut is None:
        return
    ups = state.cut_upstream.get(cut, state.cut_upstream.get(origin, frozenset()))
    hit = state.items.get(id(data))
    src = hit[2]() if hit is not None and len(hit) > 2 else None
    if src is not None and state.forced_walks < 64:  # each call's own tensor: one cut line
        state.forced_walks += 1  # serves the layers trained one by one (forward-forward)
        ups = ups | upstream_leaves(src, state._track_leaf)
    state.cut_upstream[cut] = ups


def mark_root_cut(state: Any, roots: Any) -> None:
    """A root of backward() that is a leaf made by a recorded cut marks that cut."""
    for root in roots[:4]:
        if not isinstance(root, Tensor) or root.grad_fn is not None or not root.requires_grad \
                or isinstance(root, torch.nn.Parameter):
            continue
        hit = state.cuts.get(id(root))
        if hit is not None and hit[0]() is root and len(state.root_cuts) < 16:
            cut = hit[1]
            if cut.reason == "rewrap" and cut.origin is not None and cut.origin.reason == "item":
                # `v = loss.item()` then `torch.tensor(v, requires_grad=True)`: the number was
                # made at the `.item()` (GT102's line, the static one too); one line when inline
                origin = cut.origin
                state.cut_upstream[origin] = state.cut_upstream.get(origin, frozenset()) \
                    | state.cut_upstream.get(cut, frozenset())
                cut = origin
            state.root_cuts.add(cut)


def root_cut_first(state: Any, cut: Cut) -> bool:
    """Sort key: False for a cut that made a backward()'s root (it leads)."""
    return cut not in state.root_cuts


def graphless_grads(mode: Any, args: tuple[Any, ...], kwargs: dict[str, Any], roots: Any,
                    out: Any) -> None:
    """NOTE [gradients taken without a graph]: the gradients ``autograd.grad`` returned."""
    rewritten_inputs(mode.state, args, kwargs, roots)  # NOTE [input rewritten into the output]
    cut_paths(mode.state, args, kwargs, roots)  # NOTE [derivative through a no_grad copy of its input]
    create = kwargs.get("create_graph", args[4] if len(args) > 4 else False)
    if create or not torch.is_grad_enabled() or not isinstance(out, (tuple, list)):
        return
    src = next((r for r in roots if isinstance(r, Tensor) and r.requires_grad), None)
    grads = [g for g in out if isinstance(g, Tensor) and not g.requires_grad]
    if src is None or not grads:
        return
    cut = mode._cut(grads[0], src, "torch.autograd.grad", "grad")
    if cut is not None:
        for g in grads[1:64]:
            mode.state.add_cut(g, cut, None)
