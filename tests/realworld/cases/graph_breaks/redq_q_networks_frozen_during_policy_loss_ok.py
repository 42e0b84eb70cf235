"""REDQ after its pull request: the Q networks are set to requires_grad_(False) while the policy loss runs through them and back to True afterwards, so the policy loss only reaches the policy and the Q step follows the Q loss alone.

source: https://github.com/watchernyu/REDQ/pull/3
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Mlp(nn.Module):
    def __init__(self, input_dim, output_dim, hidden=32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(input_dim, hidden), nn.ReLU(), nn.Linear(hidden, output_dim))

    def forward(self, x):
        return self.net(x)


class TanhGaussianPolicy(nn.Module):
    def __init__(self, obs_dim, act_dim, hidden=32):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(obs_dim, hidden), nn.ReLU())
        self.mean = nn.Linear(hidden, act_dim)
        self.log_std = nn.Linear(hidden, act_dim)

    def forward(self, obs):
        h = self.body(obs)
        std = self.log_std(h).clamp(-5, 2).exp()
        normal = torch.distributions.Normal(self.mean(h), std)
        u = normal.rsample()
        a = torch.tanh(u)
        log_prob = (normal.log_prob(u) - torch.log(1 - a.pow(2) + 1e-6)).sum(1, keepdim=True)
        return a, log_prob


class REDQSACAgent:
    def __init__(self, obs_dim, act_dim, num_Q=4, alpha=0.2, policy_update_delay=1):
        self.num_Q, self.alpha, self.policy_update_delay = num_Q, alpha, policy_update_delay
        self.policy_net = TanhGaussianPolicy(obs_dim, act_dim)
        self.q_net_list = [Mlp(obs_dim + act_dim, 1) for _ in range(num_Q)]
        self.policy_optimizer = torch.optim.Adam(self.policy_net.parameters(), lr=3e-3)
        self.q_optimizer_list = [torch.optim.Adam(q.parameters(), lr=3e-3) for q in self.q_net_list]

    def train(self, obs_tensor, acts_tensor, y_q, i_update, num_update):
        q_prediction_list = [q(torch.cat([obs_tensor, acts_tensor], 1)) for q in self.q_net_list]
        q_prediction_cat = torch.cat(q_prediction_list, dim=1)
        q_loss_all = F.mse_loss(q_prediction_cat, y_q.expand(-1, self.num_Q)) * self.num_Q
        for q_i in range(self.num_Q):
            self.q_optimizer_list[q_i].zero_grad()
        q_loss_all.backward()
        if ((i_update + 1) % self.policy_update_delay == 0) or i_update == num_update - 1:
            a_tilda, log_prob_a_tilda = self.policy_net(obs_tensor)
            q_a_tilda_list = []
            for sample_idx in range(self.num_Q):
                self.q_net_list[sample_idx].requires_grad_(False)
                q_a_tilda = self.q_net_list[sample_idx](torch.cat([obs_tensor, a_tilda], 1))
                q_a_tilda_list.append(q_a_tilda)
            ave_q = torch.cat(q_a_tilda_list, 1).mean(dim=1, keepdim=True)
            policy_loss = (self.alpha * log_prob_a_tilda - ave_q).mean()
            self.policy_optimizer.zero_grad()
            policy_loss.backward()
            self.policy_optimizer.step()
            for sample_idx in range(self.num_Q):
                self.q_net_list[sample_idx].requires_grad_(True)
        for q_i in range(self.num_Q):
            self.q_optimizer_list[q_i].step()
        return q_loss_all.item() / self.num_Q


torch.manual_seed(0)
obs_dim, act_dim, batch = 5, 2, 64
agent = REDQSACAgent(obs_dim, act_dim)
obs, acts, y_q = torch.randn(batch, obs_dim), torch.rand(batch, act_dim) * 2 - 1, torch.randn(batch, 1)
for i_update in range(40):
    q_loss = agent.train(obs, acts, y_q, i_update, 40)
    if i_update == 0:
        print("first-update q0 grad", float(agent.q_net_list[0].net[0].weight.grad.norm()))
with torch.no_grad():
    a, _ = agent.policy_net(obs)
    q_pi = torch.cat([q(torch.cat([obs, a], 1)) for q in agent.q_net_list], 1).mean()
print("q loss", q_loss, "mean Q at policy actions", float(q_pi))
