"""rlkit's `SACTrainer.train_from_torch` computes the policy loss through `qf1`/`qf2`, then runs the Q-function updates (`qf1_optimizer.step()` changes the critics' weights in place) and only afterwards calls `policy_loss.backward()`: the policy loss's graph saved the old critic weights, so since PyTorch 1.5 the backward fails; the merged PR optimizes the actor before the critic.

source: https://github.com/rail-berkeley/rlkit/pull/109
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim


def mlp(inp, out, hidden=32):
    return nn.Sequential(nn.Linear(inp, hidden), nn.ReLU(), nn.Linear(hidden, out))


class ConcatMlp(nn.Module):
    def __init__(self, obs_dim, action_dim):
        super().__init__()
        self.net = mlp(obs_dim + action_dim, 1)

    def forward(self, obs, actions):
        return self.net(torch.cat([obs, actions], dim=1))


class TanhGaussianPolicy(nn.Module):
    def __init__(self, obs_dim, action_dim):
        super().__init__()
        self.net = mlp(obs_dim, 2 * action_dim)

    def forward(self, obs):
        mean, log_std = self.net(obs).chunk(2, dim=1)
        std = log_std.clamp(-20, 2).exp()
        pre_tanh = mean + std * torch.randn_like(mean)
        action = torch.tanh(pre_tanh)
        log_prob = torch.distributions.Normal(mean, std).log_prob(pre_tanh)
        log_prob = (log_prob - torch.log(1 - action.pow(2) + 1e-6)).sum(dim=1, keepdim=True)
        return action, log_prob


class SACTrainer:
    def __init__(self, policy, qf1, qf2, target_qf1, target_qf2, discount=0.99, reward_scale=1.0,
                 policy_lr=3e-4, qf_lr=3e-4, target_entropy=-2.0):
        self.policy, self.qf1, self.qf2 = policy, qf1, qf2
        self.target_qf1, self.target_qf2 = target_qf1, target_qf2
        self.discount, self.reward_scale, self.target_entropy = discount, reward_scale, target_entropy
        self.log_alpha = torch.zeros(1, requires_grad=True)
        self.alpha_optimizer = optim.Adam([self.log_alpha], lr=policy_lr)
        self.policy_optimizer = optim.Adam(self.policy.parameters(), lr=policy_lr)
        self.qf1_optimizer = optim.Adam(self.qf1.parameters(), lr=qf_lr)
        self.qf2_optimizer = optim.Adam(self.qf2.parameters(), lr=qf_lr)
        self.qf_criterion = nn.MSELoss()

    def train_from_torch(self, batch):
        rewards, terminals = batch['rewards'], batch['terminals']
        obs, actions, next_obs = batch['observations'], batch['actions'], batch['next_observations']

        """Policy and Alpha Loss"""
        new_obs_actions, log_pi = self.policy(obs)
        alpha_loss = -(self.log_alpha * (log_pi + self.target_entropy).detach()).mean()
        self.alpha_optimizer.zero_grad()
        alpha_loss.backward()
        self.alpha_optimizer.step()
        alpha = self.log_alpha.exp().detach()
        q_new_actions = torch.min(self.qf1(obs, new_obs_actions), self.qf2(obs, new_obs_actions))
        policy_loss = (alpha * log_pi - q_new_actions).mean()

        """QF Loss"""
        q1_pred = self.qf1(obs, actions)
        q2_pred = self.qf2(obs, actions)
        with torch.no_grad():
            new_next_actions, new_log_pi = self.policy(next_obs)
            target_q_values = torch.min(self.target_qf1(next_obs, new_next_actions),
                                        self.target_qf2(next_obs, new_next_actions)) - alpha * new_log_pi
            q_target = self.reward_scale * rewards + (1. - terminals) * self.discount * target_q_values
        qf1_loss = self.qf_criterion(q1_pred, q_target)
        qf2_loss = self.qf_criterion(q2_pred, q_target)

        """Update networks"""
        self.qf1_optimizer.zero_grad()
        qf1_loss.backward()
        self.qf1_optimizer.step()  # ROOT

        self.qf2_optimizer.zero_grad()
        qf2_loss.backward()
        self.qf2_optimizer.step()

        self.policy_optimizer.zero_grad()
        policy_loss.backward()  # SYMPTOM
        self.policy_optimizer.step()
        return policy_loss.item(), qf1_loss.item()


obs_dim, action_dim = 6, 2
torch.manual_seed(0)
qf1, qf2 = ConcatMlp(obs_dim, action_dim), ConcatMlp(obs_dim, action_dim)
target_qf1, target_qf2 = ConcatMlp(obs_dim, action_dim), ConcatMlp(obs_dim, action_dim)
target_qf1.load_state_dict(qf1.state_dict())
target_qf2.load_state_dict(qf2.state_dict())
trainer = SACTrainer(TanhGaussianPolicy(obs_dim, action_dim), qf1, qf2, target_qf1, target_qf2)
rng = np.random.default_rng(0)
for it in range(3):
    batch = {
        'observations': torch.as_tensor(rng.normal(size=(64, obs_dim)), dtype=torch.float32),
        'actions': torch.as_tensor(rng.uniform(-1, 1, size=(64, action_dim)), dtype=torch.float32),
        'rewards': torch.as_tensor(rng.normal(size=(64, 1)), dtype=torch.float32),
        'terminals': torch.zeros(64, 1),
        'next_observations': torch.as_tensor(rng.normal(size=(64, obs_dim)), dtype=torch.float32),
    }
    print("policy loss %.4f, qf1 loss %.4f" % trainer.train_from_torch(batch))
