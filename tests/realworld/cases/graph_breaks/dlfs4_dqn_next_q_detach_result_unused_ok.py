"""Deep Learning from Scratch 4 DQN: next_q.detach() discards its result, but the target net has no optimizer.

source: https://github.com/oreilly-japan/deep-learning-from-scratch-4/issues/13
kind: lookalike
"""
import copy
import torch
import torch.nn as nn
import torch.optim as optim


class QNet(nn.Module):
    def __init__(self, action_size):
        super().__init__()
        self.l1 = nn.Linear(4, 32)
        self.l2 = nn.Linear(32, action_size)

    def forward(self, x):
        return self.l2(torch.relu(self.l1(x)))


class DQNAgent:
    def __init__(self):
        self.gamma = 0.98
        self.action_size = 2
        self.qnet = QNet(self.action_size)
        self.qnet_target = QNet(self.action_size)
        self.optimizer = optim.Adam(self.qnet.parameters(), lr=0.0005)

    def sync_qnet(self):
        self.qnet_target = copy.deepcopy(self.qnet)

    def update(self, state, action, reward, next_state, done):
        qs = self.qnet(state)
        q = qs[torch.arange(len(action)), action]
        next_qs = self.qnet_target(next_state)
        next_q = next_qs.max(1)[0]
        next_q.detach()
        target = reward + (1 - done) * self.gamma * next_q
        loss = nn.MSELoss()(q, target)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()


torch.manual_seed(0)
agent = DQNAgent()
for episode in range(3):
    state, next_state = torch.randn(8, 4), torch.randn(8, 4)
    action, reward, done = torch.randint(0, 2, (8,)), torch.randn(8), torch.zeros(8)
    agent.update(state, action, reward, next_state, done)
    agent.sync_qnet()
