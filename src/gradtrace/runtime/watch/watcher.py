"""``gradtrace.watch``: gradient flow per layer over training, as a report people can look at.

Example::

    with gradtrace.watch(model, optimizer) as w:
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
    print(w.report.summary())
    w.report.save_html("flow.html")

A step is one ``optimizer.step()`` when an optimizer is given (optimizer step hooks), else
one backward pass that reaches the model (post-accumulate-grad hooks plus an end-of-backward
callback). The loss is seen when it comes out of a ``torch.nn`` loss module, when the model
itself returns a scalar, when ``backward()`` is called on it under ``gradtrace.trace()`` (a
functional loss too: loss_listeners.LOSS_LISTENERS), or when you pass it to
:meth:`Watcher.observe_loss`. Every hook is removed by :meth:`Watcher.close`
(also on exceptions when used as a context manager). See NOTE [watch cost] in
``collect`` for what a step costs.

# NOTE [nothing on the user's modules]
A watched model must stay a plain model: ``torch.save(model)``, ``pickle``, ``copy.deepcopy``,
``torch.jit.script`` and ``torch.compile`` all read a module's own hook dicts (pickling fails on
a closure there, ``deepcopy`` copies it onto the copy, scripting tries to compile it). So the
module side of a watch is one *global* forward hook, kept in torch's module-level registry,
that looks the module up in a dict of watched models (and recognises ``torch.nn`` loss
modules). Optimizer step hooks live on the optimizer, whose ``__getstate__`` drops them, and
post-accumulate-grad hooks on parameters, which pickling and ``deepcopy`` do not carry.
Inside a region that ``torch.compile`` is tracing, the hook returns at once, so it adds no
graph break; ``torch.compile(module)`` called while a watch is open warns that global hooks
exist (a torch warning, harmless for this hook).
"""
from __future__ import annotations

import logging
import weakref
from typing import Any, Callable, Iterable

import torch

from gradtrace.env import strict
from gradtrace.report.model import NanSource, ParamInfo, Report, Track
from gradtrace.runtime.loss_listeners import LossListening
from gradtrace.runtime.watch.collect import Collector
from gradtrace.runtime.watch.nan_replay import remember
from gradtrace.runtime.watch.params import (caller_site, describe_params, optimizer_param_ids,
                                            owner_modules)
from gradtrace.runtime.pace import Pace
from gradtrace.runtime.pace import clock

LOG = logging.getLogger(__name__)
_LOSS = torch.nn.modules.loss._Loss
_set_grad_enabled = torch._C._set_grad_enabled  # what torch.no_grad() itself calls
__all__ = ["Watcher", "watch", "watch_all"]


_is_compiling: Callable[[], bool] = getattr(getattr(torch, "compiler", None), "is_compiling",
                                           lambda: False)


def _scalar_loss(out: Any) -> torch.Tensor | None:
    """The loss inside a module output, if the output is (or carries) a float scalar."""
    if isinstance(out, dict):
        out = out.get("loss")
    elif not isinstance(out, torch.Tensor):
        out = getattr(out, "loss", None)
    if isinstance(out, torch.Tensor) and out.dim() == 0 and out.is_floating_point() \
            and out.requires_grad:
        return out.detach()  # a read-only copy for the report, not a loss
    return None


class _Bound:
    """One collector plus what it needs to replay a NaN step: the model and its last inputs."""

    def __init__(self, collector: Collector, model: torch.nn.Module | None,
                 by_optimizer: bool, pace: Pace) -> None:
        self.collector = collector
        self.model = weakref.ref(model) if model is not None else None
        self.by_optimizer = by_optimizer
        self.inputs: Any = None  # nan_replay.Inputs: the last call's arguments, tensors weak
        self.reached: list[bool] = [False] * len(collector.infos)
        self.queued = False
        self.enabled = True
        self.pace = pace
        self.anomaly = False  # the last recorded step saw a non-finite gradient


