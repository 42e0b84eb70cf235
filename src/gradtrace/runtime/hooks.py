"""Global module and optimizer hooks: which modules ran, which optimizers stepped, and how.

Installed with the public registration functions of torch (each returns a handle); removed on
exit. Modules and optimizers are held weakly.
"""
from __future__ import annotations

import math
import os
import weakref
from dataclasses import dataclass, field
from typing import Any

import torch

from gradtrace.runtime.frames import Site, raw_site
from gradtrace.runtime.state import TraceState

Tensor = torch.Tensor


@dataclass
class ModuleRecord:
    """What happened to one module object while tracing."""

    ref: weakref.ref[torch.nn.Module]
    site: Site | None
    grad_runs: int = 0
    nograd_runs: int = 0
    nograd_site: Site | None = None
    unregistered_in: str = ""


@dataclass
class OptimizerRecord:
    """What happened to one optimizer while tracing."""

    ref: weakref.ref[torch.optim.Optimizer]
    site: Site | None
    steps: int = 0
    rep: tuple[int, int, int, int] | None = None  # (param id, grad id, grad version, backwards)
    accumulate_site: Site | None = None
    nonfinite: tuple[str, int, Site | None] | None = None


@dataclass
class HookState:
    """Module/optimizer bookkeeping of one session."""

    modules: dict[int, ModuleRecord] = field(default_factory=dict)
    optimizers: dict[int, OptimizerRecord] = field(default_factory=dict)
    had_grad: set[int] = field(default_factory=set)
    stack: list[torch.nn.Module] = field(default_factory=list)
    registered: dict[tuple[int, int], bool] = field(default_factory=dict)
    snapshot: list[Any] = field(default_factory=list)
    steps: int = 0


