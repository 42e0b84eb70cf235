"""The lazily built network with the optimizer created on first access (the property the stable-baselines3 feature request proposes), i.e. after the first forward pass has registered the network, so every parameter is optimized.

source: https://github.com/DLR-RM/stable-baselines3/issues/1271
kind: lookalike
"""
import torch as th
import torch.nn as nn


class LazyPolicy(nn.Module):
    """A stable-baselines3 BaseModel-style policy whose network is built on the first forward pass."""

    def __init__(self, features_dim, n_actions, lr_schedule, optimizer_class=th.optim.Adam, optimizer_kwargs=None):
        super().__init__()
        self.features_dim, self.n_actions = features_dim, n_actions
        self.lr_schedule = lr_schedule
        self.optimizer_class = optimizer_class
        self.optimizer_kwargs = optimizer_kwargs or {}
        self.net = None
        self.action_net = nn.Linear(features_dim, n_actions)
        self._optimizer = None

    @property
    def optimizer(self):
        if self._optimizer is None:
            self._optimizer = self.optimizer_class(self.parameters(), lr=self.lr_schedule(1), **self.optimizer_kwargs)
        return self._optimizer

    def forward(self, x):
        if self.net is None:
            self.net = nn.Sequential(nn.Linear(x.shape[-1], self.features_dim), nn.ReLU())
        return self.action_net(self.net(x))


th.manual_seed(0)
policy = LazyPolicy(features_dim=16, n_actions=4, lr_schedule=lambda progress: 3e-3)
obs, target_actions = th.randn(64, 10), th.randint(0, 4, (64,))
policy(obs)
net_before = policy.net[0].weight.detach().clone()
head_before = policy.action_net.weight.detach().clone()
for step in range(50):
    loss = nn.functional.cross_entropy(policy(obs), target_actions)
    policy.optimizer.zero_grad()
    loss.backward()
    policy.optimizer.step()
print(step, loss.item())
