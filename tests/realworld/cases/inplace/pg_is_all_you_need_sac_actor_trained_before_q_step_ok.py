"""pg-is-all-you-need's SAC notebook (05.SAC) after the fix (PR 31) trains the actor first: actor_loss.backward() runs through q_pred = min(qf_1(state, new_action), qf_2(...)) while the Q weights are still those of the forward pass, and the Q and V optimizer steps come after it.

source: https://github.com/MrSyee/pg-is-all-you-need/issues/30
kind: lookalike
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Normal


def mlp(in_dim, out_dim):
    return nn.Sequential(nn.Linear(in_dim, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, out_dim))


class Actor(nn.Module):  # hidden layers as one Sequential; mu and log_std from one head
    def __init__(self, in_dim, out_dim, log_std_min=-20, log_std_max=2):
        super(Actor, self).__init__()
        self.log_std_min, self.log_std_max = log_std_min, log_std_max
        self.net = mlp(in_dim, 2 * out_dim)

    def forward(self, state):
        mu, log_std = self.net(state).tanh().chunk(2, dim=-1)
        log_std = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (log_std + 1)
        dist = Normal(mu, torch.exp(log_std))
        z = dist.rsample()
        action = z.tanh()
        log_prob = dist.log_prob(z) - torch.log(1 - action.pow(2) + 1e-7)
        return action, log_prob.sum(-1, keepdim=True)


class CriticQ(nn.Module):
    def __init__(self, in_dim):
        super(CriticQ, self).__init__()
        self.net = mlp(in_dim, 1)

    def forward(self, state, action):
        return self.net(torch.cat((state, action), dim=-1))


class SACAgent:  # no environment: update_model samples a random batch of Pendulum-sized transitions
    def __init__(self, obs_dim=3, action_dim=1, batch_size=32, gamma=0.99, tau=5e-3, policy_update_freq=2):
        self.batch_size, self.gamma, self.tau, self.policy_update_freq = batch_size, gamma, tau, policy_update_freq
        self.obs_dim, self.total_step = obs_dim, 0
        self.target_entropy = -np.prod((action_dim,)).item()
        self.log_alpha = torch.zeros(1, requires_grad=True)
        self.alpha_optimizer = optim.Adam([self.log_alpha], lr=3e-4)
        self.actor = Actor(obs_dim, action_dim)
        self.vf, self.vf_target = mlp(obs_dim, 1), mlp(obs_dim, 1)
        self.qf_1, self.qf_2 = CriticQ(obs_dim + action_dim), CriticQ(obs_dim + action_dim)
        self.actor_optimizer, self.vf_optimizer = optim.Adam(self.actor.parameters(), lr=3e-4), optim.Adam(self.vf.parameters(), lr=3e-4)
        self.qf_1_optimizer, self.qf_2_optimizer = optim.Adam(self.qf_1.parameters(), lr=3e-4), optim.Adam(self.qf_2.parameters(), lr=3e-4)

    def _target_soft_update(self):
        for t_param, l_param in zip(self.vf_target.parameters(), self.vf.parameters()):
            t_param.data.copy_(self.tau * l_param.data + (1.0 - self.tau) * t_param.data)

    def update_model(self):
        n = self.batch_size
        state, next_state = torch.randn(n, self.obs_dim), torch.randn(n, self.obs_dim)
        action, reward, done = torch.rand(n, 1) * 2 - 1, torch.randn(n, 1), torch.zeros(n, 1)
        new_action, log_prob = self.actor(state)
        alpha_loss = (-self.log_alpha.exp() * (log_prob + self.target_entropy).detach()).mean()
        self.alpha_optimizer.zero_grad()
        alpha_loss.backward()
        self.alpha_optimizer.step()
        alpha = self.log_alpha.exp()  # used for the actor loss calculation
        mask = 1 - done
        q_1_pred = self.qf_1(state, action)
        q_2_pred = self.qf_2(state, action)
        v_target = self.vf_target(next_state)
        q_target = reward + self.gamma * v_target * mask
        qf_1_loss = F.mse_loss(q_1_pred, q_target.detach())
        qf_2_loss = F.mse_loss(q_2_pred, q_target.detach())
        v_pred = self.vf(state)
        q_pred = torch.min(self.qf_1(state, new_action), self.qf_2(state, new_action))
        v_target = q_pred - alpha * log_prob
        vf_loss = F.mse_loss(v_pred, v_target.detach())
        if self.total_step % self.policy_update_freq == 0:
            advantage = q_pred - v_pred.detach()
            actor_loss = (alpha * log_prob - advantage).mean()
            self.actor_optimizer.zero_grad()
            actor_loss.backward()
            self.actor_optimizer.step()
            self._target_soft_update()
        else:
            actor_loss = torch.zeros(1)
        # train Q functions
        self.qf_1_optimizer.zero_grad()
        qf_1_loss.backward()
        self.qf_1_optimizer.step()
        self.qf_2_optimizer.zero_grad()
        qf_2_loss.backward()
        self.qf_2_optimizer.step()
        qf_loss = qf_1_loss + qf_2_loss
        self.vf_optimizer.zero_grad()
        vf_loss.backward()
        self.vf_optimizer.step()
        return actor_loss.data, qf_loss.data, vf_loss.data, alpha_loss.data


torch.manual_seed(0)
agent = SACAgent()
for agent.total_step in range(1, 5):
    losses = agent.update_model()
print("actor, qf, vf, alpha losses:", [round(float(x), 4) for x in losses])
