"""pytorch-ddpg-naf's update with the fix the issue proposes (and the repository adopted): torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1), which skips parameters whose .grad is None (the unused bn1/bn2) and clips the others in place.

source: https://github.com/ikostrikov/pytorch-ddpg-naf/issues/1
kind: lookalike
"""
from collections import namedtuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim import Adam

MSELoss = nn.MSELoss()
Transition = namedtuple('Transition', ('state', 'action', 'mask', 'next_state', 'reward'))


class Policy(nn.Module):
    def __init__(self, hidden_size, num_inputs, action_space):
        super(Policy, self).__init__()
        num_outputs = action_space.shape[0]
        self.bn0 = nn.BatchNorm1d(num_inputs)
        self.linear1 = nn.Linear(num_inputs, hidden_size)
        self.bn1 = nn.BatchNorm1d(hidden_size)
        self.linear2 = nn.Linear(hidden_size, hidden_size)
        self.bn2 = nn.BatchNorm1d(hidden_size)
        self.V = nn.Linear(hidden_size, 1)
        self.mu = nn.Linear(hidden_size, num_outputs)
        self.L = nn.Linear(hidden_size, num_outputs ** 2)
        self.tril_mask = torch.tril(torch.ones(num_outputs, num_outputs), diagonal=-1).unsqueeze(0)
        self.diag_mask = torch.diag(torch.diag(torch.ones(num_outputs, num_outputs))).unsqueeze(0)

    def forward(self, inputs):
        x, u = inputs
        x = self.bn0(x)
        x = F.tanh(self.linear1(x))
        x = F.tanh(self.linear2(x))
        V = self.V(x)
        mu = F.tanh(self.mu(x))
        Q = None
        if u is not None:
            num_outputs = mu.size(1)
            L = self.L(x).view(-1, num_outputs, num_outputs)
            L = L * self.tril_mask.expand_as(L) + torch.exp(L) * self.diag_mask.expand_as(L)
            P = torch.bmm(L, L.transpose(2, 1))
            u_mu = (u - mu).unsqueeze(2)
            A = -0.5 * torch.bmm(torch.bmm(u_mu.transpose(2, 1), P), u_mu)[:, :, 0]
            Q = A + V
        return mu, Q, V


class NAF:
    def __init__(self, gamma, tau, hidden_size, num_inputs, action_space):
        self.model = Policy(hidden_size, num_inputs, action_space)
        self.target_model = Policy(hidden_size, num_inputs, action_space)
        self.target_model.load_state_dict(self.model.state_dict())
        self.optimizer = Adam(self.model.parameters(), lr=1e-3)
        self.gamma, self.tau = gamma, tau

    def update_parameters(self, batch):
        state_batch = torch.cat(batch.state)
        action_batch = torch.cat(batch.action)
        reward_batch = torch.cat(batch.reward)
        with torch.no_grad():
            _, _, next_state_values = self.target_model((torch.cat(batch.next_state), None))
        expected_state_action_values = reward_batch.unsqueeze(1) + next_state_values * self.gamma
        _, state_action_values, _ = self.model((state_batch, action_batch))
        loss = MSELoss(state_action_values, expected_state_action_values)
        self.optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1)
        self.optimizer.step()
        return loss.item()


class Box:
    shape = (2,)


torch.manual_seed(0)
agent = NAF(gamma=0.99, tau=0.001, hidden_size=32, num_inputs=4, action_space=Box())
for i_update in range(3):
    batch = Transition(state=[torch.randn(16, 4)], action=[torch.rand(16, 2) * 2 - 1], mask=[torch.ones(16)],
                       next_state=[torch.randn(16, 4)], reward=[torch.randn(16)])
    print(i_update, agent.update_parameters(batch))
