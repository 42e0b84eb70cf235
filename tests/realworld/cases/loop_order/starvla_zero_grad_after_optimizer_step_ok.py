"""StarVLA's trainer with the issue's fix: optimizer.zero_grad() moved after optimizer.step() inside the `with accelerator.accumulate(model):` block, so the gradients of all accumulation micro-batches add up before the synced step and are cleared only after it.

source: https://github.com/starVLA/starVLA/issues/395
kind: lookalike
"""
from contextlib import contextmanager

import torch
import torch.nn as nn


class GradientState:
    def __init__(self):
        self.sync_gradients = True


class AcceleratedOptimizer:
    """As accelerate.optimizer.AcceleratedOptimizer: step/zero_grad only act when gradients sync."""

    def __init__(self, optimizer, gradient_state):
        self.optimizer = optimizer
        self.gradient_state = gradient_state

    def zero_grad(self, set_to_none=None):
        if self.gradient_state.sync_gradients:
            self.optimizer.zero_grad()

    def step(self, closure=None):
        if self.gradient_state.sync_gradients:
            self.optimizer.step(closure)


class Accelerator:
    def __init__(self, gradient_accumulation_steps=1):
        self.gradient_accumulation_steps = gradient_accumulation_steps
        self.gradient_state = GradientState()
        self.step = 0

    def prepare(self, model, optimizer):
        return model, AcceleratedOptimizer(optimizer, self.gradient_state)

    @contextmanager
    def accumulate(self, model):
        self.step += 1
        self.gradient_state.sync_gradients = self.step % self.gradient_accumulation_steps == 0
        yield

    def backward(self, loss):
        (loss / self.gradient_accumulation_steps).backward()

    @property
    def sync_gradients(self):
        return self.gradient_state.sync_gradients


class ActionHead(nn.Module):
    def __init__(self, obs_dim=12, act_dim=4):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim, 32), nn.Tanh(), nn.Linear(32, act_dim))

    def forward(self, obs, actions):
        return nn.functional.mse_loss(self.net(obs), actions)


class VLATrainer:
    def __init__(self, model, optimizer, accelerator):
        self.accelerator = accelerator
        self.model, self.optimizer = accelerator.prepare(model, optimizer)

    def _train_step(self, batch):
        with self.accelerator.accumulate(self.model):
            action_loss = self.model(*batch)
            self.accelerator.backward(action_loss)
            if self.accelerator.sync_gradients:
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 100.0)
            self.optimizer.step()
            self.optimizer.zero_grad()
        return action_loss.item()

    def train(self, batches):
        for batch in batches:
            self._train_step(batch)


def update_from(model, batches, lr):
    probe = ActionHead()
    probe.load_state_dict(model.state_dict())
    loss = sum(probe(*b) for b in batches) / len(batches)
    grads = torch.autograd.grad(loss, list(probe.parameters()))
    return torch.cat([-lr * g.flatten() for g in grads])


torch.manual_seed(0)
lr, steps = 0.5, 4
model = ActionHead()
batches = [(torch.randn(8, 12), torch.randn(8, 4)) for _ in range(steps)]
expected_all = update_from(model, batches, lr)
expected_last = update_from(model, batches[-1:], lr) / steps
before = torch.cat([p.detach().flatten().clone() for p in model.parameters()])
trainer = VLATrainer(model, torch.optim.SGD(model.parameters(), lr=lr), Accelerator(gradient_accumulation_steps=steps))
trainer.train(batches)
applied = torch.cat([p.detach().flatten() for p in model.parameters()]) - before
print("distance to last-micro-batch update", (applied - expected_last).norm().item())
print("distance to all-micro-batch update", (applied - expected_all).norm().item())
