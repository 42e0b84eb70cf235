"""The handlers of :class:`gradtrace.runtime.trace.provenance.ProvenanceMode` for the special
torch functions (in-place ops, ``detach``, ``.data``, ``.item()``, constructors, ``.grad``
and ``requires_grad`` writes, ``backward`` / ``autograd.grad``): a base class it inherits;
``provenance._HANDLERS`` maps each kind to one of them."""
from __future__ import annotations

from typing import Any

import torch

from gradtrace.runtime.frames import internal_names, raw_site, user_frame
from gradtrace.runtime.trace.carried_attr import stamp_detached
from gradtrace.runtime.trace.classify import call_name, first_grad_tensor
from gradtrace.runtime.trace.average_stats import note_nograd_write
from gradtrace.runtime.trace.data_swap import (before_set, check_backward, note_alias,
                                               note_alias_write, note_set)
from gradtrace.runtime.trace.data_rewrite import note_graph_data, note_rewrite
from gradtrace.runtime.trace.dead_terms import rewrapped_list, seen_in_backward
from gradtrace.runtime.trace.ema_reads import note_average
from gradtrace.runtime.trace.graph_walk import backward_roots, stamp_freed
from gradtrace.runtime.trace.inplace_value import note_plain_write
from gradtrace.runtime.trace.late_thaw import note_thaw
from gradtrace.runtime.trace.mode_checks import _oops
from gradtrace.runtime.trace.loss_nan import loss_hunt, loss_hunted
from gradtrace.runtime.trace.nan_origin import end_hunt, start_hunt
from gradtrace.runtime.trace.random_buffer import FILLS, note_fill
from gradtrace.runtime.trace.records import META_CREATED
from gradtrace.runtime.trace.written_graph import stamp_write
from gradtrace.runtime.trace.root_leaf import forced_number_leaf, graphless_grads

Tensor = torch.Tensor
Parameter = torch.nn.Parameter