class Watcher:
    """Live handle of a watch: a context manager; ``report`` is the captured result."""

    def __init__(self, every: int | None = None, history: int = 256, track_updates: bool = True,
                 budget: float = 0.02) -> None:
        if every is not None and (not isinstance(every, int) or every < 1):
            raise ValueError(f"every must be a positive int or None (auto), got {every!r}")
        if not isinstance(history, int) or history < 2:
            raise ValueError(f"history must be an int >= 2, got {history!r}")
        if not isinstance(budget, (int, float)) or not 0 < budget <= 1:
            raise ValueError(f"budget must be a fraction of a step in (0, 1], got {budget!r}")
        self.every = every
        self.budget = float(budget)
        self.history = history
        self.track_updates = track_updates
        self._handles: list[Any] = []
        self._bound: list[_Bound] = []
        self._closed = False
        self._final: Report | None = None
        self._models: dict[int, _Bound] = {}  # id(model) -> its binding
        self._forward_handle: Any = None
        self._replaying = False

    # ------------------------------------------------------------------ public
    def __enter__(self) -> Watcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def report(self) -> Report:
        """The :class:`~gradtrace.report.model.Report` so far (frozen once closed)."""
        if self._final is not None:
            return self._final
        return self._build()

    def observe_loss(self, loss: Any) -> None:
        """Tell the watch the loss of the current step (any float or scalar tensor)."""
        if isinstance(loss, torch.Tensor):
            if loss.numel() != 1:
                return
            loss = loss.detach().reshape(())
        else:
            loss = torch.tensor(float(loss))
        for b in self._bound:
            b.collector.loss = loss

    def close(self) -> None:
        """Remove every hook, freeze the report and drop every tensor reference."""
        if self._closed:
            return
        self._closed = True
        errors = []
        if self._forward_handle is not None:
            self._handles.append(self._forward_handle)
            self._forward_handle = None
        for h in reversed(self._handles):
            try:
                h.remove()
            except Exception as exc:  # keep removing the others
                errors.append(exc)
        self._handles.clear()
        try:
            self._final = self._build()
        except Exception:  # never mask the user's exception from __exit__
            if strict():
                raise
            LOG.warning("gradtrace.watch: could not build the report", exc_info=True)
            self._final = Report(meta={"torch": torch.__version__, "error": "report failed"})
        finally:
            for b in self._bound:
                b.collector.release()
                b.inputs = None
        if errors:
            LOG.warning("gradtrace.watch: %d hook(s) failed to detach: %s", len(errors), errors)

    # ------------------------------------------------------------------ building
    def _build(self) -> Report:
        from gradtrace.runtime.watch.analysis import analyze

        tracks = tuple(b.collector.to_track() for b in self._bound)
        meta = {"torch": torch.__version__, "every": self.every or "auto",
                "budget": self.budget, "closed": self._closed}
        return Report(tracks=tracks, findings=tuple(analyze(tracks)), meta=meta)

    def _guard(self, b: _Bound | None, fn: Callable[[], None]) -> None:
        """Run a hook body with grad mode off (the collectors' ops must record no graph; a
        bare switch, cheaper than ``torch.no_grad()`` on this per-step path); a failure
        disables that collector instead of breaking training."""
        if b is not None and not b.enabled:
            return
        grad = torch.is_grad_enabled()
        try:
            _set_grad_enabled(False)
            fn()
        except Exception:
            if strict():
                raise
            LOG.warning("gradtrace.watch: internal error; watching stops for this model",
                        exc_info=True)
            if b is not None:
                b.enabled = False
        finally:
            _set_grad_enabled(grad)

    # ------------------------------------------------------------------ wiring
    def _add_model(self, name: str, model: torch.nn.Module | None,
                   named: list[tuple[ParamInfo, torch.Tensor]], by_optimizer: bool,
                   site: tuple[str, int] = ("<unknown>", 1)) -> _Bound:
        col = Collector(name, named, every=self.every or 1, capacity=self.history,
                        has_optimizer=by_optimizer, track_updates=self.track_updates,
                        site=site)
        b = _Bound(col, model, by_optimizer, Pace(self.every, self.budget))
        self._bound.append(b)
        if model is not None:
            self._models[id(model)] = b
            self._hook_forward()
        return b

    def _hook_forward(self) -> None:
        """One global forward hook for the watched models and the loss modules.

        See NOTE [nothing on the user's modules]. It sees the inputs and output of each
        watched model, and the output of every ``torch.nn`` loss module.
        """
        if self._forward_handle is not None or self._closed:
            return
        register = torch.nn.modules.module.register_module_forward_hook
        try:
            self._forward_handle = register(self._forward, with_kwargs=True)
        except TypeError:  # torch < 2.2: global hooks take no kwargs
            self._forward_handle = register(
                lambda mod, args, out: self._forward(mod, args, {}, out))

    def _arm(self) -> None:
        """Keep the forward hook only while the next step is one to record
        (NOTE [watch pace]): it sees that step's inputs and loss, and costs every module call otherwise."""
        if any(b.enabled and b.collector.recording() for b in self._bound):
            self._hook_forward()
        elif self._forward_handle is not None:
            self._forward_handle.remove()
            self._forward_handle = None

    def _forward(self, mod: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any],
                 out: Any) -> None:
        if self._replaying or _is_compiling():
            return
        b = self._models.get(id(mod))
        if b is not None:
            if b.model is not None and b.model() is mod:
                self._guard(b, lambda: self._on_forward(b, args, kwargs, out))
        elif isinstance(mod, _LOSS):
            self._guard(None, lambda: self._on_loss(out))

    def _on_loss(self, out: Any) -> None:
        if isinstance(out, torch.Tensor) and out.numel() == 1 and out.is_floating_point():
            self.observe_loss(out)

    def _on_forward(self, b: _Bound, args: tuple[Any, ...], kwargs: dict[str, Any],
                    out: Any) -> None:
        b.inputs = remember(args, kwargs)
        loss = _scalar_loss(out)
        if loss is not None:
            b.collector.loss = loss

    # ------------------------------------------------------------------ step events
    def _on_pre(self, b: _Bound, closure: bool = False) -> None:
        """Optimizer pre-step hook: an unrecorded step costs one modulo here."""
        col = b.collector
        if col.recording():
            self._guard(b, lambda: self._pre_step(b, closure))

    def _on_post(self, b: _Bound, closure: bool = False) -> None:
        """Optimizer post-step hook: an unrecorded step only counts (NOTE [watch pace])."""
        col = b.collector
        if col.recording() or not b.enabled:
            self._guard(b, lambda: self._post_step(b, closure))
            return
        col.end_step()
        b.pace.step_end(col.total_steps, col.every, False)
        if col.recording():
            self._hook_forward()  # the next step is recorded: see its forward

    def _pre_step(self, b: _Bound, closure: bool = False) -> None:
        col = b.collector
        if col.recording():
            t0 = clock()
            if not closure:  # step(closure) computes the gradients inside step (L-BFGS)
                self._measure(b, None)
            col.snapshot()
            b.pace.cost += clock() - t0

    def _post_step(self, b: _Bound, closure: bool = False) -> None:
        col = b.collector
        if col.recording():
            t0 = clock()
            if closure:  # the gradients of the closure's last evaluation
                self._measure(b, None)
            col.measure_update()
            b.pace.cost += clock() - t0
            self._paced(b)
        else:
            col.end_step()
            b.pace.step_end(col.total_steps, col.every, False)
        self._arm()

    def _paced(self, b: _Bound) -> None:
        """End a recorded step and choose how many steps until the next (NOTE [watch pace])."""
        col = b.collector
        col.end_step()
        col.every = b.pace.step_end(col.total_steps, col.every, True, b.anomaly)
        col.anchor = b.pace.anchor

    def _measure(self, b: _Bound, reached: list[bool] | None) -> None:
        col = b.collector
        bad = col.measure(reached)
        b.anomaly = bool(bad)
        if bad and col.nan_source is None:  # weights are still those of the forward
            col.nan_source = self._locate_nan(b, bad)

    def _on_accumulated(self, b: _Bound, i: int) -> None:
        b.reached[i] = True
        if not b.queued:
            b.queued = True
            engine = torch.autograd.Variable._execution_engine
            engine.queue_callback(lambda: self._guard(b, lambda: self._end_backward(b)))

    def _end_backward(self, b: _Bound) -> None:
        col = b.collector
        b.queued = False
        col.measure_update()  # the update applied since the last recorded backward
        if col.recording():
            t0 = clock()
            self._measure(b, b.reached)
            col.snapshot()
            b.pace.cost += clock() - t0
            b.reached = [False] * len(b.reached)
            self._paced(b)
        else:
            b.reached = [False] * len(b.reached)
            col.end_step()
            b.pace.step_end(col.total_steps, col.every, False)
        self._arm()

    def _locate_nan(self, b: _Bound, bad: list[int]) -> NanSource:
        from gradtrace.runtime.watch.nan_replay import replay

        col = b.collector
        step = col.total_steps
        model = b.model() if b.model is not None else None
        found = None
        if model is not None:
            self._replaying = True  # the replay's modules are not the user's forward
            try:
                found = replay(model, b.inputs, step)
            finally:
                self._replaying = False
        if found is None:
            mods = list(dict.fromkeys(col.infos[i].module for i in bad))
            found = NanSource(step, mods[-1] if mods else None, None, "unknown",
                              "could not replay the step (inputs no longer alive or model "
                              f"not copyable); non-finite gradients in: {', '.join(mods)}")
        return found


