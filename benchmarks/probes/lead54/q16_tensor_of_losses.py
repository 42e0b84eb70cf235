import torch
import torch.nn as nn

policy = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 2))
optim = torch.optim.Adam(policy.parameters(), lr=1e-2)


def episode_loss(states, actions, returns):
    terms = []
    for s, a, g in zip(states, actions, returns):
        logp = torch.log_softmax(policy(s), -1)[a]
        terms.append(-logp * g)
    return torch.tensor(terms).sum()  # ROOT


for ep in range(3):
    states = torch.randn(5, 4)
    actions = torch.randint(0, 2, (5,))
    returns = torch.linspace(1.0, 0.2, 5)
    loss = episode_loss(states, actions, returns)
    optim.zero_grad()
    loss.backward()
    optim.step()