class SpecialHandlers:
    """One method per special function kind, called through ``ProvenanceMode._special``."""

    def _inplace(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        target = args[0] if args and isinstance(args[0], Tensor) else None
        info = plain = None
        if target is not None and target.requires_grad and torch.is_grad_enabled():
            info = (target.grad_fn, target._version, tuple(target.shape))
        elif target is not None and torch.is_grad_enabled() and not self.state.in_step \
                and not target.is_inference():  # (an inference tensor has no version)
            try:
                plain = target._version  # NOTE [write into a tensor without grad]
            except Exception:  # a tensor subclass without one: nothing to record
                plain = None
        out = self._call(func, args, kwargs)
        self.seq += 1
        if plain is not None and not self.state.backward_count and call_name(func) in FILLS:
            note_fill(self.state, call_name(func), args)  # NOTE [random weight kept as a buffer]
        if len(args) > 1 and isinstance(args[1], Parameter):  # NOTE [EMA between steps]
            note_average(self.state, call_name(func), args)
        if not torch.is_grad_enabled():  # NOTE [average that skips the statistics]
            note_nograd_write(self.state, call_name(func), args)
        if self.state.after_step is not None and ("mul" in call_name(func) or "clamp" in call_name(func)):
            self._clip_after_step()
        if info is not None:
            raw = raw_site()
            gf = target.grad_fn
            self.state.on_inplace(raw, call_name(func), info, gf)
            self._dead_iadd(func, args, target)  # NOTE [dead loss term]: `loss += term`
            if raw is not None and gf is not None and gf is not info[0]:  # `loss += l`: its
                gf.metadata[META_CREATED] = (raw[0], raw[1], self.seq)  # node's line too
        elif target is not None and not target.requires_grad:
            note_rewrite(self.state, args, call_name(func))  # a graph tensor's `.data` rewritten
            if target._base is not None:  # NOTE [in-place result used as a value]
                note_plain_write(self.state, func, target)
            if self.state.data_aliases and id(target) in self.state.data_aliases:
                raw = raw_site()  # NOTE [values swapped under a saved graph]
                note_alias_write(self.state, target, None if raw is None else
                                 self.state.site(raw), self.seq)
            if plain is not None:
                self.state.on_plain_inplace(raw_site(), call_name(func), plain,
                                            tuple(target.shape), self.state.cut_of(target))
            if self.state.cuts:
                self.state.propagate(args[1:], target)
        elif target is not None and call_name(func) in ("add_", "__iadd__"):
            # a total that starts as a plain tensor (defaultdict(lambda: torch.tensor(0.)))
            # takes its graph here: stamped like an op's output, for the running-total check
            self._after(func, args, target)
        elif target is not None:  # NOTE [graph written into a plain tensor]
            stamp_write(target, self.seq)
        return out

    def _detach(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        out = self._call(func, args, kwargs)
        self.seq += 1
        if args and isinstance(args[0], Tensor) and args[0].requires_grad:
            self._cut(out, args[0], "detach", "detach")
            stamp_detached(args[0])  # NOTE [detach result dropped]
        return out

    def _data_get(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        out = self._call(func, args, kwargs)
        if args and isinstance(args[0], Tensor) and args[0].requires_grad:
            cut = self._cut(out, args[0], ".data", "data")
            if args[0].is_leaf and isinstance(out, Tensor):
                note_alias(self.state, out, args[0])  # NOTE [values swapped under a saved graph]
            else:  # NOTE [graph values rewritten through .data]
                note_graph_data(self.state, cut, args[0])
        return out

    def _data_set(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        before = before_set(args)  # NOTE [values swapped under a saved graph]
        out = self._call(func, args, kwargs)
        if before is not None:
            self.seq += 1
            raw = raw_site()
            note_set(self.state, args[0], before, None if raw is None else
                     self.state.site(raw), self.seq)
        return out

    def _setgrad(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        prev = torch.is_grad_enabled()
        out = self._call(func, args, kwargs)
        now = torch.is_grad_enabled()
        if prev != now and not self.state.in_step:  # the optimizer's own switches don't matter
            if now:  # grad mode back on: no site to remember (a sample()'s no_grad block)
                self.state.on_grad_mode(True, None, "")
                return out
            frame = user_frame(2)
            how = _grad_switch_name(internal_names(2))
            self.state.on_grad_mode(now, None if frame is None else (frame.f_code, frame.f_lineno),
                                    how)
        return out

    def _item(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        out = self._call(func, args, kwargs)
        if args and isinstance(args[0], Tensor) and args[0].requires_grad:
            raw = raw_site()
            if raw is not None:
                self.state.on_item(raw, call_name(func), out, args[0])
        return out

    def _ctor(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        out = self._call(func, args, kwargs)
        self.seq += 1
        data = args[0] if args else None  # torch.tensor([log_prob, ...]): values only
        inner = first_grad_tensor(tuple(data[:64])) if isinstance(data, (list, tuple)) else None
        copied, what = (data, "tensor") if isinstance(data, Tensor) and data.requires_grad \
            else (inner, "[tensor, ...]")
        if isinstance(out, Tensor) and out.requires_grad and out.grad_fn is None \
                and copied is not None:  # NOTE [copied leaf]
            self._cut(out, copied, f"torch.{call_name(func)}({what}, requires_grad=True)", "copy")
        elif isinstance(out, Tensor) and not out.requires_grad and args:
            if isinstance(data, Tensor) and data.requires_grad:
                self._cut(out, data, f"torch.{call_name(func)}(tensor)", "rewrap")
            elif inner is not None:  # torch.tensor([log_prob, ...]): each element's value only
                cut = self._cut(out, inner, f"torch.{call_name(func)}([tensor, ...])", "rewrap")
                if cut is not None:
                    self.state.widen_upstream(cut, data[:64])
            elif (origin := self.state.item_origin(data)) is not None:
                self._cut(out, None, f"torch.{call_name(func)}(... {origin.op}() ...)", "rewrap",
                          origin)
            elif isinstance(data, (list, tuple)) and self.state.cuts:
                rewrapped_list(self, call_name(func), data, out)
        elif args and self.state.items:  # NOTE [backward of a leaf]
            forced_number_leaf(self, out, args[0], call_name(func))
        return out

    def _grad_set(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        old = args[0].grad if self.state.fresh_grads and args and isinstance(args[0], Tensor) \
            and args[0].is_leaf else None  # NOTE [cleared gradients already used by a step]
        out = self._call(func, args, kwargs)
        self.state.zero_seen = True
        if args and id(args[0]) in self.state.clear_watch:
            self.state.note_clear(id(args[0]))  # NOTE [clear on some passes only]
        if self.state.closure_watch is not None or self.state.closure_sum is not None:
            from gradtrace.runtime.trace.closure_sum import cleared
            cleared(self.state)  # NOTE [closure evaluations summed]
        if self.state.fresh_grads and args:
            self.state.on_zero(args[0], old)
        if len(args) > 1 and args[1] is None:
            self.state.on_grad_none(args[0], self.seq)
        return out

    def _zeroish(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if args and isinstance(args[0], Tensor) and args[0].grad_fn is not None \
                and call_name(func) == "detach_":  # NOTE [detached in place]: a cut, no clear
            out = self._inplace(func, args, kwargs)  # recorded as a write too (GT602's
            self._cut(args[0], None, "detach_", "detach")  # saved tensor detached in place)
            return out
        # a fill with a number other than 0 (a GAN's `label.fill_(real_label)` between the
        # two steps) clears no gradient: it must not hide a missing zero_grad
        # (NOTE [step before backward] in loop_order.py)
        value = args[1] if len(args) > 1 else kwargs.get("value", 0)
        if not (isinstance(value, (int, float)) and value != 0):
            self.state.zero_seen = True
            if self.state.closure_watch is not None or self.state.closure_sum is not None:
                from gradtrace.runtime.trace.closure_sum import cleared
                cleared(self.state)
        if args and call_name(func) in ("zero_", "_foreach_zero_"):
            watch, fresh = self.state.clear_watch, self.state.fresh_grads
            for t in args[0] if isinstance(args[0], (list, tuple)) else args[:1]:
                if fresh:
                    self.state.on_zero(t)
                if id(t) in watch:
                    self.state.note_clear(id(t))  # NOTE [clear on some passes only]
        return self._inplace(func, args, kwargs)

    def _rg_set(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        was = args[0].requires_grad if args and isinstance(args[0], Tensor) else None
        out = self._call(func, args, kwargs)
        value = args[1] if len(args) > 1 else kwargs.get("requires_grad", True)
        if isinstance(args[0], Tensor) and (not value or isinstance(args[0], Parameter)):
            raw = raw_site()
            if raw is not None:  # an unfreeze only of a Parameter (set up, not per step)
                self.state.on_freeze(raw, args[0], bool(value))
                if value and was is False:  # NOTE [unfrozen after the last step]
                    note_thaw(self.state, args[0])
        elif isinstance(args[0], Tensor) and args[0].is_leaf:  # a plain leaf made trainable
            raw = raw_site()
            if raw is not None:
                self.state.on_made_leaf(raw, args[0])
        return out

    def _backward(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        raw, roots, retain = None, [], True
        try:
            raw = raw_site()
            roots, retain = backward_roots(func, args, kwargs)
            if self.state.dead_pending:  # NOTE [dead loss term]
                seen_in_backward(self.state, roots)
            if self.state.data_writes:  # NOTE [values swapped under a saved graph]
                check_backward(self.state, roots)
            self.state.on_backward_start(raw, () if func is torch.autograd.grad else roots)
        except Exception as exc:  # never stop the user's backward because of us
            _oops(exc)
        hunt = start_hunt(self.state, func, roots)  # NOTE [NaN origin]
        try:
            hunt = loss_hunt(self.state, func, roots, hunt)  # NOTE [NaN loss hunted]
        except Exception as exc:
            _oops(exc)
        self.state.hunt = hunt
        try:
            out = self._call(func, args, kwargs)
        except Exception as exc:  # diagnosed while the hunt still knows the node that raised
            self._failed(exc, func, args, kwargs)
            raise
        finally:
            self.state.hunt = None
            if hunt is not None:
                if not loss_hunted(self.state, hunt):  # NOTE [NaN loss hunted]'s own: apart
                    end_hunt(self.state, hunt)
            if self.state.fn_active:  # a custom backward that raised (graph_scan.py)
                from gradtrace.runtime.trace.graph_scan import leave_backwards
                leave_backwards(self.state)
        self.seq += 1
        # a kept graph is stamped too, NOTE [retained graph] (not autograd.grad's: penalties)
        if raw is not None and (not retain or func is not torch.autograd.grad):
            self.busy = True
            try:
                stamp_freed(roots, (raw[0], raw[1], self.seq), retained=retain)
            finally:
                self.busy = False
        if func is torch.autograd.grad:  # NOTE [gradients taken without a graph]
            graphless_grads(self, args, kwargs, roots, out)
        self.state.on_backward_done(raw, self.seq, func is torch.autograd.grad)
        return out


def _grad_switch_name(names: list[str]) -> str:
    for n in names:
        if n in ("__enter__", "__exit__"):
            return "with-block"
        if n == "__init__":
            return "call"
        if n in ("decorate_context", "wrapper"):
            return "decorator"
    return "call"
