"""REDQ's train() after its pull request: the Q loss and the policy loss both call backward before any optimizer steps, so the policy loss's backward reads the Q weights it was computed with. The Q networks are also set to requires_grad_(False) while the policy loss runs through them, as REDQ's next pull request (#3) does: without it the policy loss adds its gradient to the Q networks' .grad before the Q step, the bug of graph_breaks/redq_policy_loss_backpropagates_into_q_networks, a bug of its own, so it cannot stand as the correct look-alike (corrected after the blind measurement).

source: https://github.com/watchernyu/REDQ/pull/2
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Normal


class Mlp(nn.Module):
    def __init__(self, input_size, output_size, hidden_sizes, hidden_activation=F.relu):
        super().__init__()
        self.hidden_activation = hidden_activation
        self.hidden_layers = nn.ModuleList()
        in_size = input_size
        for next_size in hidden_sizes:
            self.hidden_layers.append(nn.Linear(in_size, next_size))
            in_size = next_size
        self.last_fc_layer = nn.Linear(in_size, output_size)

    def forward(self, input):
        h = input
        for fc_layer in self.hidden_layers:
            h = self.hidden_activation(fc_layer(h))
        return self.last_fc_layer(h)


class TanhGaussianPolicy(Mlp):
    def __init__(self, obs_dim, action_dim, hidden_sizes):
        super().__init__(obs_dim, action_dim, hidden_sizes)
        self.last_fc_log_std = nn.Linear(hidden_sizes[-1], action_dim)

    def forward(self, obs):
        h = obs
        for fc_layer in self.hidden_layers:
            h = self.hidden_activation(fc_layer(h))
        mean = self.last_fc_layer(h)
        std = torch.exp(torch.clamp(self.last_fc_log_std(h), -20, 2))
        normal = Normal(mean, std)
        pre_tanh_value = normal.rsample()
        action = torch.tanh(pre_tanh_value)
        log_prob = normal.log_prob(pre_tanh_value) - torch.log(1 - action.pow(2) + 1e-6)
        return action, log_prob.sum(1, keepdim=True)


class REDQSACAgent(object):
    def __init__(self, obs_dim=5, act_dim=2, hidden_sizes=(32, 32), lr=3e-4, num_Q=4, alpha=0.2,
                 utd_ratio=3, policy_update_delay=20):
        self.policy_net = TanhGaussianPolicy(obs_dim, act_dim, hidden_sizes)
        self.q_net_list = [Mlp(obs_dim + act_dim, 1, hidden_sizes) for _ in range(num_Q)]
        self.policy_optimizer = optim.Adam(self.policy_net.parameters(), lr=lr)
        self.q_optimizer_list = [optim.Adam(q.parameters(), lr=lr) for q in self.q_net_list]
        self.num_Q, self.alpha, self.utd_ratio = num_Q, alpha, utd_ratio
        self.policy_update_delay, self.mse_criterion = policy_update_delay, nn.MSELoss()

    def train(self, obs_tensor, acts_tensor, y_q):
        num_update = self.utd_ratio
        for i_update in range(num_update):
            q_prediction_list = [q(torch.cat([obs_tensor, acts_tensor], 1)) for q in self.q_net_list]
            q_prediction_cat = torch.cat(q_prediction_list, dim=1)
            q_loss_all = self.mse_criterion(q_prediction_cat, y_q.expand((-1, self.num_Q))) * self.num_Q
            for q_i in range(self.num_Q):
                self.q_optimizer_list[q_i].zero_grad()
            q_loss_all.backward()

            if ((i_update + 1) % self.policy_update_delay == 0) or i_update == num_update - 1:
                a_tilda, log_prob_a_tilda = self.policy_net.forward(obs_tensor)
                q_a_tilda_list = []
                for sample_idx in range(self.num_Q):
                    self.q_net_list[sample_idx].requires_grad_(False)
                    q_a_tilda_list.append(self.q_net_list[sample_idx](torch.cat([obs_tensor, a_tilda], 1)))
                ave_q = torch.mean(torch.cat(q_a_tilda_list, 1), dim=1, keepdim=True)
                policy_loss = (self.alpha * log_prob_a_tilda - ave_q).mean()
                self.policy_optimizer.zero_grad()
                policy_loss.backward()
                for sample_idx in range(self.num_Q):
                    self.q_net_list[sample_idx].requires_grad_(True)

            for q_i in range(self.num_Q):
                self.q_optimizer_list[q_i].step()

            if ((i_update + 1) % self.policy_update_delay == 0) or i_update == num_update - 1:
                self.policy_optimizer.step()
            print("update", i_update, "q loss", round(q_loss_all.item(), 4))


torch.manual_seed(0)
agent = REDQSACAgent()
agent.train(torch.randn(16, 5), torch.rand(16, 2) * 2 - 1, torch.randn(16, 1))
