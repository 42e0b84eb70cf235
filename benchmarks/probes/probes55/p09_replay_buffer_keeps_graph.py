import random
from collections import deque

import torch
import torch.nn as nn

q_net = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
opt = torch.optim.Adam(q_net.parameters(), lr=1e-3)
memory = deque(maxlen=100)

state = torch.randn(4)
for t in range(40):
    q = q_net(state)
    action = int(q.argmax())
    next_state, reward = torch.randn(4), random.random()
    memory.append((state, action, reward, next_state, q))  # ROOT
    state = next_state
    if len(memory) >= 8:
        batch = random.sample(memory, 8)
        q_sa = torch.stack([b[4][b[1]] for b in batch])
        with torch.no_grad():
            target = torch.tensor([b[2] for b in batch]) + 0.99 * q_net(torch.stack([b[3] for b in batch])).max(1).values
        loss = nn.functional.smooth_l1_loss(q_sa, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
