"""Gymnasium's REINFORCE tutorial after the fix: each step's log-probability is weighted by its own return and summed.

source: https://github.com/Farama-Foundation/Gymnasium/pull/1337
kind: lookalike
"""
import torch
import torch.nn as nn
from torch.distributions.normal import Normal


class Policy_Network(nn.Module):
    def __init__(self, obs_space_dims, action_space_dims):
        super().__init__()
        hidden_space1, hidden_space2 = 16, 32
        self.shared_net = nn.Sequential(nn.Linear(obs_space_dims, hidden_space1), nn.Tanh(),
                                        nn.Linear(hidden_space1, hidden_space2), nn.Tanh())
        self.policy_mean_net = nn.Sequential(nn.Linear(hidden_space2, action_space_dims))
        self.policy_stddev_net = nn.Sequential(nn.Linear(hidden_space2, action_space_dims))

    def forward(self, x):
        shared_features = self.shared_net(x.float())
        action_means = self.policy_mean_net(shared_features)
        action_stddevs = torch.log(1 + torch.exp(self.policy_stddev_net(shared_features)))
        return action_means, action_stddevs


class REINFORCE:
    def __init__(self, obs_space_dims, action_space_dims):
        self.learning_rate = 1e-4
        self.gamma = 0.99
        self.eps = 1e-6
        self.probs = []
        self.rewards = []
        self.net = Policy_Network(obs_space_dims, action_space_dims)
        self.optimizer = torch.optim.AdamW(self.net.parameters(), lr=self.learning_rate)

    def sample_action(self, state):
        action_means, action_stddevs = self.net(torch.as_tensor(state).unsqueeze(0))
        distrib = Normal(action_means[0] + self.eps, action_stddevs[0] + self.eps)
        action = distrib.sample()
        self.probs.append(distrib.log_prob(action).sum())
        return action.numpy()

    def update(self):
        running_g = 0
        gs = []
        for R in self.rewards[::-1]:
            running_g = R + self.gamma * running_g
            gs.insert(0, running_g)
        deltas = torch.tensor(gs)
        log_probs = torch.stack(self.probs)
        loss = -torch.sum(log_probs * deltas)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.probs = []
        self.rewards = []


torch.manual_seed(0)
agent = REINFORCE(obs_space_dims=5, action_space_dims=2)
for episode in range(2):
    for t in range(6):
        action = agent.sample_action(torch.randn(5).numpy())
        agent.rewards.append(float(-abs(action).sum()))
    agent.update()
