"""Checks of :class:`~gradtrace.runtime.trace.provenance.ProvenanceMode` that run on a few
kinds of torch call only (off the hot path of NOTE [hot path]): a dropped result
(NOTE [dropped result]), a dead loss term (NOTE [dead loss term]), clipping around the step and
the GradScaler, ``torch.where`` branches holding inf/NaN, what a loss was fed
(NOTE [loss input])."""
from __future__ import annotations

import logging
import os
import sys
import weakref
from typing import Any

import torch

from gradtrace.env import strict
from gradtrace.runtime.frames import internal_names, raw_site
from gradtrace.runtime.trace.classify import LOSS_FUNCS, WHERE_CHECKS, call_name
from gradtrace.runtime.trace.caller_input import check_caller_input
from gradtrace.runtime.trace.clip_target import note_clipped
from gradtrace.runtime.trace.dead_terms import check_combine, mark, summed_by_user
from gradtrace.runtime.trace.dropped import result_dropped
from gradtrace.runtime.trace.eval_dropout import check_dropout
from gradtrace.runtime.trace.fwd_nan import check_output
from gradtrace.runtime.trace.graph_walk import leaf_tensors
from gradtrace.runtime.trace.loss_input import bce_failed, check_loss
from gradtrace.runtime.trace.singleton import check_softmax
from gradtrace.runtime.trace.st_loss import note_st_loss
from gradtrace.runtime.trace.teacher_target import note_target

LOG = logging.getLogger("gradtrace.runtime.trace.provenance")
Tensor = torch.Tensor
_getframe = sys._getframe
_ADD_INPLACE = frozenset({"__iadd__", "__isub__", "add_", "sub_"})
_OWN_DIRS = (os.path.dirname(os.path.dirname(os.path.dirname(__file__))),  # gradtrace/
             os.path.dirname(torch.__file__))


