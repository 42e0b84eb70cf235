"""minimalRL dqn.py: target = r + gamma * max_a q_target(s') * done_mask is built from q_target, whose parameters are not in the optimizer and are overwritten from q by load_state_dict, so leaving it undetached trains nothing it should not (the PR author's own conclusion: target has nothing to do with q).

source: https://github.com/seungeunrho/minimalRL/pull/41
kind: lookalike
"""
import collections
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

learning_rate = 0.0005
gamma = 0.98
batch_size = 8


class ReplayBuffer():
    def __init__(self):
        self.buffer = collections.deque(maxlen=50000)

    def put(self, transition):
        self.buffer.append(transition)

    def sample(self, n):
        mini_batch = random.sample(self.buffer, n)
        s_lst, a_lst, r_lst, s_prime_lst, done_mask_lst = [], [], [], [], []
        for s, a, r, s_prime, done_mask in mini_batch:
            s_lst.append(s)
            a_lst.append([a])
            r_lst.append([r])
            s_prime_lst.append(s_prime)
            done_mask_lst.append([done_mask])
        return torch.tensor(s_lst, dtype=torch.float), torch.tensor(a_lst), torch.tensor(r_lst), \
            torch.tensor(s_prime_lst, dtype=torch.float), torch.tensor(done_mask_lst)


class Qnet(nn.Module):
    def __init__(self):
        super(Qnet, self).__init__()
        self.fc1 = nn.Linear(4, 32)
        self.fc2 = nn.Linear(32, 2)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def train(q, q_target, memory, optimizer):
    for i in range(3):
        s, a, r, s_prime, done_mask = memory.sample(batch_size)
        q_out = q(s)
        q_a = q_out.gather(1, a)
        max_q_prime = q_target(s_prime).max(1)[0].unsqueeze(1)
        target = r + gamma * max_q_prime * done_mask
        loss = F.smooth_l1_loss(q_a, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


random.seed(0)
torch.manual_seed(0)
q = Qnet()
q_target = Qnet()
q_target.load_state_dict(q.state_dict())
memory = ReplayBuffer()
for _ in range(32):
    memory.put(([random.random() for _ in range(4)], random.randint(0, 1), random.random(),
                [random.random() for _ in range(4)], 1.0))
optimizer = optim.Adam(q.parameters(), lr=learning_rate)
before = q_target.fc1.weight.detach().clone()
train(q, q_target, memory, optimizer)
print((q_target.fc1.weight - before).abs().max().item())
q_target.load_state_dict(q.state_dict())
