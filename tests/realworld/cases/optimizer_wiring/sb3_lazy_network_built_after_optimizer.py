"""stable-baselines3 BaseModel builds its optimizer from self.parameters() in __init__; a policy that creates its network on the first forward pass (input shape not known in advance) leaves that network out of the optimizer, so only the action head trains, silently.

source: https://github.com/DLR-RM/stable-baselines3/issues/1271
kind: bug
symptom: silent
verified: after 50 Adam steps (lr 3e-3) net[0].weight is unchanged (max abs difference 0.0) while its never-cleared gradient has norm 5.85, the optimizer holds 68 of the policy's 244 values and the loss is 1.311; with the optimizer built lazily on first use (the issue's proposal) it holds 244, net[0].weight moves by 0.178 and the loss is 1.149
"""
import torch as th
import torch.nn as nn


class LazyPolicy(nn.Module):
    """A stable-baselines3 BaseModel-style policy whose network is built on the first forward pass."""

    def __init__(self, features_dim, n_actions, lr_schedule, optimizer_class=th.optim.Adam, optimizer_kwargs=None):
        super().__init__()
        self.features_dim, self.n_actions = features_dim, n_actions
        self.optimizer_class = optimizer_class
        self.optimizer_kwargs = optimizer_kwargs or {}
        self.net = None
        self.action_net = nn.Linear(features_dim, n_actions)
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)  # ROOT

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
