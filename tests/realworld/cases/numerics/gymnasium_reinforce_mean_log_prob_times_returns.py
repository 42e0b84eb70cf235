"""Gymnasium's REINFORCE tutorial averages the episode's log-probabilities before weighting them by the per-step returns.

source: https://github.com/Farama-Foundation/Gymnasium/issues/1336
kind: bug
symptom: silent
verified: on the first 6-step episode the gradient of the policy-mean weight differs from the REINFORCE gradient (sum of log_prob_t * G_t) by 6.9 (max abs; that gradient is 17.3 at most): every step is weighted by the mean of the returns instead of by its own return
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
        log_prob_mean = log_probs.mean()  # ROOT
        loss = -torch.sum(log_prob_mean * deltas)
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
