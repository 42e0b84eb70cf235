"""GT894: a parameter's values replaced through ``.data =`` while a graph still holds it.

# NOTE [values swapped under a saved graph]
``p.data = v`` points the leaf ``p`` at new storage without touching its version counter. An
op that saved ``p`` itself for its backward (a convolution's weight, ``w * x``'s ``w``; not a
``Linear``, whose ``addmm`` saves the view ``w.t()`` of the old storage) unpacks the same
tensor at backward, now with the new values: the gradients are those of a function the
forward never computed, and nothing fails (an in-place write would raise "modified by an
inplace operation"). The tracer records each ``.data =`` of a leaf that requires grad (the
storage before and after, the op counter); at the next ``backward()``/``autograd.grad`` it
walks the graph once and looks for a node created before the write (its
``META_CREATED`` counter) that saved that very leaf. The finding names the write; when the
write puts back the storage an earlier ``.data =`` of the same leaf had taken away (swap the
values in, run the forward, restore them in a ``finally`` before the gradient), it names the
swap, the design at fault, with the restore as related. A write after the backward, a write
of the same storage (``model.to()`` of a no-op), one of another shape or dtype, or a forward
built after the write is not reported. An in-place write through the alias ``p.data``
(``p.data.mul_(mask)``, ``p.data[i] = v``, ``.copy_``: the alias has its own version counter)
is recorded the same way and matched on storage, so a node that saved a view of ``p``
(``Linear``'s ``w.t()``) counts too. At most 8 walks per run, 5000 nodes each."""
from __future__ import annotations

import weakref
from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.build import make, src
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.graph_walk import graph_nodes
from gradtrace.runtime.trace.records import META_CREATED

Tensor = torch.Tensor
WALKS = 8  # backward() calls checked per run (each walks at most 5000 nodes)
KEPT = 64  # writes remembered between two backward() calls


def _storage(t: Tensor) -> int:
    try:
        return t.untyped_storage().data_ptr()
    except Exception:  # a tensor subclass or meta tensor without a storage pointer
        return 0


def before_set(args: tuple[Any, ...]) -> int | None:
    """What a ``.data =`` is about to replace: a leaf that requires grad, same shape/dtype."""
    if len(args) < 2 or not isinstance(args[0], Tensor) or not isinstance(args[1], Tensor):
        return None
    t, new = args[0], args[1]
    try:  # a lazy module's UninitializedParameter raises on `.shape` until it is materialised
        if not (t.requires_grad and t.is_leaf) or new.shape != t.shape or new.dtype != t.dtype:
            return None
    except Exception:
        return None
    return _storage(t) or None


def note_set(state: Any, t: Tensor, old: int, site: Site | None, seq: int) -> None:
    """Record ``t.data = ...`` (``old``: the storage it had) at op counter ``seq``."""
    new = _storage(t)
    if site is None or not old or new == old or state.swap_walks >= WALKS:
        return
    writes = state.data_writes
    if len(writes) >= KEPT:
        del writes[: KEPT // 2]
    writes.append((weakref.ref(t), old, new, site, seq))


def note_alias(state: Any, alias: Tensor, t: Tensor) -> None:
    """``alias = t.data`` of a leaf that requires grad: an in-place write into it is a write
    into ``t`` that autograd does not see."""
    aliases = state.data_aliases
    if len(aliases) >= 256:
        aliases.clear()
    aliases[id(alias)] = (weakref.ref(alias), weakref.ref(t))


def note_alias_write(state: Any, target: Tensor, site: Site | None, seq: int) -> None:
    """An in-place op on ``target``: recorded when it is a live ``.data`` alias of a leaf."""
    pair = state.data_aliases.get(id(target))
    if pair is None or pair[0]() is not target or site is None or state.swap_walks >= WALKS:
        return
    t = pair[1]()
    if t is None:
        return
    writes = state.data_writes
    if len(writes) >= KEPT:
        del writes[: KEPT // 2]
    writes.append((pair[1], 0, _storage(t), site, seq))


def check_backward(state: Any, roots: list[Tensor]) -> None:
    """At a backward: a node built before a recorded write that saved the written leaf."""
    writes, state.data_writes = state.data_writes, []
    if not roots or state.swap_walks >= WALKS:
        return
    by_id: dict[int, list[tuple[Any, ...]]] = {}
    for w in writes:
        t = w[0]()
        if t is not None:
            by_id.setdefault(id(t), []).append(w)
    if not by_id:
        return
    state.swap_walks += 1
    for node in graph_nodes(roots):
        try:
            nexts = node.next_functions
        except (AttributeError, RuntimeError):
            continue
        for nxt, _ in nexts:
            var = _leaf_of(nxt)
            if var is None or id(var) not in by_id:
                continue
            made = node.metadata.get(META_CREATED)
            if made is None:
                continue
            later = [w for w in by_id[id(var)] if w[4] > made[2]
                     and (_saves_storage(node, w[2]) if w[1] == 0 else _saves(node, var))]
            if later:
                state.swap_found.append(_finding(later[0], by_id[id(var)], made))
                return


def _leaf_of(node: Any) -> Tensor | None:
    """The leaf of an AccumulateGrad node, or of the one a single-input node (a view, ``t()``)
    feeds."""
    if node is None:
        return None
    var = getattr(node, "variable", None)
    if var is not None:
        return var
    try:
        nexts = node.next_functions
    except (AttributeError, RuntimeError):
        return None
    if len(nexts) == 1 and nexts[0][0] is not None:
        return getattr(nexts[0][0], "variable", None)
    return None


def _saves_storage(node: Any, ptr: int) -> bool:
    for name in dir(node):
        if name.startswith("_saved_"):
            try:
                v = getattr(node, name)
                if isinstance(v, Tensor) and _storage(v) == ptr:
                    return True
            except Exception:  # freed or not a tensor
                continue
    return False


def _saves(node: Any, t: Tensor) -> bool:
    for name in dir(node):
        if name.startswith("_saved_"):
            try:
                if getattr(node, name) is t:
                    return True
            except Exception:  # freed or not a tensor
                continue
    return False


def _finding(write: tuple[Any, ...], all_writes: list[tuple[Any, ...]],
             made: tuple[Any, ...]) -> Finding:
    _, old, _, site, _ = write
    swap = next((w for w in all_writes if old and w[2] == old and w[1] == write[2]
                 and w[4] <= made[2]), None)
    lead = swap[3] if swap is not None else site
    used = f"the forward op at line {made[1]} saved it for its backward"
    if swap is not None:
        what = (f"this `.data =` swaps new values into a parameter for a forward pass, and "
                f"{src(site)} (line {site.line}) puts the old ones back before the gradient is "
                f"taken: {used}, and at backward it reads the restored values, not the ones the "
                "forward used")
        related = [(site, "the old values are put back here, under the saved graph")]
    else:
        how = "`.data =` replaces" if old else "in-place write through `.data` changes"
        what = (f"this {how} a parameter's values after {used} and before the "
                "backward(): the gradient is computed with the new values, not the ones the "
                "forward used")
        related = []
    return make("GT894", lead, f"{what} (`.data` writes do not bump the version counter, so "
                "autograd cannot tell)",
                fix="compute the forward with the modified weights as a separate tensor (pass "
                    "it to the functional op, or torch.func.functional_call) instead of "
                    "swapping `.data`; or take the gradient before the values change",
                related=related, severity="warning")


def swap_findings(state: Any) -> list[Finding]:
    return list(state.swap_found[:3])
