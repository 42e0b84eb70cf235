"""The autonomous-learning-library's SoftDeterministicPolicyNetwork corrects the squashed-Gaussian log-probability with torch.log(1 - action.pow(2) + 1e-6), where action is already scaled by tanh_scale; for an action space wider than [-1, 1] the argument goes negative, the log-probability is NaN, and through the SAC value targets and the temperature update the NaN reaches the V network's weights and the temperature without an error.

source: https://github.com/cpnota/autonomous-learning-library/issues/139
kind: bug
symptom: silent
verified: with an action space [-2, 2] 30 of 32 log-probabilities are NaN (no error is raised); one SAC update leaves the V network's weights NaN (its targets subtract temperature * log_prob) and the temperature nan; with the fix (torch.log(1 - torch.tanh(raw).pow(2) + 1e-6), divided by tanh_scale) no log-probability is NaN, the V weights stay finite and the temperature is 0.0997
"""
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class SoftDeterministicPolicyNetwork(nn.Module):
    def __init__(self, model, space):
        super().__init__()
        self.model, self.device = model, "cpu"
        self._action_dim = space.shape[0]
        self._tanh_scale = torch.tensor((space.high - space.low) / 2).to(self.device)
        self._tanh_mean = torch.tensor((space.high + space.low) / 2).to(self.device)

    def forward(self, state):
        outputs = self.model(state)
        normal = self._normal(outputs)
        if self.training:
            action, log_prob = self._sample(normal)
            return action, log_prob
        return self._squash(normal.loc)

    def _normal(self, outputs):
        means = outputs[:, 0: self._action_dim]
        logvars = outputs[:, self._action_dim:]
        std = logvars.mul(0.5).exp_()
        return torch.distributions.normal.Normal(means, std)

    def _sample(self, normal):
        raw = normal.rsample()
        action = self._squash(raw)
        log_prob = normal.log_prob(raw)
        log_prob -= torch.log(1 - action.pow(2) + 1e-6)  # ROOT
        log_prob = log_prob.sum(1)
        return action, log_prob

    def _squash(self, x):
        return torch.tanh(x) * self._tanh_scale + self._tanh_mean


torch.manual_seed(0)
space = SimpleNamespace(shape=(2,), high=np.array([2.0, 2.0], dtype=np.float32),
                        low=np.array([-2.0, -2.0], dtype=np.float32))
policy = SoftDeterministicPolicyNetwork(nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 4)), space)
q_1, v = nn.Linear(4 + 2, 1), nn.Linear(4, 1)
policy_opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
q_opt, v_opt = torch.optim.Adam(q_1.parameters(), lr=1e-3), torch.optim.Adam(v.parameters(), lr=1e-3)
temperature, lr_temperature, entropy_target, discount_factor = 0.1, 1e-4, -2.0, 0.99


def reinforce(optimizer, loss):
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


states, actions = torch.randn(32, 4), torch.rand(32, 2) * 4 - 2
rewards, next_states = torch.randn(32, 1), torch.randn(32, 4)
with torch.no_grad():
    _actions, _log_probs = policy(states)
    q_targets = rewards + discount_factor * v(next_states)
    v_targets = q_1(torch.cat([states, _actions], 1)) - temperature * _log_probs.unsqueeze(1)
reinforce(q_opt, F.mse_loss(q_1(torch.cat([states, actions], 1)), q_targets))
reinforce(v_opt, F.mse_loss(v(states), v_targets))
_actions2, _log_probs2 = policy(states)
reinforce(policy_opt, (-q_1(torch.cat([states, _actions2], 1)).squeeze(1) + temperature * _log_probs2).mean())
temperature += lr_temperature * (_log_probs + entropy_target).mean().item()
print("NaN log-probs", int(torch.isnan(_log_probs).sum()), "of", len(_log_probs),
      "V weights NaN", bool(torch.isnan(v.weight).any()), "temperature", temperature)
