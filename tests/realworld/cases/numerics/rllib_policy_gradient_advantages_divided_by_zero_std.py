"""RLlib policy gradient: advantages are standardised by their std, which is 0 when every reward is 0.

source: https://github.com/ray-project/ray/issues/846
kind: bug
symptom: silent
verified: the advantages are nan, the loss is nan and every policy weight becomes nan after the step
"""
import numpy as np
import torch
import torch.nn as nn
from torch.distributions import Categorical


def discount(x, gamma):
    out, running = np.zeros_like(x), 0.0
    for t in reversed(range(len(x))):
        running = x[t] + gamma * running
        out[t] = running
    return out


def process_rollout(rollout, gamma=0.99):
    traj = dict(rollout)
    traj["advantages"] = discount(traj["rewards"], gamma)
    traj["advantages"] = (traj["advantages"] - traj["advantages"].mean()) / traj["advantages"].std()  # ROOT
    return traj


torch.manual_seed(0)
np.random.seed(0)
policy = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 2))
optimizer = torch.optim.Adam(policy.parameters(), lr=1e-3)
observations = torch.randn(10, 4)
dist = Categorical(logits=policy(observations))
actions = dist.sample()
rollout = {"observations": observations, "actions": actions, "rewards": np.zeros(10, dtype=np.float32)}
traj = process_rollout(rollout)
advantages = torch.from_numpy(traj["advantages"])
loss = -(dist.log_prob(traj["actions"]) * advantages).mean()
optimizer.zero_grad()
loss.backward()
optimizer.step()
