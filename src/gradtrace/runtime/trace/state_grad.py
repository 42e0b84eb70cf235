"""The grad-mode, freezing and ``.grad`` events of a tracing session: the methods of
:class:`gradtrace.runtime.trace.state.TraceState` that record them (a base class it inherits;
the tables they write are made in ``TraceState.__init__``)."""
from __future__ import annotations

import weakref
from typing import Any

import torch

from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.leaves import converted_leaf as _converted_leaf
from gradtrace.runtime.trace.records import RawSite, created_site

Tensor = torch.Tensor


class GradEvents:
    """Grad-mode switches, freezes, leaves made trainable, ``.grad`` set to None, cleared or
    read on a non-leaf; a base class of :class:`~gradtrace.runtime.trace.state.TraceState`."""

    # -- grad mode, freezing, .grad ----------------------------------------------------------
    def on_grad_mode(self, enabled: bool, raw: RawSite | None, how: str) -> None:
        if not enabled:
            self.grad_off = None if raw is None else self.site(raw)
            self.grad_off_how = how
        else:
            self.grad_off = None

    def on_freeze(self, raw: RawSite, t: Tensor, unfreeze: bool = False) -> None:
        table = self.unfreeze if unfreeze else self.freeze
        table.pop(id(t), None)  # the latest freeze last (NOTE [idle steps])
        table[id(t)] = (weakref.ref(t), self.site(raw))

    def on_made_leaf(self, raw: RawSite, t: Tensor, factory: bool = False) -> None:
        """``requires_grad_()`` on a plain leaf, or (``factory``) a constant factory called
        with ``requires_grad=True``: NOTE [leaf made trainable too early] keeps both."""
        for made, value in ((self.leaf_births, (t._version, factory)),
                            (None if factory else self.made_leaves, ())):
            if made is not None:
                made.pop(id(t), None)
                if len(made) >= 32:
                    made.pop(next(iter(made)))
                made[id(t)] = (weakref.ref(t), self.site(raw), *value)

    def unfrozen_at(self, params: list[Tensor]) -> Site | None:
        """Where the first of ``params`` was last set to ``requires_grad=True``."""
        for p in params:
            hit = self.unfreeze.get(id(p))
            if hit is not None and hit[0]() is p:
                return hit[1]
        return None

    def frozen_at(self, t: Tensor) -> Site | None:
        hit = self.freeze.get(id(t))
        return hit[1] if hit is not None and hit[0]() is t else None

    def frozen_sites(self) -> list[Site]:
        """Distinct sites where a live tensor was frozen (requires_grad=False), first first."""
        out: list[Site] = []
        for ref, site in self.freeze.values():
            if ref() is not None and site not in out:
                out.append(site)
        return out

    def on_grad_none(self, t: Any, seq: int) -> None:
        if not isinstance(t, Tensor):
            return
        if seq != self._grad_none_seq:
            from gradtrace.runtime.frames import raw_site

            raw = raw_site()
            self._grad_none_site = None if raw is None else self.site(raw)
            self._grad_none_seq = seq
        if len(self.grad_none) > 100_000:
            self.grad_none.clear()
        self.grad_none[id(t)] = self._grad_none_site  # wording only; an id may be reused

    def on_zero(self, t: Any, grad: Any = None) -> None:
        """Gradient ``t`` is being cleared (``p.grad = None`` with ``t`` the parameter and
        ``grad`` its gradient, ``grad.zero_()`` with ``t`` the gradient) after a backward() no
        optimizer step has used yet: remember which, and where (the first such line). Not a
        gradient that an optimizer's last step applied and no backward() changed since
        (NOTE [cleared gradients already used by a step] in loop_order.py)."""
        if not self.fresh_grads or len(self.wiped_ids) > 100_000:
            return
        data = self.hooks_data
        if data is not None and len(data.optimizers) > 1 and data.applied_unchanged(
                t if grad is None else grad):
            return
        self.wiped_ids.add(id(t))
        if self.wiped_at is None:  # NOTE [zero_grad forwarded by a wrapper]
            from gradtrace.runtime.trace.forwarded_clear import clearing_raw_site

            raw = clearing_raw_site()
            self.wiped_at = None if raw is None else self.site(raw)

    def note_clear(self, key: int) -> None:
        """The watched gradient ``key`` is being cleared: where
        (NOTE [clear on some passes only] in extra_step.py)."""
        from gradtrace.runtime.frames import raw_site

        raw = raw_site()
        self.clear_sites[self.clear_watch[key]] = None if raw is None else self.site(raw)
        self.clear_ticks[self.clear_watch[key]] = self.backward_count

    def clear_wiped(self) -> None:
        self.wiped_at = None
        if self.wiped_ids:
            self.wiped_ids = set()

    def grad_set_none_at(self, t: Tensor) -> Site | None:
        return self.grad_none.get(id(t))

    def on_nonleaf_grad(self, raw: RawSite, t: Tensor) -> None:
        from gradtrace.runtime.trace.rebound_leaf import rebound_leaf

        made, _ = created_site(t.grad_fn)
        if made is not None and (_converted_leaf(t.grad_fn) or rebound_leaf(  # w1 = w.float()
                t.grad_fn, made, self.site(raw))):  # NOTE [leaf rebound by its own statement]
            self.note("weight-made-non-leaf", made, ".grad", "",
                      ((self.site(raw), ".grad of the copy is read here (always None)"),))
            return
        rel = ((made, f"it became a non-leaf here ({type(t.grad_fn).__name__})"),) if made else ()
        self.note("non-leaf-grad", self.site(raw), ".grad", "", rel)
