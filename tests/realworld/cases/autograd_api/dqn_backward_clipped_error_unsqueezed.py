"""DQN learn(): Q(s,a).backward(clipped_error.data.unsqueeze(1)) hands a [32, 1] gradient to a [32] output.

source: https://github.com/dxyang/DQN_pytorch/issues/7
kind: bug
symptom: crash
verified: RuntimeError: Mismatch in shape: grad_output[0] has a shape of torch.Size([32, 1]) and output[0] has a shape of torch.Size([32])
"""
import torch
import torch.nn as nn


class DQN(nn.Module):
    def __init__(self, in_features=4, num_actions=2):
        super(DQN, self).__init__()
        self.fc1, self.fc2 = nn.Linear(in_features, 16), nn.Linear(16, num_actions)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


torch.manual_seed(0)
batch_size, gamma = 32, 0.99
Q, Q_target = DQN(), DQN()
optimizer = torch.optim.RMSprop(Q.parameters(), lr=2.5e-4, alpha=0.95, eps=0.01)
obs_t, act_t = torch.randn(batch_size, 4), torch.randint(0, 2, (batch_size,))
rew_t, obs_tp1, done_mask = torch.randn(batch_size), torch.randn(batch_size, 4), torch.zeros(batch_size)

q_values = Q(obs_t)
q_s_a = q_values.gather(1, act_t.unsqueeze(1))
q_s_a = q_s_a.squeeze()
q_tp1_values = Q_target(obs_tp1).detach()
q_s_a_prime, a_prime = q_tp1_values.max(1)
q_s_a_prime = (1 - done_mask) * q_s_a_prime
error = rew_t + gamma * q_s_a_prime - q_s_a
clipped_error = -1.0 * error.clamp(-1, 1)
optimizer.zero_grad()
q_s_a.backward(clipped_error.data.unsqueeze(1))  # ROOT
optimizer.step()
