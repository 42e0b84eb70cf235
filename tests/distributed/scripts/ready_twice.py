"""The same layer in two reentrant checkpoints: "Expected to mark a variable ready only once"."""
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = nn.Linear(4, 4)
        self.head = nn.Linear(4, 1)

    def forward(self, x):
        h = checkpoint(self.block, x, use_reentrant=True)  # <- first
        h = checkpoint(self.block, h, use_reentrant=True)  # <- again
        return self.head(h)


dist.init_process_group("gloo", timeout=timedelta(seconds=20))
torch.manual_seed(0)
model = DDP(Net(), find_unused_parameters=True)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(2):
    opt.zero_grad()
    loss = model(torch.randn(8, 4, requires_grad=True)).pow(2).mean()
    loss.backward()  # <- raised
    opt.step()
dist.destroy_process_group()
