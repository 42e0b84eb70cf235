"""SAC walker agent: dist.log_prob(normal_sample) returns one log-probability per action dimension, [64, 4], and it is not summed, so td_target becomes [64, 4] and F.mse_loss(self.critic_1(states, actions), td_target.detach()) broadcasts the [64, 1] critic output against it (torch only warns).

source: https://github.com/sunwuzhou03/reinforcement-learning-lab/issues/1
kind: bug
symptom: silent
verified: td_target has shape [64, 4] and the first critic loss is 1.45, where the same step with the log-probability summed over the 4 action dimensions has a [64, 1] target and a loss of 1.78; torch only warns about the target size
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Normal


class PolicyNet(nn.Module):
    def __init__(self, state_dim, hidden_dim, action_dim, action_bound):
        super(PolicyNet, self).__init__()
        self.fc1 = nn.Linear(state_dim, hidden_dim)
        self.fc_mu = nn.Linear(hidden_dim, action_dim)
        self.fc_std = nn.Linear(hidden_dim, action_dim)
        self.action_bound = action_bound

    def forward(self, x):
        x = F.relu(self.fc1(x))
        mu = self.fc_mu(x)
        std = F.softplus(self.fc_std(x))
        dist = Normal(mu, std)
        normal_sample = dist.rsample()
        log_prob = dist.log_prob(normal_sample)  # ROOT
        action = torch.tanh(normal_sample)
        log_prob = log_prob - torch.log(1 - torch.tanh(action).pow(2) + 1e-7)
        action = action * self.action_bound
        return action, log_prob


class QValueNet(nn.Module):
    def __init__(self, state_dim, hidden_dim, action_dim):
        super(QValueNet, self).__init__()
        self.fc1 = nn.Linear(state_dim + action_dim, hidden_dim)
        self.fc_out = nn.Linear(hidden_dim, 1)

    def forward(self, x, a):
        return self.fc_out(F.relu(self.fc1(torch.cat([x, a], dim=1))))


class SACContinuous:
    def __init__(self, state_dim=8, hidden_dim=32, action_dim=4, action_bound=1.0, gamma=0.99, alpha=0.2):
        self.actor = PolicyNet(state_dim, hidden_dim, action_dim, action_bound)
        self.critic_1 = QValueNet(state_dim, hidden_dim, action_dim)
        self.target_critic_1 = QValueNet(state_dim, hidden_dim, action_dim)
        self.target_critic_1.load_state_dict(self.critic_1.state_dict())
        self.critic_1_optimizer = torch.optim.Adam(self.critic_1.parameters(), lr=3e-3)
        self.gamma, self.alpha = gamma, alpha

    def calc_target(self, rewards, next_states, dones):
        next_actions, log_prob = self.actor(next_states)
        entropy = -log_prob
        q1_value = self.target_critic_1(next_states, next_actions)
        next_value = q1_value + self.alpha * entropy
        td_target = rewards + self.gamma * next_value * (1 - dones)
        return td_target

    def update(self, states, actions, rewards, next_states, dones):
        td_target = self.calc_target(rewards, next_states, dones)
        critic_1_loss = torch.mean(F.mse_loss(self.critic_1(states, actions), td_target.detach()))
        self.critic_1_optimizer.zero_grad()
        critic_1_loss.backward()
        self.critic_1_optimizer.step()
        return td_target.shape, critic_1_loss.item()


torch.manual_seed(0)
agent = SACContinuous()
states, actions = torch.randn(64, 8), torch.rand(64, 4) * 2 - 1
rewards, next_states, dones = torch.randn(64, 1), torch.randn(64, 8), torch.zeros(64, 1)
print(agent.update(states, actions, rewards, next_states, dones))
