"""SAC with LSTM critics: the target Q is built without no_grad but detached where it enters the critic losses.

source: https://github.com/quantumiracle/Popular-RL-Algorithms/issues/16
kind: lookalike
verified: after one update the target critics' weights have no gradient (None) and the two soft Q nets get one
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class QNetworkLSTM(nn.Module):
    def __init__(self, state_dim, action_dim, hidden_dim=16):
        super().__init__()
        self.linear1 = nn.Linear(state_dim + action_dim, hidden_dim)
        self.lstm1 = nn.LSTM(state_dim + action_dim, hidden_dim)
        self.linear2 = nn.Linear(2 * hidden_dim, 1)

    def forward(self, state, action, last_action, hidden_in):
        fc_branch = F.relu(self.linear1(torch.cat([state, action], -1)))
        lstm_branch, lstm_hidden = self.lstm1(torch.cat([state, last_action], -1), hidden_in)
        return self.linear2(torch.cat([fc_branch, lstm_branch], -1)), lstm_hidden


torch.manual_seed(0)
state_dim, action_dim, T, B, hidden_dim = 3, 2, 5, 4, 16
soft_q_net1, soft_q_net2 = QNetworkLSTM(state_dim, action_dim), QNetworkLSTM(state_dim, action_dim)
target_soft_q_net1, target_soft_q_net2 = QNetworkLSTM(state_dim, action_dim), QNetworkLSTM(state_dim, action_dim)
target_soft_q_net1.load_state_dict(soft_q_net1.state_dict())
target_soft_q_net2.load_state_dict(soft_q_net2.state_dict())
soft_q_criterion1, soft_q_criterion2 = nn.MSELoss(), nn.MSELoss()
soft_q_optimizer1 = torch.optim.Adam(soft_q_net1.parameters(), lr=3e-4)
soft_q_optimizer2 = torch.optim.Adam(soft_q_net2.parameters(), lr=3e-4)
alpha, gamma = 0.2, 0.99

state, next_state = torch.randn(T, B, state_dim), torch.randn(T, B, state_dim)
action, last_action = torch.randn(T, B, action_dim), torch.randn(T, B, action_dim)
new_next_action, next_log_prob = torch.tanh(torch.randn(T, B, action_dim)), torch.randn(T, B, 1)
reward, done = torch.randn(T, B, 1), torch.zeros(T, B, 1)
hidden_in = hidden_out = (torch.zeros(1, B, hidden_dim), torch.zeros(1, B, hidden_dim))

predicted_q_value1, _ = soft_q_net1(state, action, last_action, hidden_in)
predicted_q_value2, _ = soft_q_net2(state, action, last_action, hidden_in)
predict_target_q1, _ = target_soft_q_net1(next_state, new_next_action, action, hidden_out)
predict_target_q2, _ = target_soft_q_net2(next_state, new_next_action, action, hidden_out)
target_q_min = torch.min(predict_target_q1, predict_target_q2) - alpha * next_log_prob
target_q_value = reward + (1 - done) * gamma * target_q_min
q_value_loss1 = soft_q_criterion1(predicted_q_value1, target_q_value.detach())
q_value_loss2 = soft_q_criterion2(predicted_q_value2, target_q_value.detach())
soft_q_optimizer1.zero_grad()
q_value_loss1.backward()
soft_q_optimizer1.step()
soft_q_optimizer2.zero_grad()
q_value_loss2.backward()
soft_q_optimizer2.step()
print(target_soft_q_net1.linear2.weight.grad, soft_q_net1.linear2.weight.grad.abs().max().item())
