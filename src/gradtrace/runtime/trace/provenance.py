"""The TorchFunctionMode that records where values leave the autograd graph.

# NOTE [hot path]
Every torch call made while tracing goes through :meth:`ProvenanceMode.__torch_function__`.
The common case (an op whose output requires grad): a dict lookup to classify ``func``, the call,
a frame walk (cached per code object), one write into ``grad_fn.metadata`` (none (1) for an op
that returned its input itself, ``.cpu()`` of a CPU tensor: the node keeps its line). The rest
runs only on the events that matter; records hold plain values and weak references only.
"""
from __future__ import annotations

import logging
import sys
import weakref
from typing import TYPE_CHECKING, Any, Callable

import torch
from torch.overrides import TorchFunctionMode

from gradtrace.runtime.frames import (FRAME_BY_ID, called_by_library, called_by_optimizer,
                                      is_internal,
                                      raw_site, site_of, user_frame)
from gradtrace.runtime.ran import PAUSED, resume_after_import
from gradtrace.runtime.trace.data_swap import note_alias_write
from gradtrace.runtime.trace.classify import (
    AGRAD, AMP, BACKWARD, COMBINE, CTOR, IS_LEAF, TO, DATA_GET, DATA_SET, DETACH, DROP_FUNCS,
    COMPARE, DROPOUT_FUNCS, DROPPABLE_OP, GRAD_GET, CONST_FACTORIES,
    GRAD_SET, INPLACE, ITEM, MAYBE_INPLACE, PASS, PLAIN, RG_SET, SETGRAD, WHERE, ZEROISH,
    INPLACE_ARG, CALL_KIND, LOSS, SHAPE_ONLY, SOFTMAX, first_grad_tensor, call_name, classify,
)
from gradtrace.runtime.trace.declared import note_none_read
from gradtrace.runtime.trace.dead_terms import (DEAD, block_statement, check_combine,
                                                note_detached_scalar, note_numpy,
                                                summed_by_user)
from gradtrace.runtime.trace.dropped import DROP_AT, learn
from gradtrace.runtime.trace.average_stats import note_nograd_write
from gradtrace.runtime.trace.random_buffer import FILLS, note_fill
from gradtrace.runtime.trace.ema_reads import note_average
from gradtrace.runtime.trace.mode_checks import ModeChecks, _oops
from gradtrace.runtime.trace.lr_groups import note_asked
from gradtrace.runtime.trace.opt_state import PROCESS_CODE, on_built, on_state_loaded
from gradtrace.runtime.trace.locate import inference_block
from gradtrace.runtime.trace.records import META_CREATED, Cut, Event, RawSite
from gradtrace.runtime.trace.provenance_handlers import SpecialHandlers
from gradtrace.runtime.trace.reached_cuts import note_meet
from gradtrace.runtime.trace.read_then_cut import note_read_then_cut
from gradtrace.runtime.trace.step_nan import step_call
from gradtrace.runtime.trace.zero_diff import on_combine, tag

if TYPE_CHECKING:
    from gradtrace.runtime.trace.state import TraceState

LOG = logging.getLogger(__name__)
Tensor = torch.Tensor
Parameter = torch.nn.Parameter
_NUMPY = torch.Tensor.numpy
_getframe = sys._getframe
_grad_enabled = torch.is_grad_enabled
_inference_enabled = torch.is_inference_mode_enabled

