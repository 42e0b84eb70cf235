"""A stochastic actor trained through its critic (DDPG-style update on a Gaussian policy)."""
import torch
import torch.nn as nn
from torch.distributions import Normal


class Actor(nn.Module):
    def __init__(self, s=3, a=2):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(s, 32), nn.ReLU())
        self.mu = nn.Linear(32, a)
        self.log_std = nn.Linear(32, a)

    def forward(self, s):
        h = self.body(s)
        return Normal(self.mu(h), self.log_std(h).clamp(-5, 2).exp())


actor = Actor()
critic = nn.Sequential(nn.Linear(5, 32), nn.ReLU(), nn.Linear(32, 1))
actor_opt = torch.optim.Adam(actor.parameters(), lr=3e-3)
for _ in range(4):
    s = torch.randn(16, 3)
    dist = actor(s)
    a = dist.sample()  # ROOT
    q = critic(torch.cat([s, a], -1))
    actor_loss = -q.mean()
    actor_opt.zero_grad()
    actor_loss.backward()
    actor_opt.step()
print("mu grad", actor.mu.weight.grad)
