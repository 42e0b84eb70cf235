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
    memory.append((state, action, reward, next_state, q.detach()))
    state = next_state
    if len(memory) >= 8:
        batch = random.sample(memory, 8)
        states = torch.stack([b[0] for b in batch])
        actions = torch.tensor([b[1] for b in batch])
        q_sa = q_net(states).gather(1, actions[:, None]).squeeze(1)
        with torch.no_grad():
            target = torch.tensor([b[2] for b in batch]) + 0.99 * q_net(torch.stack([b[3] for b in batch])).max(1).values
        loss = nn.functional.smooth_l1_loss(q_sa, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
