"""A-GCN builds its adaptive adjacency from W_theta and W_phi and then detaches it, so neither weight gets a gradient.

source: https://github.com/queenie88/A-GCN/issues/4
kind: bug
symptom: silent
verified: after loss.backward() W_theta.weight.grad and W_phi.weight.grad are None; without the detach both are set (W_theta max abs grad 0.032)
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class AGCN(nn.Module):
    def __init__(self, num_classes=6, in_channel=16, hidden=32):
        super().__init__()
        self.W_theta = nn.Linear(in_channel, hidden, bias=False)
        self.W_phi = nn.Linear(in_channel, hidden, bias=False)
        self.gc1 = nn.Linear(in_channel, hidden)
        self.gc2 = nn.Linear(hidden, 1)

    def forward(self, feature, inp):
        theta, phi = self.W_theta(inp), self.W_phi(inp)
        adj = F.softmax(theta @ phi.t(), dim=1)
        adj = adj.detach()  # ROOT
        x = F.leaky_relu(adj @ self.gc1(inp), 0.2)
        x = (adj @ self.gc2(x)).squeeze(-1)
        return feature @ x.unsqueeze(1) + x


torch.manual_seed(0)
model = AGCN()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
feature, inp = torch.randn(8, 6), torch.randn(6, 16)
target = (torch.rand(8, 6) > 0.5).float()
loss = F.binary_cross_entropy_with_logits(model(feature, inp), target)
optimizer.zero_grad()
loss.backward()
optimizer.step()
print("W_theta grad:", model.W_theta.weight.grad, "W_phi grad:", model.W_phi.weight.grad)