class ProvenanceMode(ModeChecks, SpecialHandlers, TorchFunctionMode):
    """Records graph cuts, grad-mode switches, in-place ops and backward calls into a state."""

    def __init__(self, state: TraceState) -> None:
        super().__init__()
        self.state = state
        self.seq = 0
        self.busy, self._called = False, False
        self._out: Any = None

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        if kwargs is None:
            kwargs = {}
        if self.busy or self.state.in_step:  # our own work, or an optimizer's internals
            hunt = self.state.step_hunt
            if hunt is not None and hunt.hunting and not self.busy:
                return step_call(self.state, func, args, kwargs)  # NOTE [NaN made by a step]
            return func(*args, **kwargs)
        if PAUSED:  # NOTE [imports unrecorded]
            resume_after_import()
        kind = CALL_KIND.get(func)
        if kind is None:
            kind = CALL_KIND[func] = _safe_classify(func)
        if kind != PLAIN:
            if kind == SOFTMAX:  # NOTE [softmax over a singleton dim]: the shape only
                self._softmax(func, args, kwargs)
                kind = PLAIN
            if kind == COMPARE:  # NOTE [teacher target computed with grad]: before the call
                self._compare(args, kwargs)
                kind = PLAIN
            elif kind == MAYBE_INPLACE:  # F.relu(x) / F.dropout(x) without inplace=True: plain
                if func in DROPOUT_FUNCS:  # NOTE [functional dropout in eval]
                    self._eval_dropout(func, kwargs)
                pos = INPLACE_ARG.get(func, -1)
                if not kwargs.get("inplace", args[pos] if 0 <= pos < len(args) else False):
                    kind = PLAIN
                    if func in DROP_FUNCS:
                        self._dropped(func)
            elif kind == DROPPABLE_OP or kind == COMBINE:  # NOTE [dropped result]
                f = _getframe(1)
                hit = DROP_AT.get(id(f.f_code))
                if hit is None:
                    hit = learn(f.f_code)
                if hit and f.f_lasti in hit:
                    self._dropped_at(func, f)
                if kind == COMBINE and self.state.block_stmt:  # NOTE [dead loss term]
                    try:
                        dead = check_combine(self.state, args)
                    except Exception as exc:
                        _oops(exc)
                        dead = None
                    if dead is not None and summed_by_user(f):
                        return self._dead_sum(func, args, kwargs, dead)
                if kind == COMBINE and on_combine(self.state, func, args):
                    # see NOTE [difference with its straight-through copy]
                    return self._marked(func, args, kwargs, tag)
                kind = PLAIN
            elif kind == TO:  # NOTE [loaded state thrown away]
                if _getframe(1).f_code is PROCESS_CODE:
                    self._opt_event(on_state_loaded)
                kind = PLAIN
            elif kind == IS_LEAF:
                if _getframe(1).f_code.co_name == "add_param_group":
                    self._opt_event(on_built)
                    self._opt_event(note_asked)  # NOTE [group learning rates erased]
                kind = PASS
        if kind == PLAIN:
            try:
                out = func(*args, **kwargs)
            except Exception as exc:
                self._failed(exc, func, args, kwargs)
                raise
            self.seq += 1
            try:  # recording must never break the user's program (zero-cost when no error)
                if self.state.fwd_hunt:  # NOTE [forward NaN origin]: first forward only
                    self._fwd_nan(func, args, out)
                if type(out) is Tensor or isinstance(out, Tensor):
                    if out.requires_grad:
                        gf = out.grad_fn
                        if gf is not None:  # NOTE [hot path]: inlined user-frame walk
                            if self.state.meet_watch:  # NOTE [cut that reaches the loss]
                                note_meet(self.state, args, gf)
                            f = _getframe(1) if not args or args[0] is not out else None  # (1)
                            while f is not None:
                                code = f.f_code
                                hit = FRAME_BY_ID.get(id(code))
                                if hit is None:
                                    hit = is_internal(code)
                                if not hit:
                                    gf.metadata[META_CREATED] = (code, f.f_lineno, self.seq)
                                    break
                                f = f.f_back
                        else:  # a new leaf: rare (a factory with requires_grad=True)
                            self._leaf_out(func, args, out)
                        return out
                    # An output without grad from inputs without grad (shape arithmetic, masks, a
                    # distribution's argument checks) is settled here (NOTE [hot path]): it inherits
                    # the cut of its first input that carries one, or, made under inference_mode, is
                    # one; anything else (an input that requires grad, a list) goes to _no_grad_out
                    cuts = self.state.cuts
                    taint = None
                    for a in args:
                        if isinstance(a, Tensor):
                            if a.requires_grad:
                                break
                            if cuts and taint is None:
                                taint = cuts.get(id(a))
                                if taint is not None and taint[0]() is not a:
                                    taint = None
                        elif isinstance(a, (list, tuple)):
                            break
                    else:
                        if taint is not None:
                            cuts[id(out)] = (weakref.ref(out), taint[1])
                            if taint[1].reason == "detach":  # (dead_terms.py)
                                note_detached_scalar(self.state, out, taint[1])
                        elif _inference_enabled():
                            self._cut(out, None, call_name(func), "inference")
                        return out
                    self._no_grad_out(func, args, out)
                elif isinstance(out, (tuple, list)) and out and isinstance(out[0], Tensor):
                    for o in out:
                        if isinstance(o, Tensor):
                            self._after(func, args, o)
            except Exception as exc:
                _oops(exc)
            return out
        if kind == PASS:
            try:
                out = func(*args, **kwargs)
            except Exception as exc:
                self._failed(exc, func, args, kwargs)
                raise
            if func is _NUMPY and self.state.cuts:  # NOTE [loss term computed in NumPy]
                try:
                    note_numpy(self.state, args[0], self.seq)
                except Exception as exc:
                    _oops(exc)
            return out
        if kind == INPLACE and self.state.after_step is None and not _grad_enabled():
            try:  # e.g. optimizer updates: nothing to record
                out = func(*args, **kwargs)
            except Exception as exc:
                self._failed(exc, func, args, kwargs)
                raise
            self.seq += 1
            if self.state.fresh_grads:
                self._clip_before_step(func, args)
            if len(args) > 1 and isinstance(args[1], Parameter):  # NOTE [EMA between steps]
                note_average(self.state, call_name(func), args)
            name = call_name(func)
            note_nograd_write(self.state, name, args)  # NOTE [average that skips the statistics]
            if name in FILLS:  # NOTE [random weight kept as a buffer]
                note_fill(self.state, name, args)
            if self.state.data_aliases and args and id(args[0]) in self.state.data_aliases:
                raw = raw_site()  # NOTE [values swapped under a saved graph]: under no_grad
                note_alias_write(self.state, args[0], None if raw is None else
                                 self.state.site(raw), self.seq)
            return out
        if kind == GRAD_GET:
            out = func(*args, **kwargs)
            try:
                t = args[0]
                if not t.is_leaf and not t.retains_grad:
                    self._nonleaf_grad(t)
                elif out is None and t.requires_grad:  # NOTE [read as None by the program]
                    note_none_read(self.state, t)
            except Exception as exc:
                _oops(exc)
            return out
        return self._special(kind, func, args, kwargs)

    def _maybe_inplace(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        pos = INPLACE_ARG.get(func, -1)
        flag = kwargs.get("inplace", args[pos] if 0 <= pos < len(args) else False)
        if flag:
            if args and isinstance(args[0], Tensor) and _grad_enabled():
                self._caller_input(args[0])  # NOTE [in-place on the caller's input]
            return self._inplace(func, args, kwargs)
        out = self._call(func, args, kwargs)
        self.seq += 1
        if isinstance(out, Tensor):
            self._after(func, args, out)
        return out

    # -- the common path -------------------------------------------------------------------
    def _after(self, func: Any, args: tuple[Any, ...], out: Tensor) -> None:
        if out.requires_grad:
            gf = out.grad_fn
            if gf is not None and self.state.meet_watch:  # NOTE [cut that reaches the loss]
                note_meet(self.state, args, gf)
            if gf is not None and not (args and args[0] is out):  # (1): an identity op's
                site = raw_site()
                if site is not None:
                    gf.metadata[META_CREATED] = (site[0], site[1], self.seq)
            return
        if not self.state.in_step:
            self._no_grad_out(func, args, out)

    def _leaf_out(self, func: Any, args: tuple[Any, ...], out: Tensor) -> None:
        """A leaf that requires grad made from a tensor that requires grad, with grad mode on,
        copies the values without the graph (NOTE [copied leaf] in :mod:`.graph_scan`)."""
        src = first_grad_tensor(args)
        if src is not None and src is not out and _grad_enabled() \
                and call_name(func) not in SHAPE_ONLY:
            self._cut(out, src, call_name(func), "copy")
        elif src is None and call_name(func) in CONST_FACTORIES:
            raw = raw_site()  # NOTE [leaf made trainable too early]
            if raw is not None:
                self.state.on_made_leaf(raw, out, factory=True)

    def _no_grad_out(self, func: Any, args: tuple[Any, ...], out: Tensor) -> None:
        src = first_grad_tensor(args)
        if src is not None:
            name = call_name(func)
            if torch.is_grad_enabled() and not torch.is_inference_mode_enabled():
                if name not in SHAPE_ONLY:  # (enable_grad inside inference_mode
                    # records nothing: an inference cut, below)
                    self._cut(out, src, name, "nondiff")
            elif self.state.closure_watch is None or not called_by_optimizer():
                # (LBFGS's own work between its closure's evaluations, `_add_grad`'s
                # `view_as(p)`, is no use of a parameter: NOTE [closure evaluations summed])
                self._cut(out, src, name, "inference"
                          if torch.is_inference_mode_enabled() else "no_grad")
        elif self.state.cuts and self.state.propagate(args, out):
            return
        elif torch.is_inference_mode_enabled():
            self._cut(out, None, call_name(func), "inference")

    def _nonleaf_grad(self, t: Tensor) -> None:
        raw = raw_site()
        if raw is not None:
            self.state.on_nonleaf_grad(raw, t)

    def _cut(self, out: Tensor, src: Tensor | None, op: str, reason: str,
             origin: Cut | None = None) -> Cut | None:
        raw = raw_site()
        if raw is None:
            return None
        block = inference_block(user_frame(1)) if reason == "inference" else None
        library = reason == "nondiff" and called_by_library()
        cut = self.state.make_cut(raw, op, reason, origin, block, library)
        self.state.add_cut(out, cut, src)
        if reason == "detach" and src is not None:  # NOTE [parameter read where it is detached]
            note_read_then_cut(self.state, cut, src)
        if reason in DEAD and src is not None and \
                cut not in self.state.block_stmt and len(self.state.block_stmt) < 1024:
            self.state.block_stmt[cut] = block_statement(self.state.grad_off) \
                if reason == "no_grad" else None  # NOTE [dead loss term]
        return cut

    # -- special functions -----------------------------------------------------------------
    def _special(self, kind: int, func: Any, args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> Any:
        handler = _HANDLERS.get(kind)
        if handler is None:  # pragma: no cover - every kind has a handler
            return func(*args, **kwargs)
        self._called = False
        try:
            out = handler(self, func, args, kwargs)
        except Exception as exc:
            if self._called:  # torch succeeded; the failure is ours: hide it
                out, self._out = self._out, None
                _oops(exc)
                return out
            self._failed(exc, func, args, kwargs)
            raise
        self._out = None
        return out

    def _call(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        out = func(*args, **kwargs)
        self._called, self._out = True, out
        return out

    def _failed(self, exc: BaseException, func: Any, args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> None:
        if getattr(exc, "__gradtrace__", None) is not None:
            return
        self.busy = True
        try:
            self.state.on_failure(exc, func, args, kwargs, raw_site())
        except Exception:  # never let diagnosis hide the user's error
            LOG.debug("gradtrace: diagnosis failed", exc_info=True)
        finally:
            self.busy = False


def _safe_classify(func: Any) -> int:
    try:
        return classify(func)
    except Exception as exc:  # an exotic callable: let it through untouched
        _oops(exc)
        return PASS


_HANDLERS: dict[int, Callable[..., Any]] = {
    INPLACE: ProvenanceMode._inplace,
    DETACH: ProvenanceMode._detach,
    DATA_GET: ProvenanceMode._data_get,
    DATA_SET: ProvenanceMode._data_set,
    SETGRAD: ProvenanceMode._setgrad,
    ITEM: ProvenanceMode._item,
    CTOR: ProvenanceMode._ctor,
    GRAD_SET: ProvenanceMode._grad_set,
    ZEROISH: ProvenanceMode._zeroish,
    RG_SET: ProvenanceMode._rg_set,
    BACKWARD: ProvenanceMode._backward,
    MAYBE_INPLACE: ProvenanceMode._maybe_inplace,
    WHERE: ProvenanceMode._where,
    AGRAD: ProvenanceMode._backward,
    AMP: ProvenanceMode._amp,
    LOSS: ProvenanceMode._loss,
}

__all__ = ["Cut", "Event", "ProvenanceMode", "RawSite", "classify", "site_of", "weakref"]
