"""d2l's MyLinear with the parameters themselves in forward (the pull request's fix): the loss has a graph back to weight and bias and SGD trains both layers.

source: https://github.com/d2l-ai/d2l-en/pull/2600
kind: lookalike
"""
import torch
from torch import nn
from torch.nn import functional as F


class MyLinear(nn.Module):
    def __init__(self, in_units, units):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(in_units, units))
        self.bias = nn.Parameter(torch.randn(units,))

    def forward(self, X):
        linear = torch.matmul(X, self.weight) + self.bias
        return F.relu(linear)


torch.manual_seed(0)
net = nn.Sequential(MyLinear(64, 8), MyLinear(8, 1))
X, y = torch.rand(32, 64), torch.rand(32, 1)
trainer = torch.optim.SGD(net.parameters(), lr=0.01)
w0 = net[0].weight.detach().clone()
for epoch in range(20):
    trainer.zero_grad()
    l = F.mse_loss(net(X), y)
    l.backward()
    trainer.step()
print(epoch, l.item())
