"""Each rank takes a different branch of forward(): rank 0 uses head_a, rank 1 head_b."""
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.head_a = nn.Linear(8, 1)
        self.head_b = nn.Linear(8, 1)

    def forward(self, x, use_b):
        h = torch.relu(self.body(x))
        if use_b:
            return self.head_b(h)  # <- branch b
        return self.head_a(h)  # <- branch a


dist.init_process_group("gloo", timeout=timedelta(seconds=20))
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(Net())  # <- wrap
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    opt.zero_grad()
    loss = model(torch.randn(8, 4), use_b=rank == 1).pow(2).mean()
    loss.backward()
    opt.step()
dist.destroy_process_group()
