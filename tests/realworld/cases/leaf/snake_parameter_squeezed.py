"""Snake activation with a learnable frequency: .squeeze() after nn.Parameter leaves `a` untrained.

source: https://github.com/EdwardDixon/snake/pull/2
kind: bug
symptom: silent
verified: snake.a is not among snake.parameters() and never changes
"""
import torch
import torch.nn as nn
from torch.nn.parameter import Parameter

torch.manual_seed(0)


class Snake(nn.Module):
    def __init__(self, in_features, a=None, trainable=True):
        super().__init__()
        self.in_features = in_features if isinstance(in_features, list) else [in_features]
        if a is not None:
            self.a = Parameter(torch.ones(self.in_features) * a)
        else:
            m = torch.distributions.exponential.Exponential(torch.tensor([0.1]))
            self.a = Parameter(m.rsample(self.in_features)).squeeze()  # ROOT
        self.a.requiresGrad = trainable

    def forward(self, x):
        return x + (1.0 / self.a) * torch.pow(torch.sin(x * self.a), 2)


snake = Snake(4)
net = nn.Sequential(nn.Linear(3, 4), snake, nn.Linear(4, 1))
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
before = snake.a.detach().clone()
loss = net(torch.randn(8, 3)).pow(2).mean()
optimizer.zero_grad()
loss.backward()
optimizer.step()
print(len(list(snake.parameters())), torch.equal(before, snake.a.detach()))
