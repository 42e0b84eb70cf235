"""SupCon-Hard training deliberately re-creates Adam every adaptive_rate epochs to reset its state.

source: https://github.com/tttianhao/CLEAN/issues/56
kind: lookalike
"""
import torch
import torch.nn as nn


class args:
    adaptive_rate = 3
    learning_rate = 1e-3


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
lr = args.learning_rate
optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.999))
epochs = 7
x = torch.randn(32, 8)
for epoch in range(1, epochs + 1):
    if epoch % args.adaptive_rate == 0 and epoch != epochs + 1:
        optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.999))
    optimizer.zero_grad()
    z = nn.functional.normalize(model(x), dim=-1)
    loss = -(z @ z.t()).diag().mean() + (z @ z.t()).mean()
    loss.backward()
    optimizer.step()