class ModeChecks:
    """Mixed into ProvenanceMode (which provides ``state``, ``seq``, ``busy``, ``_call``,
    ``_after`` and ``_failed``)."""

    state: Any
    seq: int
    busy: bool

    def _dropped(self, func: Any) -> None:
        """NOTE [dropped result] for ``F.relu(x)``-style calls (through handle_torch_function
        and the functional's own frame)."""
        try:
            f = _getframe(2)
            if f.f_code.co_name == "handle_torch_function":
                f = f.f_back.f_back
            if result_dropped(f):
                self._dropped_at(func, f)
        except Exception as exc:
            _oops(exc)

    def _eval_dropout(self, func: Any, kwargs: dict[str, Any]) -> None:
        """NOTE [functional dropout in eval] for ``F.dropout(x, p)``-style calls (through
        handle_torch_function and the functional's own frame)."""
        busy, self.busy = self.busy, True
        try:
            f = _getframe(2)
            if f.f_code.co_name == "handle_torch_function":
                check_dropout(self.state, func.__name__, kwargs, f.f_back.f_back)
        except Exception as exc:
            _oops(exc)
        finally:
            self.busy = busy

    def _fwd_nan(self, func: Any, args: tuple[Any, ...], out: Any) -> None:
        """NOTE [forward NaN origin] (fwd_nan.py), on the first forward pass only."""
        busy, self.busy = self.busy, True
        try:
            with torch._C.DisableTorchFunction():
                check_output(self.state, func, args, out)
        except Exception as exc:
            _oops(exc)
        finally:
            self.busy = busy

    def _softmax(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """NOTE [softmax over a singleton dim] (singleton.py), before the call."""
        busy, self.busy = self.busy, True
        try:
            check_softmax(self.state, func, args, kwargs)
        except Exception as exc:
            _oops(exc)
        finally:
            self.busy = busy

    def _compare(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """NOTE [teacher target computed with grad] (teacher_target.py), before the call."""
        busy, self.busy = self.busy, True
        try:
            note_target(self.state, args, kwargs)
            note_st_loss(self.state, args, kwargs)  # NOTE [loss on the straight-through output]
        except Exception as exc:
            _oops(exc)
        finally:
            self.busy = busy

    def _opt_event(self, record: Any) -> None:
        """An optimizer built or loaded (NOTE [loaded state thrown away])."""
        data = self.state.hooks_data
        if data is None:
            return
        busy, self.busy = self.busy, True
        try:
            record(data, self.seq)
        except Exception as exc:
            _oops(exc)
        finally:
            self.busy = busy

    def _caller_input(self, target: Any) -> None:
        busy, self.busy = self.busy, True
        try:
            check_caller_input(self.state, target)
        except Exception as exc:
            _oops(exc)
        finally:
            self.busy = busy

    def _dropped_at(self, func: Any, f: Any) -> None:
        """The user frame ``f`` throws the result of ``func`` away here."""
        self.state.note("tensor-op-result-discarded",
                        self.state.site((f.f_code, f.f_lineno, f.f_lasti)), call_name(func))

    def _dead_sum(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                  cut: Any) -> Any:
        """A live scalar plus a dead one (NOTE [dead loss term]): mark the sum."""
        return self._marked(func, args, kwargs, lambda out: mark(self.state, out, cut))

    def _marked(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                marker: Any) -> Any:
        """The call, recorded as a plain op's, then ``marker(out)`` on a tensor result."""
        try:
            out = func(*args, **kwargs)
        except Exception as exc:
            self._failed(exc, func, args, kwargs)
            raise
        self.seq += 1
        try:
            if isinstance(out, Tensor):
                self._after(func, args, out)
                marker(out)
        except Exception as exc:
            _oops(exc)
        return out

    def _dead_iadd(self, func: Any, args: tuple[Any, ...], target: Tensor) -> None:
        """``loss += term`` (``add_``/``sub_``) with a dead scalar ``term`` on a live scalar
        loss, in the user's code (NOTE [dead loss term]): mark the loss's new node."""
        if not self.state.block_stmt or call_name(func) not in _ADD_INPLACE:
            return
        try:
            dead = check_combine(self.state, args)
            f = sys._getframe(2)
            while f is not None and f.f_code.co_filename.startswith(_OWN_DIRS):
                f = f.f_back
            if dead is not None and summed_by_user(f):
                mark(self.state, target, dead)
        except Exception as exc:
            _oops(exc)

    def _clip_after_step(self) -> None:
        names = internal_names(3)
        if any(n.startswith(("clip_grad", "clip_grads")) for n in names):
            raw = raw_site()
            if raw is not None and self.state.after_step is not None:
                self.state.note("clip-after-step", self.state.site(raw), "clip", "",
                                ((self.state.after_step, "optimizer.step() ran here, before"),))

    def _where(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """torch.where: on its first calls per line, note a branch holding inf/NaN, whose
        gradient is NaN even where it is not selected (0 * inf)."""
        out = self._call(func, args, kwargs)
        self.seq += 1
        if not isinstance(out, Tensor):
            return out
        self._after(func, args, out)
        if not out.requires_grad:
            return out
        raw = raw_site()
        checks = self.state.where_checks
        if raw is None or checks.get(raw, 0) >= WHERE_CHECKS:
            return out
        checks[raw] = checks.get(raw, 0) + 1
        branches = [a for a in (*args, *kwargs.values()) if isinstance(a, Tensor)
                    and a.requires_grad and a.is_floating_point()]
        self.busy = True
        try:
            bad = [b for b in branches if not bool(torch.isfinite(b).all())]
            if bad:
                c = self.state.note("where-nonfinite", self.state.site(raw), "where")
                leaves = c.extra.setdefault("leaves", [])
                if len(leaves) < 64:
                    leaves.extend(weakref.ref(t) for t in leaf_tensors(bad, 64))
        finally:
            self.busy = False
        return out

    def _amp(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A GradScaler unscales: it may skip steps (torch's scheduler-order warning lies);
        gradients clipped since the last backward() were clipped while still scaled."""
        self.state.grad_scaler = True
        clip = self.state.clip_at
        if clip is not None:
            self.state.clip_at = None
            raw = raw_site()
            self.state.note("clip-before-unscale", clip, "clip", "", (
                (None if raw is None else self.state.site(raw),
                 "the GradScaler unscales the gradients only here, after the clip"),))
        return self._call(func, args, kwargs)

    def _clip_before_step(self, func: Any, args: tuple[Any, ...]) -> None:
        """Gradients clipped between backward() and the step: where (for the GradScaler),
        and which (NOTE [clip of parameters no step uses])."""
        name = call_name(func)
        if ("mul" in name or "clamp" in name) and any(
                n.startswith(("clip_grad", "clip_grads")) for n in internal_names(2)):
            raw = raw_site()
            if raw is not None:
                site = self.state.site(raw)
                if self.state.clip_at is None:
                    self.state.clip_at = site
                if args:
                    note_clipped(self.state, site, args[0])

    def _loss(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A loss call: its input's kind is checked (NOTE [loss input])."""
        name = LOSS_FUNCS[func]
        try:
            out = self._call(func, args, kwargs)
        except Exception as exc:
            if name == "bce" and getattr(exc, "__gradtrace__", None) is None:
                self.busy = True
                try:
                    with torch._C.DisableTorchFunction():
                        bce_failed(self.state, args, kwargs, exc)
                except Exception as ours:
                    _oops(ours)
                finally:
                    self.busy = False
            raise
        self.seq += 1
        self.busy = True
        try:
            with torch._C.DisableTorchFunction():
                check_loss(self.state, name, args, kwargs)
        finally:
            self.busy = False
        if isinstance(out, Tensor):
            self._after(func, args, out)
        return out


def _oops(exc: BaseException) -> None:
    """A bug of ours while recording: log it (raise under GRADTRACE_STRICT=1), never propagate."""
    if strict():
        raise exc
    LOG.debug("gradtrace: recording failed", exc_info=exc)
