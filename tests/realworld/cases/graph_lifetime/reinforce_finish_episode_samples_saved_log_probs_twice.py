"""REINFORCE example changed to call finish_episode on random samples of the stored experience, twice per episode.

source: https://github.com/pytorch/examples/issues/151
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import random
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical

torch.manual_seed(0)
random.seed(0)
gamma = 0.99


class Policy(nn.Module):
    def __init__(self):
        super(Policy, self).__init__()
        self.affine1 = nn.Linear(4, 32)
        self.affine2 = nn.Linear(32, 2)
        self.saved_log_probs = []
        self.rewards = []

    def forward(self, x):
        x = F.relu(self.affine1(x))
        return F.softmax(self.affine2(x), dim=1)


policy = Policy()
optimizer = optim.Adam(policy.parameters(), lr=1e-2)


def select_action(state):
    probs = policy(state.unsqueeze(0))
    m = Categorical(probs)
    action = m.sample()
    policy.saved_log_probs.append(m.log_prob(action))
    return action.item()


def finish_episode(batch_size=6):
    R = 0
    returns = []
    for r in policy.rewards[::-1]:
        R = r + gamma * R
        returns.insert(0, R)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + 1e-6)
    idx = random.sample(range(len(returns)), batch_size)
    policy_loss = torch.cat([-policy.saved_log_probs[i] * returns[i] for i in idx]).sum()
    optimizer.zero_grad()
    policy_loss.backward()
    optimizer.step()


for i_episode in range(2):
    for t in range(10):
        action = select_action(torch.randn(4))
        policy.rewards.append(float(action))
    finish_episode()
    finish_episode()  # ROOT
    del policy.rewards[:]
    del policy.saved_log_probs[:]
