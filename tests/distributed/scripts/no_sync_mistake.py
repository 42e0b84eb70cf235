"""Gradient accumulation that never leaves ddp.no_sync(): gradients are never averaged."""
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo", timeout=timedelta(seconds=20))
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
gen = torch.Generator().manual_seed(rank)
for step in range(4):
    opt.zero_grad()
    for micro in range(2):
        with model.no_sync():  # <- never synced
            loss = model(torch.randn(8, 4, generator=gen)).pow(2).mean() / 2
            loss.backward()
    opt.step()  # <- step
dist.destroy_process_group()