class Hooks:
    """Installs the global hooks into ``state``; :meth:`remove` takes them all out."""

    def __init__(self, state: TraceState, mode: Any = None) -> None:
        self.state = state
        self.mode = mode
        self.data = HookState()
        self.handles: list[Any] = []

    def install(self) -> None:
        from torch.nn.modules import module as mm
        from torch.optim import optimizer as om

        self.handles.append(mm.register_module_forward_pre_hook(self._pre))
        try:
            self.handles.append(mm.register_module_forward_hook(self._post, always_call=True))
        except TypeError:  # torch < 2.0 has no always_call
            self.handles.append(mm.register_module_forward_hook(self._post))
        self.handles.append(om.register_optimizer_step_pre_hook(self._step_pre))
        self.handles.append(om.register_optimizer_step_post_hook(self._step_post))

    def remove(self) -> None:
        while self.handles:
            self.handles.pop().remove()
        self.data.stack.clear()

    # -- modules -------------------------------------------------------------------------------
    def _pre(self, module: torch.nn.Module, args: Any) -> None:
        d = self.data
        rec = d.modules.get(id(module))
        if rec is None or rec.ref() is not module:
            raw = raw_site()
            rec = d.modules[id(module)] = ModuleRecord(
                weakref.ref(module), None if raw is None else self.state.site(raw))
        if torch.is_grad_enabled():
            rec.grad_runs += 1
        else:
            rec.nograd_runs += 1
            rec.nograd_site = rec.nograd_site or self.state.grad_off
        if d.stack:
            parent = d.stack[-1]
            key = (id(parent), id(module))
            ok = d.registered.get(key)
            if ok is None:
                ok = d.registered[key] = any(m is module for m in parent.modules())
            if not ok and not rec.unregistered_in:
                rec.unregistered_in = type(parent).__name__
        d.stack.append(module)

    def _post(self, module: torch.nn.Module, args: Any, out: Any) -> None:
        stack = self.data.stack
        if stack and stack[-1] is module:
            stack.pop()

    # -- optimizers ----------------------------------------------------------------------------
    def _step_pre(self, opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        d, st = self.data, self.state
        rec = d.optimizers.get(id(opt))
        raw = raw_site()
        site = None if raw is None else st.site(raw)
        if rec is None or rec.ref() is not opt:
            rec = d.optimizers[id(opt)] = OptimizerRecord(weakref.ref(opt), site)
        rec.steps += 1
        grads: list[Tensor] = []
        rep = None
        for group in opt.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is not None:
                    d.had_grad.add(id(p))
                    grads.append(g)
                    if rep is None and not g.is_sparse:
                        rep = (id(p), id(g), g._version, st.backward_count)
        self._check_accumulate(rec, rep, site)
        rec.rep = rep
        if rec.nonfinite is None and _due(rec.steps) and grads:
            busy = self.mode is not None and self.mode.busy
            if self.mode is not None:
                self.mode.busy = True
            try:
                self._check_finite(opt, rec, grads, site)
            finally:
                if self.mode is not None:
                    self.mode.busy = busy

    def _check_accumulate(self, rec: OptimizerRecord, rep: Any, site: Site | None) -> None:
        old, st = rec.rep, self.state
        if old is None or rep is None or rec.accumulate_site is not None or st.zero_seen:
            return
        if old[0] == rep[0] and old[1] == rep[1] and rep[3] > old[3] and rep[2] > old[2]:
            rec.accumulate_site = site

    def _check_finite(self, opt: torch.optim.Optimizer, rec: OptimizerRecord,
                      grads: list[Tensor], site: Site | None) -> None:
        with torch.no_grad():
            try:
                norms = torch._foreach_norm([g for g in grads if not g.is_sparse])
                total = float(torch.stack(norms).sum())
            except (RuntimeError, TypeError, AttributeError):
                return
        if math.isfinite(total):
            return
        for group in opt.param_groups:
            for p in group["params"]:
                if p.grad is not None and not bool(torch.isfinite(p.grad).all()):
                    rec.nonfinite = (param_name(self.data, p), rec.steps, site)
                    return

    def _step_post(self, opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        rec = self.data.optimizers.get(id(opt))
        self.state.after_step = rec.site if rec is not None else None
        self.state.zero_seen = False
        self.data.steps += 1
        if _due(self.data.steps):
            self._snapshot()

    def _snapshot(self) -> None:
        """Parameter findings now, in case the model dies before tracing ends."""
        from gradtrace.runtime.silent import parameter_findings

        busy = self.mode is not None and self.mode.busy
        if self.mode is not None:
            self.mode.busy = True
        try:
            self.data.snapshot = parameter_findings(self.state, self.data)
        except Exception:  # a failed snapshot must not disturb training
            if os.environ.get("GRADTRACE_STRICT", "") not in ("", "0"):
                raise
        finally:
            if self.mode is not None:
                self.mode.busy = busy


def _due(step: int) -> bool:
    """Check gradients on steps 1-8, then every power of two, then every 64th."""
    return step <= 8 or (step & (step - 1)) == 0 or step % 64 == 0


def param_name(data: HookState, p: Tensor) -> str:
    """``Model.fc.weight``-style name of a parameter, from the modules that ran."""
    best, depth = "", -1
    for rec in list(data.modules.values()):
        m = rec.ref()
        if m is None:
            continue
        for name, q in m.named_parameters(recurse=True):
            if q is p and name.count(".") > depth:
                best, depth = f"{type(m).__name__}.{name}", name.count(".")
    if depth <= 0:
        best = _in_plain_container(data, p) or best
    return best or f"tensor of shape {list(p.shape)}"


def _in_plain_container(data: HookState, p: Tensor) -> str:
    """``MLP.blocks[0].weight`` for a layer held in a plain list/tuple/dict attribute."""
    for rec in list(data.modules.values()):
        m = rec.ref()
        if m is None:
            continue
        for attr, value in vars(m).items():
            items = value.items() if isinstance(value, dict) else enumerate(value) \
                if isinstance(value, (list, tuple)) else ()
            for key, child in items:
                if isinstance(child, torch.nn.Module):
                    for name, q in child.named_parameters():
                        if q is p:
                            return f"{type(m).__name__}.{attr}[{key!r}].{name}"
    return ""
