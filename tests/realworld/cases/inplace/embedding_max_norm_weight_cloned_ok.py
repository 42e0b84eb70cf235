"""nn.Embedding(max_norm=...) with the documented fix: the weight is cloned before its differentiable use.

source: https://github.com/pytorch/pytorch/issues/26596
kind: lookalike
verified: backward succeeds; the embedding weight and W both receive gradients
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
n, d, m = 3, 5, 7
embedding = nn.Embedding(n, d, max_norm=True)
W = torch.randn((m, d), requires_grad=True)
optimizer = torch.optim.Adam(list(embedding.parameters()) + [W], lr=1e-3)

optimizer.zero_grad()
idx = torch.tensor([1, 2])
a = embedding.weight.clone() @ W.t()
b = embedding(idx) @ W.t()
out = (a.unsqueeze(0) + b.unsqueeze(1))
loss = out.sigmoid().prod()
loss.backward()
optimizer.step()
print(embedding.weight.grad is not None, W.grad is not None)
