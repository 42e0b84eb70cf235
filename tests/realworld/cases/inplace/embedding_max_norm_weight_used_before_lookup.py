"""nn.Embedding(max_norm=...) renormalizes its weight in place on lookup; the weight was already used in a matmul.

source: https://github.com/pytorch/pytorch/issues/26596
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
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
a = embedding.weight @ W.t()  # ROOT
b = embedding(idx) @ W.t()
out = (a.unsqueeze(0) + b.unsqueeze(1))
loss = out.sigmoid().prod()
loss.backward()  # SYMPTOM
optimizer.step()
