"""TSP actor-critic: the critic value is not detached in the advantage, so the policy loss also trains the critic.

source: https://github.com/astariul/encode-attend-navigate-pytorch/pull/3
kind: bug
symptom: silent
verified: critic.weight.grad includes the policy-loss term (it differs from the grad with a detached baseline)
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Categorical


class Actor(nn.Module):
    def __init__(self, n_nodes, hidden=16):
        super().__init__()
        self.encoder = nn.Linear(2, hidden)
        self.pointer = nn.Linear(hidden, 1)
        self.n_nodes = n_nodes

    def forward(self, coords):
        logits = self.pointer(torch.tanh(self.encoder(coords))).squeeze(-1)
        dist = Categorical(logits=logits)
        tour = torch.stack([dist.sample() for _ in range(self.n_nodes)], 1)
        log_probs = torch.stack([dist.log_prob(tour[:, k]) for k in range(self.n_nodes)], 1)
        return tour, log_probs


def tour_length(coords, tour):
    pts = coords[torch.arange(coords.size(0)).unsqueeze(1), tour]
    return (pts - pts.roll(1, dims=1)).norm(dim=-1).sum(1)


class Critic(nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.encoder = nn.Linear(2, hidden)
        self.head = nn.Linear(hidden, 1)

    def forward(self, coords):
        return self.head(torch.relu(self.encoder(coords)).mean(1)).squeeze(-1)


torch.manual_seed(0)
actor, critic = Actor(n_nodes=5), Critic()
optimizer = torch.optim.Adam(list(actor.parameters()) + list(critic.parameters()), lr=1e-3)
for step in range(3):
    coords = torch.rand(8, 5, 2)
    tour, log_probs = actor(coords)
    reward = tour_length(coords, tour)
    critic_pred = critic(coords)
    advantage = reward - critic_pred  # ROOT
    actor_loss = (advantage * log_probs.sum(1)).mean()
    critic_loss = F.mse_loss(critic_pred, reward)
    optimizer.zero_grad()
    (actor_loss + critic_loss).backward()
    optimizer.step()
