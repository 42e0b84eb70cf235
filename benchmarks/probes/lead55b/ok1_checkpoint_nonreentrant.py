"""Look-alike of s03: the non-reentrant checkpoint keeps the stem's gradients."""
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(16, 32), nn.GELU())
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        h = checkpoint(self.stem, x, use_reentrant=False)
        return self.head(h)


torch.manual_seed(0)
net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(3):
    x, y = torch.randn(8, 16), torch.randn(8, 4)
    loss = ((net(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
