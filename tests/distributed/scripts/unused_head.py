"""DDP model with a head that forward() never uses: "Expected to have finished reduction"."""
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.head = nn.Linear(8, 1)
        self.aux = nn.Linear(8, 3)  # <- unused

    def forward(self, x):
        return self.head(torch.relu(self.body(x)))


dist.init_process_group("gloo", timeout=timedelta(seconds=20))
torch.manual_seed(0)
model = DDP(Net())
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    opt.zero_grad()
    loss = model(torch.randn(8, 4)).pow(2).mean()  # <- raised
    loss.backward()
    opt.step()
dist.destroy_process_group()