def watch(model: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None,
          every: int | None = None, *, budget: float = 0.02, history: int = 256,
          track_updates: bool = True) -> Watcher:
    """Watch the gradient flow of ``model`` per parameter and per module over training.

    Records steps (an ``optimizer.step()`` when ``optimizer`` is given, else a backward pass
    reaching the model): gradient norm, max abs, fraction of zeros, None-ness, non-finite
    count, update-to-weight ratio, and the loss when visible. ``every=None`` records the first
    16 steps, then as often as costs about ``budget`` of a step (NOTE [watch pace]);
    ``every=N`` records one step in N. At most ``history`` steps are kept (evenly thinned). Use as a context manager or call
    :meth:`Watcher.close`; read ``.report`` for the :class:`Report`.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"gradtrace.watch expects an nn.Module, got {type(model).__name__}")
    if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError("gradtrace.watch: optimizer must be a torch.optim.Optimizer, got "
                        f"{type(optimizer).__name__}")
    w = Watcher(every=every, history=history, track_updates=track_updates, budget=budget)
    try:
        named = describe_params(model, optimizer_param_ids(optimizer) if optimizer else None)
        b = w._add_model(type(model).__name__, model, named, optimizer is not None,
                         caller_site())
        if optimizer is not None:
            w._handles.append(optimizer.register_step_pre_hook(
                lambda o, a, k: w._on_pre(b, _closure(a, k))))
            w._handles.append(optimizer.register_step_post_hook(
                lambda o, a, k: w._on_post(b, _closure(a, k))))
        else:
            _hook_accumulation(w, b, [p for _, p in named])
        w._handles.append(LossListening(w.observe_loss))  # a traced backward()'s loss
    except BaseException:
        w.close()
        raise
    return w


def _closure(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """``step(closure)`` computes the gradients inside step; hooks get (optimizer, closure)."""
    return (args[1] if len(args) > 1 else kwargs.get("closure")) is not None


def _hook_accumulation(w: Watcher, b: _Bound, params: list[torch.Tensor]) -> None:
    for i, p in enumerate(params):
        if p.requires_grad:
            w._handles.append(p.register_post_accumulate_grad_hook(
                lambda t, i=i: w._guard(b, lambda: w._on_accumulated(b, i))))


# ---------------------------------------------------------------------- watch_all
def _discover(w: Watcher, optimizer: torch.optim.Optimizer) -> list[_Bound]:
    ids = optimizer_param_ids(optimizer)
    site = caller_site()
    out, seen = [], set()
    for name, root in owner_modules(ids):
        named = describe_params(root, ids, only=ids)
        seen.update(id(p) for _, p in named)
        out.append(w._add_model(name, root, named, True, site))
    rest = [p for g in optimizer.param_groups for p in g["params"] if id(p) not in seen]
    if rest:
        named = [(ParamInfo(f"{type(optimizer).__name__}.param{i}", "", "",
                            tuple(p.shape), bool(p.requires_grad), True), p)
                 for i, p in enumerate(rest)]
        out.append(w._add_model(f"{type(optimizer).__name__} (unowned tensors)", None,
                                named, True, site))
    return out


def watch_all(every: int | None = None, *, budget: float = 0.02, history: int = 256,
              track_updates: bool = True) -> Watcher:
    """Watch every model trained in this process, found through the optimizers that step.

    Uses the global optimizer step hooks; on an optimizer's first step the modules owning
    its parameters are found once (a scan of live objects) and watched from then on, with
    parameters named by qualified name. Used by ``gradtrace run --report``.
    """
    from torch.optim.optimizer import (register_optimizer_step_post_hook,
                                       register_optimizer_step_pre_hook)

    w = Watcher(every=every, history=history, track_updates=track_updates, budget=budget)
    by_opt: weakref.WeakKeyDictionary[torch.optim.Optimizer, list[_Bound]] = \
        weakref.WeakKeyDictionary()

    def pre(opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        bound = by_opt.get(opt)
        if bound is None:
            bound = []
            w._guard(None, lambda: bound.extend(_discover(w, opt)))
            by_opt[opt] = bound
        for b in bound:
            w._on_pre(b, _closure(args, kwargs))

    def post(opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        for b in by_opt.get(opt, ()):
            w._on_post(b, _closure(args, kwargs))

    try:
        w._handles.append(register_optimizer_step_pre_hook(pre))
        w._handles.append(register_optimizer_step_post_hook(post))
        w._hook_forward()
        w._handles.append(LossListening(w.observe_loss))
    except BaseException:
        w.close()
        raise
    return w


def tracks_of(watchers: Iterable[Watcher]) -> list[Track]:
    """All tracks of several watchers (helper for combined reports)."""
    return [t for w in watchers for t in w.report.tracks]
