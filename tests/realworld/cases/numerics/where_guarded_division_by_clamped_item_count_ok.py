"""A per-group average guarded with torch.where whose division sees safe inputs, torch.where(n > 0, total / n.clamp(min=1), total): the unselected branch of the empty groups is finite, so its zero gradient stays zero and the regressor trains (the way around the report's NaN gradient through the untaken branch).

source: https://github.com/pytorch/pytorch/issues/36923
kind: lookalike
"""
import torch
import torch.nn as nn


def per_group_mean(total, n):
    """Average of a group's items; an empty group keeps its total (0)."""
    return torch.where(n > 0, total / n.clamp(min=1), total)


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
