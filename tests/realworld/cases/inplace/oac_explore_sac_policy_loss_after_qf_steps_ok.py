"""OAC's SACTrainer.train_from_torch with the reordering the issue proposes: the Q networks are stepped first and q_new_actions and policy_loss are computed afterwards from the updated qf1/qf2, so policy_loss.backward() runs on a graph whose saved weights are current.

source: https://github.com/microsoft/oac-explore/issues/27
kind: lookalike
"""
import numpy as np
import torch
import torch.optim as optim
from torch import nn as nn
from torch.distributions import Normal


class FlattenMlp(nn.Module):
    def __init__(self, input_size, output_size, hidden_sizes=(64, 64)):
        super().__init__()
        layers, in_size = [], input_size
        for h in hidden_sizes:
            layers += [nn.Linear(in_size, h), nn.ReLU()]
            in_size = h
        layers.append(nn.Linear(in_size, output_size))
        self.net = nn.Sequential(*layers)

    def forward(self, *inputs):
        return self.net(torch.cat(inputs, dim=1))


class TanhGaussianPolicy(nn.Module):
    def __init__(self, obs_dim, action_dim, hidden=64):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(obs_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.mean = nn.Linear(hidden, action_dim)
        self.log_std = nn.Linear(hidden, action_dim)

    def forward(self, obs, reparameterize=True, return_log_prob=True):
        h = self.trunk(obs)
        mean, log_std = self.mean(h), self.log_std(h).clamp(-20, 2)
        normal = Normal(mean, log_std.exp())
        pre_tanh = normal.rsample()
        action = torch.tanh(pre_tanh)
        log_prob = (normal.log_prob(pre_tanh) - torch.log(1 - action.pow(2) + 1e-6)).sum(dim=1, keepdim=True)
        return action, mean, log_std, log_prob


class SACTrainer(object):
    def __init__(self, policy_producer, q_producer, action_space_dim, discount=0.99, reward_scale=1.0,
                 policy_lr=1e-3, qf_lr=1e-3, optimizer_class=optim.Adam):
        self.target_entropy = -np.prod(action_space_dim).item()
        self.qf_criterion = nn.MSELoss()
        self.discount, self.reward_scale = discount, reward_scale
        self.policy = policy_producer()
        self.qf1, self.qf2 = q_producer(), q_producer()
        self.target_qf1, self.target_qf2 = q_producer(), q_producer()
        self.log_alpha = torch.zeros(1, requires_grad=True)
        self.alpha_optimizer = optimizer_class([self.log_alpha], lr=policy_lr)
        self.policy_optimizer = optimizer_class(self.policy.parameters(), lr=policy_lr)
        self.qf1_optimizer = optimizer_class(self.qf1.parameters(), lr=qf_lr)
        self.qf2_optimizer = optimizer_class(self.qf2.parameters(), lr=qf_lr)

    def train_from_torch(self, batch):
        rewards = batch['rewards']
        terminals = batch['terminals']
        obs = batch['observations']
        actions = batch['actions']
        next_obs = batch['next_observations']

        """
        Policy and Alpha Loss
        """
        new_obs_actions, policy_mean, policy_log_std, log_pi = self.policy(
            obs, reparameterize=True, return_log_prob=True,
        )
        alpha_loss = -(self.log_alpha * (log_pi + self.target_entropy).detach()).mean()
        self.alpha_optimizer.zero_grad()
        alpha_loss.backward()
        self.alpha_optimizer.step()
        alpha = self.log_alpha.exp()

        """
        QF Loss
        """
        q1_pred = self.qf1(obs, actions)
        q2_pred = self.qf2(obs, actions)
        new_next_actions, _, _, new_log_pi = self.policy(
            next_obs, reparameterize=True, return_log_prob=True,
        )
        target_q_values = torch.min(
            self.target_qf1(next_obs, new_next_actions),
            self.target_qf2(next_obs, new_next_actions),
        ) - alpha * new_log_pi
        q_target = self.reward_scale * rewards + (1. - terminals) * self.discount * target_q_values
        qf1_loss = self.qf_criterion(q1_pred, q_target.detach())
        qf2_loss = self.qf_criterion(q2_pred, q_target.detach())

        """
        Update networks
        """
        self.qf1_optimizer.zero_grad()
        qf1_loss.backward()
        self.qf1_optimizer.step()

        self.qf2_optimizer.zero_grad()
        qf2_loss.backward()
        self.qf2_optimizer.step()

        q_new_actions = torch.min(
            self.qf1(obs, new_obs_actions),
            self.qf2(obs, new_obs_actions),
        )
        policy_loss = (alpha * log_pi - q_new_actions).mean()

        self.policy_optimizer.zero_grad()
        policy_loss.backward()
        self.policy_optimizer.step()
        return qf1_loss.item(), policy_loss.item()


obs_dim, action_dim = 11, 3
torch.manual_seed(0)
trainer = SACTrainer(lambda: TanhGaussianPolicy(obs_dim, action_dim),
                     lambda: FlattenMlp(obs_dim + action_dim, 1), action_space_dim=(action_dim,))
for step in range(10):
    batch = {'rewards': torch.randn(64, 1), 'terminals': torch.zeros(64, 1),
             'observations': torch.randn(64, obs_dim), 'actions': torch.rand(64, action_dim) * 2 - 1,
             'next_observations': torch.randn(64, obs_dim)}
    losses = trainer.train_from_torch(batch)
print("qf1 loss", losses[0], "policy loss", losses[1])
