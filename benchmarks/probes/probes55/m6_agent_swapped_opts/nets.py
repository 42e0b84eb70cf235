import torch.nn as nn


def mlp(i, o, h=32):
    return nn.Sequential(nn.Linear(i, h), nn.ReLU(), nn.Linear(h, o))


class Actor(nn.Module):
    def __init__(self, obs, act):
        super().__init__()
        self.net = mlp(obs, act)

    def forward(self, s):
        return self.net(s).tanh()


class Critic(nn.Module):
    def __init__(self, obs, act):
        super().__init__()
        self.net = mlp(obs + act, 1)

    def forward(self, s, a):
        import torch
        return self.net(torch.cat([s, a], -1))
