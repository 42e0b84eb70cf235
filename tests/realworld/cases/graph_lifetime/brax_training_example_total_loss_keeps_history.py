"""PyTorch training example adds each loss tensor to total_loss, which keeps every step's autograd graph alive.

source: https://github.com/google/brax/pull/152
kind: bug
symptom: silent
verified: after 100 steps total_loss still requires grad and its grad_fn reaches 704 autograd nodes (7 more per step); with float(loss) it is a plain float
"""
import torch
import torch.nn as nn


def count_nodes(fn, seen=None):
    seen = set() if seen is None else seen
    stack = [fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        stack.extend(next_fn for next_fn, _ in node.next_functions)
    return len(seen)


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 64), nn.Tanh(), nn.Linear(64, 1))
criterion = nn.MSELoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
input, target = torch.randn(32, 8), torch.randn(32, 1)
total_loss = 0
for i in range(100):
    optimizer.zero_grad()
    output = model(input)
    loss = criterion(output, target)
    loss.backward()
    optimizer.step()
    total_loss += loss  # ROOT
print(total_loss.requires_grad, count_nodes(total_loss.grad_fn))
