"""Rank 1 skips one training step (`continue`): the next all-reduce on rank 0 never completes."""
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo", timeout=timedelta(seconds=4))
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    loss = model(torch.randn(8, 4)).pow(2).mean()  # <- forward
    if rank == 1 and step == 1:
        continue  # skips backward and step on rank 1 only
    opt.zero_grad()
    loss.backward()
    opt.step()
dist.destroy_process_group()
