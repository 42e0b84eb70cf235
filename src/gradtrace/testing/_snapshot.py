"""Save everything a test step could change, and put it back bit for bit.

# NOTE [restore]
``assert_gradients_flow`` runs the user's step for real, so the step may update BatchNorm
running stats, call ``optimizer.step()``, toggle train/eval, advance the RNG, or leave grad
mode off. The snapshot keeps: each module's ``training`` flag and its ``_parameters`` /
``_buffers`` dict entries (the objects), a clone and the version counter of every parameter and
buffer (values are copied back when the version moved or the values differ: BatchNorm's kernel
updates running stats without bumping their version counter),
each parameter's ``requires_grad`` and ``.grad`` *object* (``.grad`` is set to None before the
step, so backward never touches the saved object), the state of every optimizer that steps
(its per-parameter state and group settings, captured by a global pre-step hook just before
its first step), the CPU/CUDA/Python/numpy RNG
states and the global grad mode.
"""
from __future__ import annotations

import copy
import random
import sys
from typing import Any

import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_pre_hook

Tensor = torch.Tensor


def _is_lazy(t: Any) -> bool:
    return isinstance(t, nn.parameter.UninitializedTensorMixin)


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.keys() == b.keys() and all(a[k] is b[k] for k in a)


class Snapshot:
    """What :meth:`restore` puts back; take it with :meth:`take` just before the step."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.modules: list[tuple[nn.Module, bool, dict[str, Any], dict[str, Any]]] = []
        self.values: list[tuple[Tensor, int, Tensor]] = []
        self.params: list[tuple[Tensor, bool, Tensor | None]] = []
        self.optimizers: dict[int, tuple[Any, dict[str, Any]]] = {}
        self._hook: Any = None
        self.rng: dict[str, Any] = {}
        self.grad_enabled = True

    def take(self) -> Snapshot:
        """Record the current state and clear every ``.grad`` (returns self)."""
        seen: set[int] = set()
        for m in self.model.modules():
            self.modules.append((m, m.training, dict(m._parameters), dict(m._buffers)))
            for t in [*m._parameters.values(), *m._buffers.values()]:
                if t is None or id(t) in seen or _is_lazy(t):
                    continue
                seen.add(id(t))
                self.values.append((t, t._version, t.detach().clone()))
        for p in self.model.parameters():
            self.params.append((p, p.requires_grad, p.grad))
        self._hook = register_optimizer_step_pre_hook(self._pre_step)
        self._take_rng()
        self.grad_enabled = torch.is_grad_enabled()
        for p, _, _ in self.params:
            p.grad = None
        return self

    def _pre_step(self, opt: Any, args: Any, kwargs: Any) -> None:
        if id(opt) not in self.optimizers:
            self._save_optimizer(opt)

    def _save_optimizer(self, opt: Any) -> None:
        # Not opt.state_dict(): it is wrapped in torch._disable_dynamo, whose first use imports
        # torch._dynamo (seconds). The per-parameter state and the group settings suffice.
        state = {id(p): (p, {k: v.clone() if isinstance(v, Tensor) else copy.deepcopy(v)
                             for k, v in s.items()}) for p, s in opt.state.items()}
        groups = [{k: copy.deepcopy(v) for k, v in g.items() if k != "params"}
                  for g in opt.param_groups]
        self.optimizers[id(opt)] = (opt, (state, groups))

    def _take_rng(self) -> None:
        self.rng["cpu"] = torch.get_rng_state()
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            self.rng["cuda"] = torch.cuda.get_rng_state_all()
        self.rng["random"] = random.getstate()
        np = sys.modules.get("numpy")
        if np is not None:
            self.rng["numpy"] = np.random.get_state()

    def release_hook(self) -> None:
        """Stop watching optimizer steps (idempotent)."""
        if self._hook is not None:
            self._hook.remove()
            self._hook = None

    def restore(self) -> None:
        """Put everything back; safe to call once, also after the step raised."""
        self.release_hook()
        torch.set_grad_enabled(self.grad_enabled)
        for m, training, params, buffers in self.modules:
            m.training = training
            for current, saved in ((m._parameters, params), (m._buffers, buffers)):
                if not _same(current, saved):
                    current.clear()
                    current.update(saved)
        with torch.no_grad():
            for t, version, saved in self.values:
                if _is_lazy(t) or t.shape != saved.shape:
                    continue
                if t._version != version or not torch.equal(t, saved):
                    t.copy_(saved)
        for p, requires_grad, grad in self.params:
            if p.requires_grad != requires_grad:
                p.requires_grad_(requires_grad)
            p.grad = grad
        for opt, (state, groups) in self.optimizers.values():
            for p in [p for p in opt.state if id(p) not in state]:
                del opt.state[p]
            for p, saved in state.values():
                opt.state[p] = saved
            for group, saved_group in zip(opt.param_groups, groups):
                group.update(saved_group)
        self._restore_rng()
        self.values.clear()

    def _restore_rng(self) -> None:
        torch.set_rng_state(self.rng["cpu"])
        if "cuda" in self.rng:
            torch.cuda.set_rng_state_all(self.rng["cuda"])
        random.setstate(self.rng["random"])
        np = sys.modules.get("numpy")
        if np is not None and "numpy" in self.rng:
            np.random.set_state(self.rng["numpy"])
