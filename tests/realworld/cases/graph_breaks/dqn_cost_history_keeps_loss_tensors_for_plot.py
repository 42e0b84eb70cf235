"""DQN appends the loss tensor itself to cost_his; plot_cost then converts the list to numpy.

source: https://github.com/ClownW/Reinforcement-learning-with-PyTorch/issues/3
kind: bug
symptom: crash
verified: RuntimeError: Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.
"""
import numpy as np
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, n_features, n_actions):
        super(Net, self).__init__()
        self.el = nn.Linear(n_features, 10)
        self.q = nn.Linear(10, n_actions)

    def forward(self, x):
        return self.q(torch.relu(self.el(x)))


class DeepQNetwork:
    def __init__(self, n_actions=2, n_features=4, learning_rate=0.01, reward_decay=0.9):
        self.gamma = reward_decay
        self.q_eval = Net(n_features, n_actions)
        self.q_target = Net(n_features, n_actions)
        self.optimizer = torch.optim.RMSprop(self.q_eval.parameters(), lr=learning_rate)
        self.loss_func = nn.MSELoss()
        self.cost_his = []

    def learn(self, s, a, r, s_):
        q_next = self.q_target(s_).detach()
        q_eval = self.q_eval(s).gather(1, a)
        q_target = r + self.gamma * q_next.max(1, keepdim=True)[0]
        loss = self.loss_func(q_eval, q_target)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.cost_his.append(loss)  # ROOT

    def plot_cost(self):
        return np.arange(len(self.cost_his)), np.array(self.cost_his)  # SYMPTOM


torch.manual_seed(0)
RL = DeepQNetwork()
for step in range(5):
    s, s_ = torch.randn(8, 4), torch.randn(8, 4)
    a, r = torch.randint(0, 2, (8, 1)), torch.randn(8, 1)
    RL.learn(s, a, r, s_)
RL.plot_cost()
