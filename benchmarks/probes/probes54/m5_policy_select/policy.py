import torch
import torch.nn as nn
from torch.distributions import Categorical


class Policy(nn.Module):
    def __init__(self, obs_dim=4, n_actions=2):
        super().__init__()
        self.pi = nn.Sequential(nn.Linear(obs_dim, 32), nn.Tanh(), nn.Linear(32, n_actions))

    def forward(self, obs):
        return self.pi(obs)

    def select_action(self, obs):
        with torch.no_grad():  # ROOT
            dist = Categorical(logits=self(obs))
            action = dist.sample()
            return action.item(), dist.log_prob(action)
