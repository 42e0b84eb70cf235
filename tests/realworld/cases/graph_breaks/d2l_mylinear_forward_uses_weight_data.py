"""d2l's custom MyLinear layer computes torch.matmul(X, self.weight.data) + self.bias.data in forward: .data hands back the values without the graph, so a network of MyLinear layers produces a loss with no grad_fn and the first backward of a training loop fails.

source: https://github.com/d2l-ai/d2l-en/pull/2600
kind: bug
symptom: crash
verified: RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
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
        linear = torch.matmul(X, self.weight.data) + self.bias.data  # ROOT
        return F.relu(linear)


torch.manual_seed(0)
net = nn.Sequential(MyLinear(64, 8), MyLinear(8, 1))
X, y = torch.rand(32, 64), torch.rand(32, 1)
trainer = torch.optim.SGD(net.parameters(), lr=0.01)
w0 = net[0].weight.detach().clone()
for epoch in range(20):
    trainer.zero_grad()
    l = F.mse_loss(net(X), y)
    l.backward()  # SYMPTOM
    trainer.step()
print(epoch, l.item())
