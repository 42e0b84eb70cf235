"""gail-airl-ppo StateDependentPolicy clamps log_stds in place, but log_stds is one of the views returned by chunk().

source: https://github.com/toshikwa/gail-airl-ppo.pytorch/issues/13
kind: bug
symptom: crash
verified: RuntimeError: Output 1 of Split is a view and is being modified inplace
"""
import math

import torch
from torch import nn


def build_mlp(input_dim, output_dim, hidden_units=(64, 64), hidden_activation=nn.Tanh()):
    layers, units = [], input_dim
    for next_units in hidden_units:
        layers += [nn.Linear(units, next_units), hidden_activation]
        units = next_units
    layers.append(nn.Linear(units, output_dim))
    return nn.Sequential(*layers)


def calculate_log_pi(log_stds, noises, actions):
    gaussian_log_probs = (-0.5 * noises.pow(2) - log_stds).sum(dim=-1, keepdim=True) - 0.5 * math.log(2 * math.pi) * log_stds.size(-1)
    return gaussian_log_probs - torch.log(1 - actions.pow(2) + 1e-6).sum(dim=-1, keepdim=True)


def reparameterize(means, log_stds):
    noises = torch.randn_like(means)
    us = means + noises * log_stds.exp()
    actions = torch.tanh(us)
    return actions, calculate_log_pi(log_stds, noises, actions)


class StateDependentPolicy(nn.Module):
    def __init__(self, state_shape, action_shape, hidden_units=(64, 64)):
        super().__init__()
        self.net = build_mlp(state_shape[0], 2 * action_shape[0], hidden_units, nn.ReLU(inplace=True))

    def forward(self, states):
        return torch.tanh(self.net(states).chunk(2, dim=-1)[0])

    def sample(self, states):
        means, log_stds = self.net(states).chunk(2, dim=-1)
        return reparameterize(means, log_stds.clamp_(-20, 2))  # ROOT


torch.manual_seed(0)
actor = StateDependentPolicy(state_shape=(5,), action_shape=(2,))
optim_actor = torch.optim.Adam(actor.parameters(), lr=3e-4)
states = torch.randn(8, 5)
actions, log_pis = actor.sample(states)
loss_actor = (0.2 * log_pis - actions.sum(dim=-1, keepdim=True)).mean()
optim_actor.zero_grad()
loss_actor.backward()
optim_actor.step()
