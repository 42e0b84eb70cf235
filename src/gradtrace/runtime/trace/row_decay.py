"""Embedding rows frozen by zeroing their gradient, still moved by weight decay.

# NOTE [decayed rows]
The row-wise case of NOTE [decay without a gradient] (applied.py): textual inversion trains one
new token's embedding and "freezes" the others by zeroing their rows of the gradient after
backward() (``grads.data[index_grads_to_zero, :] = 0``). The gradient as a whole is not zero,
so the parameter-wide check does not see it, but AdamW's weight decay (any decay) still shrinks
every row at every step (diffusers#1009). Rows that no batch used also have a zero gradient
(a large vocabulary), and so do rows used only at positions that do not reach the loss (a
classifier reading the last token): they are not what the program froze. So the run looks at
the rows the forward *used* and that backward() left non-zero: on the steps whose gradients are checked (``opt_facts._due``), the global
module pre-hook notes the indices an ``nn.Embedding`` was called with (with grad on, since the
last step; its ``padding_idx`` left out), and before the step the rows of the gradient at those
indices are read, at the end of backward() (which rows it left non-zero) and before the step.
When at least half of them are zero before the step though backward() left them non-zero (a
gradient hook on the tensor, which can zero rows inside backward(), counts as zeroing them),
the checksum of those rows is kept. An embedding is reported when this held at every checked step (at least two) and the
rows moved between the first checked step and a later one, under ``weight_decay > 0`` (a
program that copies the frozen rows back after each step keeps them where they were); a zero
row of a token masked out of the loss (a pad token given no ``padding_idx``) is one row among
many and stays silent. Named, as GT870 is, at the optimizer's construction.
"""
from __future__ import annotations

import weakref
from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.build import make
from gradtrace.runtime.trace.opt_facts import _due

Tensor = torch.Tensor
_ROWS = 4096  # indices kept per embedding and step
_EMBEDDINGS = 16  # embeddings watched


def note_rows(data: Any, module: torch.nn.Module, args: Any) -> None:
    """From the module pre-hook, an ``nn.Embedding`` run with grad on: its indices, on the
    steps whose gradients will be checked."""
    w = getattr(module, "weight", None)
    if not _due(data.steps + 1) or not args or not isinstance(args[0], Tensor) \
            or not isinstance(w, Tensor) or not w.requires_grad or args[0].numel() > 1 << 16:
        return
    ent = data.rows_used.get(id(w))
    if ent is None or ent[0]() is not w or ent[1] != data.steps:
        if len(data.rows_used) >= _EMBEDDINGS and id(w) not in data.rows_used:
            return
        ent = data.rows_used[id(w)] = [weakref.ref(w), data.steps, set(),
                                       getattr(module, "padding_idx", None), None]
    if len(ent[2]) < _ROWS:
        with torch._C.DisableTorchFunction():  # not the program's own ops
            ent[2].update(torch.unique(args[0].detach()).tolist()[:_ROWS])


def rows_after_backward(data: Any) -> None:
    """At a backward() end: the used rows whose gradient backward() left non-zero."""
    for ent in list(data.rows_used.values()):
        w = ent[0]()
        if w is None or ent[1] != data.steps or w.grad is None or w.grad.is_sparse \
                or w.grad.dim() != 2:
            continue
        used = _used(ent, len(w.grad))
        if used:
            with torch.no_grad(), torch._C.DisableTorchFunction():
                idx = torch.tensor(used, device=w.grad.device)
                keep = (w.grad.index_select(0, idx).abs().sum(1) != 0).cpu().tolist()
            ent[4] = {r for r, k in zip(used, keep) if k}


def _used(ent: list[Any], n: int) -> list[int]:
    return sorted(i for i in ent[2] if i != ent[3] and isinstance(i, int) and 0 <= i < n)


def check_rows(data: Any, audit: Any, p: Tensor, g: Tensor, decay: float,
               name_of: Any) -> None:
    """Before a checked step, for a parameter with a non-zero gradient and weight decay."""
    ent = data.rows_used.get(id(p))
    if ent is None or ent[0]() is not p or ent[1] != data.steps or g.dim() != 2:
        return
    used = _used(ent, len(g))
    hooked = bool(getattr(p, "_backward_hooks", None))  # a hook may zero rows in backward()
    if len(used) < 2 or ent[4] is None and not hooked:
        return
    with torch.no_grad():
        idx = torch.tensor(used, device=g.device)
        zero = (g.index_select(0, idx).abs().sum(1) == 0).cpu()
        rows = [used[i] for i, z in enumerate(zero.tolist()) if z and (
            hooked or used[i] in ent[4])]  # zeroed by the program, not left zero by backward()
    if 2 * len(rows) < len(used):
        audit.rows_ok.add(id(p))
        return
    entry = audit.rows.get(id(p))
    if entry is None or entry[0]() is not p:
        audit.rows[id(p)] = [weakref.ref(p), 1, False, "", rows, decay, _sum(p, rows)]
        return
    entry[1] += 1
    if not entry[2] and _sum(p, entry[4]) != entry[6]:  # the rows moved since the first check
        entry[2], entry[3] = True, name_of(data, p)


def _sum(p: Tensor, rows: list[int]) -> tuple[float, float]:
    with torch.no_grad():
        v = p.detach().index_select(0, torch.tensor(rows, device=p.device)).double()
        return float(v.sum()), float((v * v).sum())


def row_findings(data: Any, rec: Any) -> list[Finding]:
    """NOTE [decayed rows] for one optimizer record."""
    audit = rec.audit
    out: list[Finding] = []
    for key, (_, checks, moved, name, rows, decay, _first) in list(audit.rows.items()):
        if not moved or checks < 2 or key in audit.rows_ok:
            continue
        shown = ", ".join(str(r) for r in rows[:6]) + (" ..." if len(rows) > 6 else "")
        out.append(make("GT870", audit.built,
                        f"rows {shown} of {name} were used by the forward yet got an all-zero "
                        f"gradient at every checked step ({checks}): they are frozen by zeroing "
                        "their gradient, but the step changed them: this optimizer applies "
                        f"weight decay ({decay}) to the whole tensor, zero gradient or not, so "
                        "the frozen rows still shrink",
                        fix="give this tensor a parameter group with weight_decay=0, or restore "
                            "the frozen rows after each step (copy them back from a saved copy)",
                        related=[(rec.site, "the optimizer steps here")], severity="warning"))
    return out
