"""rlkit's CQL trainer builds the CQL term of qf1_loss from Q values at fresh policy actions (logsumexp over sampled and policy actions), so qf1_loss's graph runs through the policy network; the trainer then steps the policy optimizer before calling qf1_loss.backward(), and the step has updated in place the policy weights that this backward still needs.

source: https://github.com/aviralkumar2907/CQL/issues/5
kind: bug
symptom: crash
verified: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
import torch.nn as nn


class TanhGaussianPolicy(nn.Module):
    def __init__(self, obs_dim, action_dim, hidden=32):
        super().__init__()
        self.fc = nn.Linear(obs_dim, hidden)
        self.last_fc = nn.Linear(hidden, action_dim)
        self.last_fc_log_std = nn.Linear(hidden, action_dim)

    def forward(self, obs):
        h = torch.relu(self.fc(obs))
        mean, std = self.last_fc(h), self.last_fc_log_std(h).clamp(-5, 2).exp()
        normal = torch.distributions.Normal(mean, std)
        pre_tanh = normal.rsample()
        action = torch.tanh(pre_tanh)
        log_pi = (normal.log_prob(pre_tanh) - torch.log(1 - action.pow(2) + 1e-6)).sum(-1, keepdim=True)
        return action, log_pi


class QF(nn.Module):
    def __init__(self, obs_dim, action_dim, hidden=32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim + action_dim, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, obs, actions):
        return self.net(torch.cat([obs, actions], -1))


class CQLTrainer:
    def __init__(self, policy, qf1, num_random=4, temp=1.0, min_q_weight=5.0, alpha=0.2):
        self.policy, self.qf1 = policy, qf1
        self.num_random, self.temp, self.min_q_weight, self.alpha = num_random, temp, min_q_weight, alpha
        self.policy_optimizer = torch.optim.Adam(policy.parameters(), lr=3e-4)
        self.qf1_optimizer = torch.optim.Adam(qf1.parameters(), lr=3e-4)

    def _get_policy_actions(self, obs, num_actions):
        obs_temp = obs.unsqueeze(1).repeat(1, num_actions, 1).view(-1, obs.shape[-1])
        new_obs_actions, new_obs_log_pi = self.policy(obs_temp)
        return new_obs_actions, new_obs_log_pi.view(obs.shape[0], num_actions, 1)

    def _get_tensor_values(self, obs, actions, network):
        num_repeat = actions.shape[0] // obs.shape[0]
        obs_temp = obs.unsqueeze(1).repeat(1, num_repeat, 1).view(-1, obs.shape[-1])
        return network(obs_temp, actions).view(obs.shape[0], num_repeat, 1)

    def train_from_torch(self, obs, actions, rewards, next_obs):
        new_obs_actions, log_pi = self.policy(obs)
        q_new_actions = self.qf1(obs, new_obs_actions)
        policy_loss = (self.alpha * log_pi - q_new_actions).mean()

        q1_pred = self.qf1(obs, actions)
        with torch.no_grad():
            new_next_actions, _ = self.policy(next_obs)
            q_target = rewards + 0.99 * self.qf1(next_obs, new_next_actions)
        qf1_loss = nn.functional.mse_loss(q1_pred, q_target)

        random_actions = torch.empty(obs.shape[0] * self.num_random, actions.shape[-1]).uniform_(-1, 1)
        curr_actions, curr_log_pis = self._get_policy_actions(obs, num_actions=self.num_random)
        q1_rand = self._get_tensor_values(obs, random_actions, network=self.qf1)
        q1_curr_actions = self._get_tensor_values(obs, curr_actions, network=self.qf1)
        cat_q1 = torch.cat([q1_rand, q1_pred.unsqueeze(1), q1_curr_actions], 1)
        min_qf1_loss = torch.logsumexp(cat_q1 / self.temp, dim=1).mean() * self.min_q_weight * self.temp
        qf1_loss = qf1_loss + min_qf1_loss - q1_pred.mean() * self.min_q_weight

        self.policy_optimizer.zero_grad()
        policy_loss.backward(retain_graph=False)
        self.policy_optimizer.step()  # ROOT

        self.qf1_optimizer.zero_grad()
        qf1_loss.backward(retain_graph=True)  # SYMPTOM
        self.qf1_optimizer.step()
        return policy_loss.item(), qf1_loss.item()


torch.manual_seed(0)
obs_dim, action_dim, batch = 6, 2, 32
trainer = CQLTrainer(TanhGaussianPolicy(obs_dim, action_dim), QF(obs_dim, action_dim))
for it in range(3):
    obs, next_obs = torch.randn(batch, obs_dim), torch.randn(batch, obs_dim)
    actions, rewards = torch.rand(batch, action_dim) * 2 - 1, torch.randn(batch, 1)
    print(trainer.train_from_torch(obs, actions, rewards, next_obs))
