"""In this Dreamer port's training loop, the value model is updated (`value_loss.backward(retain_graph=True)` then `value_optimizer.step()`) before `action_loss.backward()`, but the action loss is the mean lambda-return, computed from the value model's predictions on the imagined trajectory: the step changes the value model's weights in place, the retained graph still needs the old ones, and the action-model backward fails.

source: https://github.com/cross32768/Dreamer_PyTorch/issues/2
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import argparse

import torch
import torch.nn as nn
from torch.nn.functional import mse_loss
from torch.nn.utils import clip_grad_norm_
from torch.optim import Adam


class RSSMPrior(nn.Module):
    def __init__(self, state_dim, action_dim, rnn_hidden_dim):
        super().__init__()
        self.fc_state_action = nn.Linear(state_dim + action_dim, rnn_hidden_dim)
        self.rnn = nn.GRUCell(rnn_hidden_dim, rnn_hidden_dim)
        self.fc_prior = nn.Linear(rnn_hidden_dim, 2 * state_dim)

    def prior(self, state, action, rnn_hidden):
        hidden = torch.relu(self.fc_state_action(torch.cat([state, action], dim=1)))
        rnn_hidden = self.rnn(hidden, rnn_hidden)
        mean, std = self.fc_prior(rnn_hidden).chunk(2, dim=1)
        return torch.distributions.Normal(mean, nn.functional.softplus(std) + 0.1), rnn_hidden


class Head(nn.Module):
    """Reward, value and action models: an MLP on (state, rnn_hidden)."""

    def __init__(self, state_dim, rnn_hidden_dim, out_dim, squash=False):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(state_dim + rnn_hidden_dim, 32), nn.ELU(), nn.Linear(32, out_dim))
        self.squash = squash

    def forward(self, state, rnn_hidden):
        out = self.net(torch.cat([state, rnn_hidden], dim=1))
        return torch.tanh(out) if self.squash else out


def lambda_return(rewards, values, gamma, lambda_):
    V_lambda = torch.zeros_like(rewards)
    H = rewards.shape[0] - 1
    V_n = torch.zeros_like(rewards)
    V_n[H] = values[H]
    for n in range(1, H + 1):
        V_n[:-n] = (gamma ** n) * values[n:]
        for k in range(1, n + 1):
            if k == n:
                V_n[:-n] += (gamma ** (n - 1)) * rewards[k:]
            else:
                V_n[:-n] += (gamma ** (k - 1)) * rewards[k:-n + k]
        if n == H:
            V_lambda += (lambda_ ** (H - 1)) * V_n
        else:
            V_lambda += (1 - lambda_) * (lambda_ ** (n - 1)) * V_n
    return V_lambda


parser = argparse.ArgumentParser()
parser.add_argument('--state-dim', type=int, default=8)
parser.add_argument('--rnn-hidden-dim', type=int, default=16)
parser.add_argument('-H', '--imagination-horizon', type=int, default=5)
parser.add_argument('--gamma', type=float, default=0.99)
parser.add_argument('--lambda_', type=float, default=0.95)
parser.add_argument('--clip-grad-norm', type=int, default=100)
args = parser.parse_args([])
action_dim = 2

torch.manual_seed(0)
rssm = RSSMPrior(args.state_dim, action_dim, args.rnn_hidden_dim)
reward_model = Head(args.state_dim, args.rnn_hidden_dim, 1)
value_model = Head(args.state_dim, args.rnn_hidden_dim, 1)
action_model = Head(args.state_dim, args.rnn_hidden_dim, action_dim, squash=True)
value_optimizer = Adam(value_model.parameters(), lr=8e-5, eps=1e-4)
action_optimizer = Adam(action_model.parameters(), lr=8e-5, eps=1e-4)

for update_step in range(3):
    # posterior states of a replayed batch (the world-model update is left out)
    flatten_states = torch.randn(24, args.state_dim)
    flatten_rnn_hiddens = torch.randn(24, args.rnn_hidden_dim)
    imaginated_states = torch.zeros(args.imagination_horizon + 1, *flatten_states.shape)
    imaginated_rnn_hiddens = torch.zeros(args.imagination_horizon + 1, *flatten_rnn_hiddens.shape)
    imaginated_states[0] = flatten_states
    imaginated_rnn_hiddens[0] = flatten_rnn_hiddens
    for h in range(1, args.imagination_horizon + 1):
        actions = action_model(flatten_states, flatten_rnn_hiddens)
        flatten_states_prior, flatten_rnn_hiddens = rssm.prior(flatten_states, actions, flatten_rnn_hiddens)
        flatten_states = flatten_states_prior.rsample()
        imaginated_states[h] = flatten_states
        imaginated_rnn_hiddens[h] = flatten_rnn_hiddens

    flatten_imaginated_states = imaginated_states.view(-1, args.state_dim)
    flatten_imaginated_rnn_hiddens = imaginated_rnn_hiddens.view(-1, args.rnn_hidden_dim)
    imaginated_rewards = reward_model(flatten_imaginated_states,
                                      flatten_imaginated_rnn_hiddens).view(args.imagination_horizon + 1, -1)
    imaginated_values = value_model(flatten_imaginated_states,
                                    flatten_imaginated_rnn_hiddens).view(args.imagination_horizon + 1, -1)
    lambda_value_target = lambda_return(imaginated_rewards, imaginated_values, args.gamma, args.lambda_)

    # update_value model
    value_loss = 0.5 * mse_loss(imaginated_values, lambda_value_target.detach())
    value_optimizer.zero_grad()
    value_loss.backward(retain_graph=True)
    clip_grad_norm_(value_model.parameters(), args.clip_grad_norm)
    value_optimizer.step()  # ROOT

    # update action model (multiply -1 for gradient ascent)
    action_loss = -1 * (lambda_value_target.mean())
    action_optimizer.zero_grad()
    action_loss.backward()  # SYMPTOM
    clip_grad_norm_(action_model.parameters(), args.clip_grad_norm)
    action_optimizer.step()
    print('update_step: %3d action_loss: %.5f value_loss: %.5f'
          % (update_step + 1, action_loss.item(), value_loss.item()))
