"""DQN tutorial: param.grad.data.clamp(-1, 1) returns a new tensor, so the gradients are never clipped.

source: https://github.com/pytorch/tutorials/pull/30
kind: bug
symptom: silent
verified: policy_net gradients larger than 1 reach optimizer.step() unclipped
"""
import random
from collections import namedtuple
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

Transition = namedtuple('Transition', ('state', 'action', 'next_state', 'reward'))
BATCH_SIZE, GAMMA = 8, 0.999


class DQN(nn.Module):
    def __init__(self):
        super(DQN, self).__init__()
        self.head = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))

    def forward(self, x):
        return self.head(x)


def optimize_model(policy_net, target_net, optimizer, memory):
    transitions = random.sample(memory, BATCH_SIZE)
    batch = Transition(*zip(*transitions))
    state_batch, action_batch = torch.cat(batch.state), torch.cat(batch.action)
    reward_batch, next_states = torch.cat(batch.reward), torch.cat(batch.next_state)
    state_action_values = policy_net(state_batch).gather(1, action_batch)
    next_state_values = target_net(next_states).max(1)[0].detach()
    expected_state_action_values = (next_state_values * GAMMA) + reward_batch
    loss = F.smooth_l1_loss(state_action_values, expected_state_action_values.unsqueeze(1))
    optimizer.zero_grad()
    loss.backward()
    for param in policy_net.parameters():
        param.grad.data.clamp(-1, 1)  # ROOT
    optimizer.step()


random.seed(0)
torch.manual_seed(0)
policy_net, target_net = DQN(), DQN()
target_net.load_state_dict(policy_net.state_dict())
optimizer = optim.RMSprop(policy_net.parameters())
memory = [Transition(torch.randn(1, 4) * 5, torch.randint(0, 2, (1, 1)), torch.randn(1, 4), torch.randn(1) * 100)
          for _ in range(32)]
for i_episode in range(3):
    optimize_model(policy_net, target_net, optimizer, memory)
