"""pytorch-rl-il's `Approximation` after its fix: `reinforce` scales the loss and calls `loss.backward()`, then `step()` clips the gradients, runs `optimizer.step()` and only afterwards calls `optimizer.zero_grad()`, so each update uses the gradients of its own loss and the Q-function learns.

source: https://github.com/syuntoku14/pytorch-rl-il/commit/e1c6f865c468958f80f6c2f970bf8b9ca2eb6241
kind: lookalike
"""
import torch
from torch import nn
from torch.nn import utils
from torch.nn.functional import mse_loss

torch.manual_seed(0)


class TrivialTarget:
    def init(self, model):
        self.model = model

    def __call__(self, *inputs):
        with torch.no_grad():
            return self.model(*inputs)

    def update(self):
        pass


class Approximation:
    """Base function approximation object: wraps the model, its optimizer, gradient clipping and the target network."""

    def __init__(self, model, optimizer, clip_grad=0, loss_scaling=1, name="approximation", lr_scheduler=None,
                 target=None):
        self.model = model
        self.device = next(model.parameters()).device
        self._target = target or TrivialTarget()
        self._lr_scheduler = lr_scheduler
        self._target.init(model)
        self._optimizer = optimizer
        self._loss_scaling = loss_scaling
        self._clip_grad = clip_grad
        self._name = name
        self.losses = []

    def __call__(self, *inputs):
        return self.model(*inputs)

    def no_grad(self, *inputs):
        with torch.no_grad():
            return self.model(*inputs)

    def target(self, *inputs):
        return self._target(*inputs)

    def reinforce(self, loss=None):
        if loss is not None:
            loss = self._loss_scaling * loss
            self.losses.append(loss.item())
            loss.backward()
        self.step()
        return self

    def step(self):
        """Given that a backward pass has been made, run an optimization step."""
        if self._clip_grad != 0:
            utils.clip_grad_norm_(self.model.parameters(), self._clip_grad)
        self._optimizer.step()
        self._optimizer.zero_grad()
        self._target.update()
        if self._lr_scheduler:
            self._lr_scheduler.step()
        return self

    def zero_grad(self):
        self._optimizer.zero_grad()
        return self


class QContinuous(Approximation):
    def __init__(self, model, optimizer, name="q", **kwargs):
        super().__init__(model, optimizer, name=name, **kwargs)


class QModel(nn.Module):
    def __init__(self, state_dim=6, action_dim=2):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(state_dim + action_dim, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, states, actions):
        return self.net(torch.cat([states, actions], dim=-1)).squeeze(-1)


# a small replay buffer of transitions with a fixed reward function
N = 512
states = torch.randn(N, 6)
actions = torch.rand(N, 2) * 2 - 1
rewards = torch.tanh(states[:, 0] + actions[:, 0] * states[:, 1]) + 0.5 * actions[:, 1]
next_states = torch.randn(N, 6)
dones = (torch.rand(N) < 0.1).float()

model = QModel()
q = QContinuous(model, torch.optim.Adam(model.parameters(), lr=3e-3), clip_grad=10.0)
policy = nn.Sequential(nn.Linear(6, 2), nn.Tanh())  # a fixed behaviour policy for the next actions
discount = 0.5

before = [p.detach().clone() for p in model.parameters()]
for update in range(200):
    idx = torch.randint(0, N, (64,))
    with torch.no_grad():
        next_actions = policy(next_states[idx])
    targets = rewards[idx] + discount * (1 - dones[idx]) * q.target(next_states[idx], next_actions)
    q_values = q(states[idx], actions[idx])
    q.reinforce(mse_loss(q_values, targets))

change = max((p.detach() - b).abs().max().item() for p, b in zip(model.parameters(), before))
print(f"max weight change after 200 updates: {change}")
print(f"TD loss: first 10 updates {sum(q.losses[:10]) / 10:.3f} -> last 10 {sum(q.losses[-10:]) / 10:.3f}")
