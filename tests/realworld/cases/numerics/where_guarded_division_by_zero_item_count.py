"""A per-group average guarded with torch.where(n > 0, total / n, total), as in the report's `torch.where(x >= t, x, t * (x / t))`: the forward never selects the division for the empty groups (n == 0) and the loss is finite, but backward multiplies the zero gradient of the unselected branch by the division's infinite derivative, so the weights get NaN gradients and are NaN after the first step.

source: https://github.com/pytorch/pytorch/issues/36923
kind: bug
symptom: silent
verified: the loss of the first step is finite (0.1773) but the head's weight gradient is NaN, and after the first SGD step every weight and the loss are NaN; dividing by n.clamp(min=1) inside the where (the unselected branch fed safe inputs, the workaround discussed in the duplicate issue 23395) keeps the gradients finite and the loss falls to 0.0021 in 30 steps
"""
import torch
import torch.nn as nn


def per_group_mean(total, n):
    """Average of a group's items; an empty group keeps its total (0)."""
    return torch.where(n > 0, total / n, total)  # ROOT


class GroupRegressor(nn.Module):
    def __init__(self, in_dim=6):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(in_dim, 32), nn.Tanh())
        self.head = nn.Linear(32, 1)

    def forward(self, x, n):
        total = self.head(self.encoder(x)).squeeze(-1) * n  # predicted sum over the group's items
        return per_group_mean(total, n)


torch.manual_seed(0)
model = GroupRegressor()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(16, 6)
n = torch.randint(0, 4, (16,)).float()  # some groups are empty
n[0] = 0.0
target = torch.where(n > 0, x[:, 0].tanh(), torch.zeros(16))
for step in range(30):
    loss = ((model(x, n) - target) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    if step == 0:
        print("first loss", loss.item(), "head grad has nan", torch.isnan(model.head.weight.grad).any().item())
    optimizer.step()
print("final loss", loss.item(), "weights nan", any(torch.isnan(p).any().item() for p in model.parameters()))
